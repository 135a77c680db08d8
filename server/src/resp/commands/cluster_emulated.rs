//! `--cluster-mode emulated` (docs/CLUSTER.md, "Emulated cluster mode"): one server answers
//! as a Redis Cluster of one node that owns all 16,384 hash slots, as Dragonfly's emulated
//! mode does, so a cluster-aware client (redis-py's `RedisCluster`, go-redis's
//! `ClusterClient`, `JedisCluster`) starts from `CLUSTER SLOTS` or `CLUSTER SHARDS`, finds
//! every slot covered, and sends everything here. The node's address is the one the asking
//! connection reached (its local address), so a client sees the address it used; its id is
//! drawn at start. The gate refuses a multi-key command over several slots (`-CROSSSLOT`),
//! so an application finds out here what a real cluster would refuse.

use crate::resp::call::Call;
use crate::resp::commands::keys::walk_keys;
use crate::resp::reply::upper;
use accelkv_proto::resp;
use accelkv_proto::slot::{key_slot, SLOTS};
use std::net::SocketAddr;
use std::sync::OnceLock;

/// This node's id: 40 hex digits, drawn once per process.
fn node_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut id = String::new();
        for part in 0..3u64 {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(part ^ u64::from(std::process::id()));
            id.push_str(&format!("{:016x}", h.finish()));
        }
        id.truncate(40);
        id
    })
}

/// The address the connection reached (the bind address and RESP port without one).
fn addr(x: &Call<'_, '_>) -> SocketAddr {
    match &x.s.client {
        Some(reg) => reg.entry.laddr,
        None => {
            let st = x.sh.settings();
            SocketAddr::new(st.bind, st.resp_port)
        }
    }
}

/// `CLUSTER <subcommand>` in emulated mode.
pub fn cluster(x: &mut Call<'_, '_>) {
    let sub = upper(x.args[1]);
    let n = x.args.len();
    match (sub.as_slice(), n) {
        (b"INFO", 2) => info(x),
        (b"MYID", 2) => resp::bulk(x.out, Some(node_id().as_bytes())),
        (b"KEYSLOT", 3) => resp::integer(x.out, i64::from(key_slot(x.args[2]))),
        (b"SLOTS", 2) => slots(x),
        (b"SHARDS", 2) => shards(x),
        (b"NODES", 2) => {
            let text = nodes_line(addr(x));
            resp::bulk(x.out, Some(text.as_bytes()))
        }
        (b"COUNTKEYSINSLOT", 3) => match slot_arg(x.args[2]) {
            Some(slot) => in_slot(x, slot, None),
            None => resp::error(x.out, "ERR Invalid slot"),
        },
        (b"GETKEYSINSLOT", 4) => {
            let count = std::str::from_utf8(x.args[3])
                .ok()
                .and_then(|c| c.parse::<usize>().ok());
            match (slot_arg(x.args[2]), count) {
                (Some(slot), Some(count)) => in_slot(x, slot, Some(count)),
                (None, _) => resp::error(x.out, "ERR Invalid slot"),
                (_, None) => resp::error(x.out, "ERR Invalid number of keys"),
            }
        }
        (b"INFO" | b"MYID" | b"SLOTS" | b"SHARDS" | b"NODES" | b"KEYSLOT", _)
        | (b"COUNTKEYSINSLOT" | b"GETKEYSINSLOT", _) => {
            let name = String::from_utf8_lossy(x.args[1]).to_lowercase();
            resp::error(
                x.out,
                &format!("ERR wrong number of arguments for 'cluster|{name}' command"),
            )
        }
        _ => {
            let name = String::from_utf8_lossy(x.args[1]);
            resp::error(
                x.out,
                &format!("ERR unknown subcommand '{name}'. Try CLUSTER HELP."),
            )
        }
    }
}

fn slot_arg(a: &[u8]) -> Option<u16> {
    std::str::from_utf8(a)
        .ok()?
        .parse::<u16>()
        .ok()
        .filter(|&s| s < SLOTS)
}

fn info(x: &mut Call<'_, '_>) {
    let text = "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:1\r\ncluster_size:1\r\ncluster_current_epoch:1\r\ncluster_my_epoch:1\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n";
    resp::bulk(x.out, Some(text.as_bytes()))
}

/// `CLUSTER SLOTS`: one range, 0 to 16383, served by this node (Redis 7's entry: address,
/// port, id and its networking metadata, none).
fn slots(x: &mut Call<'_, '_>) {
    let a = addr(x);
    let ip = a.ip().to_string();
    resp::array(x.out, 1);
    resp::array(x.out, 3);
    resp::integer(x.out, 0);
    resp::integer(x.out, i64::from(SLOTS - 1));
    resp::array(x.out, 4);
    resp::bulk(x.out, Some(ip.as_bytes()));
    resp::integer(x.out, i64::from(a.port()));
    resp::bulk(x.out, Some(node_id().as_bytes()));
    resp::map(x.out, 0, x.s.proto);
}

/// `CLUSTER SHARDS`: one shard of all the slots, with this node as its primary.
fn shards(x: &mut Call<'_, '_>) {
    let a = addr(x);
    let ip = a.ip().to_string();
    let v = x.s.proto;
    resp::array(x.out, 1);
    resp::map(x.out, 2, v);
    resp::bulk(x.out, Some(b"slots"));
    resp::array(x.out, 2);
    resp::integer(x.out, 0);
    resp::integer(x.out, i64::from(SLOTS - 1));
    resp::bulk(x.out, Some(b"nodes"));
    resp::array(x.out, 1);
    resp::map(x.out, 7, v);
    for (k, val) in [("id", node_id()), ("ip", &ip), ("endpoint", &ip)] {
        resp::bulk(x.out, Some(k.as_bytes()));
        resp::bulk(x.out, Some(val.as_bytes()));
    }
    resp::bulk(x.out, Some(b"port"));
    resp::integer(x.out, i64::from(a.port()));
    resp::bulk(x.out, Some(b"role"));
    resp::bulk(x.out, Some(b"master"));
    resp::bulk(x.out, Some(b"replication-offset"));
    resp::integer(x.out, 0);
    resp::bulk(x.out, Some(b"health"));
    resp::bulk(x.out, Some(b"online"));
}

/// `CLUSTER NODES`' one line: id, address with the cluster bus port (Redis's port +
/// 10000), flags, no primary, ping and pong times, epoch, link state, slots.
pub fn nodes_line(a: SocketAddr) -> String {
    let bus = a.port().wrapping_add(10_000);
    format!(
        "{} {}:{}@{bus} myself,master - 0 0 1 connected 0-{}\n",
        node_id(),
        a.ip(),
        a.port(),
        SLOTS - 1
    )
}

/// `COUNTKEYSINSLOT` (`limit` `None`) or `GETKEYSINSLOT`: a walk of the selected database
/// (every key is hashed: O(keys), where Redis keeps an index per slot).
fn in_slot(x: &mut Call<'_, '_>, slot: u16, limit: Option<usize>) {
    let (mut count, mut keys) = (0usize, Vec::new());
    let walked = walk_keys(x.sh, x.s.db, |k| {
        if key_slot(k) != slot {
            return true;
        }
        match limit {
            Some(l) if keys.len() >= l => return false,
            Some(_) => keys.push(k.to_vec()),
            None => count += 1,
        }
        true
    });
    if let Err(e) = walked {
        return crate::resp::reply::err_store(x.out, &e);
    }
    match limit {
        None => resp::integer(x.out, count as i64),
        Some(_) => {
            resp::array(x.out, keys.len());
            for k in &keys {
                resp::bulk(x.out, Some(k));
            }
        }
    }
}

/// Whether the keys of a multi-key command hash to more than one slot.
pub fn cross_slot<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
    let Some(first) = keys.next() else {
        return false;
    };
    let slot = key_slot(first);
    keys.any(|k| key_slot(k) != slot)
}

//! `--cluster-mode emulated` (docs/CLUSTER.md, "Emulated cluster mode"): one server answers
//! as a Redis Cluster of one node that owns all 16,384 hash slots, as Dragonfly's emulated
//! mode does, so a cluster-aware client (redis-py's `RedisCluster`, go-redis's
//! `ClusterClient`, `JedisCluster`) starts from `CLUSTER SLOTS` or `CLUSTER SHARDS`, finds
//! every slot covered, and sends everything here. The node's address is the one the asking
//! connection reached (its local address), so a client sees the address it used; its id is
//! drawn at start. The gate refuses a multi-key command over several slots (`-CROSSSLOT`),
//! so an application finds out here what a real cluster would refuse.

use crate::resp::call::Call;
use crate::resp::commands::cluster_topology::{self as topology, Member, Shard};
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

/// The one shard: every slot, on this node as the connection reached it.
fn shard(x: &Call<'_, '_>) -> Vec<Shard> {
    let a = addr(x);
    let me = Member {
        id: node_id().to_string(),
        ip: a.ip().to_string(),
        port: a.port(),
        myself: true,
    };
    vec![Shard {
        first: 0,
        last: SLOTS - 1,
        nodes: vec![me],
    }]
}

/// `CLUSTER <subcommand>` in emulated mode.
pub fn cluster(x: &mut Call<'_, '_>) {
    let sub = upper(x.args[1]);
    let n = x.args.len();
    match (sub.as_slice(), n) {
        (b"INFO", 2) => {
            let text = topology::info(&shard(x), 1);
            resp::bulk(x.out, Some(text.as_bytes()))
        }
        (b"MYID", 2) => resp::bulk(x.out, Some(node_id().as_bytes())),
        (b"KEYSLOT", 3) => resp::integer(x.out, i64::from(key_slot(x.args[2]))),
        (b"SLOTS", 2) => topology::slots(x.out, &shard(x), x.s.proto),
        (b"SHARDS", 2) => topology::shards(x.out, &shard(x), x.s.proto),
        (b"NODES", 2) => {
            let text = topology::nodes(&shard(x), 1);
            resp::bulk(x.out, Some(text.as_bytes()))
        }
        (b"COUNTKEYSINSLOT", 3) | (b"GETKEYSINSLOT", 4) => {
            let (sh, db) = (x.sh, x.s.db);
            // Every key of the database is hashed: O(keys), where Redis keeps an index
            // per slot.
            let walk = |slot: u16, f: &mut dyn FnMut(&[u8]) -> bool| {
                walk_keys(sh, db, |k| key_slot(k) != slot || f(k))
            };
            topology::keys_in_slot(&x.args[1..], &walk, x.out);
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

/// Whether the keys of a multi-key command hash to more than one slot.
pub fn cross_slot<'a>(mut keys: impl Iterator<Item = &'a [u8]>) -> bool {
    let Some(first) = keys.next() else {
        return false;
    };
    let slot = key_slot(first);
    keys.any(|k| key_slot(k) != slot)
}

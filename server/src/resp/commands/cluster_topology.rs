//! Redis Cluster's answers about who serves which hash slots (`CLUSTER SLOTS`, `SHARDS`,
//! `NODES`, `INFO`), in Redis 7's exact formats, from a list of shards: the one shard of
//! `--cluster-mode emulated` (cluster_emulated.rs), or a slot-mode cluster's ranges, each a
//! run of slots with its leader first (server/src/cluster, docs/CLUSTER.md). Cluster-aware
//! clients (redis-py's `RedisCluster`, go-redis's `ClusterClient`, `JedisCluster`) start
//! from these and refuse a cluster whose 16,384 slots are not all covered.

use accelkv_proto::resp::{self, Version};
use accelkv_proto::slot::SLOTS;

/// One node as Redis Cluster names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// 40 hex digits.
    pub id: String,
    pub ip: String,
    pub port: u16,
    /// The node that answered.
    pub myself: bool,
}

/// A run of slots `first..=last` and who serves it: its primary (the range's leader)
/// first, then its replicas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub first: u16,
    pub last: u16,
    pub nodes: Vec<Member>,
}

/// `CLUSTER SLOTS`: per shard, its slots and its nodes (address, port, id, no networking
/// metadata), the primary first.
pub fn slots(out: &mut Vec<u8>, shards: &[Shard], proto: Version) {
    resp::array(out, shards.len());
    for sh in shards {
        resp::array(out, 2 + sh.nodes.len());
        resp::integer(out, i64::from(sh.first));
        resp::integer(out, i64::from(sh.last));
        for m in &sh.nodes {
            resp::array(out, 4);
            resp::bulk(out, Some(m.ip.as_bytes()));
            resp::integer(out, i64::from(m.port));
            resp::bulk(out, Some(m.id.as_bytes()));
            resp::map(out, 0, proto);
        }
    }
}

/// `CLUSTER SHARDS`: per shard, its slot run and its nodes with their roles.
pub fn shards(out: &mut Vec<u8>, shards: &[Shard], v: Version) {
    resp::array(out, shards.len());
    for sh in shards {
        resp::map(out, 2, v);
        resp::bulk(out, Some(b"slots"));
        resp::array(out, 2);
        resp::integer(out, i64::from(sh.first));
        resp::integer(out, i64::from(sh.last));
        resp::bulk(out, Some(b"nodes"));
        resp::array(out, sh.nodes.len());
        for (i, m) in sh.nodes.iter().enumerate() {
            resp::map(out, 7, v);
            for (k, val) in [("id", &m.id), ("ip", &m.ip), ("endpoint", &m.ip)] {
                resp::bulk(out, Some(k.as_bytes()));
                resp::bulk(out, Some(val.as_bytes()));
            }
            resp::bulk(out, Some(b"port"));
            resp::integer(out, i64::from(m.port));
            resp::bulk(out, Some(b"role"));
            let role: &[u8] = if i == 0 { b"master" } else { b"replica" };
            resp::bulk(out, Some(role));
            resp::bulk(out, Some(b"replication-offset"));
            resp::integer(out, 0);
            resp::bulk(out, Some(b"health"));
            resp::bulk(out, Some(b"online"));
        }
    }
}

/// `CLUSTER NODES`: one line per node (id, address with the bus port, Redis's port +
/// 10000, flags, its primary or `-`, ping and pong times, epoch, link state, the slots it
/// is primary of, adjacent runs joined). In accelkv a node may lead some ranges and follow
/// others, which Redis's one role per node cannot say: a node that leads any range is shown
/// as a primary of the slots it leads, one that leads none as a replica of the primary of
/// the first range it holds.
pub fn nodes(shards: &[Shard], epoch: u64) -> String {
    // Each node, the slot runs it leads, and the first primary it follows.
    type Seen<'a> = (&'a Member, Vec<(u16, u16)>, Option<&'a str>);
    let mut members: Vec<Seen<'_>> = Vec::new();
    for sh in shards {
        for (i, m) in sh.nodes.iter().enumerate() {
            let at = match members.iter().position(|(x, ..)| x.id == m.id) {
                Some(at) => at,
                None => {
                    members.push((m, Vec::new(), None));
                    members.len() - 1
                }
            };
            let entry = &mut members[at];
            match (i, entry.1.last_mut()) {
                (0, Some(run)) if run.1 + 1 == sh.first => run.1 = sh.last,
                (0, _) => entry.1.push((sh.first, sh.last)),
                (_, _) => {
                    let primary = sh.nodes[0].id.as_str();
                    entry.2 = entry.2.or(Some(primary));
                }
            }
        }
    }
    let mut text = String::new();
    for (m, runs, follows) in members {
        let me = if m.myself { "myself," } else { "" };
        let (role, primary) = match (runs.is_empty(), follows) {
            (true, Some(p)) => ("slave", p),
            _ => ("master", "-"),
        };
        let bus = m.port.wrapping_add(10_000);
        text.push_str(&format!(
            "{} {}:{}@{bus} {me}{role} {primary} 0 0 {epoch} connected",
            m.id, m.ip, m.port
        ));
        for (a, b) in runs {
            match a == b {
                true => text.push_str(&format!(" {a}")),
                false => text.push_str(&format!(" {a}-{b}")),
            }
        }
        text.push('\n');
    }
    text
}

/// `CLUSTER INFO`'s text: the state is `ok` while every slot is served.
pub fn info(shards: &[Shard], epoch: u64) -> String {
    let assigned: u32 = shards.iter().map(|s| u32::from(s.last - s.first) + 1).sum();
    let mut known: Vec<&str> = shards
        .iter()
        .flat_map(|s| s.nodes.iter().map(|m| m.id.as_str()))
        .collect();
    known.sort_unstable();
    known.dedup();
    let primaries = {
        let mut p: Vec<&str> = shards
            .iter()
            .filter_map(|s| s.nodes.first().map(|m| m.id.as_str()))
            .collect();
        p.sort_unstable();
        p.dedup();
        p.len()
    };
    let state = if assigned == u32::from(SLOTS) {
        "ok"
    } else {
        "fail"
    };
    format!(
        "cluster_enabled:1\r\ncluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\ncluster_size:{primaries}\r\ncluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\ncluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
        known.len()
    )
}

/// A slot number argument (`None`: not one of 0..16383).
pub fn slot_arg(a: &[u8]) -> Option<u16> {
    std::str::from_utf8(a)
        .ok()?
        .parse::<u16>()
        .ok()
        .filter(|&s| s < SLOTS)
}

/// A walk of one slot's keys: calls its closure with each, as the client names it, until
/// the closure answers false.
pub type SlotWalk<'a> =
    &'a dyn Fn(u16, &mut dyn FnMut(&[u8]) -> bool) -> Result<(), accelkv_tree::Error>;

/// `COUNTKEYSINSLOT slot` and `GETKEYSINSLOT slot count` (`args`: the subcommand first),
/// answered from `walk`; `false` when `args` is neither.
pub fn keys_in_slot(args: &[&[u8]], walk: SlotWalk<'_>, out: &mut Vec<u8>) -> bool {
    let sub = crate::resp::reply::upper(args[0]);
    let limit = match (&sub[..], args.len()) {
        (b"COUNTKEYSINSLOT", 2) => None,
        (b"GETKEYSINSLOT", 3) => match std::str::from_utf8(args[2])
            .ok()
            .and_then(|c| c.parse().ok())
        {
            Some(n) => Some(n),
            None => {
                resp::error(out, "ERR Invalid number of keys");
                return true;
            }
        },
        _ => return false,
    };
    let Some(slot) = slot_arg(args[1]) else {
        resp::error(out, "ERR Invalid slot");
        return true;
    };
    let (mut count, mut keys) = (0usize, Vec::new());
    let walked = walk(slot, &mut |k: &[u8]| {
        match limit {
            Some(l) if keys.len() >= l => return false,
            Some(_) => keys.push(k.to_vec()),
            None => count += 1,
        }
        true
    });
    if let Err(e) = walked {
        crate::resp::reply::err_store(out, &e);
        return true;
    }
    match limit {
        None => resp::integer(out, count as i64),
        Some(_) => {
            resp::array(out, keys.len());
            for k in &keys {
                resp::bulk(out, Some(k));
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(n: u8, myself: bool) -> Member {
        Member {
            id: format!("{n:040x}"),
            ip: "127.0.0.1".into(),
            port: 7100 + u16::from(n),
            myself,
        }
    }

    #[test]
    fn three_ranges_render_as_redis_cluster_does() {
        let shards = vec![
            Shard {
                first: 0,
                last: 5460,
                nodes: vec![m(1, true), m(2, false)],
            },
            Shard {
                first: 5461,
                last: 5461,
                nodes: vec![m(2, false), m(1, true)],
            },
            Shard {
                first: 5462,
                last: 16383,
                nodes: vec![m(1, true), m(2, false)],
            },
        ];
        let text = nodes(&shards, 4);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        // Adjacent runs joined; a node that leads nothing is its primary's replica.
        let joined = nodes(
            &[
                shards[0].clone(),
                Shard {
                    first: 5461,
                    last: 16383,
                    nodes: vec![m(1, true), m(3, false)],
                },
            ],
            2,
        );
        assert!(
            joined.contains("myself,master - 0 0 2 connected 0-16383\n"),
            "{joined}"
        );
        assert!(
            joined.contains(&format!(
                "127.0.0.1:7102@17102 slave {} 0 0 2 connected\n",
                m(1, true).id
            )),
            "{joined}"
        );
        assert!(
            lines[0].ends_with(
                "127.0.0.1:7101@17101 myself,master - 0 0 4 connected 0-5460 5462-16383"
            ),
            "{text}"
        );
        assert!(
            lines[1].ends_with("127.0.0.1:7102@17102 master - 0 0 4 connected 5461"),
            "{text}"
        );
        let i = info(&shards, 4);
        assert!(
            i.contains("cluster_state:ok\r\n") && i.contains("cluster_size:2\r\n"),
            "{i}"
        );
        assert!(i.contains("cluster_known_nodes:2\r\n"), "{i}");
        let half = info(&shards[..1], 4);
        assert!(
            half.contains("cluster_state:fail\r\ncluster_slots_assigned:5461\r\n"),
            "{half}"
        );
        let mut out = Vec::new();
        slots(&mut out, &shards[1..2], Version::Resp2);
        let want = format!(
            "*1\r\n*4\r\n:5461\r\n:5461\r\n*4\r\n$9\r\n127.0.0.1\r\n:7102\r\n$40\r\n{}\r\n*0\r\n*4\r\n$9\r\n127.0.0.1\r\n:7101\r\n$40\r\n{}\r\n*0\r\n",
            m(2, false).id,
            m(1, true).id
        );
        assert_eq!(String::from_utf8(out).unwrap(), want);
        assert_eq!(slot_arg(b"16383"), Some(16383));
        assert_eq!(slot_arg(b"16384"), None);
    }
}

//! Slot mode's `CLUSTER` answers (`--slots redis`, docs/CLUSTER.md): Redis Cluster's
//! SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT, COUNTKEYSINSLOT and GETKEYSINSLOT from the
//! range map, each range a run of hash slots served by its leader (its primary) and its
//! other replicas. A node's id is its number as 40 hex digits.

use super::Node;
use crate::resp::commands::cluster_topology::{self as topology, Member, Shard};
use crate::resp::commands::keys::walk_range;
use accelkv_proto::resp::{self, Version};
use accelkv_proto::slot;

/// A node's id as Redis Cluster shows one.
pub(super) fn node_id(id: u64) -> String {
    format!("{id:040x}")
}

impl Node {
    /// Every range of the map as a shard: its slots, its leader (as this node's group
    /// knows it, else the map's hint, else its first replica) and then its other replicas.
    fn shards(&self) -> Vec<Shard> {
        let map = self.map.borrow();
        let member = |id: u64| {
            let a = map.nodes.get(&id)?;
            let (ip, port) = a.resp.rsplit_once(':')?;
            Some(Member {
                id: node_id(id),
                ip: ip.to_string(),
                port: port.parse().ok()?,
                myself: id == self.me,
            })
        };
        let mut shards = Vec::new();
        for r in &map.ranges {
            let Some((first, last)) = slot::slots_of_range(&r.start, r.end.as_deref()) else {
                continue;
            };
            let leader = match self.raft.group(r.id) {
                Some(g) => g.metrics().borrow().current_leader,
                None => r.leader,
            }
            .filter(|l| r.replicas.contains(l))
            .or(r.replicas.first().copied());
            let order = leader
                .into_iter()
                .chain(r.replicas.iter().copied().filter(|id| Some(*id) != leader));
            let nodes = order.filter_map(member).collect();
            shards.push(Shard { first, last, nodes });
        }
        shards
    }

    /// Answers a `CLUSTER` subcommand (`args`: the subcommand first) slot mode gives as
    /// Redis Cluster does; false for the others (RANGES, SPLIT, MOVE…, answered as in
    /// native mode).
    pub(super) fn slot_command(&self, args: &[&[u8]], proto: Version, out: &mut Vec<u8>) -> bool {
        let sub = crate::resp::reply::upper(args[0]);
        let epoch = self.map.borrow().epoch;
        match (&sub[..], args.len()) {
            (b"SLOTS", 1) => topology::slots(out, &self.shards(), proto),
            (b"SHARDS", 1) => topology::shards(out, &self.shards(), proto),
            (b"NODES", 1) => {
                let text = topology::nodes(&self.shards(), epoch);
                resp::bulk(out, Some(text.as_bytes()))
            }
            (b"INFO", 1) => {
                let mut text = topology::info(&self.shards(), epoch);
                text.push_str(&self.info_lines());
                resp::verbatim(out, text.as_bytes(), proto)
            }
            (b"MYID", 1) => resp::bulk(out, Some(node_id(self.me).as_bytes())),
            (b"KEYSLOT", 2) => resp::integer(out, i64::from(slot::key_slot(args[1]))),
            (b"COUNTKEYSINSLOT" | b"GETKEYSINSLOT", _) => {
                let Some(sh) = self.ctl.sh.upgrade() else {
                    resp::error(out, "ERR shutting down");
                    return true;
                };
                // This node's copy of the slot (a follower's may lag its leader's): its
                // keys, not its collections' subkeys (`slot | FF FF | …`).
                let walk = |s: u16, f: &mut dyn FnMut(&[u8]) -> bool| {
                    let lo = slot::bound(s).to_vec();
                    let mut hi = lo.clone();
                    hi.extend_from_slice(&crate::resp::db::DB_PREFIX);
                    walk_range(&sh, (lo, hi), f)
                };
                if !topology::keys_in_slot(args, &walk, out) {
                    let name = String::from_utf8_lossy(args[0]).to_lowercase();
                    let e = format!("ERR wrong number of arguments for 'cluster|{name}' command");
                    resp::error(out, &e);
                }
            }
            _ => return false,
        }
        true
    }
}

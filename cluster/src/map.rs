//! The range map: the key space split into contiguous ranges, each served by a group of
//! replicas, and the nodes that serve them. It lives in etcd (`coord.rs`) as one JSON
//! document whose `epoch` grows with every change, so a route taken from an older map is
//! recognised as stale and answered with a redirect rather than served.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A node's identity in the cluster (also its openraft node id).
pub type NodeId = u64;

/// A range's identity (also the openraft group it is replicated by).
pub type RangeId = u64;

/// Where a node is reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddr {
    /// Its RESP endpoint (`host:port`): where clients and redirects go.
    pub resp: String,
    /// Its Raft endpoint (`host:port`): where the other replicas send Raft messages.
    pub raft: String,
    /// Its binary-protocol TCP endpoint (`host:port`): where binary redirects go (empty in
    /// a map written before nodes advertised it).
    #[serde(default)]
    pub binary: String,
}

/// One contiguous range of keys: `start <= key < end` (`end` `None`: no upper bound).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Range {
    /// Its id; unique over the cluster's life (a split range's right half gets a new one).
    pub id: RangeId,
    /// The first key it holds.
    #[serde(with = "bytes_hex")]
    pub start: Vec<u8>,
    /// The first key past it (`None`: the end of the key space).
    #[serde(with = "opt_bytes_hex")]
    pub end: Option<Vec<u8>>,
    /// The nodes that hold a replica (voters of its Raft group).
    pub replicas: Vec<NodeId>,
    /// The replica that led the group when the map was last written (a hint: the group
    /// itself knows the current leader).
    pub leader: Option<NodeId>,
    /// Nodes catching up as learners while the range moves to them (they vote once the
    /// group's membership changes; see `docs/CLUSTER.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learners: Vec<NodeId>,
}

impl Range {
    /// Whether `key` falls in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }
}

/// The whole map.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeMap {
    /// Grows by one with every change.
    pub epoch: u64,
    /// The ranges, sorted by `start`, covering the key space without gaps or overlaps.
    pub ranges: Vec<Range>,
    /// Every node the map names.
    pub nodes: BTreeMap<NodeId, NodeAddr>,
    /// The id the next new range gets (ids are never reused).
    #[serde(default)]
    pub next_id: RangeId,
    /// How keys are placed, fixed when the map is made: `None`, native byte order;
    /// `Some("redis")`, by Redis Cluster's hash slot (`--slots redis`, docs/CLUSTER.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<String>,
}

impl RangeMap {
    /// A map of one range over the whole key space, replicated on `replicas`.
    pub fn single(replicas: &[(NodeId, NodeAddr)]) -> RangeMap {
        RangeMap {
            epoch: 1,
            ranges: vec![Range {
                id: 1,
                start: Vec::new(),
                end: None,
                replicas: replicas.iter().map(|r| r.0).collect(),
                leader: None,
                learners: Vec::new(),
            }],
            nodes: replicas.iter().cloned().collect(),
            next_id: 2,
            slots: None,
        }
    }

    /// Whether keys are placed by hash slot (`--slots redis`).
    pub fn by_slot(&self) -> bool {
        self.slots.as_deref() == Some("redis")
    }

    /// Takes the next unused range id (the caller writes the map back to keep it).
    pub fn reserve_id(&mut self) -> RangeId {
        let top = self.ranges.iter().map(|r| r.id).max().unwrap_or(0);
        let id = self.next_id.max(top + 1);
        self.next_id = id + 1;
        self.epoch += 1;
        id
    }

    /// The range that holds `key`.
    pub fn find(&self, key: &[u8]) -> Option<&Range> {
        // The last range starting at or before the key.
        let i = self.ranges.partition_point(|r| r.start.as_slice() <= key);
        let r = self.ranges.get(i.checked_sub(1)?)?;
        r.contains(key).then_some(r)
    }

    /// The range with id `id`.
    pub fn range(&self, id: RangeId) -> Option<&Range> {
        self.ranges.iter().find(|r| r.id == id)
    }

    /// The ranges `node` holds a replica of (voting, or learning as the range moves).
    pub fn ranges_of(&self, node: NodeId) -> impl Iterator<Item = &Range> {
        self.ranges
            .iter()
            .filter(move |r| r.replicas.contains(&node) || r.learners.contains(&node))
    }

    /// Checks the map's shape: ranges sorted, contiguous from the empty key to the end,
    /// ids unique, every replica a known node.
    pub fn validate(&self) -> Result<(), String> {
        let Some(first) = self.ranges.first() else {
            return Err("the map has no ranges".into());
        };
        if !first.start.is_empty() {
            return Err("the first range does not start at the empty key".into());
        }
        for w in self.ranges.windows(2) {
            match &w[0].end {
                Some(e) if *e == w[1].start => {}
                _ => {
                    return Err(format!(
                        "range {} does not end where range {} starts",
                        w[0].id, w[1].id
                    ))
                }
            }
        }
        if self.ranges.last().is_some_and(|r| r.end.is_some()) {
            return Err("the last range does not reach the end of the key space".into());
        }
        let mut ids: Vec<_> = self.ranges.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        if ids.windows(2).any(|w| w[0] == w[1]) {
            return Err("two ranges share an id".into());
        }
        for r in &self.ranges {
            if r.replicas.is_empty() {
                return Err(format!("range {} has no replicas", r.id));
            }
            if let Some(n) = r
                .replicas
                .iter()
                .chain(&r.learners)
                .find(|n| !self.nodes.contains_key(n))
            {
                return Err(format!("range {} names unknown node {n}", r.id));
            }
        }
        Ok(())
    }

    /// Splits range `id` at `at` (which must lie strictly inside it): the left part keeps
    /// the id, the right part gets `new_id` and the same replicas. Bumps the epoch.
    pub fn split(&mut self, id: RangeId, at: &[u8], new_id: RangeId) -> Result<(), String> {
        if self.ranges.iter().any(|r| r.id == new_id) {
            return Err(format!("range id {new_id} is taken"));
        }
        let i = self
            .ranges
            .iter()
            .position(|r| r.id == id)
            .ok_or_else(|| format!("no range {id}"))?;
        let r = &self.ranges[i];
        if at <= r.start.as_slice() || !r.contains(at) {
            return Err(format!("the split key is not inside range {id}"));
        }
        let right = Range {
            id: new_id,
            start: at.to_vec(),
            end: r.end.clone(),
            replicas: r.replicas.clone(),
            leader: r.leader,
            learners: Vec::new(),
        };
        self.ranges[i].end = Some(at.to_vec());
        self.ranges.insert(i + 1, right);
        self.next_id = self.next_id.max(new_id + 1);
        self.epoch += 1;
        Ok(())
    }

    /// The map as stored in etcd.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a range map serializes")
    }

    /// A map read from etcd.
    pub fn from_json(b: &[u8]) -> Result<RangeMap, String> {
        let m: RangeMap =
            serde_json::from_slice(b).map_err(|e| format!("the range map is not valid: {e}"))?;
        m.validate()?;
        Ok(m)
    }
}

/// Keys are bytes; in the JSON document they are hex so any byte survives.
mod bytes_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        super::unhex(&s).map_err(serde::de::Error::custom)
    }
}

mod opt_bytes_hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => s.serialize_some(&super::hex(b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(s) => super::unhex(&s).map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("odd hex length".into());
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr(i: u64) -> NodeAddr {
        NodeAddr {
            resp: format!("127.0.0.1:{}", 7000 + i),
            raft: format!("127.0.0.1:{}", 8000 + i),
            binary: format!("127.0.0.1:{}", 9000 + i),
        }
    }

    fn three() -> RangeMap {
        RangeMap::single(&[(1, addr(1)), (2, addr(2)), (3, addr(3))])
    }

    #[test]
    fn one_range_holds_every_key() {
        let m = three();
        m.validate().unwrap();
        for k in [&b""[..], b"a", b"\xff\xff"] {
            assert_eq!(m.find(k).unwrap().id, 1);
        }
        assert_eq!(m.ranges_of(2).count(), 1);
        assert_eq!(m.ranges_of(4).count(), 0);
    }

    #[test]
    fn bad_maps_are_refused() {
        let mut m = three();
        m.ranges[0].start = b"a".to_vec();
        assert!(m.validate().is_err());
        let mut m = three();
        m.ranges[0].replicas.push(9);
        assert!(m.validate().is_err());
        let mut m = three();
        m.split(1, b"m", 2).unwrap();
        m.ranges[1].start = b"n".to_vec();
        assert!(m.validate().is_err());
        let mut m = three();
        assert!(m.split(1, b"", 2).is_err());
        assert!(m.split(1, b"m", 1).is_err());
        assert!(RangeMap::from_json(b"{}").is_err());
    }

    #[test]
    fn reserved_ids_are_never_reused() {
        let mut m = three();
        let a = m.reserve_id();
        let b = m.reserve_id();
        assert_eq!((a, b), (2, 3));
        m.split(1, b"m", 7).unwrap();
        assert_eq!(m.reserve_id(), 8);
        let mut old = three();
        old.next_id = 0; // a map written before the counter existed
        old.split(1, b"m", 5).unwrap();
        assert_eq!(old.reserve_id(), 6);
        assert_eq!(m.epoch, 5);
    }

    proptest! {
        /// After any splits, every key falls in exactly one range, the one `find` answers,
        /// and the map survives its JSON form.
        #[test]
        fn splits_keep_one_range_per_key(
            cuts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..4), 0..12),
            probes in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..5), 1..50),
        ) {
            let mut m = three();
            let mut next = 2;
            for c in &cuts {
                let id = m.find(c).unwrap().id;
                if m.split(id, c, next).is_ok() {
                    next += 1;
                }
            }
            m.validate().unwrap();
            prop_assert_eq!(m.epoch, next - 1);
            let back = RangeMap::from_json(&m.to_json()).unwrap();
            prop_assert_eq!(&back, &m);
            for k in &probes {
                let holders: Vec<_> = m.ranges.iter().filter(|r| r.contains(k)).collect();
                prop_assert_eq!(holders.len(), 1);
                prop_assert_eq!(m.find(k).unwrap().id, holders[0].id);
            }
        }
    }
}

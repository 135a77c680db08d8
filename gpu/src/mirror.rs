//! The host's bookkeeping of what the device holds: its copy of the page table and the
//! interior-node cache (Honeycomb §5). Each batch first drains the tree's remap stream; this
//! turns the remaps into device updates: page-table entries, cache slots for interior nodes
//! (a new slot for every new interior buffer, so a kernel still reading the old one is never
//! disturbed), and slots to free once every launch that could read them has finished.
//!
//! Pure host logic (no device): unit tested here.
//!
//! Invariants:
//! 1. A slot referenced by the device's slot table at the time launch `t` started is not
//!    reused before launch `t` has finished: a slot replaced while launch ids below `T` could
//!    run is retired with tag `T` and reused only when the oldest launch in flight is >= `T`.
//! 2. Updates for a LID are emitted in remap order, so the device ends at the newest mapping.

use accelkv_tree::Remap;
use std::collections::{HashMap, VecDeque};

/// Device updates computed from one drain of the remap stream.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Updates {
    /// Page-table entries: (LID, arena offset).
    pub pt: Vec<(u64, u64)>,
    /// Cache-slot entries: (LID, slot + 1, or 0 for none).
    pub slots: Vec<(u64, u64)>,
    /// Interior nodes to copy into cache slots before the slot entries are applied:
    /// (slot, arena offset).
    pub copies: Vec<(u32, u64)>,
}

impl Updates {
    pub(crate) fn is_empty(&self) -> bool {
        self.pt.is_empty() && self.slots.is_empty()
    }
}

/// The device page table is too small for a LID (the store grew past the bound the engine
/// sized it for).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct TableFull(pub u64);

pub(crate) struct Mirror {
    pt_cap: u64,
    free: Vec<u32>,
    slot_of: HashMap<u64, u32>,
    retired: VecDeque<(u64, u32)>,
    pub(crate) cached: usize,
    pub(crate) uncached: u64,
}

impl Mirror {
    /// A mirror of a device page table with `pt_cap` entries and `slots` cache slots.
    pub(crate) fn new(pt_cap: u64, slots: u32) -> Mirror {
        Mirror {
            pt_cap,
            free: (0..slots).rev().collect(),
            slot_of: HashMap::new(),
            retired: VecDeque::new(),
            cached: 0,
            uncached: 0,
        }
    }

    /// Updates for `remaps` (oldest first). `interior(off)` says whether the buffer at `off`
    /// is an interior node; `tag` is the id the next launch will get and `oldest` the
    /// oldest launch still in flight (`u64::MAX`: none).
    pub(crate) fn apply(
        &mut self,
        remaps: &[Remap],
        interior: &mut dyn FnMut(u64) -> bool,
        tag: u64,
        oldest: u64,
    ) -> Result<Updates, TableFull> {
        while self.retired.front().is_some_and(|&(t, _)| t <= oldest) {
            let (_, s) = self.retired.pop_front().expect("non-empty");
            self.free.push(s);
        }
        // Only the newest mapping of each LID matters (older batches follow old-version
        // pointers back from it); keep remap order otherwise.
        let mut last: HashMap<u64, usize> = HashMap::with_capacity(remaps.len());
        let mut last_map: HashMap<u64, usize> = HashMap::with_capacity(remaps.len());
        for (i, r) in remaps.iter().enumerate() {
            last.insert(r.lid, i);
            if r.off != u64::MAX {
                last_map.insert(r.lid, i);
            }
        }
        let mut u = Updates::default();
        for (i, r) in remaps.iter().enumerate() {
            if last_map.get(&r.lid) != Some(&i) {
                continue;
            }
            if r.lid >= self.pt_cap {
                return Err(TableFull(r.lid));
            }
            // Removed after this mapping (in the same drain): batches whose read versions
            // predate the removal may still need this buffer, so the device maps it; but it
            // may be freed by now, so nothing reads it and it is not cached. Removals leave
            // the device's entries as they are otherwise: the LID is reused (and remapped)
            // only once no batch can reach the removed node.
            let removed = last.get(&r.lid) != Some(&i);
            u.pt.push((r.lid, r.off));
            let old = self.slot_of.remove(&r.lid);
            if let Some(s) = old {
                self.retired.push_back((tag, s));
                self.cached -= 1;
            }
            let new = if !removed && interior(r.off) {
                let s = self.free.pop();
                if s.is_none() {
                    self.uncached += 1;
                }
                s
            } else {
                None
            };
            match new {
                Some(s) => {
                    self.slot_of.insert(r.lid, s);
                    self.cached += 1;
                    u.copies.push((s, r.off));
                    u.slots.push((r.lid, u64::from(s) + 1));
                }
                None if old.is_some() => u.slots.push((r.lid, 0)),
                None => {}
            }
        }
        Ok(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remap(lid: u64, off: u64) -> Remap {
        Remap {
            lid,
            off,
            version: 1,
        }
    }

    /// Offsets below 1000 are interior nodes in these tests.
    fn interior(off: u64) -> bool {
        off < 1000
    }

    #[test]
    fn interior_nodes_get_slots_and_leaves_do_not() {
        let mut m = Mirror::new(100, 4);
        let u = m
            .apply(
                &[remap(1, 10), remap(2, 5000), remap(3, 20)],
                &mut interior,
                0,
                u64::MAX,
            )
            .unwrap();
        assert_eq!(u.pt, vec![(1, 10), (2, 5000), (3, 20)]);
        assert_eq!(u.slots, vec![(1, 1), (3, 2)]);
        assert_eq!(u.copies, vec![(0, 10), (1, 20)]);
        assert_eq!(m.cached, 2);
    }

    #[test]
    fn replaced_slots_wait_for_launches_that_could_read_them() {
        let mut m = Mirror::new(100, 2);
        m.apply(&[remap(1, 10), remap(2, 11)], &mut interior, 0, u64::MAX)
            .unwrap();
        // LID 1 gets a new buffer while launch 5 runs: no free slot, so it goes uncached;
        // its old slot is retired with tag 6.
        let u = m.apply(&[remap(1, 12)], &mut interior, 6, 5).unwrap();
        assert_eq!(u.slots, vec![(1, 0)]);
        assert_eq!(m.uncached, 1);
        // Launch 5 still runs: the slot stays retired.
        let u = m.apply(&[remap(1, 13)], &mut interior, 7, 5).unwrap();
        assert!(u.copies.is_empty());
        // Every launch before 6 finished: the slot is free again.
        let u = m.apply(&[remap(1, 14)], &mut interior, 8, 6).unwrap();
        assert_eq!(u.copies, vec![(0, 14)]);
        assert_eq!(u.slots, vec![(1, 1)]);
    }

    #[test]
    fn root_turning_leaf_clears_its_slot_and_duplicates_collapse() {
        let mut m = Mirror::new(100, 4);
        m.apply(&[remap(1, 10)], &mut interior, 0, u64::MAX)
            .unwrap();
        let u = m
            .apply(
                &[remap(1, 20), remap(4, 30), remap(1, 7000)],
                &mut interior,
                1,
                u64::MAX,
            )
            .unwrap();
        assert_eq!(u.pt, vec![(4, 30), (1, 7000)]);
        assert_eq!(u.slots, vec![(4, 2), (1, 0)]);
        assert_eq!(m.cached, 1);
    }

    #[test]
    fn a_removed_lid_keeps_its_entries_until_reused() {
        let mut m = Mirror::new(100, 4);
        m.apply(&[remap(5, 10)], &mut interior, 0, u64::MAX)
            .unwrap();
        // Removed: nothing changes on the device, and the removed buffer is never read
        // (the interior check would panic on it).
        let mut never = |off: u64| -> bool { panic!("read buffer {off} of a removed LID") };
        let u = m
            .apply(&[remap(6, 12), remap(6, u64::MAX)], &mut never, 1, u64::MAX)
            .unwrap();
        // Mapped (older batches may need buffer 12) but neither read nor cached.
        assert_eq!(u.pt, vec![(6, 12)]);
        assert!(u.slots.is_empty() && u.copies.is_empty());
        let u = m
            .apply(&[remap(5, u64::MAX)], &mut never, 1, u64::MAX)
            .unwrap();
        assert!(u.pt.is_empty() && u.slots.is_empty() && u.copies.is_empty());
        assert_eq!(m.cached, 1);
        // A mapping newer than the removal is not the removed node's: the cached image of
        // LID 5 is dropped with it.
        let u = m
            .apply(&[remap(5, 11), remap(5, u64::MAX)], &mut never, 2, u64::MAX)
            .unwrap();
        assert_eq!((u.pt, u.slots), (vec![(5, 11)], vec![(5, 0)]));
        assert_eq!(m.cached, 0);
        // Reused as an interior node later (no launch in flight: the retired slot is free).
        let u = m
            .apply(&[remap(5, 30)], &mut interior, 3, u64::MAX)
            .unwrap();
        assert_eq!((u.slots, u.copies), (vec![(5, 1)], vec![(0, 30)]));
    }

    #[test]
    fn a_lid_past_the_table_is_an_error() {
        let mut m = Mirror::new(8, 1);
        assert_eq!(
            m.apply(&[remap(8, 1)], &mut interior, 0, u64::MAX),
            Err(TableFull(8))
        );
    }

    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    #[derive(Clone, Debug)]
    enum Step {
        /// Remaps of (LID, 0 leaf / 1 interior / 2 removed), then a launch starts (as a
        /// worker does).
        Launch(Vec<(u64, u8)>),
        /// The n-th oldest launch in flight finishes.
        Finish(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => prop::collection::vec((1u64..12, 0u8..3), 0..6).prop_map(Step::Launch),
            2 => (0usize..4).prop_map(Step::Finish),
        ]
    }

    proptest! {
        /// Invariant 1 against a model of the device: a slot is overwritten only when no
        /// launch in flight could see it in the slot table; no two LIDs share a slot; the
        /// device slot table names a slot for exactly the interior LIDs that got one.
        #[test]
        fn slots_in_use_are_never_overwritten(steps in prop::collection::vec(step(), 1..60), slots in 1u32..6) {
            let mut m = Mirror::new(16, slots);
            let mut device: HashMap<u64, u64> = HashMap::new(); // LID -> slot + 1
            let mut inflight: Vec<(u64, HashSet<u64>)> = Vec::new(); // (tag, visible slots)
            let mut next_tag = 0u64;
            let mut off = 0u64;
            for s in steps {
                match s {
                    Step::Launch(remaps) => {
                        let rs: Vec<Remap> = remaps.iter().map(|&(lid, kind)| {
                            off += 1;
                            remap(lid, match kind { 0 => 1000 + off, 1 => off % 1000, _ => u64::MAX })
                        }).collect();
                        let oldest = inflight.iter().map(|x| x.0).min().unwrap_or(u64::MAX);
                        let u = m.apply(&rs, &mut interior, next_tag, oldest).unwrap();
                        for &(slot, _) in &u.copies {
                            for (tag, seen) in &inflight {
                                prop_assert!(!seen.contains(&(u64::from(slot) + 1)),
                                    "slot {slot} overwritten while launch {tag} can read it");
                            }
                        }
                        for &(lid, v) in &u.slots {
                            if v == 0 { device.remove(&lid); } else { device.insert(lid, v); }
                        }
                        let used: Vec<u64> = device.values().copied().collect();
                        let distinct: HashSet<u64> = used.iter().copied().collect();
                        prop_assert_eq!(used.len(), distinct.len(), "two LIDs share a slot");
                        prop_assert_eq!(device.len(), m.cached);
                        inflight.push((next_tag, distinct));
                        next_tag += 1;
                    }
                    Step::Finish(i) => {
                        if !inflight.is_empty() {
                            let i = i % inflight.len();
                            inflight.remove(i);
                        }
                    }
                }
            }
        }
    }
}

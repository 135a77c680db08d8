//! The slab allocator over the page file (Retina §4.4): the file after the superblock is cut
//! into equal slabs; each slab holds slots of one size class (512 bytes to 3 KiB in steps,
//! then 4 KiB, 8 KiB, … up to half a slab; format.rs `slot_bytes`), named by the descriptor
//! in its first block. Leaf pages and extension pages take
//! the smallest class that holds them. The live map is not stored: recovery rebuilds it from
//! the pages it keeps, and every other slot of a described slab is free.
//!
//! Not thread-safe by itself; the committer owns it.

use crate::format::{slot_bytes, SlabDesc, BLOCK};
use std::collections::BTreeMap;

/// Slabs, their classes and their free slots.
pub struct Slabs {
    slab_size: u64,
    classes: Vec<Option<u8>>,
    free: BTreeMap<u8, Vec<u64>>,
}

impl Slabs {
    /// No slabs yet.
    pub fn new(slab_size: u64) -> Slabs {
        Slabs {
            slab_size,
            classes: Vec::new(),
            free: BTreeMap::new(),
        }
    }

    /// Bytes per slab.
    pub fn slab_bytes(&self) -> u64 {
        self.slab_size
    }

    /// The largest class (log2) a slab holds.
    pub fn max_class(&self) -> u8 {
        (self.slab_size.trailing_zeros() - 1) as u8
    }

    /// File offset of slab `index`.
    pub fn base(&self, index: u64) -> u64 {
        BLOCK + index * self.slab_size
    }

    /// Offsets of the slots of slab `index` at class `class`.
    pub fn slot_offsets(&self, index: u64, class: u8) -> impl DoubleEndedIterator<Item = u64> {
        let first = self.base(index) + BLOCK;
        let size = slot_bytes(class).unwrap_or(self.slab_size);
        let n = (self.slab_size - BLOCK) / size;
        (0..n).map(move |i| first + i * size)
    }

    /// Number of slab indexes known so far (described or not).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.classes.len() as u64
    }

    /// The class of slab `index`, if described.
    pub fn class_of_slab(&self, index: u64) -> Option<u8> {
        self.classes.get(index as usize).copied().flatten()
    }

    /// The class of the slot at `off`, if it lies in a described slab.
    pub fn class_of(&self, off: u64) -> Option<u8> {
        off.checked_sub(BLOCK)
            .and_then(|o| self.class_of_slab(o / self.slab_size))
    }

    /// Records slab `index` as holding class `class` (recovery, or after its descriptor is
    /// durable). Its slots are not free until [`Slabs::free`]d.
    pub fn describe(&mut self, index: u64, class: u8) {
        let i = index as usize;
        if self.classes.len() <= i {
            self.classes.resize(i + 1, None);
        }
        self.classes[i] = Some(class);
    }

    /// Bytes in the slot at `off` (0 outside described slabs).
    pub fn slot_bytes_at(&self, off: u64) -> u64 {
        self.class_of(off).and_then(slot_bytes).unwrap_or(0)
    }

    /// A free slot of `class`, if one exists.
    pub fn alloc(&mut self, class: u8) -> Option<u64> {
        debug_assert!(slot_bytes(class).is_some() && class <= self.max_class());
        self.free.get_mut(&class).and_then(Vec::pop)
    }

    /// Where a new slab for `class` goes (the first undescribed index), and its descriptor.
    pub fn next_slab(&self, class: u8) -> SlabDesc {
        let index = self
            .classes
            .iter()
            .position(Option::is_none)
            .unwrap_or(self.classes.len()) as u64;
        SlabDesc { index, class }
    }

    /// Adds a slab whose descriptor is durable; all its slots become free.
    pub fn add_slab(&mut self, d: SlabDesc) {
        self.describe(d.index, d.class);
        let slots = self.slot_offsets(d.index, d.class).rev();
        self.free.entry(d.class).or_default().extend(slots);
    }

    /// Returns the slot at `off` to its class's free list.
    pub fn free(&mut self, off: u64) {
        if let Some(c) = self.class_of(off) {
            self.free.entry(c).or_default().push(off);
        }
    }

    /// Free slots of every class.
    pub fn free_slots(&self) -> usize {
        self.free.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_hand_out_distinct_aligned_slots_and_reuse_freed_ones() {
        let mut s = Slabs::new(8 << 20);
        assert_eq!(s.alloc(12), None);
        let d = s.next_slab(12);
        assert_eq!(d.index, 0);
        s.add_slab(d);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..((8 << 20) / 4096 - 1) {
            let off = s.alloc(12).unwrap();
            assert_eq!(off % 4096, 0);
            assert!((2 * BLOCK..BLOCK + (8 << 20)).contains(&off));
            assert!(seen.insert(off));
        }
        assert_eq!(s.alloc(12), None);
        s.free(8192);
        assert_eq!(s.alloc(12), Some(8192));
        let d = s.next_slab(20);
        assert_eq!(d.index, 1);
        s.add_slab(d);
        assert_eq!(s.class_of(s.base(1) + BLOCK), Some(20));
        assert_eq!(s.max_class(), 22);
        assert_eq!(s.slot_offsets(1, 22).count(), 1);
    }
}

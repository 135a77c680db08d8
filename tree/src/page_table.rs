//! The LID → buffer page table and the LID allocator.
//!
//! Nodes name each other by 6-byte logical identifiers (LIDs); the page table maps a LID to
//! the arena offset of its newest buffer. Swapping one entry replaces a node (or a whole
//! subtree) atomically. Two levels of 16K entries: readers translate with two acquire loads.
//!
//! Thread safety: `get` is lock-free. `set` is a release store; the tree only calls it from
//! structural modifications, which are serialised. LID allocation takes a mutex.
//!
//! Invariants:
//! 1. A LID's entry is written (release) only after the buffer it names is fully built.
//! 2. A LID is reused only after reclamation proved that no reader can still hold it.

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::Mutex;

const BITS: u32 = 14;
const BLOCK: usize = 1 << BITS;
const DIRS: usize = 1 << BITS;
/// Largest LID the table can map.
pub const MAX_TABLE_LID: u64 = (DIRS * BLOCK) as u64 - 1;
/// Entry value of an unmapped LID.
pub const UNMAPPED: u64 = u64::MAX;

type Block = [AtomicU64; BLOCK];

struct Lids {
    next: u64,
    free: Vec<u64>,
}

/// LID → arena offset map.
pub struct PageTable {
    dirs: Box<[AtomicPtr<Block>]>,
    lids: Mutex<Lids>,
}

impl PageTable {
    /// An empty table; LID 0 is reserved as "none" and LID 1 for the root.
    pub fn new() -> PageTable {
        PageTable {
            dirs: (0..DIRS)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            lids: Mutex::new(Lids {
                next: 2,
                free: Vec::new(),
            }),
        }
    }

    fn block(&self, lid: u64) -> Option<&Block> {
        let p = self.dirs[(lid >> BITS) as usize].load(Ordering::Acquire);
        // SAFETY: blocks are installed once (below) and freed only in Drop.
        unsafe { p.as_ref() }
    }

    /// The buffer offset of `lid`, or [`UNMAPPED`].
    #[inline]
    pub fn get(&self, lid: u64) -> u64 {
        match self.block(lid) {
            Some(b) => b[lid as usize & (BLOCK - 1)].load(Ordering::Acquire),
            None => UNMAPPED,
        }
    }

    /// Address of `lid`'s entry (for prefetching), or null when its block is not allocated.
    pub fn entry_addr(&self, lid: u64) -> *const u8 {
        match self.block(lid) {
            Some(b) => &b[lid as usize & (BLOCK - 1)] as *const AtomicU64 as *const u8,
            None => std::ptr::null(),
        }
    }

    /// Maps `lid` to `off` (release).
    pub fn set(&self, lid: u64, off: u64) {
        let b = match self.block(lid) {
            Some(b) => b,
            None => self.install(lid),
        };
        b[lid as usize & (BLOCK - 1)].store(off, Ordering::Release);
    }

    fn install(&self, lid: u64) -> &Block {
        let _g = self.lids.lock().unwrap_or_else(|e| e.into_inner());
        let slot = &self.dirs[(lid >> BITS) as usize];
        if slot.load(Ordering::Acquire).is_null() {
            let b: Box<Block> = Box::new(std::array::from_fn(|_| AtomicU64::new(UNMAPPED)));
            slot.store(Box::into_raw(b), Ordering::Release);
        }
        self.block(lid).expect("installed")
    }

    /// A fresh LID, or `None` when the table is full.
    pub fn alloc_lid(&self) -> Option<u64> {
        let mut l = self.lids.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(lid) = l.free.pop() {
            return Some(lid);
        }
        if l.next > MAX_TABLE_LID {
            return None;
        }
        l.next += 1;
        Some(l.next - 1)
    }

    /// Returns `lid` for reuse (invariant 2 is the caller's).
    pub fn free_lid(&self, lid: u64) {
        self.set(lid, UNMAPPED);
        self.lids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .free
            .push(lid);
    }

    /// One past the largest LID handed out so far.
    pub fn lid_bound(&self) -> u64 {
        self.lids.lock().unwrap_or_else(|e| e.into_inner()).next
    }

    /// Bytes of table blocks allocated.
    pub fn bytes(&self) -> usize {
        self.dirs
            .iter()
            .filter(|d| !d.load(Ordering::Relaxed).is_null())
            .count()
            * std::mem::size_of::<Block>()
            + DIRS * std::mem::size_of::<AtomicPtr<Block>>()
    }
}

impl Default for PageTable {
    fn default() -> Self {
        PageTable::new()
    }
}

impl Drop for PageTable {
    fn drop(&mut self) {
        for d in self.dirs.iter() {
            let p = d.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: installed by `install` from a Box and freed once here.
                drop(unsafe { Box::from_raw(p) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_and_reuse() {
        let t = PageTable::new();
        assert_eq!(t.get(1), UNMAPPED);
        t.set(1, 4096);
        assert_eq!(t.get(1), 4096);
        let a = t.alloc_lid().unwrap();
        assert_eq!(a, 2);
        let far = (5u64 << BITS) + 3;
        t.set(far, 77);
        assert_eq!(t.get(far), 77);
        t.free_lid(a);
        assert_eq!(t.get(a), UNMAPPED);
        assert_eq!(t.alloc_lid(), Some(a));
    }
}

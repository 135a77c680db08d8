//! The write path's interleaved descent: where the writes of a batch will land, found for
//! all their keys at once, one level of every key per round with the next node prefetched
//! (AMAC, as the read engine walks), so a batch of writes pays for its memory misses once.
//! A write given its key's hint starts at that leaf instead of descending (write.rs).
//!
//! Why a hint from an earlier descent is as good as the write's own: a write checks, after
//! it locks its leaf, that the leaf is current (a superseded or evicted buffer stays locked
//! for good, so the lock fails) and that the parent it came through is current (write.rs
//! invariant 3) — checks that never assumed the descent was recent, only that the buffers
//! are still the ones it saw, which the caller's pin ([`StorePin`]) guarantees: nothing
//! reachable when the hint was found is freed while it lives.

use crate::epoch::Pin;
use crate::prefetch::prefetch;
use crate::tree::{Tree, ROOT};
use crate::Store;
use std::marker::PhantomData;

/// Keys descended together (the walk's window).
const WINDOW: usize = 16;

/// Bytes of a node prefetched at each end: its header, and its trailer with the item slots
/// nearest it.
const EDGE: usize = 128;

/// Where a write of one key lands: its leaf buffer and the parent it was reached through.
/// Valid while the [`StorePin`] it was found under lives.
#[derive(Clone, Copy, Debug)]
pub struct WriteHint<'p> {
    pub(crate) leaf: u64,
    pub(crate) parent: Option<u64>,
    _pin: PhantomData<&'p ()>,
}

/// A pin of the store's reclamation epoch: node memory reached while it lives is not freed,
/// so hints found under it stay valid. Re-entrant on a thread; keep it short (it holds back
/// the reclamation of every buffer retired meanwhile).
pub struct StorePin<'s> {
    _pin: Pin<'s>,
}

impl Store {
    /// Pins the store's reclamation epoch on this thread (see [`StorePin`]).
    pub fn pin(&self) -> StorePin<'_> {
        StorePin {
            _pin: self.tree.epochs.pin(),
        }
    }

    /// Finds where writes of `keys` would land, descending for all of them at once, and
    /// sets `hints[i]` for `keys[i]` (`None` where a node could not be read: that write
    /// descends on its own). Hand a hint to the write of the same key
    /// ([`Store::put_item_hinted`]) while `pin` lives.
    pub fn locate_writes<'p>(
        &self,
        pin: &'p StorePin<'_>,
        keys: &[&[u8]],
        hints: &mut [Option<WriteHint<'p>>],
    ) {
        let _ = pin;
        for (ks, hs) in keys.chunks(WINDOW).zip(hints.chunks_mut(WINDOW)) {
            self.tree.locate(ks, hs);
        }
    }
}

/// One key's descent: the buffer it is at (prefetched), and the one it came through.
#[derive(Clone, Copy)]
struct Walk {
    off: u64,
    parent: Option<u64>,
    done: bool,
}

impl Tree {
    /// Prefetches the two ends of the buffer at `off`.
    fn fetch_edges(&self, off: u64) {
        let base = self.arena.ptr(off);
        prefetch(base, EDGE);
        prefetch(base.wrapping_add(self.geo.node_size - EDGE), EDGE);
    }

    /// [`Store::locate_writes`] for at most [`WINDOW`] keys. The caller's pin protects
    /// every buffer read here.
    fn locate<'p>(&self, keys: &[&[u8]], hints: &mut [Option<WriteHint<'p>>]) {
        let pin = self.epochs.pin();
        let root = self.pt.get(ROOT);
        self.fetch_edges(root);
        let mut walks = [Walk {
            off: root,
            parent: None,
            done: false,
        }; WINDOW];
        let n = keys.len().min(WINDOW);
        let mut left = n;
        while left > 0 {
            for i in 0..n {
                let w = &mut walks[i];
                if w.done {
                    continue;
                }
                let v = self.view(w.off, &pin);
                if v.is_leaf() {
                    hints[i] = Some(WriteHint {
                        leaf: w.off,
                        parent: w.parent,
                        _pin: PhantomData,
                    });
                    (w.done, left) = (true, left - 1);
                    continue;
                }
                match self.page(v.child_for(keys[i])) {
                    Ok(child) => {
                        self.fetch_edges(child);
                        (w.parent, w.off) = (Some(w.off), child);
                    }
                    Err(_) => {
                        hints[i] = None;
                        (w.done, left) = (true, left - 1);
                    }
                }
            }
        }
    }
}

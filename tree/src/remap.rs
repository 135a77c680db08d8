//! The stream of page-table changes an engine with memory of its own applies to its copy of
//! the page table (DESIGN.md §6, Honeycomb §5): every LID remap a structural modification
//! publishes, as (LID, new buffer offset, version), in the order the modifications ran, and
//! every arena chunk the tree allocates, so a device can map it before it reads a buffer in
//! it.
//!
//! Thread safety: feeds are filled under the tree's SMO lock (remaps) or the arena lock
//! (chunks) and drained by their engine; each has its own mutex.
//!
//! Invariants:
//! 1. A remap is pushed after its page-table entry is set and before its write version is
//!    released, so an engine that drains its feed after taking read version `rv` has every
//!    remap with version <= `rv`.
//! 2. A subscriber's table copy and its feed together name every remap: the copy is taken
//!    under the SMO lock at the moment the feed is registered.
//! 3. A chunk is announced before any buffer in it is handed out, so a remap into a chunk is
//!    always preceded by that chunk's announcement.
//! 4. A buffer stops being its LID's newest only through a later remap of that LID (a new
//!    buffer, or the LID's removal). So the buffer the last remap of a LID in a drain names
//!    is still current at the drain, or was superseded by an event pushed after the drain —
//!    and so retired after it, protected by an epoch published before the drain.

use std::sync::{Mutex, Weak};

/// One page-table change: `lid` now maps to the buffer at arena offset `off`, published by
/// the write with version `version`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remap {
    /// The LID remapped.
    pub lid: u64,
    /// Arena offset of its new newest buffer; `u64::MAX` when the LID was removed.
    pub off: u64,
    /// Write version of the modification that published it.
    pub version: u64,
}

/// An arena chunk: its index, base address and length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Chunk index (arena offset >> log2(chunk size)).
    pub index: usize,
    /// Address of its first byte.
    pub base: usize,
    /// Bytes.
    pub len: usize,
}

/// An engine's subscription to page-table changes and new arena chunks; dropping it
/// unsubscribes.
#[derive(Default)]
pub struct RemapFeed {
    pub(crate) remaps: Mutex<Vec<Remap>>,
    pub(crate) chunks: Mutex<Vec<Chunk>>,
}

impl RemapFeed {
    /// Moves every remap received so far into `out`, oldest first.
    pub fn drain_remaps(&self, out: &mut Vec<Remap>) {
        out.append(&mut self.remaps.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Moves every chunk announced so far into `out`.
    pub fn drain_chunks(&self, out: &mut Vec<Chunk>) {
        out.append(&mut self.chunks.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// The feeds of a tree (weak: a dropped subscription is pruned at the next push).
#[derive(Default)]
pub(crate) struct Feeds {
    list: Mutex<Vec<Weak<RemapFeed>>>,
    any: std::sync::atomic::AtomicBool,
}

impl Feeds {
    fn each(&self, mut f: impl FnMut(&RemapFeed)) {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|w| match w.upgrade() {
            Some(feed) => {
                f(&feed);
                true
            }
            None => false,
        });
        if l.is_empty() {
            self.any.store(false, std::sync::atomic::Ordering::Release);
        }
    }

    /// Registers `feed`.
    pub(crate) fn add(&self, feed: &std::sync::Arc<RemapFeed>) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.push(std::sync::Arc::downgrade(feed));
        self.any.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Pushes remaps to every feed (invariant 1 is the caller's).
    pub(crate) fn remapped(&self, remaps: impl Iterator<Item = Remap> + Clone) {
        self.each(|f| {
            f.remaps
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(remaps.clone())
        });
    }

    /// Announces a new chunk to every feed.
    pub(crate) fn chunk(&self, c: Chunk) {
        self.each(|f| f.chunks.lock().unwrap_or_else(|e| e.into_inner()).push(c));
    }
}

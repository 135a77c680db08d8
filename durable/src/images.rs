//! Which live page images which leaf, and which delta entries complete that image (issue
//! 57): the book the leaf cache's pager and evictor read, kept by the committer (and by
//! recovery) under the mirror's `images` mutex.
//!
//! An evicted leaf is its last whole image plus the delta entries newer than it in its
//! range, so an update to a cold leaf costs a delta entry, not a whole leaf. A leaf may be
//! evicted at version `v` when its recorded image is at `v` or newer, where a commit that
//! wrote delta entries for the leaf raises the image's version to its own, provided the
//! leaf's state is exactly that image plus the pending entries: the image is of the same LID
//! and of the same key range (fences compared byte for byte), and the cover has that page
//! alone providing the range (no page written since shadows part of it). The pager then
//! reads the page and the entries named here, under one lock, so the two are consistent.
//!
//! `pending` mirrors the delta book's keys (delta.rs) with the page and length of each
//! key's newest entry: the committer updates both at the same point of a commit.

use crate::delta::range;
use std::collections::{BTreeMap, HashMap};

/// A delta page holding a key's newest durable state: its offset and length (0: unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeltaAt {
    pub(crate) page: u64,
    pub(crate) len: u32,
}

/// Delta entries completing an image: key and the page holding its entry, in key order.
pub(crate) type Entries = Vec<(Vec<u8>, DeltaAt)>;

/// A key range's bounds as a leaf's fences (`None`: unbounded).
pub(crate) type Fence = Option<Box<[u8]>>;

/// A page that images a leaf.
#[derive(Clone)]
struct Image {
    page: u64,
    /// The page's length in bytes (0: not known), so a load reads it in one exact read.
    len: u32,
    /// The newest version whose state of the leaf the page and the pending entries in its
    /// range hold.
    version: u64,
    low: Fence,
    high: Fence,
}

/// What a load of an evicted leaf reads: the leaf page (offset, length: 0 when unknown) and
/// the delta entries newer than it in its range, in key order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Source {
    pub(crate) page: u64,
    pub(crate) len: u32,
    pub(crate) deltas: Entries,
}

/// See the module's comment.
#[derive(Default)]
pub(crate) struct Images {
    /// LID → its newest image.
    by_lid: HashMap<u64, Image>,
    /// Page offset → LID.
    by_page: HashMap<u64, u64>,
    /// LID → the image a commit stopped naming while its slot waits for the readers that
    /// may still read it ([`Images::release`] when it is freed), with the delta entries
    /// that completed it then. A reader of an evicted leaf of an older state (a snapshot
    /// across FLUSHALL) reads it there: the stub's own page hint may be a slot an earlier
    /// commit freed when it imaged the leaf again, since reused.
    gone: HashMap<u64, (Image, Entries)>,
    /// Every key whose newest durable state is a delta entry, and the page holding it.
    pending: BTreeMap<Vec<u8>, DeltaAt>,
}

/// A fence as an owned bound.
pub(crate) fn fence(b: Option<&[u8]>) -> Fence {
    b.map(Box::from)
}

impl Images {
    /// A commit wrote `page` (`len` bytes), the image of leaf `lid` (range `[low, high)`)
    /// at `version`.
    pub(crate) fn record(
        &mut self,
        lid: u64,
        page: u64,
        len: u32,
        version: u64,
        low: Fence,
        high: Fence,
    ) {
        let image = Image {
            page,
            len,
            version,
            low,
            high,
        };
        if let Some(old) = self.by_lid.insert(lid, image) {
            self.by_page.remove(&old.page);
        }
        self.by_page.insert(page, lid);
    }

    /// A commit at `version` wrote delta entries for every key of leaf `lid` (range
    /// `[low, high)`) written since its last commit, and the cover has `page` alone
    /// providing the range: when `page` is the leaf's recorded image, of the same range,
    /// the image and the pending entries now hold the leaf's state at `version`.
    pub(crate) fn completed(
        &mut self,
        lid: u64,
        page: u64,
        version: u64,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
    ) -> bool {
        match self.by_lid.get_mut(&lid) {
            Some(i) if i.page == page && i.low.as_deref() == low && i.high.as_deref() == high => {
                i.version = i.version.max(version);
                true
            }
            _ => false,
        }
    }

    /// `page` no longer provides any range (its slot is freed once no reader can read it);
    /// returns the LID whose newest image it was, which keeps it as a gone image, with the
    /// delta entries completing it, until then. Call before the commit that frees it
    /// changes the pending entries.
    pub(crate) fn forget(&mut self, page: u64) -> Option<u64> {
        let lid = self.by_page.remove(&page)?;
        let image = self.by_lid.get(&lid).filter(|i| i.page == page).cloned()?;
        self.by_lid.remove(&lid);
        let deltas = self.pending_in(&image.low, &image.high);
        self.gone.insert(lid, (image, deltas));
        Some(lid)
    }

    /// The slot of `page`, once `lid`'s image, is about to be reused.
    pub(crate) fn release(&mut self, lid: u64, page: u64) {
        if self.gone.get(&lid).is_some_and(|(i, _)| i.page == page) {
            self.gone.remove(&lid);
        }
    }

    fn pending_in(&self, low: &Fence, high: &Fence) -> Entries {
        self.pending
            .range::<[u8], _>(range(low.as_deref(), high.as_deref()))
            .map(|(k, d)| (k.clone(), *d))
            .collect()
    }

    /// Where evicted leaf `lid` is read from: its newest image (a live one, else one whose
    /// slot is not reused yet) and the delta entries that complete it.
    pub(crate) fn source(&self, lid: u64) -> Option<Source> {
        if let Some(i) = self.by_lid.get(&lid) {
            return Some(Source {
                page: i.page,
                len: i.len,
                deltas: self.pending_in(&i.low, &i.high),
            });
        }
        self.gone.get(&lid).map(|(i, deltas)| Source {
            page: i.page,
            len: i.len,
            deltas: deltas.clone(),
        })
    }

    /// The page that images leaf `lid` (with the pending entries in its range) in a state
    /// at least as new as `version`.
    pub(crate) fn page_of(&self, lid: u64, version: u64) -> Option<u64> {
        self.by_lid
            .get(&lid)
            .filter(|i| version <= i.version)
            .map(|i| i.page)
    }

    /// A whole leaf page now provides `[low, high)`: the entries in it are superseded.
    pub(crate) fn imaged_whole(&mut self, low: Option<&[u8]>, high: Option<&[u8]>) {
        let keys: Vec<Vec<u8>> = self
            .pending
            .range::<[u8], _>(range(low, high))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            self.pending.remove(&k);
        }
    }

    /// A delta page now holds `key`'s newest state.
    pub(crate) fn delta_written(&mut self, key: &[u8], at: DeltaAt) {
        match self.pending.get_mut(key) {
            Some(d) => *d = at,
            None => {
                self.pending.insert(key.to_vec(), at);
            }
        }
    }

    /// Recovery's pending entries (key, delta page), in key order.
    pub(crate) fn recovered_pending(&mut self, entries: impl Iterator<Item = (Vec<u8>, u64)>) {
        self.pending = entries
            .map(|(k, page)| (k, DeltaAt { page, len: 0 }))
            .collect();
    }

    /// Keys whose newest durable state is a delta entry.
    #[cfg(test)]
    pub(crate) fn pending_keys(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Fence {
        Some(s.as_bytes().into())
    }

    fn at(page: u64) -> DeltaAt {
        DeltaAt { page, len: 0 }
    }

    #[test]
    fn a_forgotten_image_serves_until_its_slot_is_released() {
        let mut i = Images::default();
        i.record(7, 100, 40, 1, None, None);
        // Imaged again: the newest page wins; the old one is simply replaced.
        i.record(7, 200, 50, 2, None, None);
        assert_eq!(i.source(7).map(|s| (s.page, s.len)), Some((200, 50)));
        assert_eq!(i.forget(100), None, "page 100 no longer images anything");
        // FLUSHALL's commit frees the page: still the one to read until released.
        assert_eq!(i.forget(200), Some(7));
        assert_eq!(i.source(7).map(|s| s.page), Some(200));
        assert_eq!(
            i.page_of(7, 0),
            None,
            "a gone image never lets a leaf be evicted"
        );
        // A new image of the LID (reused after the release) takes precedence.
        i.record(7, 300, 10, 9, None, None);
        assert_eq!(i.source(7).map(|s| s.page), Some(300));
        i.release(7, 200);
        assert_eq!(i.source(7).map(|s| s.page), Some(300));
        assert_eq!(i.forget(300), Some(7));
        i.release(7, 300);
        assert_eq!(i.source(7), None);
    }

    #[test]
    fn delta_entries_complete_an_image_of_the_same_range_only() {
        let mut i = Images::default();
        i.record(3, 100, 0, 5, f("b"), f("m"));
        i.delta_written(b"a", at(1)); // another leaf's key
        i.delta_written(b"c", at(900));
        i.delta_written(b"k", at(900));
        i.delta_written(b"m", at(901)); // the next leaf's
        assert!(i.completed(3, 100, 8, Some(b"b"), Some(b"m")));
        assert_eq!(i.page_of(3, 8), Some(100));
        let s = i.source(3).unwrap();
        assert_eq!(s.page, 100);
        assert_eq!(
            s.deltas,
            vec![(b"c".to_vec(), at(900)), (b"k".to_vec(), at(900))]
        );
        // A narrower range (a split kept the LID), another page, another LID: not completed.
        assert!(!i.completed(3, 100, 9, Some(b"b"), Some(b"g")));
        assert!(!i.completed(3, 101, 9, Some(b"b"), Some(b"m")));
        assert!(!i.completed(4, 100, 9, Some(b"b"), Some(b"m")));
        assert_eq!(i.page_of(3, 9), None);
        // A newer entry replaces the key's page; a whole image supersedes the range's.
        i.delta_written(b"c", at(950));
        assert_eq!(i.source(3).unwrap().deltas[0], (b"c".to_vec(), at(950)));
        // FLUSHALL: the gone image keeps the entries that completed it.
        assert_eq!(i.forget(100), Some(3));
        i.imaged_whole(None, None);
        assert_eq!(i.pending_keys(), 0);
        assert_eq!(i.source(3).unwrap().deltas.len(), 2);
    }
}

//! Delta pages (issue 42, item 1): a commit writes, for a leaf it does not image whole, only
//! the keys that changed in it, packed with every other such leaf's changes into the
//! commit's delta pages (the device takes whole 4 KiB blocks, so one page per leaf would
//! save little). A key's durable state is then its newest delta entry when that entry is
//! newer than the leaf page covering the key, else that page's (format.rs, `KIND_DELTA`).
//!
//! This module keeps the book of what the delta pages on the device still provide:
//! - `pending`: every key whose durable state is a delta entry, with the page holding it
//!   and the extension page the entry names (kept alive while the entry is);
//! - for each live delta page, the keys it was written with and how many of them it still
//!   provides; a page that provides none is free;
//! - the live pages oldest first, so that delta space stays bounded: past the limit, a
//!   commit images whole the leaves that the oldest pages' entries belong to, which
//!   supersedes those entries and frees the pages.
//!
//! A commit images a leaf whole (and drops every entry in its range) when the leaf's
//! entries would pass [`Deltas::leaf_percent`] of its items, so reading a leaf's state
//! back never needs more than that many entries beside its page.
//!
//! Not thread-safe by itself: the committer owns it (inside `Disk`), as it owns the cover.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;

/// When commits write delta pages rather than whole leaf images (`Options::deltas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deltas {
    /// A leaf's changes go to delta pages until more of its keys than this percentage of
    /// its items (and at least [`MIN_LEAF_ENTRIES`]) would be in them; that commit images
    /// the leaf whole instead. 0 turns delta pages off: every commit images whole every
    /// leaf it touches, as format 5 did.
    pub leaf_percent: u32,
    /// The slots of live delta pages are kept to this percentage of the live leaf and
    /// extension pages' slots (in bytes: the data's), or to `min_bytes` if that is more:
    /// past it, a commit images whole the leaves of the oldest delta pages' entries, which
    /// frees those pages. (Counted against leaf pages alone, 1 KiB values in entries filled
    /// the space after about two entries per leaf, and every leaf was imaged for them.)
    pub space_percent: u32,
    /// The fewest bytes of delta page slots the limit allows.
    pub min_bytes: u64,
    /// With a leaf cache: commits write delta entries only while its resident bytes are
    /// below this percentage of its budget; past it (the cache is evicting, and a leaf
    /// touched is likely cold) they image whole, since a miss on a leaf with entries reads
    /// every delta page it has entries in (docs/BENCHMARKS.md, "Delta pages under a memory
    /// budget"). `u32::MAX`: always entries.
    pub budget_percent: u32,
}

/// The fewest delta entries a leaf may have before it is imaged whole (a small leaf's
/// percentage would round to almost none).
pub const MIN_LEAF_ENTRIES: usize = 4;

/// The longest value a delta entry holds itself (issue 57): a longer one goes to an
/// extension page written beside the entry. A value between the leaf's inline limit and
/// this travels in the commit's delta page (one sequential block per commit, as a log
/// record would) and moves to an extension page when its leaf is next imaged whole.
pub const DELTA_VALUE_MAX: usize = 4096;

/// The most bytes one delta page holds: a commit's entries past it go to further pages (a
/// page stays live while any of its entries does, so smaller pages free sooner).
pub const DELTA_PAGE_BYTES: usize = 16 << 10;

impl Default for Deltas {
    /// Measured (docs/BENCHMARKS.md, "Delta pages"): 25% of a leaf, delta space a quarter
    /// of the data's slots (at least 1 MiB), entries while a leaf cache is below 75% of
    /// its budget.
    fn default() -> Deltas {
        Deltas {
            leaf_percent: 25,
            space_percent: 25,
            min_bytes: 1 << 20,
            budget_percent: 75,
        }
    }
}

impl Deltas {
    /// Whole leaf images only.
    pub const OFF: Deltas = Deltas {
        leaf_percent: 0,
        space_percent: 0,
        min_bytes: 0,
        budget_percent: 0,
    };

    /// Whether commits write delta pages at all.
    pub fn on(&self) -> bool {
        self.leaf_percent > 0
    }

    /// The most delta entries a leaf of `items` items may have.
    pub fn leaf_limit(&self, items: usize) -> usize {
        (items * self.leaf_percent as usize / 100).max(MIN_LEAF_ENTRIES)
    }

    /// Whether a leaf cache holding `resident` bytes of its `budget` is past
    /// [`Deltas::budget_percent`].
    pub fn pressed(&self, resident: usize, budget: usize) -> bool {
        (resident as u128) * 100 >= (budget as u128) * u128::from(self.budget_percent)
    }

    /// The most bytes of live delta page slots beside `data_bytes` of live leaf and
    /// extension page slots.
    pub fn byte_limit(&self, data_bytes: u64) -> u64 {
        (data_bytes / 100 * u64::from(self.space_percent)).max(self.min_bytes)
    }
}

/// A key whose durable state is a delta entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pend {
    /// The delta page holding the entry.
    pub(crate) page: u64,
    /// The extension page the entry's value is in, if it is in one.
    pub(crate) ext: Option<u64>,
}

/// A live delta page: its slot's size, the keys it was written with, and how many it still
/// provides.
#[derive(Debug, Default)]
pub(crate) struct Meta {
    slot: u64,
    keys: Vec<Vec<u8>>,
    live: usize,
}

/// What the live delta pages provide (see the module's comment).
#[derive(Debug, Default)]
pub(crate) struct Book {
    pending: BTreeMap<Vec<u8>, Pend>,
    pages: HashMap<u64, Meta>,
    /// Live pages, oldest first; pages freed since are skipped, and dropped once they reach
    /// the front (every page behind the oldest live one was written after it, and the
    /// oldest are the ones retired).
    order: VecDeque<u64>,
    /// The live pages' slots, in bytes.
    bytes: u64,
}

/// The key range `[low, high)` of a leaf's fences (`None`: unbounded) as map bounds.
pub(crate) fn range<'a>(
    low: Option<&'a [u8]>,
    high: Option<&'a [u8]>,
) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
    (
        low.map_or(Bound::Unbounded, Bound::Included),
        high.map_or(Bound::Unbounded, Bound::Excluded),
    )
}

impl Book {
    /// Live delta pages.
    pub(crate) fn live_pages(&self) -> usize {
        self.pages.len()
    }

    /// Bytes of live delta page slots.
    pub(crate) fn live_bytes(&self) -> u64 {
        self.bytes
    }

    /// Keys whose durable state is a delta entry.
    pub(crate) fn pending_keys(&self) -> usize {
        self.pending.len()
    }

    /// Every key whose durable state is a delta entry, in key order.
    pub(crate) fn keys(&self) -> Vec<Vec<u8>> {
        self.pending.keys().cloned().collect()
    }

    /// Whether `page` is a live delta page.
    pub(crate) fn is_live(&self, page: u64) -> bool {
        self.pages.contains_key(&page)
    }

    /// The delta entries in `[low, high)`, counted up to `cap` (enough to decide).
    pub(crate) fn count_in(&self, low: Option<&[u8]>, high: Option<&[u8]>, cap: usize) -> usize {
        self.pending
            .range::<[u8], _>(range(low, high))
            .take(cap)
            .count()
    }

    /// The keys whose leaves a commit must image whole so that live delta pages' slots
    /// come down to `limit` bytes: the keys the oldest pages still provide.
    pub(crate) fn retiring(&mut self, limit: u64) -> Vec<Vec<u8>> {
        let mut over = self.bytes.saturating_sub(limit);
        let mut keys = Vec::new();
        if over == 0 {
            return keys;
        }
        // Freed pages are dropped from the front only: a scan of the whole queue per
        // commit cost a quarter of the committer's time under `sync`.
        while self
            .order
            .front()
            .is_some_and(|p| !self.pages.contains_key(p))
        {
            self.order.pop_front();
        }
        for off in &self.order {
            if over == 0 {
                break;
            }
            let Some(meta) = self.pages.get(off) else {
                continue;
            };
            over = over.saturating_sub(meta.slot);
            keys.extend(
                meta.keys
                    .iter()
                    .filter(|k| self.pending.get(*k).is_some_and(|p| p.page == *off))
                    .cloned(),
            );
        }
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// One entry fewer on `page`; frees it (onto `freed`) at none.
    fn unref(&mut self, page: u64, freed: &mut Vec<u64>) {
        if let Some(m) = self.pages.get_mut(&page) {
            m.live -= 1;
            if m.live == 0 {
                self.bytes -= m.slot;
                self.pages.remove(&page);
                freed.push(page);
            }
        }
    }

    /// A leaf page now images `[low, high)` whole: every entry in it is superseded. The
    /// extensions those entries named go onto `unnamed`, the pages left with no entry onto
    /// `freed`.
    pub(crate) fn drop_range(
        &mut self,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        unnamed: &mut Vec<u64>,
        freed: &mut Vec<u64>,
    ) {
        let keys: Vec<Vec<u8>> = self
            .pending
            .range::<[u8], _>(range(low, high))
            .map(|(k, _)| k.clone())
            .collect();
        for k in keys {
            if let Some(p) = self.pending.remove(&k) {
                unnamed.extend(p.ext);
                self.unref(p.page, freed);
            }
        }
    }

    /// Delta page `page` (in a slot of `slot` bytes) now provides `entries` (key and the
    /// extension its value is in), in key order: each supersedes the key's previous entry,
    /// whose extension goes onto `unnamed` (and whose page onto `freed` if it provides
    /// nothing else); the new entries' extensions go onto `named`.
    pub(crate) fn add_page(
        &mut self,
        page: u64,
        slot: u64,
        entries: Vec<(Vec<u8>, Option<u64>)>,
        named: &mut Vec<u64>,
        unnamed: &mut Vec<u64>,
        freed: &mut Vec<u64>,
    ) {
        let mut keys = Vec::with_capacity(entries.len());
        for (k, ext) in entries {
            named.extend(ext);
            if let Some(old) = self.pending.insert(k.clone(), Pend { page, ext }) {
                unnamed.extend(old.ext);
                self.unref(old.page, freed);
            }
            keys.push(k);
        }
        if keys.is_empty() {
            freed.push(page);
            return;
        }
        let live = keys.len();
        self.pages.insert(page, Meta { slot, keys, live });
        self.bytes += slot;
        self.order.push_back(page);
    }

    /// Recovery's book: `entries` (key, delta page, the extension it names) are the keys
    /// whose state is a delta entry, in key order; `slot` gives a page's slot size, `rank`
    /// its position by commit (the retirement queue is oldest first).
    pub(crate) fn recovered(
        entries: Vec<(Vec<u8>, u64, Option<u64>)>,
        slot: impl Fn(u64) -> u64,
        rank: &HashMap<u64, usize>,
    ) -> Book {
        let mut b = Book::default();
        for (k, page, _) in &entries {
            let m = b.pages.entry(*page).or_default();
            if m.live == 0 {
                m.slot = slot(*page);
                b.bytes += m.slot;
            }
            m.keys.push(k.clone());
            m.live += 1;
        }
        // Sorted input: the map is built in bulk, not by one search per key.
        b.pending = entries
            .into_iter()
            .map(|(k, page, ext)| (k, Pend { page, ext }))
            .collect();
        let mut order: Vec<u64> = b.pages.keys().copied().collect();
        order.sort_by_key(|p| rank.get(p).copied().unwrap_or(usize::MAX));
        b.order = order.into();
        b
    }

    /// The extensions the live entries name (one per entry).
    pub(crate) fn exts(&self) -> impl Iterator<Item = u64> + '_ {
        self.pending.values().filter_map(|p| p.ext)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn entries_are_superseded_by_newer_entries_and_by_whole_images() {
        let mut b = Book::default();
        let (mut named, mut unnamed, mut freed) = (Vec::new(), Vec::new(), Vec::new());
        b.add_page(
            100,
            512,
            vec![(k("a"), None), (k("m"), Some(7)), (k("x"), None)],
            &mut named,
            &mut unnamed,
            &mut freed,
        );
        assert_eq!((named.clone(), b.live_pages()), (vec![7], 1));
        b.add_page(
            200,
            1024,
            vec![(k("m"), None)],
            &mut named,
            &mut unnamed,
            &mut freed,
        );
        assert_eq!(unnamed, vec![7], "m's old entry named extension 7");
        assert_eq!(b.count_in(None, None, 10), 3);
        assert_eq!(b.live_bytes(), 1536);
        assert_eq!(b.count_in(Some(b"b"), Some(b"y"), 10), 2);
        assert!(freed.is_empty());
        // A whole image of [a, n) supersedes a and m: page 200 is free, 100 keeps x.
        b.drop_range(None, Some(b"n"), &mut unnamed, &mut freed);
        assert_eq!(freed, vec![200]);
        assert_eq!(b.live_bytes(), 512);
        assert!(b.is_live(100) && !b.is_live(200));
        b.drop_range(Some(b"n"), None, &mut unnamed, &mut freed);
        assert_eq!(freed, vec![200, 100]);
        assert_eq!(
            (b.live_pages(), b.pending_keys(), b.live_bytes()),
            (0, 0, 0)
        );
    }

    #[test]
    fn retiring_names_the_keys_the_oldest_pages_still_provide() {
        let mut b = Book::default();
        let (mut n, mut u, mut f) = (Vec::new(), Vec::new(), Vec::new());
        let e = |ks: &[&str]| ks.iter().map(|x| (k(x), None)).collect::<Vec<_>>();
        b.add_page(1, 512, e(&["a", "b"]), &mut n, &mut u, &mut f);
        b.add_page(2, 512, e(&["b", "c"]), &mut n, &mut u, &mut f);
        b.add_page(3, 512, e(&["d"]), &mut n, &mut u, &mut f);
        assert!(b.retiring(1536).is_empty());
        // Page 1 provides only a now (b moved to page 2).
        assert_eq!(b.retiring(1024), vec![k("a")]);
        assert_eq!(b.retiring(1000), vec![k("a"), k("b"), k("c")]);
        b.drop_range(None, Some(b"c"), &mut u, &mut f);
        assert_eq!(f, vec![1]);
        assert_eq!(b.retiring(512), vec![k("c")]);
    }

    #[test]
    fn limits() {
        let d = Deltas::default();
        assert_eq!(d.leaf_limit(140), 35);
        assert_eq!(d.leaf_limit(3), MIN_LEAF_ENTRIES);
        assert_eq!(d.byte_limit(100 << 10), 1 << 20);
        assert_eq!(d.byte_limit(100 << 20), 25 << 20);
        assert!(!Deltas::OFF.on());
    }
}

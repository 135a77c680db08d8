//! The cover: which page holds the newest durable state of each key range.
//!
//! Why ranges and not "newest page per LID" (Retina §4.5): our leaves split and merge, and
//! recovery rebuilds the tree with new LIDs, so the key range a LID names changes over time.
//! Every page is a consistent image of its range `[low, high)` at its version, and every
//! write after that version makes a newer page for the range that holds the key. So the
//! state of key `k` is the image in the newest page whose range holds `k`; a range no page
//! holds is empty. The cover maps disjoint key ranges to those pages, is built in version
//! order (the same code at run time and at recovery), and counts how many ranges each page
//! still provides: a page that provides none is shadowed everywhere and its slot is free.
//!
//! Not thread-safe by itself; the committer owns it.

use std::collections::{BTreeMap, HashMap};

/// A key range bound: `None` = unbounded.
pub type Bound = Option<Vec<u8>>;

/// Disjoint ranges → page offset, with per-page reference counts.
#[derive(Default)]
pub struct Cover {
    /// Range start (the empty key = unbounded below) → (range end, page).
    ranges: BTreeMap<Vec<u8>, (Bound, u64)>,
    refs: HashMap<u64, usize>,
}

fn before(k: &[u8], hi: &Bound) -> bool {
    hi.as_deref().is_none_or(|h| k < h)
}

impl Cover {
    /// An empty cover (every key absent).
    pub fn new() -> Cover {
        Cover::default()
    }

    /// The cover of pages whose ranges `(lo, hi, page)` are disjoint, each providing all
    /// of its range (an index's live pages): built in one sorted pass, not by an insert
    /// per page. `None` if two ranges overlap or a page is named twice.
    pub fn disjoint(pages: impl Iterator<Item = (Bound, Bound, u64)>) -> Option<Cover> {
        let mut all: Vec<(Vec<u8>, Bound, u64)> = pages
            .map(|(lo, hi, p)| (lo.unwrap_or_default(), hi, p))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let ordered = all.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            a.1.as_deref().is_some_and(|h| h <= b.0.as_slice())
        });
        if !ordered || all.iter().any(|(lo, hi, _)| !before(lo, hi)) {
            return None;
        }
        let refs: HashMap<u64, usize> = all.iter().map(|x| (x.2, 1)).collect();
        if refs.len() != all.len() {
            return None;
        }
        let ranges = all.into_iter().map(|(lo, hi, p)| (lo, (hi, p))).collect();
        Some(Cover { ranges, refs })
    }

    fn add(&mut self, lo: Vec<u8>, hi: Bound, page: u64) {
        *self.refs.entry(page).or_insert(0) += 1;
        self.ranges.insert(lo, (hi, page));
    }

    fn drop_ref(&mut self, page: u64, freed: &mut Vec<u64>) {
        if let Some(n) = self.refs.get_mut(&page) {
            *n -= 1;
            if *n == 0 {
                self.refs.remove(&page);
                freed.push(page);
            }
        }
    }

    /// Page `page` now provides `[lo, hi)` (`lo` = `None` is unbounded below); returns the
    /// pages it shadowed everywhere they still provided anything.
    pub fn insert(&mut self, lo: Option<&[u8]>, hi: Option<&[u8]>, page: u64) -> Vec<u64> {
        let lo = lo.unwrap_or(&[]).to_vec();
        let hi: Bound = hi.map(<[u8]>::to_vec);
        let mut freed = Vec::new();
        for s in self.overlapping(&lo, &hi) {
            let Some((e, p)) = self.ranges.remove(&s) else {
                continue;
            };
            if s < lo {
                self.add(s, Some(lo.clone()), p);
            }
            if let Some(h) = &hi {
                if e.as_deref().is_none_or(|e| e > h.as_slice()) {
                    self.add(h.clone(), e, p);
                }
            }
            self.drop_ref(p, &mut freed);
        }
        self.add(lo, hi, page);
        freed.retain(|p| *p != page && !self.refs.contains_key(p));
        freed
    }

    /// Page `page`, ranked `rank(page)`, provides the parts of `[lo, hi)` where no page of a
    /// higher rank does; pages may arrive in any order, and the cover is the one [`insert`]
    /// builds from them in rank order (recovery's first pass reads pages in file order and
    /// forgets each one as soon as it is shadowed). Returns the pages that now provide
    /// nothing, `page` itself among them when it is shadowed everywhere.
    ///
    /// [`insert`]: Cover::insert
    pub fn insert_ranked<R: Ord>(
        &mut self,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        page: u64,
        rank: impl Fn(u64) -> R,
    ) -> Vec<u64> {
        let lo = lo.unwrap_or(&[]).to_vec();
        let hi: Bound = hi.map(<[u8]>::to_vec);
        let mine = rank(page);
        let mut freed = Vec::new();
        // Parts of [lo, hi) that higher-ranked pages keep, in key order.
        let mut kept: Vec<(Vec<u8>, Bound, u64)> = Vec::new();
        for s in self.overlapping(&lo, &hi) {
            let Some((e, p)) = self.ranges.remove(&s) else {
                continue;
            };
            if s < lo {
                self.add(s.clone(), Some(lo.clone()), p);
            }
            let clipped_end = match (&e, &hi) {
                (Some(e), Some(h)) if e > h => {
                    self.add(h.clone(), Some(e.clone()), p);
                    Some(h.clone())
                }
                (None, Some(h)) => {
                    self.add(h.clone(), None, p);
                    Some(h.clone())
                }
                _ => e,
            };
            if rank(p) > mine {
                kept.push((s.max(lo.clone()), clipped_end, p));
            }
            self.drop_ref(p, &mut freed);
        }
        let mut at = Some(lo);
        for (s, e, p) in kept {
            let Some(from) = at.take() else { break };
            if from < s {
                self.add(from, Some(s.clone()), page);
            }
            self.add(s, e.clone(), p);
            at = e;
        }
        if let Some(from) = at {
            if before(&from, &hi) {
                self.add(from, hi, page);
            }
        }
        freed.push(page);
        freed.sort_unstable();
        freed.dedup();
        freed.retain(|p| !self.refs.contains_key(p));
        freed
    }

    /// Starts of the ranges that overlap `[lo, hi)`, in key order.
    fn overlapping(&self, lo: &[u8], hi: &Bound) -> Vec<Vec<u8>> {
        let mut hit = Vec::new();
        // The range that starts at or before `lo`, if it reaches past `lo`.
        if let Some((s, (e, _))) = self.ranges.range(..=lo.to_vec()).next_back() {
            if e.as_deref().is_none_or(|e| e > lo) {
                hit.push(s.clone());
            }
        }
        // Ranges that start inside (lo, hi).
        for (s, _) in self
            .ranges
            .range::<[u8], _>((std::ops::Bound::Excluded(lo), std::ops::Bound::Unbounded))
        {
            if !before(s, hi) {
                break;
            }
            hit.push(s.clone());
        }
        hit
    }

    /// The ranges in key order: (start, end, page).
    pub fn ranges(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>, u64)> {
        self.ranges
            .iter()
            .map(|(s, (e, p))| (s.as_slice(), e.as_deref(), *p))
    }

    /// Pages that provide at least one range.
    pub fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.refs.keys().copied()
    }

    /// Whether `page` provides at least one range.
    pub fn provides(&self, page: u64) -> bool {
        self.refs.contains_key(&page)
    }

    /// Number of live pages.
    pub fn live_pages(&self) -> usize {
        self.refs.len()
    }

    /// The page that alone provides exactly `[lo, hi)` (one range of the cover, these
    /// bounds), if one does.
    pub fn exactly(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Option<u64> {
        let (e, p) = self.ranges.get(lo.unwrap_or(&[]))?;
        (e.as_deref() == hi).then_some(*p)
    }

    /// The page providing `key`, if any.
    #[cfg(test)]
    pub fn page_for(&self, key: &[u8]) -> Option<u64> {
        let (_, (e, p)) = self
            .ranges
            .range::<[u8], _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(key)))
            .next_back()?;
        before(key, e).then_some(*p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn disjoint_pages_build_the_cover_inserts_build() {
        let b = |s: &str| Some(s.as_bytes().to_vec());
        let pages = vec![(b("m"), None, 3), (None, b("c"), 1), (b("c"), b("m"), 2)];
        let c = Cover::disjoint(pages.clone().into_iter()).unwrap();
        let mut d = Cover::new();
        for (lo, hi, p) in &pages {
            d.insert(lo.as_deref(), hi.as_deref(), *p);
        }
        assert!(c.ranges().eq(d.ranges()));
        assert_eq!(c.live_pages(), 3);
        // Overlapping, empty, or a page twice: not an index's pages.
        let bad = [
            vec![(None, b("d"), 1), (b("c"), None, 2)],
            vec![(None, b("c"), 1), (b("c"), b("c"), 2)],
            vec![(None, b("c"), 1), (b("c"), None, 1)],
            vec![(None, None, 1), (b("c"), None, 2)],
        ];
        for pages in bad {
            assert!(
                Cover::disjoint(pages.clone().into_iter()).is_none(),
                "{pages:?}"
            );
        }
    }

    #[test]
    fn splits_and_shadows() {
        let mut c = Cover::new();
        assert!(c.insert(None, None, 1).is_empty());
        // A split: page 2 takes [a, m); page 1 still provides below a and from m.
        assert!(c.insert(Some(b"a"), Some(b"m"), 2).is_empty());
        assert_eq!(c.page_for(b"0"), Some(1));
        assert_eq!(c.page_for(b"b"), Some(2));
        assert_eq!(c.page_for(b"z"), Some(1));
        assert_eq!(c.insert(Some(b"m"), None, 3), Vec::<u64>::new());
        assert_eq!(c.insert(None, Some(b"a"), 4), vec![1]);
        // A merge: one page over everything shadows the rest.
        let mut f = c.insert(None, None, 5);
        f.sort();
        assert_eq!(f, vec![2, 3, 4]);
        assert_eq!(c.live_pages(), 1);
    }

    proptest! {
        /// Against a model over a small key space: each key maps to the newest page whose
        /// range holds it, and a page is freed exactly when it provides no key.
        #[test]
        fn cover_matches_a_per_key_model(
            ops in prop::collection::vec((0u8..20, 0u8..21, any::<bool>(), any::<bool>()), 1..40)
        ) {
            let mut c = Cover::new();
            let mut model: Vec<Option<u64>> = vec![None; 20];
            let mut live = std::collections::HashSet::new();
            for (page, (a, b, lo_open, hi_open)) in ops.into_iter().enumerate() {
                let page = page as u64 + 1;
                let (a, b) = (a.min(b), a.max(b).max(a + 1));
                let lo = (!lo_open).then(|| vec![a]);
                let hi = (!hi_open).then(|| vec![b]);
                let freed = c.insert(lo.as_deref(), hi.as_deref(), page);
                for k in 0..20u8 {
                    if (lo_open || k >= a) && (hi_open || k < b) {
                        model[k as usize] = Some(page);
                    }
                }
                live.insert(page);
                for f in &freed {
                    prop_assert!(!model.contains(&Some(*f)), "freed page {} still provides a key", f);
                    live.remove(f);
                }
                for k in 0..20u8 {
                    prop_assert_eq!(c.page_for(&[k]), model[k as usize]);
                }
                // Pages of the model that provide nothing were freed (keys outside 0..20
                // are providers too, so only check the other direction).
                for p in c.pages() {
                    prop_assert!(live.contains(&p));
                }
            }
        }

        /// Pages inserted ranked, in any order, give the cover of the same pages inserted
        /// in rank order, and the pages reported as providing nothing are exactly those
        /// the ordered cover no longer uses.
        #[test]
        fn ranked_inserts_in_any_order_match_the_ordered_cover(
            ops in prop::collection::vec((0u8..20, 0u8..21, any::<bool>(), any::<bool>()), 1..40),
            order in prop::collection::vec(any::<prop::sample::Index>(), 40)
        ) {
            let pages: Vec<(Bound, Bound)> = ops
                .iter()
                .map(|&(a, b, lo_open, hi_open)| {
                    let (a, b) = (a.min(b), a.max(b).max(a + 1));
                    ((!lo_open).then(|| vec![a]), (!hi_open).then(|| vec![b]))
                })
                .collect();
            let mut ordered = Cover::new();
            for (i, (lo, hi)) in pages.iter().enumerate() {
                ordered.insert(lo.as_deref(), hi.as_deref(), i as u64);
            }
            // A random arrival order: the page ranks are their indexes.
            let mut left: Vec<usize> = (0..pages.len()).collect();
            let mut ranked = Cover::new();
            let mut forgotten = std::collections::HashSet::new();
            for pick in &order {
                if left.is_empty() {
                    break;
                }
                let i = left.remove(pick.index(left.len()));
                let (lo, hi) = &pages[i];
                for f in ranked.insert_ranked(lo.as_deref(), hi.as_deref(), i as u64, |p| p) {
                    prop_assert!(forgotten.insert(f), "page {} reported twice", f);
                }
            }
            prop_assert!(left.is_empty());
            let a: Vec<_> = ordered.ranges().map(|(s, e, p)| (s.to_vec(), e.map(<[u8]>::to_vec), p)).collect();
            let b: Vec<_> = ranked.ranges().map(|(s, e, p)| (s.to_vec(), e.map(<[u8]>::to_vec), p)).collect();
            // Adjacent ranges of one page may be split differently: compare per key.
            for k in 0..=21u8 {
                prop_assert_eq!(ordered.page_for(&[k]), ranked.page_for(&[k]));
            }
            prop_assert_eq!(ordered.page_for(&[]), ranked.page_for(&[]));
            let mut used_a: Vec<u64> = a.iter().map(|r| r.2).collect();
            let mut used_b: Vec<u64> = b.iter().map(|r| r.2).collect();
            used_a.sort_unstable();
            used_a.dedup();
            used_b.sort_unstable();
            used_b.dedup();
            prop_assert_eq!(&used_a, &used_b);
            for p in 0..pages.len() as u64 {
                prop_assert_eq!(forgotten.contains(&p), !used_b.contains(&p), "page {}", p);
            }
        }
    }
}

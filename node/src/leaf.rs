//! Search inside one leaf at a read version. A point lookup hashes the key once and
//! compares only the keys whose fingerprint matches: the log slots newest first (the newest
//! entry within the read version wins; a delete marker hides the key), then the sorted
//! items. A range read binary-searches the item slots for its first key, puts the log block
//! in key order by its order hints, and merges the two by back pointers, so items come out in
//! key order with no key comparison between log and sorted items. An entry whose deadline
//! the reader's clock (`now`, ms since the Unix epoch; 0 expires nothing) is past hides its
//! key as a delete marker does: an expired item is absent, not replaced by an older one.

use crate::builder::RawItem;
use crate::keys::cmp_keys;
use crate::layout::*;
use crate::log::{LogEntry, LogOrder};
use crate::view::{NodeView, SortedItem, SortedIter, ValueRef};
use std::cmp::Ordering::{Greater, Less};

/// Merged, version-filtered iterator over a leaf's items in key order.
pub struct LeafIter<'a> {
    view: NodeView<'a>,
    rv: u64,
    now: u64,
    order: LogOrder,
    li: usize,
    /// Back pointer of the log entry at `li` (`usize::MAX` past the last).
    log_back: usize,
    sorted: SortedIter<'a>,
    /// The next sorted item, read ahead (its `rel` is what back pointers compare with).
    next_sorted: Option<SortedItem<'a>>,
}

impl<'a> LeafIter<'a> {
    fn new(view: NodeView<'a>, rv: u64, now: u64, mut sorted: SortedIter<'a>) -> Self {
        let order = view.log_order();
        // Entries whose back pointer is before the first item read hold smaller keys.
        let start = sorted.position();
        let li = order
            .as_slice()
            .iter()
            .position(|&off| view.log_back(usize::from(off)) >= start)
            .unwrap_or(order.len());
        let next_sorted = sorted.next_item();
        let mut it = LeafIter {
            view,
            rv,
            now,
            order,
            li,
            log_back: usize::MAX,
            sorted,
            next_sorted,
        };
        it.load_back();
        it
    }

    #[inline]
    fn load_back(&mut self) {
        self.log_back = match self.order.as_slice().get(self.li) {
            Some(&off) => self.view.log_back(usize::from(off)),
            None => usize::MAX,
        };
    }

    fn entry(&self, i: usize) -> LogEntry<'a> {
        self.view.log_entry(usize::from(self.order.as_slice()[i]))
    }

    /// The next sorted item, reading the one after it ahead.
    #[inline]
    fn take_sorted(&mut self) -> Option<SortedItem<'a>> {
        let s = self.next_sorted?;
        self.next_sorted = self.sorted.next_item();
        Some(s)
    }

    /// The next key's winner at the read version (before the clock is applied): a sorted
    /// item, or the newest log entry within the read version that is not a delete marker.
    #[inline]
    fn advance(&mut self) -> Option<Pick<'a>> {
        loop {
            // The back pointer says where an entry falls among sorted items: before the item
            // at that offset (or on it, with FLAG_EQ).
            if self.log_back != usize::MAX
                && self.next_sorted.is_none_or(|s| self.log_back <= s.rel)
            {
                let e = self.entry(self.li);
                if let Some(p) = self.log_group(e) {
                    return Some(p);
                }
                continue;
            }
            return self.take_sorted().map(Pick::Item);
        }
    }

    /// Next visible (key, value) in key order.
    #[inline]
    pub fn next_kv(&mut self) -> Option<(&'a [u8], ValueRef<'a>)> {
        loop {
            let (k, v) = match self.advance()? {
                Pick::Item(s) => (s.key, self.view.value_at(s.body).0),
                Pick::Entry(e) => (e.key, e.value?),
            };
            if !v.is_expired(self.now) {
                return Some((k, v));
            }
        }
    }

    /// Consumes the run of entries for `e`'s key (newest first, linked by FLAG_DUP) and the
    /// sorted item it shadows; returns the winner, if it is not a delete marker.
    fn log_group(&mut self, e: LogEntry<'a>) -> Option<Pick<'a>> {
        let mut chosen: Option<LogEntry<'a>> = None;
        let mut cur = e;
        loop {
            self.li += 1;
            if chosen.is_none() && cur.version <= self.rv {
                chosen = Some(cur);
            }
            if cur.flags & FLAG_DUP == 0 || self.li >= self.order.len() {
                break;
            }
            cur = self.entry(self.li);
        }
        self.load_back();
        let shadowed = if e.flags & FLAG_EQ != 0 {
            // The sorted item at the back pointer has this key: consume it.
            self.take_sorted()
        } else {
            None
        };
        match chosen {
            Some(c) if c.value.is_some() => Some(Pick::Entry(c)),
            Some(_) => None,
            None => shadowed.map(Pick::Item),
        }
    }
}

/// The winner for one key of a leaf.
enum Pick<'a> {
    Item(SortedItem<'a>),
    Entry(LogEntry<'a>),
}

impl<'a> Iterator for LeafIter<'a> {
    type Item = (&'a [u8], ValueRef<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.next_kv()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let sorted = usize::from(self.next_sorted.is_some()) + self.sorted.remaining();
        (0, Some(sorted + self.order.len() - self.li))
    }
}

/// Where a leaf's point lookup goes on ([`NodeView::get_candidate`]): at log slot `j` (0:
/// the newest entry), or at sorted item `i`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    /// A log slot, newest first.
    Log(usize),
    /// A sorted item.
    Item(usize),
}

impl<'a> NodeView<'a> {
    /// Every visible item of this leaf at read version `rv`, in key order.
    pub fn leaf_iter(&self, rv: u64, now: u64) -> LeafIter<'a> {
        LeafIter::new(*self, rv, now, self.sorted_items())
    }

    /// Appends every item of this leaf at its newest version, expired ones included, to
    /// `out`, as a merge copies them: key, encoded value and fingerprint, in key order. The
    /// same items as [`NodeView::leaf_iter`] at `u64::MAX` with clock 0 (tested), in one
    /// pass with the log put in order on the stack.
    pub fn merge_items(&self, out: &mut Vec<RawItem<'a>>) {
        let n = self.item_count();
        let c = self.log_count();
        out.reserve(n + c);
        // Log slots in key order (newest first among equal keys), from the order hints.
        let mut order = [0u8; MAX_LOG_ENTRIES];
        for j in 0..c {
            let hint = usize::from(self.u8_at(self.log_slot(j).0 + 2)).min(j);
            order.copy_within(hint..j, hint + 1);
            order[hint] = j as u8;
        }
        let (mut i, mut li) = (0, 0);
        let mut next = (i < n).then(|| self.item_full(i));
        while li < c || next.is_some() {
            if li < c {
                let (off, fp) = self.log_slot(usize::from(order[li]));
                if next.is_none_or(|s| self.log_back(off) <= s.rel) {
                    // The newest entry of its key is first; older ones follow, linked by DUP.
                    let e = self.log_entry(off);
                    li += 1;
                    let mut flags = e.flags;
                    while flags & FLAG_DUP != 0 && li < c {
                        flags = self
                            .log_entry(self.log_slot(usize::from(order[li])).0)
                            .flags;
                        li += 1;
                    }
                    if e.flags & FLAG_EQ != 0 {
                        // The sorted item at the back pointer has this key.
                        i += 1;
                        next = (i < n).then(|| self.item_full(i));
                    }
                    if e.value.is_some() {
                        let at = off + LOG_ENTRY_HEADER + 2 + e.key.len();
                        out.push(RawItem {
                            key: e.key,
                            value: self.bytes(at, e.end - at),
                            fp,
                        });
                    }
                    continue;
                }
            }
            let Some(s) = next else { break };
            let end = self.value_end(s.body);
            out.push(RawItem {
                key: s.key,
                value: self.bytes(s.body, end - s.body),
                fp: self.item_fingerprints()[i],
            });
            i += 1;
            next = (i < n).then(|| self.item_full(i));
        }
    }

    /// Visible items with key >= `key`, from the first sorted item >= `key` (binary search
    /// of the item slots).
    pub fn leaf_lower_bound(
        &self,
        key: &[u8],
        rv: u64,
        now: u64,
    ) -> std::iter::Peekable<LeafIter<'a>> {
        let mut it = LeafIter::new(*self, rv, now, self.seek(key)).peekable();
        // Log entries before the first sorted item >= `key` may still hold smaller keys.
        while it.next_if(|(k, _)| cmp_keys(k, key) == Less).is_some() {}
        it
    }

    /// The visible value of `key` at `rv`: the newest log entry for `key` within `rv` if
    /// there is one (a delete marker hides the key), else the sorted block's item. Only keys
    /// whose fingerprint matches are compared. Gives the same answer as the first item of
    /// [`NodeView::leaf_lower_bound`] when its key is `key` (tested).
    #[inline]
    pub fn leaf_get(&self, key: &[u8], rv: u64, now: u64) -> Option<ValueRef<'a>> {
        self.leaf_get_fp(key, crate::fingerprint(key), rv, now)
    }

    /// [`NodeView::leaf_get`] with the key's fingerprint computed by the caller.
    #[inline]
    pub fn leaf_get_fp(&self, key: &[u8], fp: u8, rv: u64, now: u64) -> Option<ValueRef<'a>> {
        // One pass: the log's fingerprints, then the items'.
        let found = match self.log_lookup(key, fp, rv, 0) {
            Some(e) => e,
            None => self.find_item(key, fp).map(|i| self.item_value(i)),
        };
        found.filter(|v| !v.is_expired(now))
    }

    /// The first key [`NodeView::leaf_get_fp`] compares for a key of fingerprint `fp`: the
    /// newest log entry whose fingerprint matches, else the first sorted item whose does,
    /// and the node offset of its key header; `None` when none matches, and the key is
    /// absent without a key being read. What an interleaved reader prefetches between
    /// reading the tail and the lookup, so that the one access the fingerprints leave is a
    /// miss it waits for alongside other requests' instead of alone; the lookup then goes
    /// on from it ([`NodeView::leaf_get_from`]) without searching the fingerprints again.
    #[inline]
    pub fn get_candidate(&self, fp: u8) -> Option<(Candidate, usize)> {
        let slots = self.log_slots();
        let mut at = None;
        if !slots.is_empty() {
            let c = slots.len() / crate::layout::LOG_SLOT_SIZE;
            crate::fingerprint::find_log_fingerprint(slots, fp, |j| {
                at = Some((Candidate::Log(j), self.log_slot(c - 1 - j).0));
                true
            });
        }
        if at.is_none() {
            crate::fingerprint::find_fingerprint(self.item_fingerprints(), fp, |i| {
                at = Some((Candidate::Item(i), self.key_header(i)));
                true
            });
        }
        at
    }

    /// [`NodeView::leaf_get_fp`] from `from`, the first candidate
    /// [`NodeView::get_candidate`] found for `fp`: the log's fingerprints before it and the
    /// items' before an item candidate are not searched again.
    #[inline]
    pub fn leaf_get_from(
        &self,
        key: &[u8],
        fp: u8,
        rv: u64,
        now: u64,
        from: Candidate,
    ) -> Option<ValueRef<'a>> {
        let found = match from {
            Candidate::Log(j) => match self.log_lookup(key, fp, rv, j) {
                Some(e) => e,
                None => self.find_item_from(key, fp, 0).map(|i| self.item_value(i)),
            },
            Candidate::Item(i) => self.find_item_from(key, fp, i).map(|i| self.item_value(i)),
        };
        found.filter(|v| !v.is_expired(now))
    }

    /// The value of sorted item `i`.
    #[inline]
    fn item_value(&self, i: usize) -> ValueRef<'a> {
        self.value_at(self.item(i).1).0
    }

    /// The newest log entry for `key` within `rv`, searching the log slots from slot `from`
    /// (0: the newest): `Some(None)` for a delete marker, `None` when the log has no such
    /// entry.
    #[inline]
    fn log_lookup(&self, key: &[u8], fp: u8, rv: u64, from: usize) -> Option<Option<ValueRef<'a>>> {
        let slots = self.log_slots();
        let at = crate::layout::LOG_SLOT_SIZE * from;
        let rest = slots.get(at..).filter(|r| !r.is_empty())?;
        let c = slots.len() / crate::layout::LOG_SLOT_SIZE;
        let mut found = None;
        // Slots are newest first, and a buffer's entries are in version order, so the first
        // match within `rv` is the newest.
        crate::fingerprint::find_log_fingerprint(rest, fp, |j| {
            let (off, _) = self.log_slot(c - 1 - (from + j));
            let (k, version) = self.log_key(off);
            if version <= rv && crate::keys::keys_eq(k, key) {
                found = Some(self.log_entry(off).value);
                true
            } else {
                false
            }
        });
        found
    }

    /// The largest visible key <= `key` in this leaf.
    pub fn leaf_floor(&self, key: &[u8], rv: u64, now: u64) -> Option<&'a [u8]> {
        // Start a few items before the lower bound: usually one of them is visible.
        let lb = self.search(key, true);
        let mut from = lb.saturating_sub(8);
        loop {
            let mut best = None;
            for (k, _) in LeafIter::new(*self, rv, now, SortedIter::at_index(*self, from)) {
                if cmp_keys(k, key) == Greater {
                    break;
                }
                best = Some(k);
            }
            if best.is_some() || from == 0 {
                return best;
            }
            // Every item from there up to `key` is deleted: look further left.
            from = 0;
        }
    }

    /// The largest visible key of this leaf.
    pub fn leaf_last(&self, rv: u64, now: u64) -> Option<&'a [u8]> {
        self.leaf_iter(rv, now).last().map(|(k, _)| k)
    }
}

//! Search inside one leaf at a read version: the shortcut block picks one segment, the log
//! block is put in key order by its order hints, and the two are merged by back pointers, so
//! items come out in key order with no key comparison between log and sorted items. The
//! newest entry within the read version wins for each key; delete markers hide older items,
//! and so does a winning entry whose deadline the reader's clock (`now`, ms since the Unix
//! epoch; 0 expires nothing) is past: an expired item is absent, not replaced by an older one.

use crate::keys::cmp_keys;
use crate::layout::*;
use crate::log::{LogEntry, LogOrder};
use crate::view::{NodeView, SortedIter, ValueRef};
use std::cmp::Ordering::{Equal, Greater, Less};

/// Merged, version-filtered iterator over a leaf's items in key order.
pub struct LeafIter<'a> {
    view: NodeView<'a>,
    rv: u64,
    now: u64,
    order: LogOrder,
    li: usize,
    sorted: SortedIter<'a>,
}

impl<'a> LeafIter<'a> {
    fn new(view: NodeView<'a>, rv: u64, now: u64, sorted: SortedIter<'a>) -> Self {
        let order = view.log_order();
        // Entries positioned before the chosen segment hold keys below its boundary key.
        let start = sorted.position();
        let li = order
            .as_slice()
            .iter()
            .position(|&off| view.log_entry(usize::from(off)).back >= start)
            .unwrap_or(order.len());
        LeafIter {
            view,
            rv,
            now,
            order,
            li,
            sorted,
        }
    }

    fn entry(&self, i: usize) -> LogEntry<'a> {
        self.view.log_entry(usize::from(self.order.as_slice()[i]))
    }

    /// Next visible (key, value) in key order.
    #[inline]
    pub fn next_kv(&mut self) -> Option<(&'a [u8], ValueRef<'a>)> {
        loop {
            if self.li < self.order.len() {
                let e = self.entry(self.li);
                // The back pointer says where the entry falls among sorted items: before the
                // item at that offset (or on it, with FLAG_EQ).
                if self.sorted.at_end() || e.back <= self.sorted.position() {
                    if let Some(kv) = self.log_group(e) {
                        return Some(kv);
                    }
                    continue;
                }
            }
            let s = self.sorted.next_item()?;
            let v = self.view.value_at(s.body).0;
            if v.is_expired(self.now) {
                continue;
            }
            return Some((s.key, v));
        }
    }

    /// Consumes the run of entries for `e`'s key (newest first, linked by FLAG_DUP) and the
    /// sorted item it shadows; returns the visible version, if any.
    fn log_group(&mut self, e: LogEntry<'a>) -> Option<(&'a [u8], ValueRef<'a>)> {
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
        let shadowed = if e.flags & FLAG_EQ != 0 {
            // The sorted item at the back pointer has this key: consume it.
            self.sorted.next_item()
        } else {
            None
        };
        let kv = match chosen {
            Some(c) => c.value.map(|v| (c.key, v)),
            None => shadowed.map(|s| (s.key, self.view.value_at(s.body).0)),
        };
        kv.filter(|(_, v)| !v.is_expired(self.now))
    }
}

impl<'a> Iterator for LeafIter<'a> {
    type Item = (&'a [u8], ValueRef<'a>);
    fn next(&mut self) -> Option<Self::Item> {
        self.next_kv()
    }
}

impl<'a> NodeView<'a> {
    /// Every visible item of this leaf at read version `rv`, in key order.
    pub fn leaf_iter(&self, rv: u64, now: u64) -> LeafIter<'a> {
        LeafIter::new(*self, rv, now, self.sorted_items())
    }

    /// Visible items with key >= `key`, starting the search at the segment the shortcut
    /// block picks.
    pub fn leaf_lower_bound(
        &self,
        key: &[u8],
        rv: u64,
        now: u64,
    ) -> std::iter::Peekable<LeafIter<'a>> {
        self.leaf_lower_bound_from(self.seek_segment(key), key, rv, now)
    }

    /// [`NodeView::leaf_lower_bound`] from the segment [`NodeView::seek_segment`] chose.
    pub fn leaf_lower_bound_from(
        &self,
        seg: SortedIter<'a>,
        key: &[u8],
        rv: u64,
        now: u64,
    ) -> std::iter::Peekable<LeafIter<'a>> {
        let mut it = LeafIter::new(*self, rv, now, seg).peekable();
        while it.next_if(|(k, _)| cmp_keys(k, key) == Less).is_some() {}
        it
    }

    /// The visible value of `key` at `rv`: the newest log entry for `key` within `rv` if
    /// there is one (a delete marker hides the key), else the sorted block's item. Gives the
    /// same answer as the first item of [`NodeView::leaf_lower_bound`] when its key is `key`
    /// (tested), without ordering the log.
    pub fn leaf_get(&self, key: &[u8], rv: u64, now: u64) -> Option<ValueRef<'a>> {
        self.leaf_get_from(self.seek_segment(key), key, rv, now)
    }

    /// [`NodeView::leaf_get`] from the segment [`NodeView::seek_segment`] chose.
    pub fn leaf_get_from(
        &self,
        mut it: SortedIter<'a>,
        key: &[u8],
        rv: u64,
        now: u64,
    ) -> Option<ValueRef<'a>> {
        let mut newest: Option<LogEntry<'a>> = None;
        for e in self.log_entries() {
            // Entries are appended in version order, so the last visible match is newest.
            if e.version <= rv && cmp_keys(e.key, key) == Equal {
                newest = Some(e);
            }
        }
        let found = match newest {
            Some(e) => e.value,
            None => loop {
                let Some(item) = it.next_item() else {
                    break None;
                };
                match cmp_keys(item.key, key) {
                    Less => continue,
                    Equal => break Some(self.value_at(item.body).0),
                    Greater => break None,
                }
            },
        };
        found.filter(|v| !v.is_expired(now))
    }

    /// The largest visible key <= `key` in this leaf.
    pub fn leaf_floor(&self, key: &[u8], rv: u64, now: u64) -> Option<&'a [u8]> {
        let mut best = None;
        for (k, _) in LeafIter::new(*self, rv, now, self.seek_segment(key)) {
            if cmp_keys(k, key) == Greater {
                break;
            }
            best = Some(k);
        }
        if best.is_some() {
            return best;
        }
        // Every item of the chosen segment is above `key` or deleted: look further left.
        for (k, _) in self.leaf_iter(rv, now) {
            if k > key {
                break;
            }
            best = Some(k);
        }
        best
    }

    /// The largest visible key of this leaf.
    pub fn leaf_last(&self, rv: u64, now: u64) -> Option<&'a [u8]> {
        self.leaf_iter(rv, now).last().map(|(k, _)| k)
    }
}

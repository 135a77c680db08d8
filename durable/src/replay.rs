//! Recovery's last pass in bounded memory: the winning items of the live leaf pages, in key
//! order, streamed into the tree's bulk loader one page at a time. A page is read back from
//! the device (and checked again) when its first range comes up, its items are handed out
//! as slices of that one buffer (reference-counted: no copy, no allocation per item), and
//! the buffer is freed once the loader has copied its last item. So recovery holds the
//! page metadata (offsets, fences), the tree being built and one page — not the page
//! file's live bytes (issue 42, item 3).
//!
//! Delta entries newer than their key's page (the overlay, recovery.rs) are merged into the
//! stream in key order: an entry replaces the page's item, adds a key, or (a deletion)
//! drops it; each one is noted in the delta book as it goes by.
//!
//! With a memory budget, a page that provides exactly its leaf's range stays in the page
//! file, with the delta entries in that range (a load merges them, pager.rs): it is read
//! only to note the extensions it names and the keys the entries add or delete.

use crate::error::{disk, Error, Result};
use crate::format::{decode_page, ExtRef, Page, PageValue};
use crate::io::Storage;
use crate::slab::Slabs;
use accelkv_tree::Recovered;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::iter::Peekable;
use std::rc::Rc;

/// A delta entry newer than its key's page: the delta page, the value (`None`: deleted),
/// deadline, flags.
pub(crate) struct Entry {
    pub(crate) page: u64,
    pub(crate) value: Option<EntryValue>,
    pub(crate) deadline: u64,
    pub(crate) flags: u32,
}

impl Entry {
    /// A placeholder for an entry moved out.
    pub(crate) const GONE: Entry = Entry {
        page: 0,
        value: None,
        deadline: 0,
        flags: 0,
    };
}

/// A delta entry's value.
pub(crate) enum EntryValue {
    Inline(Vec<u8>),
    Ext(ExtRef),
}

/// The delta entries to merge, in strictly ascending key order.
pub(crate) type Overlay = Vec<(Vec<u8>, Entry)>;

/// Bytes of a recovered item: a slice of a page buffer, or an extension's value.
pub(crate) enum Bytes {
    /// `len` bytes at `at` of a page read back.
    Page(Rc<[u8]>, u32, u32),
    /// A value read from its extension page.
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        match self {
            Bytes::Page(b, at, len) => &b[*at as usize..(*at + *len) as usize],
            Bytes::Owned(v) => v,
        }
    }
}

/// What a live leaf page looks like to the last pass: where it is, how long, its lower
/// fence, and whether it provides exactly its leaf's range (a budgeted store then leaves
/// it in the page file).
pub(crate) struct Live {
    pub(crate) off: u64,
    pub(crate) len: u32,
    pub(crate) low: Option<Vec<u8>>,
    pub(crate) whole: bool,
    /// Whether it names extensions, how many items it holds, how many with a deadline
    /// (from the first pass: a page left in the page file without extensions is not read
    /// again).
    pub(crate) has_ext: bool,
    pub(crate) items: u32,
    pub(crate) expiring: u32,
}

/// One range of the cover, in key order: `[lo, hi)` provided by page `page`.
pub(crate) struct Range {
    pub(crate) lo: Vec<u8>,
    pub(crate) hi: Option<Vec<u8>>,
    pub(crate) page: usize,
}

/// Reads the leaf page at `off` (`len` bytes) back and checks it again: the first pass
/// found it intact, so anything else now is damage during recovery.
pub(crate) fn read_leaf(storage: &dyn Storage, off: u64, len: u32) -> Result<Rc<[u8]>> {
    read_back(storage, off, len, "leaf", |p| matches!(p, Page::Leaf(_))).map(Into::into)
}

/// Reads the `kind` page at `off` (`len` bytes) back and checks it again (`is`: the kind
/// it must decode as); the first pass found it intact, so anything else is damage.
pub(crate) fn read_back(
    storage: &dyn Storage,
    off: u64,
    len: u32,
    kind: &str,
    is: impl Fn(&Page<'_>) -> bool,
) -> Result<Vec<u8>> {
    let mut b = vec![0u8; len as usize];
    storage
        .read_at(&mut b, off)
        .map_err(|e| disk(&format!("reading a {kind} page back"), e))?;
    match decode_page(&b, off) {
        Ok(p) if is(&p) => {}
        _ => {
            return Err(Error::Corrupt(format!(
                "the {kind} page at {off} changed during recovery"
            )))
        }
    }
    Ok(b)
}

/// An item of the current page: key and value positions, deadline, flags.
struct Pos {
    key: (u32, u32),
    value: Val,
    deadline: u64,
    flags: u32,
}

enum Val {
    Inline(u32, u32),
    Ext(ExtRef),
}

/// The stream of pieces for the bulk loader, and what it learns on the way: the
/// extensions live pages name, the keys whose value is an extension, counts, and the first
/// error (which ends the stream; the caller checks it).
pub(crate) struct Replay<'a> {
    storage: &'a dyn Storage,
    slabs: &'a Slabs,
    pages: &'a [Live],
    ranges: Peekable<std::vec::IntoIter<Range>>,
    overlay: Peekable<std::vec::IntoIter<(Vec<u8>, Entry)>>,
    /// The delta entries merged so far, in key order (every one, deletions and expired ones
    /// too: they are what their pages still provide): key, delta page, extension.
    pub(crate) entries: Vec<(Vec<u8>, u64, Option<u64>)>,
    /// Leave whole pages in the page file (a budgeted store whose live leaves pass half of
    /// its budget).
    leave_pages: bool,
    now: u64,
    /// The page being handed out: its index, bytes and items.
    cur: Option<(usize, Rc<[u8]>, Vec<Pos>)>,
    /// Items of the current range still to hand out (indexes into `cur`'s items).
    next: usize,
    end: usize,
    /// Live page offset → the extension pages it names (every item, not only its ranges).
    pub(crate) named: HashMap<u64, Vec<u64>>,
    /// Key → its extension, for winning items whose value is one.
    pub(crate) ext_of: std::collections::BTreeMap<Vec<u8>, ExtRef>,
    pub(crate) items: u64,
    pub(crate) expired: u64,
    pub(crate) error: Option<Error>,
}

impl<'a> Replay<'a> {
    pub(crate) fn new(
        storage: &'a dyn Storage,
        slabs: &'a Slabs,
        pages: &'a [Live],
        ranges: Vec<Range>,
        overlay: Overlay,
        leave_pages: bool,
    ) -> Replay<'a> {
        Replay {
            storage,
            slabs,
            pages,
            ranges: ranges.into_iter().peekable(),
            overlay: overlay.into_iter().peekable(),
            entries: Vec::new(),
            leave_pages,
            now: accelkv_tree::now_ms(),
            cur: None,
            next: 0,
            end: 0,
            named: HashMap::new(),
            ext_of: Default::default(),
            items: 0,
            expired: 0,
            error: None,
        }
    }

    /// Makes page `i` the current one (reading it unless it already is), noting the
    /// extensions it names the first time it is read.
    fn load(&mut self, i: usize) -> Result<()> {
        if self.cur.as_ref().is_some_and(|c| c.0 == i) {
            return Ok(());
        }
        let p = &self.pages[i];
        let bytes = read_leaf(self.storage, p.off, p.len)?;
        let Ok(Page::Leaf(leaf)) = decode_page(&bytes, p.off) else {
            unreachable!("read_leaf checked it");
        };
        let base = bytes.as_ptr() as usize;
        let at = |s: &[u8]| ((s.as_ptr() as usize - base) as u32, s.len() as u32);
        let items: Vec<Pos> = leaf
            .items
            .iter()
            .map(|(k, v, d, f)| Pos {
                key: at(k),
                value: match v {
                    PageValue::Inline(b) => {
                        let (o, l) = at(b);
                        Val::Inline(o, l)
                    }
                    PageValue::Ext(r) => Val::Ext(*r),
                },
                deadline: *d,
                flags: *f,
            })
            .collect();
        let exts: Vec<u64> = items
            .iter()
            .filter_map(|p| match p.value {
                Val::Ext(r) => Some(r.off),
                Val::Inline(..) => None,
            })
            .collect();
        self.named.entry(p.off).or_insert(exts);
        drop(leaf);
        self.cur = Some((i, bytes, items));
        Ok(())
    }

    /// Leaves range `r` (its page's whole range) in the page file: the first pass counted
    /// the page's items; it is read only for the extensions it names, and to count the
    /// keys the delta entries in the range add or delete (the entries stay in their pages,
    /// noted in the book, and a load merges them, pager.rs).
    fn leave(&mut self, r: Range) -> Result<Recovered<Bytes, Bytes>> {
        let p = &self.pages[r.page];
        let (off, low) = (p.off, p.low.clone());
        let (mut items, mut expiring) = (i64::from(p.items), i64::from(p.expiring));
        let in_range = |k: &[u8]| r.hi.as_deref().is_none_or(|h| k < h);
        let entries = self.overlay.peek().is_some_and(|(k, _)| in_range(k));
        if !p.has_ext && !entries {
            self.named.entry(off).or_default();
        } else {
            self.load(r.page)?;
            let Some((_, bytes, page)) = &self.cur else {
                unreachable!("loaded above");
            };
            let key = |i: &Pos| &bytes[i.key.0 as usize..(i.key.0 + i.key.1) as usize];
            for it in page {
                if let Val::Ext(e) = it.value {
                    self.ext_of.insert(key(it).to_vec(), e);
                }
            }
            while let Some((k, e)) = self.overlay.next_if(|(k, _)| in_range(k)) {
                // The entry replaces the page's item for its key, if it has one.
                if let Ok(i) = page.binary_search_by(|i| key(i).cmp(&k)) {
                    items -= 1;
                    expiring -= i64::from(page[i].deadline != 0);
                    self.ext_of.remove(&k);
                }
                let ext = match &e.value {
                    Some(EntryValue::Ext(r)) => Some(*r),
                    _ => None,
                };
                if e.value.is_some() {
                    items += 1;
                    expiring += i64::from(e.deadline != 0);
                }
                if let Some(r) = ext {
                    self.ext_of.insert(k.clone(), r);
                }
                self.entries.push((k, e.page, ext.map(|r| r.off)));
            }
        }
        let items = items.max(0) as u64;
        self.items += items;
        Ok(Recovered::Page {
            page: off,
            low,
            items,
            expiring: expiring.max(0) as u64,
        })
    }

    fn slice(b: &Rc<[u8]>, (at, len): (u32, u32)) -> Bytes {
        Bytes::Page(b.clone(), at, len)
    }

    /// Starts the next range: the whole page as one piece, or its items in range.
    fn start_range(&mut self, r: Range) -> Result<Option<Recovered<Bytes, Bytes>>> {
        let p = &self.pages[r.page];
        if self.leave_pages && p.whole {
            return self.leave(r).map(Some);
        }
        self.load(r.page)?;
        let Some((_, bytes, items)) = &self.cur else {
            unreachable!("loaded above");
        };
        let key = |i: &Pos| &bytes[i.key.0 as usize..(i.key.0 + i.key.1) as usize];
        self.next = items.partition_point(|i| key(i) < r.lo.as_slice());
        self.end = self.next
            + items[self.next..]
                .iter()
                .take_while(|i| r.hi.as_deref().is_none_or(|h| key(i) < h))
                .count();
        Ok(None)
    }

    /// The current range's next item, if it has not expired.
    fn next_base(&mut self) -> Result<Option<Recovered<Bytes, Bytes>>> {
        let Some((_, bytes, items)) = &self.cur else {
            unreachable!("a range is only started on a loaded page");
        };
        let it = &items[self.next];
        self.next += 1;
        if it.deadline != 0 && self.now > it.deadline {
            self.expired += 1;
            return Ok(None);
        }
        let k = Replay::slice(bytes, it.key);
        let v = match it.value {
            Val::Inline(at, len) => Replay::slice(bytes, (at, len)),
            Val::Ext(r) => {
                self.ext_of.insert(k.as_ref().to_vec(), r);
                let v = crate::recovery::read_ext(self.storage, self.slabs, &r, k.as_ref())?;
                Bytes::Owned(v.ok_or_else(|| {
                    Error::Corrupt("extension page changed during recovery".into())
                })?)
            }
        };
        self.items += 1;
        Ok(Some(Recovered::Item(k, v, it.deadline, it.flags)))
    }

    /// The next delta entry, noted in the book; an item unless it is a deletion or expired.
    fn next_entry(&mut self) -> Result<Option<Recovered<Bytes, Bytes>>> {
        let Some((k, e)) = self.overlay.next() else {
            return Ok(None);
        };
        let ext = match &e.value {
            Some(EntryValue::Ext(r)) => Some(r.off),
            _ => None,
        };
        self.entries.push((k.clone(), e.page, ext));
        let Some(value) = e.value else {
            return Ok(None);
        };
        if e.deadline != 0 && self.now > e.deadline {
            self.expired += 1;
            return Ok(None);
        }
        let v = match value {
            EntryValue::Inline(v) => v,
            EntryValue::Ext(r) => {
                self.ext_of.insert(k.clone(), r);
                crate::recovery::read_ext(self.storage, self.slabs, &r, &k)?.ok_or_else(|| {
                    Error::Corrupt("extension page changed during recovery".into())
                })?
            }
        };
        self.items += 1;
        Ok(Some(Recovered::Item(
            Bytes::Owned(k),
            Bytes::Owned(v),
            e.deadline,
            e.flags,
        )))
    }

    /// Where the next delta entry's key falls against the current range's next item
    /// (`Greater` when there is no entry left).
    fn entry_vs_item(&mut self) -> Ordering {
        let Some((k, _)) = self.overlay.peek() else {
            return Ordering::Greater;
        };
        let Some((_, bytes, items)) = &self.cur else {
            unreachable!("a range is only started on a loaded page");
        };
        let key = items[self.next].key;
        k.as_slice()
            .cmp(&bytes[key.0 as usize..(key.0 + key.1) as usize])
    }

    fn step(&mut self) -> Result<Option<Recovered<Bytes, Bytes>>> {
        loop {
            let got = if self.next < self.end {
                match self.entry_vs_item() {
                    Ordering::Less => self.next_entry()?,
                    Ordering::Equal => {
                        // The entry is newer than the page's item.
                        self.next += 1;
                        self.next_entry()?
                    }
                    Ordering::Greater => self.next_base()?,
                }
            } else {
                // Between ranges: entries before the next range (or after the last) first.
                let before = match (self.overlay.peek(), self.ranges.peek()) {
                    (None, _) => false,
                    (Some(_), None) => true,
                    (Some((k, _)), Some(r)) => k.as_slice() < r.lo.as_slice(),
                };
                if before {
                    self.next_entry()?
                } else {
                    let Some(r) = self.ranges.next() else {
                        self.cur = None;
                        return Ok(None);
                    };
                    self.start_range(r)?
                }
            };
            if got.is_some() {
                return Ok(got);
            }
        }
    }
}

impl Iterator for Replay<'_> {
    type Item = Recovered<Bytes, Bytes>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.error.is_some() {
            return None;
        }
        match self.step() {
            Ok(x) => x,
            Err(e) => {
                self.error = Some(e);
                None
            }
        }
    }
}

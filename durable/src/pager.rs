//! The leaf cache's pager (Retina §3.4, issue 18; delta entries, issue 57): reads an
//! evicted leaf back from the page file as its last whole image merged with the delta
//! entries newer than it in its range (images.rs names both, consistently, under one lock),
//! and the values of either that live in extension pages.
//!
//! Pages a load reads stay readable while it runs: the slots a commit frees are reused
//! only once every reader pinned before that commit is done (commit.rs, `DeferredFree`).

use crate::error::{disk, Error, Result};
use crate::format::{decode_header, decode_page, ExtRef, Page, PageValue, HEADER};
use crate::images::{DeltaAt, Source};
use crate::io::Storage;
use crate::mirror::Shared;
use accelkv_tree::Pager;
use std::sync::Arc;

thread_local! {
    /// A loading thread's page buffer, reused from load to load (never shrunk, never
    /// zeroed again: a read overwrites what it uses).
    static PAGE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Bytes read at once for a delta page whose length is not known (most are shorter).
const DELTA_GUESS: usize = crate::delta::DELTA_PAGE_BYTES + HEADER;

/// Reads the page at `off` whole into `b` and returns its length: `len` bytes when the
/// length is known, else `guess` bytes (enough for most pages) and the rest once the header
/// says how long it is.
fn read_page(
    storage: &dyn Storage,
    off: u64,
    len: u32,
    guess: usize,
    b: &mut Vec<u8>,
) -> Result<usize> {
    let first = if len > 0 { len as usize } else { guess }.max(HEADER);
    if b.len() < first {
        b.resize(first, 0);
    }
    storage
        .read_at(&mut b[..first], off)
        .map_err(|e| disk("reading an evicted leaf's page", e))?;
    let h = decode_header(b).map_err(|e| Error::Corrupt(format!("page at {off}: {e:?}")))?;
    let len = h.len as usize;
    if len > first {
        if b.len() < len {
            b.resize(len, 0);
        }
        storage
            .read_at(&mut b[first..len], off + first as u64)
            .map_err(|e| disk("reading an evicted leaf's page", e))?;
    }
    Ok(len)
}

/// The tree's [`Pager`]: reads leaf pages, the delta entries that complete them and the
/// extension pages either names.
pub(crate) struct PageReader {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) shared: Arc<Shared>,
    /// Bytes read at once for a page whose length is not known (a node and its fences fit).
    pub(crate) guess: usize,
}

/// A delta entry read for a load: key, value (`None`: deleted), deadline, client flags.
type Entry = (Vec<u8>, Option<Vec<u8>>, u64, u32);

/// Adds entry `e` to a load's items unless it is a deletion.
fn entry<'a>(all: &mut Vec<accelkv_tree::PageItem<'a>>, e: &'a Entry) {
    if let Some(v) = &e.1 {
        all.push((e.0.as_slice(), v.as_slice(), e.2, e.3));
    }
}

impl PageReader {
    /// The value of extension `r` (for `key`), checked against the reference.
    fn ext(&self, r: &ExtRef, key: &[u8]) -> Result<Vec<u8>> {
        let mut e = Vec::new();
        let guess = HEADER + key.len() + r.len as usize + 1024;
        let n = read_page(self.storage.as_ref(), r.off, 0, guess, &mut e)?;
        e.truncate(n);
        match decode_page(&e, r.off) {
            Ok(Page::Ext(x)) if x.is_named_by(r, key) => Ok(x.value.to_vec()),
            _ => Err(Error::Corrupt(format!(
                "extension page at {} does not check",
                r.off
            ))),
        }
    }

    /// The entries `deltas` name (in key order), read from their pages (each page read
    /// and checked once): key, value (`None`: deleted), deadline, flags.
    fn deltas(&self, deltas: &[(Vec<u8>, DeltaAt)]) -> Result<Vec<Entry>> {
        let mut out = Vec::with_capacity(deltas.len());
        let mut b = Vec::new();
        let mut rest = deltas;
        // Entries of one page are mostly adjacent in key order: a run of them is looked up
        // in one read and one decode of the page.
        while let Some((_, at)) = rest.first() {
            let run = rest.iter().take_while(|(_, a)| a.page == at.page).count();
            let n = read_page(self.storage.as_ref(), at.page, at.len, DELTA_GUESS, &mut b)?;
            let Ok(Page::Delta(p)) = decode_page(&b[..n], at.page) else {
                return Err(Error::Corrupt(format!(
                    "page at {} is not an intact delta page",
                    at.page
                )));
            };
            for (key, _) in &rest[..run] {
                let Ok(i) = p.items.binary_search_by(|(k, ..)| (*k).cmp(key.as_slice())) else {
                    return Err(Error::Corrupt(format!(
                        "delta page at {} has no entry for a key it should hold",
                        at.page
                    )));
                };
                let (_, v, deadline, flags) = &p.items[i];
                let value = match v {
                    None => None,
                    Some(PageValue::Inline(v)) => Some(v.to_vec()),
                    Some(PageValue::Ext(r)) => Some(self.ext(r, key)?),
                };
                out.push((key.clone(), value, *deadline, *flags));
            }
            rest = &rest[run..];
        }
        Ok(out)
    }

    /// Hands the items of `src` (a leaf page merged with its delta entries) to `items` at
    /// once, borrowed from the thread's page buffer where they can be.
    fn read_leaf(&self, src: &Source, items: &mut accelkv_tree::ItemSink<'_>) -> Result<()> {
        // Read before the page buffer is borrowed: a delta page may need the same buffer.
        let deltas = self.deltas(&src.deltas)?;
        PAGE_BUF.with(|buf| {
            // A pager call within a pager call cannot happen (the sink builds a leaf); a
            // fresh buffer keeps even that correct.
            let mut fresh = Vec::new();
            let mut held = buf.try_borrow_mut();
            let b: &mut Vec<u8> = match held.as_deref_mut() {
                Ok(b) => b,
                Err(_) => &mut fresh,
            };
            let (page, len) = (src.page, src.len);
            let n = read_page(self.storage.as_ref(), page, len, self.guess, b)?;
            let Ok(Page::Leaf(p)) = decode_page(&b[..n], page) else {
                return Err(Error::Corrupt(format!(
                    "page at {page} is not an intact leaf page"
                )));
            };
            // Values in extension pages, read first so every item can be borrowed (not
            // those of keys an entry replaces).
            let replaced = |k: &[u8]| deltas.binary_search_by(|e| e.0.as_slice().cmp(k)).is_ok();
            let mut ext: Vec<Vec<u8>> = Vec::new();
            for (k, v, ..) in &p.items {
                if let PageValue::Ext(r) = v {
                    if !replaced(k) {
                        ext.push(self.ext(r, k)?);
                    }
                }
            }
            // The page's items merged with the entries (both in key order): the entry wins
            // a key both hold; a deletion drops it.
            let mut ext = ext.iter();
            let mut all: Vec<accelkv_tree::PageItem<'_>> =
                Vec::with_capacity(p.items.len() + deltas.len());
            let mut d = deltas.iter().peekable();
            for (k, v, deadline, flags) in &p.items {
                while let Some(e) = d.next_if(|e| e.0.as_slice() < *k) {
                    entry(&mut all, e);
                }
                if let Some(e) = d.next_if(|e| e.0.as_slice() == *k) {
                    entry(&mut all, e);
                    continue;
                }
                let v: &[u8] = match v {
                    PageValue::Inline(v) => v,
                    // As many as pushed above, in the same order.
                    PageValue::Ext(_) => ext.next().map_or(&[][..], Vec::as_slice),
                };
                all.push((k, v, *deadline, *flags));
            }
            for e in d {
                entry(&mut all, e);
            }
            items(&all);
            Ok(())
        })
    }
}

impl Pager for PageReader {
    fn read(
        &self,
        lid: u64,
        page: u64,
        items: &mut accelkv_tree::ItemSink<'_>,
    ) -> std::result::Result<(), String> {
        // While a leaf is evicted nothing changes it, so any page that images it (with the
        // entries completing it) holds the same items; the newest is intact (the hint may
        // have been freed by a later commit that imaged the leaf again, and reused). After
        // FLUSHALL the LID has no live image: its last one is kept as gone, its slot not
        // reused while a reader that can reach the stub runs. The hint serves only a leaf
        // no commit imaged since it was evicted.
        let src = crate::mirror::lock(&self.shared.images)
            .source(lid)
            .unwrap_or(Source {
                page,
                len: 0,
                deltas: Vec::new(),
            });
        self.read_leaf(&src, items).map_err(|e| e.to_string())?;
        // A load that read delta pages besides the leaf's: while the cache is pressed, the
        // leaf is imaged whole by a coming commit (through one of the entries' keys), so
        // that its next miss reads one page (mirror.rs).
        if let Some((key, _)) = src.deltas.first() {
            self.shared.compact(key.clone());
        }
        Ok(())
    }

    fn pressure(&self) {
        self.shared.poke();
    }
}

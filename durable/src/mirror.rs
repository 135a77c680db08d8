//! The durability side of the mirror cache (Retina §3.4, issue 18): which page images which
//! leaf, the pager that reads evicted leaves back, and the evictor thread that keeps the
//! store under its memory budget (`Config::memory_limit` with `Config::evict`).
//!
//! A leaf may be evicted once a commit imaged its newest state: the committer records, for
//! every leaf page it writes, (LID → page, version), and forgets a page when it frees it.
//! The evictor asks the tree for victims (S3-FIFO, `accelkv_tree` mirror.rs) and names the
//! page of each; a leaf with writes newer than its last image is passed over until the next
//! commit images it, so eviction never writes anything itself and the no-WAL argument is
//! unchanged: an evicted leaf's page is a live page of the cover, and it stays live because
//! nothing can change the leaf without reading it back first.
//!
//! Lock order: the committer's `disk` before `images`; the evictor takes the tree's SMO
//! latch, then `images`. Nothing takes the latch after `images`.

use crate::commit::Core;
use crate::error::{disk, Error, Result};
use crate::format::{decode_header, decode_page, Page, PageValue, HEADER};
use crate::io::Storage;
use accelkv_tree::{Pager, Store as Tree};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which live page images which leaf.
#[derive(Default)]
pub(crate) struct Images {
    /// LID → its newest image.
    by_lid: HashMap<u64, Image>,
    /// Page offset → LID.
    by_page: HashMap<u64, u64>,
    /// LID → the image a commit stopped naming while its slot waits for the readers that
    /// may still read it ([`Images::release`] when it is freed). A reader of an evicted leaf
    /// of an older state (a snapshot across FLUSHALL) reads it there: the stub's own page
    /// hint may be a slot an earlier commit freed when it imaged the leaf again, since reused.
    gone: HashMap<u64, Image>,
}

/// A page that images a leaf.
#[derive(Clone, Copy)]
struct Image {
    page: u64,
    /// The page's length in bytes (0: not known), so a load reads it in one exact read.
    len: u32,
    /// The version of the snapshot it imaged.
    version: u64,
}

impl Images {
    /// A commit wrote `page` (`len` bytes), the image of leaf `lid` at `version`.
    pub(crate) fn record(&mut self, lid: u64, page: u64, len: u32, version: u64) {
        let image = Image { page, len, version };
        if let Some(old) = self.by_lid.insert(lid, image) {
            self.by_page.remove(&old.page);
        }
        self.by_page.insert(page, lid);
    }

    /// `page` no longer provides any range (its slot is freed once no reader can read it);
    /// returns the LID whose newest image it was, which keeps it as a gone image until then.
    pub(crate) fn forget(&mut self, page: u64) -> Option<u64> {
        let lid = self.by_page.remove(&page)?;
        let image = self.by_lid.get(&lid).filter(|i| i.page == page).copied()?;
        self.by_lid.remove(&lid);
        self.gone.insert(lid, image);
        Some(lid)
    }

    /// The slot of `page`, once `lid`'s image, is about to be reused.
    pub(crate) fn release(&mut self, lid: u64, page: u64) {
        if self.gone.get(&lid).is_some_and(|i| i.page == page) {
            self.gone.remove(&lid);
        }
    }

    /// The newest page that images leaf `lid` (a live one, else one whose slot is not
    /// reused yet), and its length (0: not known).
    fn current(&self, lid: u64) -> Option<(u64, u32)> {
        self.by_lid
            .get(&lid)
            .or_else(|| self.gone.get(&lid))
            .map(|i| (i.page, i.len))
    }

    /// The page that images leaf `lid` in a state at least as new as `version`.
    fn page_of(&self, lid: u64, version: u64) -> Option<u64> {
        self.by_lid
            .get(&lid)
            .filter(|i| version <= i.version)
            .map(|i| i.page)
    }
}

/// What the tree's pager, the committer and the evictor share.
pub(crate) struct Shared {
    pub(crate) images: Mutex<Images>,
    poked: Mutex<bool>,
    wake: Condvar,
    stop: AtomicBool,
    /// Leaves the evictor had imaged by a commit because no page held their newest state.
    pub(crate) write_backs: std::sync::atomic::AtomicU64,
}

impl Shared {
    pub(crate) fn new() -> Arc<Shared> {
        Arc::new(Shared {
            images: Mutex::new(Images::default()),
            poked: Mutex::new(false),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            write_backs: std::sync::atomic::AtomicU64::new(0),
        })
    }

    fn poke(&self) {
        *lock(&self.poked) = true;
        self.wake.notify_one();
    }

    /// Stops the evictor thread.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.poke();
    }
}

thread_local! {
    /// A loading thread's page buffer, reused from load to load (never shrunk, never
    /// zeroed again: a read overwrites what it uses).
    static PAGE_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

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

/// The tree's [`Pager`]: reads leaf pages (and the extension pages they name) back.
pub(crate) struct PageReader {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) shared: Arc<Shared>,
    /// Bytes read at once for a page whose length is not known (a node and its fences fit).
    pub(crate) guess: usize,
}

impl PageReader {
    /// Hands the items of leaf page `page` (`len` bytes, 0: not known) to `items` at once,
    /// borrowed from the thread's page buffer (values in extension pages read beside it).
    fn read_leaf(&self, page: u64, len: u32, items: &mut accelkv_tree::ItemSink<'_>) -> Result<()> {
        PAGE_BUF.with(|buf| {
            // A pager call within a pager call cannot happen (the sink builds a leaf); a
            // fresh buffer keeps even that correct.
            let mut fresh = Vec::new();
            let mut held = buf.try_borrow_mut();
            let b: &mut Vec<u8> = match held.as_deref_mut() {
                Ok(b) => b,
                Err(_) => &mut fresh,
            };
            let n = read_page(self.storage.as_ref(), page, len, self.guess, b)?;
            let Ok(Page::Leaf(p)) = decode_page(&b[..n], page) else {
                return Err(Error::Corrupt(format!(
                    "page at {page} is not an intact leaf page"
                )));
            };
            // Values in extension pages, read first so every item can be borrowed.
            let mut ext: Vec<Vec<u8>> = Vec::new();
            for (k, v, ..) in &p.items {
                if let PageValue::Ext(r) = v {
                    let mut e = Vec::new();
                    let n = read_page(
                        self.storage.as_ref(),
                        r.off,
                        0,
                        HEADER + k.len() + r.len as usize + 1024,
                        &mut e,
                    )?;
                    e.truncate(n);
                    match decode_page(&e, r.off) {
                        Ok(Page::Ext(x)) if x.is_named_by(r, k) => ext.push(x.value.to_vec()),
                        _ => {
                            return Err(Error::Corrupt(format!(
                                "extension page at {} does not check",
                                r.off
                            )))
                        }
                    }
                }
            }
            let mut ext = ext.iter();
            let mut all: Vec<accelkv_tree::PageItem<'_>> = Vec::with_capacity(p.items.len());
            for (k, v, deadline, flags) in &p.items {
                let v: &[u8] = match v {
                    PageValue::Inline(v) => v,
                    // As many as pushed above, in the same order.
                    PageValue::Ext(_) => ext.next().map_or(&[][..], Vec::as_slice),
                };
                all.push((k, v, *deadline, *flags));
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
        // While a leaf is evicted nothing changes it, so any page that images it holds the
        // same items; the newest is intact (the hint may have been freed by a later commit
        // that imaged the leaf again, and reused). After FLUSHALL the LID has no live image:
        // its last one is kept as gone, its slot not reused while a reader that can reach
        // the stub runs. The hint serves only a leaf no commit imaged since it was evicted.
        let (page, len) = lock(&self.shared.images).current(lid).unwrap_or((page, 0));
        self.read_leaf(page, len, items).map_err(|e| e.to_string())
    }

    fn pressure(&self) {
        self.shared.poke();
    }
}

/// The evictor thread: every 10 ms, or at once when told the store is over its budget,
/// evicts down to 95% of the budget; leaves whose newest state is not imaged yet are queued
/// for the next commit (write-back), which it asks for at once.
pub(crate) fn run_evictor(tree: Arc<Tree>, core: Arc<Core>, shared: Arc<Shared>) {
    let budget = tree.config().memory_limit;
    let target = budget / 20 * 19;
    while !shared.stop.load(Ordering::SeqCst) {
        {
            let mut p = lock(&shared.poked);
            if !*p {
                p = shared
                    .wake
                    .wait_timeout(p, Duration::from_millis(10))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            *p = false;
        }
        if !tree.over_budget() {
            // Under the budget: only the queues take in the leaves that arrived.
            tree.evict(usize::MAX, &mut |_, _, _| None);
            continue;
        }
        let mut write_back: Vec<Vec<u8>> = Vec::new();
        tree.evict(target, &mut |lid, version, first| {
            let page = lock(&shared.images).page_of(lid, version);
            if let (None, Some(k)) = (page, first) {
                write_back.push(k.to_vec());
            }
            page
        });
        if !write_back.is_empty() {
            // Leaves whose newest state no whole page images (a split left a half that no
            // write has touched since, or delta pages hold its newest changes): the next
            // commit images them whole, through a key each.
            shared
                .write_backs
                .fetch_add(write_back.len() as u64, Ordering::Relaxed);
            lock(&core.queue).whole.extend(write_back);
        }
        if tree.over_budget() {
            core.poke();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Images;

    #[test]
    fn a_forgotten_image_serves_until_its_slot_is_released() {
        let mut i = Images::default();
        i.record(7, 100, 40, 1);
        // Imaged again: the newest page wins; the old one is simply replaced.
        i.record(7, 200, 50, 2);
        assert_eq!(i.current(7), Some((200, 50)));
        assert_eq!(i.forget(100), None, "page 100 no longer images anything");
        // FLUSHALL's commit frees the page: still the one to read until released.
        assert_eq!(i.forget(200), Some(7));
        assert_eq!(i.current(7), Some((200, 50)));
        assert_eq!(
            i.page_of(7, 0),
            None,
            "a gone image never lets a leaf be evicted"
        );
        // A new image of the LID (reused after the release) takes precedence.
        i.record(7, 300, 10, 9);
        assert_eq!(i.current(7), Some((300, 10)));
        i.release(7, 200);
        assert_eq!(i.current(7), Some((300, 10)));
        assert_eq!(i.forget(300), Some(7));
        i.release(7, 300);
        assert_eq!(i.current(7), None);
    }
}

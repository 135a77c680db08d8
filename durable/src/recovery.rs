//! Recovery (Retina §4.5), in two passes over the page file and no log:
//! 1. Leaf pages: read every slot of every described slab; keep the pages whose checksum
//!    holds. Find the newest *complete* commit: every leaf page it wrote is intact (their
//!    count is in each of them) and so is every extension they name. Only the newest commit
//!    can be incomplete (commit.rs, invariant 2), so pages of commits after the complete one
//!    are a crash's leftovers: they are discarded and their slots wiped (their headers
//!    zeroed and synced) so that no later recovery can take them for part of a newer
//!    commit. The state recovered is therefore the state at one commit's version: a prefix
//!    of the writes by version, never some of a commit's pages without the others.
//! 2. Build the cover (cover.rs) in commit order, so the newest page wins for each key
//!    range and older versions are discarded. Check that every extension a winning leaf
//!    names is intact and is the one it was written with (key, length, CRC-32C); a leaf
//!    page naming a bad one (damage, not a crash) is dropped in favour of the previous
//!    version of its range, and the cover rebuilt.
//!
//! Then the tree is bulk-loaded from the winning items (interior nodes rebuilt from the
//! leaves' keys), its version clock set past every version on the device, and the slab
//! allocator's live map rebuilt: live leaf pages and the extensions they name; every other
//! slot is free (orphaned extensions included).

use crate::commit::Disk;
use crate::cover::Cover;
use crate::error::{disk, Error, Result};
use crate::format::{
    class_for, decode_header, decode_page, decode_slab, decode_super, encode_super, ext_len,
    CommitTag, ExtRef, FormatError, Page, PageItem, PageValue, Super, BLOCK, FORMAT_VERSION,
    HEADER,
};
use crate::io::Storage;
use crate::slab::Slabs;
use accelkv_tree::{Config, Store as Tree};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Whether the page file was created by this open.
    pub created: bool,
    /// Bytes in the page file.
    pub file_bytes: u64,
    /// Slabs with a valid descriptor.
    pub slabs: u64,
    /// Slabs whose descriptor is damaged (their slots are treated as unwritten).
    pub bad_slabs: u64,
    /// Valid leaf pages read.
    pub leaf_pages: u64,
    /// Valid extension pages read.
    pub ext_pages: u64,
    /// Leaf pages still providing a key range (kept).
    pub live_pages: u64,
    /// Leaf pages shadowed everywhere by newer versions (their slots freed).
    pub versions_discarded: u64,
    /// Written slots whose checksum or structure failed (torn or corrupted), ignored.
    pub torn_pages: u64,
    /// Leaf pages dropped because an extension they name is missing or damaged.
    pub bad_references: u64,
    /// Extension pages no live leaf names (freed).
    pub orphaned_exts: u64,
    /// Items recovered.
    pub items: u64,
    /// Items whose deadline had passed by the time of recovery: not loaded (their pages
    /// are rewritten without them when their leaf is next committed).
    pub expired: u64,
    /// The version recovered: every write up to it is in the store, none after it. New
    /// writes get larger versions.
    pub version: u64,
    /// The number of the commit recovered (0: none, or a file written by format 1).
    pub commit: u64,
    /// The version lease found (the largest in an intact clock page; 0: none, a file of
    /// format 4 or older): no version above it was ever issued, every version up to it
    /// may have been. New writes get versions above both it and `version`.
    pub lease: u64,
    /// Pages (leaf and extension) of commits after it, which a crash left incomplete:
    /// discarded and wiped.
    pub incomplete_pages: u64,
    /// Time the recovery took.
    pub elapsed: Duration,
    /// With a memory budget: leaves left in the page file (read back when needed), and the
    /// bytes the store held in memory right after recovery.
    pub evicted_leaves: u64,
    /// Bytes of node memory and out-of-line values after recovery.
    pub resident_bytes: u64,
}

impl std::fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.created {
            return write!(f, "created a new page file");
        }
        write!(
            f,
            "recovered {} items ({} expired ones dropped) at version {} (commit {}, lease {}) in {:.3} s: {} pages of an incomplete commit discarded, {} leaf pages read ({} live, {} older versions discarded), {} extension pages ({} orphaned), {} torn pages, {} pages with bad extension references, {} slabs ({} damaged), {} bytes",
            self.items,
            self.expired,
            self.version,
            self.commit,
            self.lease,
            self.elapsed.as_secs_f64(),
            self.incomplete_pages,
            self.leaf_pages,
            self.live_pages,
            self.versions_discarded,
            self.ext_pages,
            self.orphaned_exts,
            self.torn_pages,
            self.bad_references,
            self.slabs,
            self.bad_slabs,
            self.file_bytes
        )?;
        if self.evicted_leaves > 0 {
            write!(
                f,
                "; {} leaves left in the page file, {} bytes in memory",
                self.evicted_leaves, self.resident_bytes
            )?;
        }
        Ok(())
    }
}

/// A recovered item: key, value (borrowed from a leaf page or read from an extension
/// page), deadline, client flags.
type Recovered<'a> = (&'a [u8], Cow<'a, [u8]>, u64, u32);

/// A piece of a tree rebuilt with a memory budget.
type Piece<'a> = accelkv_tree::Recovered<&'a [u8], Cow<'a, [u8]>>;

/// A leaf page read in pass 1: its bytes (checked), decoded again when its items are
/// needed, so shadowed pages cost no per-item allocation.
struct Leaf {
    off: u64,
    version: u64,
    commit: CommitTag,
    low: Option<Vec<u8>>,
    high: Option<Vec<u8>>,
    bytes: Vec<u8>,
}

impl Leaf {
    fn items(&self) -> Vec<PageItem<'_>> {
        match decode_page(&self.bytes, self.off) {
            Ok(Page::Leaf(p)) => p.items,
            _ => Vec::new(), // checked in pass 1
        }
    }
}

/// Slab size for a store whose largest value is `max_value` with keys up to `max_key`.
pub(crate) fn slab_size_for(max_key: usize, max_value: usize) -> u64 {
    let biggest = HEADER + 2 + max_key + 3 + max_key + 4 + max_value;
    let class = class_for(biggest);
    (1u64 << (class + 1)).max(crate::format::MIN_SLAB)
}

/// Opens the page file on `storage`: formats an empty one, or recovers the tree from it.
/// With a memory budget: the pager's storage and the mirror cache's shared state, so
/// recovery leaves whole pages in the page file instead of loading them.
pub(crate) type MirrorParts = (Arc<dyn Storage>, Arc<crate::mirror::Shared>);

/// How far a recovery has read the page file, for a server that answers LOADING meanwhile.
#[derive(Debug, Default)]
pub struct LoadProgress {
    /// Bytes of the page file read so far (slabs, in the first pass).
    pub bytes_read: AtomicU64,
    /// Bytes of the page file.
    pub bytes_total: AtomicU64,
    /// A pause before each page slot is decoded, in microseconds: a testing aid (Redis's
    /// `key-load-delay`) that makes a small store's recovery last.
    pub page_delay_us: AtomicU64,
}

pub(crate) fn recover(
    storage: &dyn Storage,
    cfg: Config,
    mirror: Option<MirrorParts>,
    progress: &LoadProgress,
) -> Result<(Tree, Disk, RecoveryReport)> {
    let t0 = Instant::now();
    let mut rep = RecoveryReport::default();
    let len = storage
        .len()
        .map_err(|e| disk("reading the page file's length", e))?;
    progress.bytes_total.store(len, Ordering::Relaxed);
    rep.file_bytes = len;
    let mut sb = vec![0u8; BLOCK as usize];
    storage
        .read_at(&mut sb, 0)
        .map_err(|e| disk("reading the superblock", e))?;
    let sup = match decode_super(&sb) {
        Ok(s) => s,
        // A superblock that never became durable: the file was being created.
        Err(_) if len <= BLOCK => {
            let s = Super {
                slab_size: slab_size_for(cfg.max_key, cfg.max_value),
                version: FORMAT_VERSION,
            };
            storage
                .write_at(&encode_super(&s), 0)
                .map_err(|e| disk("writing the superblock", e))?;
            storage
                .sync()
                .map_err(|e| disk("fdatasync of the superblock", e))?;
            rep.created = true;
            let tree = Tree::new(cfg)?;
            let disk = Disk {
                slabs: Slabs::new(s.slab_size),
                cover: Cover::new(),
                pages: HashMap::new(),
                ext_refs: HashMap::new(),
                ext_of: HashMap::new(),
                seq: 0,
                unsynced: false,
                clock: None,
                lease: 0,
            };
            rep.elapsed = t0.elapsed();
            return Ok((tree, disk, rep));
        }
        Err(e) => return Err(Error::Corrupt(format!("superblock: {e}"))),
    };
    let needed = slab_size_for(cfg.max_key, cfg.max_value);
    if needed > sup.slab_size {
        return Err(Error::Config(format!(
            "max_value {} needs {needed}-byte slabs; this page file has {}-byte slabs",
            cfg.max_value, sup.slab_size
        )));
    }
    let mut slabs = Slabs::new(sup.slab_size);
    let nslabs = len.saturating_sub(BLOCK).div_ceil(sup.slab_size);
    // Pass 1: every slot of every described slab.
    let mut leaves: Vec<Leaf> = Vec::new();
    let mut exts: HashMap<u64, u64> = HashMap::new(); // intact extension page → its commit
    let mut max_seq = 0u64;
    // The clock page with the largest lease: (lease, offset).
    let mut clock: Option<(u64, u64)> = None;
    let mut buf = vec![0u8; sup.slab_size as usize];
    for index in 0..nslabs {
        let base = slabs.base(index);
        storage
            .read_at(&mut buf, base)
            .map_err(|e| disk("reading a slab", e))?;
        progress.bytes_read.store(base.min(len), Ordering::Relaxed);
        let delay = progress.page_delay_us.load(Ordering::Relaxed);
        let desc = match decode_slab(&buf[..BLOCK as usize]) {
            Ok(d) if d.index == index && d.class_log2 <= slabs.max_class() => d,
            Ok(_) => {
                rep.bad_slabs += 1;
                continue;
            }
            Err(FormatError::Empty) => continue,
            Err(_) => {
                rep.bad_slabs += 1;
                continue;
            }
        };
        rep.slabs += 1;
        slabs.describe(index, desc.class_log2);
        for off in slabs.slot_offsets(index, desc.class_log2) {
            progress.bytes_read.store(off.min(len), Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_micros(delay));
            }
            let at = (off - base) as usize;
            let slot = &buf[at..at + (1usize << desc.class_log2)];
            let len = match decode_header(slot) {
                Err(FormatError::Empty) => continue,
                Ok(h) if h.class_log2 == desc.class_log2 => h.len as usize,
                _ => {
                    rep.torn_pages += 1;
                    continue;
                }
            };
            match decode_page(slot, off) {
                Ok(Page::Leaf(p)) => {
                    rep.leaf_pages += 1;
                    max_seq = max_seq.max(p.commit.seq);
                    leaves.push(Leaf {
                        off,
                        version: p.version,
                        commit: p.commit,
                        low: p.low.map(<[u8]>::to_vec),
                        high: p.high.map(<[u8]>::to_vec),
                        bytes: slot[..len].to_vec(),
                    });
                }
                Ok(Page::Ext(p)) => {
                    rep.ext_pages += 1;
                    max_seq = max_seq.max(p.commit.seq);
                    exts.insert(off, p.commit.seq);
                }
                Ok(Page::Clock(lease)) => {
                    if clock.is_none_or(|(l, _)| lease > l) {
                        clock = Some((lease, off));
                    }
                }
                Err(_) => rep.torn_pages += 1,
            }
        }
    }
    drop(buf);
    let mut checked: HashMap<(u64, Vec<u8>), bool> = HashMap::new();
    let cut = newest_complete_commit(storage, &slabs, &leaves, &mut checked)?;
    rep.commit = cut;
    // Pages of later commits: counted out of the report, wiped, forgotten.
    let (kept, stale): (Vec<Leaf>, Vec<Leaf>) =
        leaves.into_iter().partition(|l| l.commit.seq <= cut);
    leaves = kept;
    let stale_exts: Vec<u64> = exts
        .iter()
        .filter(|(_, &seq)| seq > cut)
        .map(|(&off, _)| off)
        .collect();
    exts.retain(|_, seq| *seq <= cut);
    rep.leaf_pages -= stale.len() as u64;
    rep.ext_pages -= stale_exts.len() as u64;
    let stale: Vec<u64> = stale.iter().map(|l| l.off).chain(stale_exts).collect();
    if !stale.is_empty() {
        wipe(storage, &stale)?;
    }
    rep.incomplete_pages = stale.len() as u64;
    if sup.version < FORMAT_VERSION {
        // Pages written from now on carry commit numbers: an older build must not read them.
        let up = Super {
            version: FORMAT_VERSION,
            ..sup
        };
        storage
            .write_at(&encode_super(&up), 0)
            .and_then(|()| storage.sync())
            .map_err(|e| disk("upgrading the superblock", e))?;
    }
    let max_version = leaves.iter().map(|l| l.version).max().unwrap_or(0);
    leaves.sort_by_key(|l| (l.commit.seq, l.version, l.off));
    // Pass 2: extensions named by winning items must be intact; drop pages that name a bad
    // one and rebuild the cover until none does.
    let mut dropped: HashSet<u64> = HashSet::new();
    let by_off: HashMap<u64, usize> = leaves.iter().enumerate().map(|(i, l)| (l.off, i)).collect();
    let cover = loop {
        let mut cover = Cover::new();
        for l in leaves.iter().filter(|l| !dropped.contains(&l.off)) {
            cover.insert(l.low.as_deref(), l.high.as_deref(), l.off);
        }
        let mut bad = Vec::new();
        for (lo, hi, page) in cover.ranges() {
            let l = &leaves[by_off[&page]];
            let items = l.items();
            for (k, v, ..) in in_range(&items, lo, hi) {
                if let PageValue::Ext(r) = v {
                    if !ext_ok(storage, &slabs, r, k, &mut checked)? {
                        bad.push(page);
                        break;
                    }
                }
            }
        }
        if bad.is_empty() {
            break cover;
        }
        rep.bad_references += bad.len() as u64;
        dropped.extend(bad);
    };
    // Only the pages that provide a range are needed from here on.
    let live: HashSet<u64> = cover.pages().collect();
    // With a budget, pages stay in the page file only when the leaves would take more than
    // half of it; a store that fits is loaded whole, as without one.
    let mirror = mirror.filter(|_| live.len().saturating_mul(cfg.node_size) > cfg.memory_limit / 2);
    for l in leaves.iter_mut().filter(|l| !live.contains(&l.off)) {
        l.bytes = Vec::new();
    }
    // Live pages' lengths, so a load reads exactly one page.
    let lens: HashMap<u64, u32> = leaves
        .iter()
        .filter(|l| live.contains(&l.off))
        .map(|l| (l.off, l.bytes.len() as u32))
        .collect();
    // The winning items, in key order, borrowed from the page bytes.
    let decoded: HashMap<u64, Vec<PageItem<'_>>> = leaves
        .iter()
        .filter(|l| live.contains(&l.off))
        .map(|l| (l.off, l.items()))
        .collect();
    let mut items: Vec<Recovered<'_>> = Vec::new();
    let mut pieces: Vec<Piece<'_>> = Vec::new();
    let mut ext_of = HashMap::new();
    let now = accelkv_tree::now_ms();
    for (lo, hi, page) in cover.ranges() {
        let l = &leaves[by_off[&page]];
        if mirror.is_some() && lo == l.low.as_deref().unwrap_or(&[]) && hi == l.high.as_deref() {
            // With a budget, a page that provides its whole range stays in the page file:
            // it images exactly the leaf built for it (mirror cache).
            let its = &decoded[&page];
            for (k, v, ..) in its {
                if let PageValue::Ext(r) = v {
                    ext_of.insert(k.to_vec(), *r);
                }
            }
            if !items.is_empty() {
                pieces.extend(items.drain(..).map(|(k, v, d, f)| Piece::Item(k, v, d, f)));
            }
            rep.items += its.len() as u64;
            pieces.push(Piece::Page {
                page,
                low: l.low.clone(),
                items: its.len() as u64,
                expiring: its.iter().filter(|i| i.2 != 0).count() as u64,
            });
            continue;
        }
        for (k, v, deadline, flags) in in_range(&decoded[&page], lo, hi) {
            if deadline != 0 && now > deadline {
                rep.expired += 1;
                continue;
            }
            let value = match v {
                PageValue::Inline(b) => Cow::Borrowed(*b),
                PageValue::Ext(r) => {
                    ext_of.insert(k.to_vec(), *r);
                    Cow::Owned(read_ext(storage, &slabs, r, k)?.ok_or_else(|| {
                        Error::Corrupt("extension page changed during recovery".into())
                    })?)
                }
            };
            items.push((k, value, deadline, flags));
        }
    }
    rep.items += items.len() as u64;
    rep.version = max_version;
    rep.lease = clock.map_or(0, |c| c.0);
    // The clocks continue above every version ever issued: a version a reader saw before
    // a crash that lost its write is never issued again.
    let start = max_version.max(rep.lease);
    let tree = match mirror {
        Some((storage, shared)) => {
            pieces.extend(
                items
                    .into_iter()
                    .map(|(k, v, d, f)| Piece::Item(k, v, d, f)),
            );
            let pager = Arc::new(crate::mirror::PageReader {
                storage,
                shared: shared.clone(),
                guess: cfg.node_size + 4096,
            });
            let (tree, stubs) = Tree::recovered(cfg, pager, pieces, start)?;
            let mut images = shared.images.lock().unwrap_or_else(|e| e.into_inner());
            for &(lid, page) in &stubs {
                images.record(
                    lid,
                    page,
                    lens.get(&page).copied().unwrap_or(0),
                    // The state at `start` is the state at `max_version` (no writes between).
                    start,
                );
            }
            rep.evicted_leaves = stubs.len() as u64;
            rep.resident_bytes = tree.mirror_stats().resident_bytes;
            tree
        }
        None => Tree::bulk_load_at(cfg, items, start)?,
    };
    // The live map: live leaf pages and the extensions they name; the rest is free.
    let mut pages = HashMap::new();
    let mut ext_refs: HashMap<u64, usize> = HashMap::new();
    for (&page, its) in &decoded {
        let named: Vec<u64> = its
            .iter()
            .filter_map(|(_, v, ..)| match v {
                PageValue::Ext(r) => Some(r.off),
                PageValue::Inline(_) => None,
            })
            .collect();
        for e in &named {
            *ext_refs.entry(*e).or_insert(0) += 1;
        }
        pages.insert(page, named);
    }
    rep.live_pages = pages.len() as u64;
    rep.versions_discarded = rep
        .leaf_pages
        .saturating_sub(rep.live_pages + dropped.len() as u64);
    rep.orphaned_exts = exts.keys().filter(|e| !ext_refs.contains_key(e)).count() as u64;
    for index in 0..slabs.len() {
        if let Some(class) = slabs.class_of_slab(index) {
            let free = slabs
                .slot_offsets(index, class)
                .rev()
                .filter(|o| !pages.contains_key(o) && !ext_refs.contains_key(o))
                .filter(|o| clock.is_none_or(|c| c.1 != *o));
            for o in free {
                slabs.free(o);
            }
        }
    }
    rep.elapsed = t0.elapsed();
    progress.bytes_read.store(len, Ordering::Relaxed);
    let disk = Disk {
        slabs,
        cover,
        pages,
        ext_refs,
        ext_of,
        seq: max_seq,
        unsynced: false,
        clock: clock.map(|c| c.1),
        lease: rep.lease,
    };
    Ok((tree, disk, rep))
}

/// The number of the newest commit whose leaf pages are all intact, as are the extensions
/// they name; 0 when there is none (pages of format 1 files are commit 0). `checked`
/// caches extension checks for pass 2.
fn newest_complete_commit(
    storage: &dyn Storage,
    slabs: &Slabs,
    leaves: &[Leaf],
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
) -> Result<u64> {
    let mut by_commit: BTreeMap<u64, Vec<&Leaf>> = BTreeMap::new();
    for l in leaves.iter().filter(|l| l.commit.seq > 0) {
        by_commit.entry(l.commit.seq).or_default().push(l);
    }
    'commits: for (&seq, pages) in by_commit.iter().rev() {
        let want = pages[0].commit.pages;
        if pages.len() != want as usize || pages.iter().any(|l| l.commit.pages != want) {
            continue;
        }
        for l in pages {
            for (k, v, ..) in l.items() {
                if let PageValue::Ext(r) = v {
                    if !ext_ok(storage, slabs, &r, k, checked)? {
                        continue 'commits;
                    }
                }
            }
        }
        return Ok(seq);
    }
    Ok(0)
}

/// Whether the extension `r` names is intact and belongs to `key` (cached in `checked`).
fn ext_ok(
    storage: &dyn Storage,
    slabs: &Slabs,
    r: &ExtRef,
    key: &[u8],
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
) -> Result<bool> {
    if let Some(ok) = checked.get(&(r.off, key.to_vec())) {
        return Ok(*ok);
    }
    let ok = read_ext(storage, slabs, r, key)?.is_some();
    checked.insert((r.off, key.to_vec()), ok);
    Ok(ok)
}

/// Zeroes the headers of the pages at `offs` (an incomplete commit's leftovers), so they
/// read as empty slots, and syncs.
fn wipe(storage: &dyn Storage, offs: &[u64]) -> Result<()> {
    let zeros = [0u8; HEADER];
    for &off in offs {
        storage
            .write_at(&zeros, off)
            .map_err(|e| disk("wiping a page of an incomplete commit", e))?;
    }
    storage
        .sync()
        .map_err(|e| disk("fdatasync after wiping an incomplete commit", e))
}

fn in_range<'p, 'a>(
    items: &'p [PageItem<'a>],
    lo: &'p [u8],
    hi: Option<&'p [u8]>,
) -> impl Iterator<Item = (&'a [u8], &'p PageValue<'a>, u64, u32)> + 'p {
    let start = items.partition_point(|(k, ..)| *k < lo);
    items[start..]
        .iter()
        .take_while(move |(k, ..)| hi.is_none_or(|h| *k < h))
        .map(|(k, v, d, f)| (*k, v, *d, *f))
}

/// The value in the extension page `r` names, if that page is intact and belongs to `key`.
fn read_ext(
    storage: &dyn Storage,
    slabs: &Slabs,
    r: &ExtRef,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    let Some(class) = slabs.class_of(r.off) else {
        return Ok(None);
    };
    let want = ext_len(&crate::format::ExtPage {
        lid: 0,
        version: 0,
        commit: CommitTag::default(),
        key,
        anchor: None,
        value: &[],
    }) + r.len as usize;
    if want > 1usize << class {
        return Ok(None);
    }
    // The anchor's length is unknown up front: read the whole slot.
    let mut b = vec![0u8; 1usize << class];
    storage
        .read_at(&mut b, r.off)
        .map_err(|e| disk("reading an extension page", e))?;
    Ok(match decode_page(&b, r.off) {
        Ok(Page::Ext(p)) if p.is_named_by(r, key) => Some(p.value.to_vec()),
        _ => None,
    })
}

//! Recovery (Retina §4.5), in two passes over the page file and no log, in bounded memory:
//! what it holds at once is the metadata (offset, length, fences, version, commit) of the
//! live pages, one slab buffer and one page — never the page file's live bytes, nor the
//! metadata of the older page versions still on the device (pass1.rs forgets a version as
//! soon as newer ones shadow it).
//! 1. Read every slot of every described slab; note the intact pages (leaf pages by their
//!    metadata; extension pages; the clock page with the largest lease). Find the newest
//!    *complete* commit: every leaf page it wrote is intact (their count is in each of
//!    them) and so is every extension they name. Only the newest commit can be incomplete
//!    (commit.rs, invariant 2), so pages of commits after the complete one are a crash's
//!    leftovers: they are discarded and their slots wiped (their headers zeroed and synced)
//!    so that no later recovery can take them for part of a newer commit. The state
//!    recovered is therefore the state at one commit's version: a prefix of the writes by
//!    version, never some of a commit's pages without the others.
//! 2. Build the cover (cover.rs) in commit order, so the newest page wins for each key
//!    range and older versions are discarded. Check that every extension a winning leaf
//!    names is intact and is the one it was written with (key, length, CRC-32C), reading
//!    back the winning pages that name extensions; a leaf page naming a bad one (damage,
//!    not a crash) is dropped in favour of the previous version of its range, and the
//!    cover rebuilt.
//!
//! Then the winning items are streamed, page by page in key order, into the tree's bulk
//! loader (replay.rs; interior nodes rebuilt from the leaves' keys), its version clocks set
//! past every version on the device and the lease, and the slab allocator's live map
//! rebuilt: live leaf pages and the extensions they name, and the clock page; every other
//! slot is free (orphaned extensions included).

use crate::commit::Disk;
use crate::cover::Cover;
use crate::error::{disk, Error, Result};
use crate::format::{
    class_for, decode_page, decode_super, encode_super, ext_len, slot_bytes, CommitTag, ExtRef,
    Page, PageValue, Super, BLOCK, FORMAT_VERSION, HEADER,
};
use crate::images::fence;
use crate::index::{IndexedDelta, IndexedLeaf};
use crate::io::Storage;
use crate::pass1::{scan, DeltaFound, ExtItems, Found, Leaf};
use crate::replay::{Entry, EntryValue, Live, Overlay, Range, Replay};
use crate::slab::Slabs;
use accelkv_tree::{Config, Recovered, Store as Tree};
use std::collections::{HashMap, HashSet};
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
    /// Valid delta pages read (of complete commits).
    pub delta_pages: u64,
    /// Whether the open read the index a clean close wrote instead of scanning the file.
    pub from_index: bool,
    /// Their bytes: recovery holds their entries (the newest per key) while it loads.
    pub delta_bytes: u64,
    /// Keys whose recovered state came from a delta page (newer than their leaf page).
    pub delta_keys: u64,
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
    /// Times the page file was read: 1, or 2 when damage (not a crash) needed an older page
    /// version than the first pass, which forgets shadowed versions as it reads, kept.
    pub scans: u32,
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
            "recovered {} items ({} expired ones dropped) at version {} (commit {}, lease {}) in {:.3} s: {} pages of an incomplete commit discarded, {} leaf pages read ({} live, {} older versions discarded), {} delta pages ({} keys newer than their leaf page), {} extension pages ({} orphaned), {} torn pages, {} pages or entries with bad extension references, {} slabs ({} damaged), {} bytes",
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
            self.delta_pages,
            self.delta_keys,
            self.ext_pages,
            self.orphaned_exts,
            self.torn_pages,
            self.bad_references,
            self.slabs,
            self.bad_slabs,
            self.file_bytes
        )?;
        if self.scans > 1 {
            write!(
                f,
                "; the page file read {} times (damage needed older versions)",
                self.scans
            )?;
        }
        if self.evicted_leaves > 0 {
            write!(
                f,
                "; {} leaves left in the page file, {} bytes in memory",
                self.evicted_leaves, self.resident_bytes
            )?;
        }
        if self.from_index {
            write!(f, "; from the index of the last clean close")?;
        }
        Ok(())
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

/// Recovers the store in `storage`; `index` is the data directory's index file, if it has
/// one (index.rs: used only if the page file's close record names it).
pub(crate) fn recover(
    storage: &dyn Storage,
    cfg: Config,
    mirror: Option<MirrorParts>,
    progress: &LoadProgress,
    index: Option<&[u8]>,
) -> Result<(Tree, Disk, RecoveryReport)> {
    recover_with(storage, cfg, mirror, progress, true, index)
}

/// [`recover`], its first pass pruning shadowed page versions or not (pass1.rs); the two
/// give the same state, which the tests check.
#[cfg(test)]
pub(crate) fn recover_pruning(
    storage: &dyn Storage,
    cfg: Config,
    mirror: Option<MirrorParts>,
    progress: &LoadProgress,
    prune: bool,
) -> Result<(Tree, Disk, RecoveryReport)> {
    recover_with(storage, cfg, mirror, progress, prune, None)
}

fn recover_with(
    storage: &dyn Storage,
    cfg: Config,
    mirror: Option<MirrorParts>,
    progress: &LoadProgress,
    prune: bool,
    index: Option<&[u8]>,
) -> Result<(Tree, Disk, RecoveryReport)> {
    let t0 = Instant::now();
    let mut rep = RecoveryReport::default();
    let len = storage
        .len()
        .map_err(|e| disk("reading the page file's length", e))?;
    progress.bytes_total.store(len, Ordering::Relaxed);
    rep.file_bytes = len;
    let Some(sup) = read_super(storage, len)? else {
        return create(storage, cfg, rep, t0);
    };
    let needed = slab_size_for(cfg.max_key, cfg.max_value);
    if needed > sup.slab_size {
        return Err(Error::Config(format!(
            "max_value {} needs {needed}-byte slabs; this page file has {}-byte slabs",
            cfg.max_value, sup.slab_size
        )));
    }
    // Cleared (and synced) before any page is written, used if it names `index`.
    if let Some(ix) = crate::index_open::closed_index(storage, &sup, len, index)? {
        let mut r = rep.clone();
        if let Some(parts) = crate::index_open::parts(&sup, len, ix, &mut r) {
            r.from_index = true;
            let done = finish(
                storage,
                cfg.clone(),
                mirror.clone(),
                progress,
                len,
                sup,
                parts,
                HashMap::new(),
                r,
                t0,
            );
            match done {
                Ok(x) => return Ok(x),
                // A page the index names does not check: recover as without it (from a
                // fresh leaf cache book).
                Err(_) => {
                    if let Some((_, shared)) = &mirror {
                        *crate::mirror::lock(&shared.images) = Default::default();
                    }
                }
            }
        }
    }
    let mut checked: HashMap<(u64, Vec<u8>), bool> = HashMap::new();
    let parts = scan_and_cover(storage, &sup, len, progress, prune, &mut checked, &mut rep)?;
    finish(
        storage, cfg, mirror, progress, len, sup, parts, checked, rep, t0,
    )
}

/// What the first pass found (or an index says it would): the slabs, the pages, the cover,
/// and how many leaf pages were dropped for bad references.
pub(crate) type Parts = (Slabs, Found, Cover, usize);

/// Recovery after the first pass: the overlay of delta entries, the tree, the live map.
#[allow(clippy::too_many_arguments)]
fn finish(
    storage: &dyn Storage,
    cfg: Config,
    mirror: Option<MirrorParts>,
    progress: &LoadProgress,
    len: u64,
    sup: Super,
    (mut slabs, mut found, cover, dropped): Parts,
    // Extension checks the first pass made (none from an index), not made again.
    mut checked: HashMap<(u64, Vec<u8>), bool>,
    mut rep: RecoveryReport,
    t0: Instant,
) -> Result<(Tree, Disk, RecoveryReport)> {
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
    // Every page a pruned pass forgot is shadowed by a kept one of a later commit.
    let max_version = found
        .leaves
        .iter()
        .map(|l| l.version)
        .chain(found.deltas.iter().map(|d| d.version))
        .max()
        .unwrap_or(0);
    found
        .deltas
        .sort_by_key(|d| (d.commit.seq, d.version, d.off));
    let overlay = overlay(
        storage,
        &slabs,
        &cover,
        &found.leaves,
        &found.deltas,
        &mut checked,
        &mut rep,
    )?;
    rep.version = max_version;
    rep.lease = found.clock.map_or(0, |c| c.0);
    // The clocks continue above every version ever issued: a version a reader saw before
    // a crash that lost its write is never issued again.
    let start = max_version.max(rep.lease);
    let leaves = std::mem::take(&mut found.leaves);
    // The live leaf pages' metadata, kept by the committer for the next index.
    let meta: HashMap<u64, IndexedLeaf> = leaves
        .iter()
        .filter(|l| cover.provides(l.off))
        .map(|l| (l.off, l.clone()))
        .collect();
    let Loaded {
        tree,
        pages,
        ext_of,
        delta,
    } = load(
        storage, &slabs, cfg, mirror, &cover, leaves, overlay, start, &mut rep,
    )?;
    let rank: HashMap<u64, usize> = found
        .deltas
        .iter()
        .enumerate()
        .map(|(i, d)| (d.off, i))
        .collect();
    let delta = crate::delta::Book::recovered(delta, |p| slabs.slot_bytes_at(p), &rank);
    let dmeta: HashMap<u64, IndexedDelta> = found
        .deltas
        .iter()
        .filter(|d| delta.is_live(d.off))
        .map(|d| (d.off, *d))
        .collect();
    rep.delta_keys = delta.pending_keys() as u64;
    // The live map: live leaf and delta pages and the extensions they name; the rest is
    // free.
    let mut ext_refs: HashMap<u64, usize> = HashMap::new();
    for e in pages.values().flatten().copied().chain(delta.exts()) {
        *ext_refs.entry(e).or_insert(0) += 1;
    }
    let leaf_bytes = pages.keys().map(|&p| slabs.slot_bytes_at(p)).sum();
    let ext_bytes = ext_refs.keys().map(|&p| slabs.slot_bytes_at(p)).sum();
    rep.live_pages = pages.len() as u64;
    rep.versions_discarded = rep
        .leaf_pages
        .saturating_sub(rep.live_pages + dropped as u64);
    rep.orphaned_exts = found
        .exts
        .keys()
        .filter(|e| !ext_refs.contains_key(e))
        .count() as u64;
    let clock = found.clock.map(|c| c.1);
    for index in 0..slabs.len() {
        if let Some(class) = slabs.class_of_slab(index) {
            let free = slabs
                .slot_offsets(index, class)
                .rev()
                .filter(|o| !pages.contains_key(o) && !ext_refs.contains_key(o))
                .filter(|o| clock != Some(*o) && !delta.is_live(*o));
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
        seq: found.max_seq,
        unsynced: false,
        clock,
        lease: rep.lease,
        delta,
        leaf_bytes,
        ext_bytes,
        filled: Vec::new(),
        meta,
        dmeta,
    };
    Ok((tree, disk, rep))
}

/// The superblock; `None` for a file whose creation never completed (at most one block
/// whose superblock does not check).
fn read_super(storage: &dyn Storage, len: u64) -> Result<Option<Super>> {
    let mut sb = vec![0u8; BLOCK as usize];
    storage
        .read_at(&mut sb, 0)
        .map_err(|e| disk("reading the superblock", e))?;
    match decode_super(&sb) {
        Ok(s) => Ok(Some(s)),
        Err(_) if len <= BLOCK => Ok(None),
        Err(e) => Err(Error::Corrupt(format!("superblock: {e}"))),
    }
}

/// Formats a new page file: its superblock, synced; an empty tree.
fn create(
    storage: &dyn Storage,
    cfg: Config,
    mut rep: RecoveryReport,
    t0: Instant,
) -> Result<(Tree, Disk, RecoveryReport)> {
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
    let disk = Disk::empty(s.slab_size);
    rep.elapsed = t0.elapsed();
    Ok((tree, disk, rep))
}

/// Pass 1, the newest complete commit (what a crash left after it wiped) and the cover of
/// the leaf pages up to it. Pass 1 prunes older page versions first (pass1.rs); when the
/// pruned pass lacks a version recovery needs (an older commit is the newest complete one,
/// or a winning page names a damaged extension), it runs again without pruning.
fn scan_and_cover(
    storage: &dyn Storage,
    sup: &Super,
    len: u64,
    progress: &LoadProgress,
    mut prune: bool,
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
    rep: &mut RecoveryReport,
) -> Result<(Slabs, Found, Cover, usize)> {
    let base = rep.clone();
    loop {
        rep.scans += 1;
        let mut slabs = Slabs::new(sup.slab_size);
        let mut found = scan(storage, &mut slabs, len, progress, rep, prune)?;
        let cut = match newest_complete_commit(storage, &slabs, &found, checked)? {
            Some(cut) if cut >= found.pruned_upto => cut,
            _ if prune => {
                *rep = RecoveryReport {
                    scans: rep.scans,
                    ..base.clone()
                };
                prune = false;
                continue;
            }
            _ => return Err(Error::Corrupt("no commit found without pruning".into())),
        };
        rep.commit = cut;
        discard_after(storage, &mut found, cut, rep)?;
        found
            .leaves
            .sort_by_key(|l| (l.commit.seq, l.version, l.off));
        let (cover, dropped) = build_cover(storage, &slabs, &found.leaves, checked, rep)?;
        if prune && dropped > 0 {
            // The pages the dropped ones shadowed may have been forgotten.
            *rep = RecoveryReport {
                incomplete_pages: rep.incomplete_pages,
                scans: rep.scans,
                ..base.clone()
            };
            prune = false;
            continue;
        }
        return Ok((slabs, found, cover, dropped));
    }
}

/// Pages of commits after `cut` (a crash's leftovers): counted out of the report, wiped,
/// forgotten.
fn discard_after(
    storage: &dyn Storage,
    f: &mut Found,
    cut: u64,
    rep: &mut RecoveryReport,
) -> Result<()> {
    let mut stale: Vec<u64> = f
        .leaves
        .iter()
        .filter(|l| l.commit.seq > cut)
        .map(|l| l.off)
        .collect();
    f.leaves.retain(|l| l.commit.seq <= cut);
    rep.leaf_pages -= stale.len() as u64;
    let deltas = stale.len();
    stale.extend(
        f.deltas
            .iter()
            .filter(|d| d.commit.seq > cut)
            .map(|d| d.off),
    );
    f.deltas.retain(|d| d.commit.seq <= cut);
    rep.delta_pages -= (stale.len() - deltas) as u64;
    let exts = stale.len();
    stale.extend(
        f.exts
            .iter()
            .filter(|(_, &seq)| seq > cut)
            .map(|(&off, _)| off),
    );
    f.exts.retain(|_, seq| *seq <= cut);
    rep.ext_pages -= (stale.len() - exts) as u64;
    if !stale.is_empty() {
        wipe(storage, &stale)?;
    }
    rep.incomplete_pages += stale.len() as u64;
    Ok(())
}

/// Pass 2: the cover of `leaves` (sorted by commit), checking that the extensions the
/// winning items name are intact; a page that names a bad one is dropped and the cover
/// rebuilt until none does. Returns the cover and how many pages were dropped.
fn build_cover(
    storage: &dyn Storage,
    slabs: &Slabs,
    leaves: &[Leaf],
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
    rep: &mut RecoveryReport,
) -> Result<(Cover, usize)> {
    let mut dropped: HashSet<u64> = HashSet::new();
    let by_off: HashMap<u64, &Leaf> = leaves.iter().map(|l| (l.off, l)).collect();
    loop {
        let mut cover = Cover::new();
        for l in leaves.iter().filter(|l| !dropped.contains(&l.off)) {
            cover.insert(l.low.as_deref(), l.high.as_deref(), l.off);
        }
        let mut bad = Vec::new();
        // A page providing several ranges is read back once for them.
        let mut last: Option<(u64, ExtItems)> = None;
        for (lo, hi, page) in cover.ranges() {
            let l = by_off[&page];
            if !l.has_ext {
                continue;
            }
            if last.as_ref().is_none_or(|x| x.0 != page) {
                last = Some((page, l.ext_items(storage)?));
            }
            let Some((_, named)) = &last else {
                unreachable!("set above");
            };
            let start = named.partition_point(|(k, _)| k.as_slice() < lo);
            for (k, r) in named[start..]
                .iter()
                .take_while(|(k, _)| hi.is_none_or(|h| k.as_slice() < h))
            {
                if !ext_ok(storage, slabs, r, k, checked)? {
                    bad.push(page);
                    break;
                }
            }
        }
        if bad.is_empty() {
            return Ok((cover, dropped.len()));
        }
        rep.bad_references += bad.len() as u64;
        dropped.extend(bad);
    }
}

/// What [`load`] built and learnt.
struct Loaded {
    tree: Tree,
    /// Live leaf page → the extension pages it names.
    pages: HashMap<u64, Vec<u64>>,
    /// Key → its extension, for keys whose value is one.
    ext_of: std::collections::BTreeMap<Vec<u8>, ExtRef>,
    /// The delta entries that won, in key order: key, delta page, extension.
    delta: Vec<(Vec<u8>, u64, Option<u64>)>,
}

/// The live pages' winning items, streamed into a new tree whose clocks start at `start`
/// (replay.rs). Returns the tree, the extensions each live page names, and the keys whose
/// value is an extension.
#[allow(clippy::too_many_arguments)]
fn load(
    storage: &dyn Storage,
    slabs: &Slabs,
    cfg: Config,
    mirror: Option<MirrorParts>,
    cover: &Cover,
    leaves: Vec<Leaf>,
    overlay: Overlay,
    start: u64,
    rep: &mut RecoveryReport,
) -> Result<Loaded> {
    let by_off: HashMap<u64, &Leaf> = leaves.iter().map(|l| (l.off, l)).collect();
    // With a budget, pages stay in the page file only when the leaves would take more than
    // half of it; a store that fits is loaded whole, as without one.
    let live = cover.pages().collect::<HashSet<u64>>().len();
    let shared = mirror.as_ref().map(|m| m.1.clone());
    // An open from the index leaves them whatever their size: serving starts once the index
    // is read, and leaves load on first touch.
    let mirror = mirror
        .filter(|_| rep.from_index || live.saturating_mul(cfg.node_size) > cfg.memory_limit / 2);
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut lives: Vec<Live> = Vec::new();
    let mut ranges: Vec<Range> = Vec::new();
    // The high fences of the pages that may stay in the page file (their stubs' images).
    let mut highs: HashMap<u64, Option<Vec<u8>>> = HashMap::new();
    for (lo, hi, page) in cover.ranges() {
        let l = by_off[&page];
        // A page that provides exactly its range may stay in the page file (with the delta
        // entries in the range, which a load merges).
        let whole = lo == l.low.as_deref().unwrap_or(&[]) && hi == l.high.as_deref();
        if whole && mirror.is_some() {
            highs.insert(page, hi.map(<[u8]>::to_vec));
        }
        let i = *index.entry(page).or_insert_with(|| {
            lives.push(Live {
                off: page,
                len: l.len,
                low: l.low.clone(),
                whole,
                has_ext: l.has_ext,
                items: l.items,
                expiring: l.expiring,
            });
            lives.len() - 1
        });
        ranges.push(Range {
            lo: lo.to_vec(),
            hi: hi.map(<[u8]>::to_vec),
            page: i,
        });
    }
    drop(by_off);
    drop(leaves);
    let mut replay = Replay::new(storage, slabs, &lives, ranges, overlay, mirror.is_some());
    let tree = match mirror {
        Some((storage, shared)) => {
            let pager = Arc::new(crate::pager::PageReader {
                storage,
                shared: shared.clone(),
                guess: cfg.node_size + 4096,
            });
            let built = Tree::recovered(cfg, pager, replay.by_ref(), start);
            // A read error ended the stream early: the tree built is not the state.
            if let Some(e) = replay.error.take() {
                return Err(e);
            }
            let (tree, stubs) = built?;
            let mut images = shared.images.lock().unwrap_or_else(|e| e.into_inner());
            for &(lid, page) in &stubs {
                let (len, low) = index
                    .get(&page)
                    .map_or((0, None), |&i| (lives[i].len, lives[i].low.as_deref()));
                let high = highs.get(&page).and_then(Option::as_deref);
                // The state at `start` is the state at the recovered version (no writes
                // between them).
                images.record(lid, page, len, start, fence(low), fence(high));
            }
            rep.evicted_leaves = stubs.len() as u64;
            rep.resident_bytes = tree.mirror_stats().resident_bytes;
            tree
        }
        None => {
            let items = replay.by_ref().filter_map(|p| match p {
                Recovered::Item(k, v, d, f) => Some((k, v, d, f)),
                Recovered::Page { .. } => None,
            });
            let built = Tree::bulk_load_at(cfg, items, start);
            if let Some(e) = replay.error.take() {
                return Err(e);
            }
            built?
        }
    };
    rep.items = replay.items;
    rep.expired = replay.expired;
    if let Some(shared) = shared {
        // The leaf cache's copy of the delta book's keys (images.rs).
        let entries = replay.entries.iter().map(|(k, page, _)| (k.clone(), *page));
        crate::mirror::lock(&shared.images).recovered_pending(entries);
    }
    Ok(Loaded {
        tree,
        pages: replay.named,
        ext_of: replay.ext_of,
        delta: replay.entries,
    })
}

/// The delta entries newer than the leaf page covering their key (by commit), the newest
/// per key, in key order, from the delta pages of complete commits (`deltas`, sorted by
/// commit). An entry naming an extension that is not intact (damage) is skipped, so the key
/// keeps its older state. Every entry is collected, then sorted once and walked along the
/// cover's ranges (no tree insert or cover lookup per entry: 1.5 M entries took seconds so).
fn overlay(
    storage: &dyn Storage,
    slabs: &Slabs,
    cover: &Cover,
    leaves: &[Leaf],
    deltas: &[DeltaFound],
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
    rep: &mut RecoveryReport,
) -> Result<Overlay> {
    if deltas.is_empty() {
        return Ok(Overlay::new());
    }
    let mut all = delta_entries(storage, deltas)?;
    // Newest first within a key; a key whose newest intact entry is not newer than its
    // leaf page has no older one that is.
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let seq_of: HashMap<u64, u64> = leaves.iter().map(|l| (l.off, l.commit.seq)).collect();
    let mut ranges = cover.ranges().peekable();
    let mut out = Overlay::new();
    let mut i = 0;
    while i < all.len() {
        let key = all[i].0.as_slice();
        let end = i + all[i..].iter().take_while(|e| e.0 == key).count();
        // The range holding the key, if any (both walks go in key order).
        while ranges
            .peek()
            .is_some_and(|(_, hi, _)| hi.is_some_and(|h| h <= key))
        {
            ranges.next();
        }
        let base = match ranges.peek() {
            Some(&(lo, _, page)) if lo <= key => seq_of[&page],
            _ => 0,
        };
        let mut win = None;
        for (j, (_, at, e)) in all.iter().enumerate().take(end).skip(i) {
            if deltas[*at].commit.seq <= base {
                break;
            }
            if let Some(EntryValue::Ext(r)) = &e.value {
                if !ext_ok(storage, slabs, r, key, checked)? {
                    rep.bad_references += 1;
                    continue;
                }
            }
            win = Some(j);
            break;
        }
        if let Some(j) = win {
            let (k, _, e) = std::mem::replace(&mut all[j], (Vec::new(), 0, Entry::GONE));
            out.push((k, e));
        }
        i = end;
    }
    Ok(out)
}

/// Every entry of `deltas`: key, the position of its page (by commit), the entry.
fn delta_entries(
    storage: &dyn Storage,
    deltas: &[DeltaFound],
) -> Result<Vec<(Vec<u8>, usize, Entry)>> {
    let mut all = Vec::new();
    for (at, d) in deltas.iter().enumerate() {
        let b = d.read(storage)?;
        let Ok(Page::Delta(p)) = decode_page(&b, d.off) else {
            unreachable!("read checked it");
        };
        for (k, v, deadline, flags) in p.items {
            let value = match v {
                None => None,
                Some(PageValue::Inline(b)) => Some(EntryValue::Inline(b.to_vec())),
                Some(PageValue::Ext(r)) => Some(EntryValue::Ext(r)),
            };
            let e = Entry {
                page: d.off,
                value,
                deadline,
                flags,
            };
            all.push((k.to_vec(), at, e));
        }
    }
    Ok(all)
}

/// The number of the newest commit whose leaf and delta pages are all intact, as are the
/// extensions they name; 0 when there is none (pages of format 1 files are commit 0), `None`
/// when it is older than every commit whose pages a pruned pass counted. `checked` caches
/// extension checks for pass 2.
fn newest_complete_commit(
    storage: &dyn Storage,
    slabs: &Slabs,
    f: &Found,
    checked: &mut HashMap<(u64, Vec<u8>), bool>,
) -> Result<Option<u64>> {
    'commits: for (&seq, t) in f.tallies.iter().rev() {
        if !t.complete() {
            continue;
        }
        let leaves = f.leaves.iter().filter(|l| l.commit.seq == seq);
        let deltas = f.deltas.iter().filter(|d| d.commit.seq == seq);
        let named = leaves
            .map(|l| l.ext_items(storage))
            .chain(deltas.map(|d| d.ext_items(storage)));
        for items in named {
            for (k, r) in items? {
                if !ext_ok(storage, slabs, &r, &k, checked)? {
                    continue 'commits;
                }
            }
        }
        return Ok(Some(seq));
    }
    Ok((f.tallies_dropped == 0).then_some(0))
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

/// The value in the extension page `r` names, if that page is intact and belongs to `key`.
pub(crate) fn read_ext(
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
    let slot = slot_bytes(class).unwrap_or(0) as usize;
    if want > slot {
        return Ok(None);
    }
    // The anchor's length is unknown up front: read the whole slot.
    let mut b = vec![0u8; slot];
    storage
        .read_at(&mut b, r.off)
        .map_err(|e| disk("reading an extension page", e))?;
    Ok(match decode_page(&b, r.off) {
        Ok(Page::Ext(p)) if p.is_named_by(r, key) => Some(p.value.to_vec()),
        _ => None,
    })
}

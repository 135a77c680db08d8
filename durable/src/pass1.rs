//! Recovery's first pass (recovery.rs): every slot of every described slab is read, one
//! slab in memory at a time, and what is intact is noted: leaf and delta pages by their
//! metadata, extension pages, the clock page with the largest lease, and how many pages of
//! each commit were found.
//!
//! Memory is bounded by the live pages, not by the older versions still on the device
//! (their number depends on how fast the writer ran against the committer, and is unbounded
//! under `--sync none`): leaf pages of every commit but the newest read so far go into a
//! cover ranked by (commit, version, offset) as they are read, and a page shadowed
//! everywhere is forgotten at once (`Cover::insert_ranked`). The newest commit's pages are
//! held aside because only it can be incomplete (commit.rs, invariant 2); if recovery finds
//! that an older commit is the newest complete one, or that an older version is needed
//! because a winning page names a damaged extension, it reads the file again with pruning
//! off (`Found::pruned_upto`), as it did before the bound: damage costs a second pass, a
//! crash never does.

use crate::cover::Cover;
use crate::error::{disk, Result};
use crate::format::{
    decode_header, decode_page, decode_slab, slot_bytes, CommitTag, ExtRef, FormatError, Page,
    PageValue, BLOCK,
};
use crate::io::Storage;
use crate::recovery::{LoadProgress, RecoveryReport};
use crate::replay::{read_back, read_leaf};
use crate::slab::Slabs;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::Duration;

/// A leaf page found intact in pass 1: where it is and what it covers, not its bytes
/// (read back when needed, so recovery never holds the page file's live bytes at once).
/// The index of a clean close holds the same of every live one (index.rs).
pub(crate) use crate::index::IndexedLeaf as Leaf;

/// A leaf page's items whose value is an extension: key and reference, in key order.
pub(crate) type ExtItems = Vec<(Vec<u8>, ExtRef)>;

/// A delta page found intact in pass 1 (read back when needed); as the index holds it.
pub(crate) use crate::index::IndexedDelta as DeltaFound;

impl DeltaFound {
    /// Its bytes, read back from `storage` and checked again.
    pub fn read(&self, storage: &dyn Storage) -> Result<Vec<u8>> {
        read_back(storage, self.off, self.len, "delta", |p| {
            matches!(p, Page::Delta(_))
        })
    }

    /// Its entries' keys and extension references.
    pub fn ext_items(&self, storage: &dyn Storage) -> Result<ExtItems> {
        if !self.has_ext {
            return Ok(Vec::new());
        }
        let b = self.read(storage)?;
        let Ok(Page::Delta(p)) = decode_page(&b, self.off) else {
            unreachable!("read checked it");
        };
        Ok(p.items
            .iter()
            .filter_map(|(k, v, ..)| match v {
                Some(PageValue::Ext(r)) => Some((k.to_vec(), *r)),
                _ => None,
            })
            .collect())
    }
}

impl Leaf {
    /// Its items' keys and extension references, read back from `storage`.
    pub fn ext_items(&self, storage: &dyn Storage) -> Result<ExtItems> {
        if !self.has_ext {
            return Ok(Vec::new());
        }
        let b = read_leaf(storage, self.off, self.len)?;
        let Ok(Page::Leaf(p)) = decode_page(&b, self.off) else {
            unreachable!("read_leaf checked it");
        };
        Ok(p.items
            .iter()
            .filter_map(|(k, v, ..)| match v {
                PageValue::Ext(r) => Some((k.to_vec(), *r)),
                PageValue::Inline(_) => None,
            })
            .collect())
    }
}

/// How many pages of one commit were found, and how many each of them says it has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tally {
    found: u32,
    want: u32,
    agree: bool,
}

impl Tally {
    /// Every page the commit wrote was found intact.
    pub fn complete(&self) -> bool {
        self.agree && self.found == self.want
    }
}

/// With pruning, the tallies of the newest commits only: when there are more than this,
/// the oldest are dropped down to [`TALLIES_KEPT`] (the newest complete commit is almost
/// always the newest or the one before it).
const TALLIES_MAX: usize = 64;
const TALLIES_KEPT: usize = 4;

/// What pass 1 found.
pub(crate) struct Found {
    /// Leaf pages that may matter: without pruning every intact one; with pruning those of
    /// the newest leaf commit read and those that provide a range in `ranked`.
    pub leaves: Vec<Leaf>,
    pub deltas: Vec<DeltaFound>,
    /// Intact extension page → its commit.
    pub exts: HashMap<u64, u64>,
    pub max_seq: u64,
    /// The clock page with the largest lease: (lease, offset).
    pub clock: Option<(u64, u64)>,
    /// Commit (above 0) → its pages found, leaf and delta; with pruning, the newest only.
    pub tallies: BTreeMap<u64, Tally>,
    /// Tallies of commits up to this one were dropped (0: none).
    pub tallies_dropped: u64,
    /// The newest commit whose leaf pages went into the ranked cover, where older versions
    /// were forgotten (0 without pruning): a recovery whose newest complete commit is older
    /// than this one must read the file again without pruning.
    pub pruned_upto: u64,
    prune: Option<Pruner>,
}

/// Pass 1's ranked cover and the pages it still uses.
#[derive(Default)]
struct Pruner {
    cover: Cover,
    pages: HashMap<u64, Leaf>,
    /// Leaf pages of the newest commit read so far, and its number.
    held: Vec<Leaf>,
    held_seq: u64,
}

impl Pruner {
    fn add(&mut self, l: Leaf, pruned_upto: &mut u64) {
        use std::cmp::Ordering::*;
        match l.commit.seq.cmp(&self.held_seq) {
            Greater => {
                self.held_seq = l.commit.seq;
                for h in std::mem::replace(&mut self.held, vec![l]) {
                    self.rank(h, pruned_upto);
                }
            }
            Equal => self.held.push(l),
            Less => self.rank(l, pruned_upto),
        }
    }

    fn rank(&mut self, l: Leaf, pruned_upto: &mut u64) {
        *pruned_upto = (*pruned_upto).max(l.commit.seq);
        let (off, low, high) = (l.off, l.low.clone(), l.high.clone());
        self.pages.insert(off, l);
        let pages = &self.pages;
        let gone = self
            .cover
            .insert_ranked(low.as_deref(), high.as_deref(), off, |p| {
                let l = &pages[&p];
                (l.commit.seq, l.version, l.off)
            });
        for p in gone {
            self.pages.remove(&p);
        }
    }
}

impl Found {
    /// What an index says the first pass would find (index.rs): the live leaf and delta
    /// pages, the newest commit and the clock page; no extension page is listed (the index
    /// is trusted for them: a clean close wrote it).
    pub(crate) fn indexed(
        leaves: Vec<Leaf>,
        deltas: Vec<DeltaFound>,
        max_seq: u64,
        clock: Option<(u64, u64)>,
    ) -> Found {
        Found {
            leaves,
            deltas,
            max_seq,
            clock,
            ..Found::new(false)
        }
    }

    fn new(prune: bool) -> Found {
        Found {
            leaves: Vec::new(),
            deltas: Vec::new(),
            exts: HashMap::new(),
            max_seq: 0,
            clock: None,
            tallies: BTreeMap::new(),
            tallies_dropped: 0,
            pruned_upto: 0,
            prune: prune.then(Pruner::default),
        }
    }

    /// Counts a page of commit `c`.
    fn tally(&mut self, c: CommitTag) {
        if c.seq == 0 || c.seq <= self.tallies_dropped {
            return;
        }
        let t = self.tallies.entry(c.seq).or_insert(Tally {
            found: 0,
            want: c.pages,
            agree: true,
        });
        t.found += 1;
        t.agree &= t.want == c.pages;
        if self.prune.is_some() && self.tallies.len() > TALLIES_MAX {
            while self.tallies.len() > TALLIES_KEPT {
                if let Some((seq, _)) = self.tallies.pop_first() {
                    self.tallies_dropped = seq;
                }
            }
        }
    }

    fn add_leaf(&mut self, l: Leaf) {
        self.tally(l.commit);
        match &mut self.prune {
            Some(p) => p.add(l, &mut self.pruned_upto),
            None => self.leaves.push(l),
        }
    }

    /// Ends the pass: the leaves that may matter into `leaves`.
    fn finish(&mut self) {
        if let Some(p) = self.prune.take() {
            self.leaves = p.held;
            self.leaves.extend(p.pages.into_values());
        }
    }
}

/// Pass 1: every slot of every described slab, one slab in memory at a time; with `prune`,
/// older leaf page versions are forgotten as they are shadowed.
pub(crate) fn scan(
    storage: &dyn Storage,
    slabs: &mut Slabs,
    len: u64,
    progress: &LoadProgress,
    rep: &mut RecoveryReport,
    prune: bool,
) -> Result<Found> {
    let mut f = Found::new(prune);
    let nslabs = len.saturating_sub(BLOCK).div_ceil(slabs.slab_bytes());
    let mut buf = vec![0u8; slabs.slab_bytes() as usize];
    for index in 0..nslabs {
        let base = slabs.base(index);
        storage
            .read_at(&mut buf, base)
            .map_err(|e| disk("reading a slab", e))?;
        progress.bytes_read.store(base.min(len), Ordering::Relaxed);
        let delay = progress.page_delay_us.load(Ordering::Relaxed);
        let desc = match decode_slab(&buf[..BLOCK as usize]) {
            Ok(d) if d.index == index && d.class <= slabs.max_class() => d,
            Err(FormatError::Empty) => continue,
            _ => {
                rep.bad_slabs += 1;
                continue;
            }
        };
        rep.slabs += 1;
        slabs.describe(index, desc.class);
        for off in slabs.slot_offsets(index, desc.class) {
            progress.bytes_read.store(off.min(len), Ordering::Relaxed);
            if delay > 0 {
                std::thread::sleep(Duration::from_micros(delay));
            }
            let at = (off - base) as usize;
            scan_slot(
                &buf[at..at + slot_bytes(desc.class).unwrap_or(0) as usize],
                off,
                desc.class,
                &mut f,
                rep,
            );
        }
    }
    f.finish();
    Ok(f)
}

/// One slot of pass 1: an intact page is noted in `f`, a damaged one counted.
fn scan_slot(slot: &[u8], off: u64, class: u8, f: &mut Found, rep: &mut RecoveryReport) {
    let len = match decode_header(slot) {
        Err(FormatError::Empty) => return,
        Ok(h) if h.class == class => h.len,
        _ => {
            rep.torn_pages += 1;
            return;
        }
    };
    match decode_page(slot, off) {
        Ok(Page::Leaf(p)) => {
            rep.leaf_pages += 1;
            f.max_seq = f.max_seq.max(p.commit.seq);
            f.add_leaf(Leaf {
                off,
                len,
                version: p.version,
                commit: p.commit,
                low: p.low.map(<[u8]>::to_vec),
                high: p.high.map(<[u8]>::to_vec),
                has_ext: p.items.iter().any(|i| matches!(i.1, PageValue::Ext(_))),
                items: p.items.len() as u32,
                expiring: p.items.iter().filter(|i| i.2 != 0).count() as u32,
            });
        }
        Ok(Page::Delta(p)) => {
            rep.delta_pages += 1;
            rep.delta_bytes += u64::from(len);
            f.max_seq = f.max_seq.max(p.commit.seq);
            f.tally(p.commit);
            f.deltas.push(DeltaFound {
                off,
                len,
                version: p.version,
                commit: p.commit,
                has_ext: p
                    .items
                    .iter()
                    .any(|i| matches!(i.1, Some(PageValue::Ext(_)))),
            });
        }
        Ok(Page::Ext(p)) => {
            rep.ext_pages += 1;
            f.max_seq = f.max_seq.max(p.commit.seq);
            f.exts.insert(off, p.commit.seq);
        }
        Ok(Page::Clock(lease)) => {
            if f.clock.is_none_or(|(l, _)| lease > l) {
                f.clock = Some((lease, off));
            }
        }
        Err(_) => rep.torn_pages += 1,
    }
}

#[cfg(test)]
mod tests {
    use crate::fault::FaultStorage;
    use crate::recovery::{recover_pruning, LoadProgress, RecoveryReport};
    use crate::{Options, Store, SyncPolicy};
    use accelkv_tree::Config;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;
    use std::sync::Arc;

    type State = BTreeMap<Vec<u8>, Vec<u8>>;

    fn config() -> Config {
        Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            max_value: 64 << 10,
            ..Config::default()
        }
    }

    /// What recovery of `img` gives, pruning or not: the state, and the report without its
    /// timing and scan count.
    fn recovered(img: &[u8], prune: bool) -> Result<(State, RecoveryReport), String> {
        let dev = FaultStorage::from_image(img.to_vec());
        let (tree, _, rep) = recover_pruning(&dev, config(), None, &LoadProgress::default(), prune)
            .map_err(|e| e.to_string())?;
        let state = tree.scan(b"", None, usize::MAX).into_iter().collect();
        let rep = RecoveryReport {
            elapsed: Default::default(),
            scans: 0,
            ..rep
        };
        Ok((state, rep))
    }

    /// A page file of many small commits over a few leaves: rewrites, deletes, and values
    /// in extension pages, so older versions of every range are on the device.
    fn history(deltas: crate::Deltas) -> Vec<u8> {
        let dev = Arc::new(FaultStorage::new());
        let opts = Options {
            config: config(),
            sync: SyncPolicy::Sync,
            deltas,
            ..Options::default()
        };
        let s = Store::open_storage(dev.clone(), opts).unwrap();
        let mut rng = SmallRng::seed_from_u64(7);
        for i in 0..1500u32 {
            let k = format!("key{:04}", rng.gen_range(0..400u32)).into_bytes();
            if i % 17 == 0 {
                s.delete(&k).unwrap();
            } else {
                let big = rng.gen_ratio(1, 60);
                s.put(&k, &vec![i as u8; if big { 3000 } else { 30 }])
                    .unwrap();
            }
        }
        drop(s);
        dev.durable_image()
    }

    /// Damaged page files recover to the same state with pruning as without: the first
    /// pass's pruning never changes what recovery finds, and where damage needs an older
    /// version it forgot, it reads the file again.
    #[test]
    fn pruning_recovers_what_a_full_pass_does_on_damaged_files() {
        for deltas in [crate::Deltas::OFF, crate::Deltas::default()] {
            damage_rounds(&history(deltas));
        }
    }

    fn damage_rounds(clean: &[u8]) {
        let (state, rep) = recovered(clean, true).unwrap();
        assert_eq!(recovered(clean, false).unwrap().1, rep);
        assert!(!state.is_empty());
        let written: Vec<usize> = (0..clean.len()).filter(|&i| clean[i] != 0).collect();
        let mut rng = SmallRng::seed_from_u64(11);
        let (mut rescans, mut damaged_once) = (0, 0);
        const ROUNDS: usize = 150;
        for round in 0..ROUNDS {
            let mut img = clean.to_vec();
            for _ in 0..rng.gen_range(1..12) {
                img[written[rng.gen_range(0..written.len())]] ^= rng.gen_range(1..=255u8);
            }
            let full = recovered(&img, false);
            let pruned = recovered(&img, true);
            assert_eq!(pruned, full, "round {round}");
            let dev = FaultStorage::from_image(img);
            if let Ok((_, _, r)) =
                recover_pruning(&dev, config(), None, &LoadProgress::default(), true)
            {
                rescans += usize::from(r.scans > 1);
                damaged_once += usize::from(r.scans == 1 && r.torn_pages + r.bad_slabs > 0);
            }
        }
        // Both branches were taken: damage that needs an older version (a second scan) and
        // damage that does not.
        eprintln!(
            "{rescans} of {ROUNDS} damaged files needed a second scan, {damaged_once} did not: {rep}"
        );
        assert!(rescans > 0, "no round needed a second scan");
        assert!(damaged_once > 0, "every damaged file needed a second scan");
    }
}

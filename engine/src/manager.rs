//! The hot-key cache's control plane (the RISC-V NIC accelerator's software side): engine
//! threads sample GET keys; this thread feeds them to the popularity sketch and, every
//! interval, decides whether the cache pays for itself, and while it does installs the
//! hottest keys not yet cached, evicting an occupant only for a hotter key. Installation
//! follows invariant 2 of hot.rs, turning the cache on and off invariant 5.
//!
//! Whether the cache pays: a hit saves a tree walk (about 2,000 instructions) and costs
//! every GET a lookup and every write a bucket update (about 150 each), so the cache is
//! worth its cost once it would answer a tenth of the GETs. The sketch predicts that share:
//! the sightings of the keys the cache could hold (its hottest candidates, as many as it has
//! buckets) over all sightings. The cache goes on at [`ON`] and off below [`OFF`]; while it
//! is off, writers and readers skip it entirely, and a uniform workload pays only for the
//! sampling.

use crate::hot::{HotCache, MAX_CACHED_KEY};
use crate::sketch::Sketch;
use accelkv_tree::Store;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sampled keys sent to the manager at a time.
const SAMPLE_BATCH: usize = 256;

/// Emptied sample buffers the manager hands back for reuse, at most this many.
const SPARE_BUFFERS: usize = 16;

/// A batch of sampled keys, each `len u8 | key` (cacheable keys are at most 40 bytes):
/// one buffer, reused, rather than one allocation per key.
pub(crate) type Samples = Vec<u8>;

/// The channel samples go to the manager on, and the buffers it gives back.
#[derive(Clone)]
pub(crate) struct SampleChannel {
    pub(crate) tx: Sender<Samples>,
    pub(crate) spare: Arc<Mutex<Vec<Samples>>>,
}

/// A reader's side of the control plane (an engine thread's or an inline reader's): one
/// GET key in `every` is copied into a batch buffer sent to the manager when full; the
/// manager hands emptied buffers back, so sampling allocates nothing once warm.
pub(crate) struct Sampler {
    channel: Option<SampleChannel>,
    every: u32,
    gets: u32,
    batch: Samples,
    keys: usize,
}

impl Sampler {
    pub(crate) fn new(channel: Option<SampleChannel>, every: u32) -> Sampler {
        Sampler {
            channel,
            every: every.max(1),
            gets: 0,
            batch: Vec::new(),
            keys: 0,
        }
    }

    /// Counts a GET of `key`, keeping it if it is the one in `every` (and cacheable).
    pub(crate) fn see(&mut self, key: &[u8]) {
        self.gets = self.gets.wrapping_add(1);
        if self.gets.is_multiple_of(self.every) && key.len() <= MAX_CACHED_KEY {
            self.batch.push(key.len() as u8);
            self.batch.extend_from_slice(key);
            self.keys += 1;
            if self.keys >= SAMPLE_BATCH {
                self.keys = 0;
                let Some(ch) = &self.channel else {
                    self.batch.clear();
                    return;
                };
                let spare = ch.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let full = std::mem::replace(&mut self.batch, spare.unwrap_or_default());
                let _ = ch.tx.send(full);
            }
        }
    }
}

/// The keys of a sample batch.
fn sampled(batch: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = usize::from(*batch.get(at)?);
        let key = batch.get(at + 1..at + 1 + len)?;
        at += 1 + len;
        Some(key)
    })
}

/// Most keys installed per interval.
const PER_ROUND: usize = 16384;

/// Predicted share of GETs the cache would answer at which it goes on.
pub(crate) const ON: f64 = 0.10;
/// Predicted share below which it goes off again.
pub(crate) const OFF: f64 = 0.05;

pub(crate) struct Manager {
    pub(crate) store: Arc<Store>,
    pub(crate) cache: Arc<HotCache>,
    pub(crate) samples: Receiver<Samples>,
    /// Where emptied sample buffers go back to the samplers.
    pub(crate) spare: Arc<Mutex<Vec<Samples>>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) interval: Duration,
}

impl Manager {
    pub(crate) fn run(self) {
        let buckets = self.cache.stats().buckets;
        let mut sketch = Sketch::new(buckets.min(1 << 20));
        let mut last = Instant::now();
        let mut rounds = 0u64;
        let mut fresh = false;
        // Sightings counted by the sketch (halved with it).
        let mut seen = 0u64;
        while !self.stop.load(Ordering::Relaxed) {
            match self.samples.recv_timeout(self.interval) {
                Ok(mut batch) => {
                    for k in sampled(&batch) {
                        sketch.add(k);
                        seen += 1;
                    }
                    fresh = true;
                    batch.clear();
                    let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
                    if spare.len() < SPARE_BUFFERS {
                        spare.push(batch);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if last.elapsed() >= self.interval {
                last = Instant::now();
                rounds += 1;
                // Nothing new sampled: the ranking has not changed.
                if std::mem::take(&mut fresh) {
                    let top = sketch.top(buckets);
                    let covered: u64 = top.iter().map(|(_, c)| u64::from(*c)).sum();
                    let share = covered as f64 / seen.max(1) as f64;
                    if share >= ON {
                        self.cache.activate();
                    } else if share < OFF {
                        self.cache.deactivate();
                    }
                    if self.cache.is_active() {
                        self.refresh(&sketch, top);
                    }
                }
                if rounds.is_multiple_of(50) {
                    sketch.decay();
                    seen /= 2;
                }
            }
        }
    }

    /// Installs the hottest keys (`top`, hottest first) that are not cached yet.
    fn refresh(&self, sketch: &Sketch, top: Vec<(&[u8], u32)>) {
        let mut installed = 0;
        for (key, count) in top {
            if installed == PER_ROUND {
                break;
            }
            if self.cache.contains(key) {
                continue;
            }
            let Some(cands) = self.cache.candidates(key) else {
                continue;
            };
            // An empty bucket, else the occupant with the lowest estimate if colder.
            let victim = cands
                .iter()
                .map(|(b, w, occ)| (*b, *w, occ.as_ref().map_or(0, |o| sketch.estimate(&o.key))))
                .min_by_key(|c| c.2);
            let Some((b, _, victim_count)) = victim else {
                continue;
            };
            if victim_count >= count {
                continue;
            }
            let seen = [(cands[0].0, cands[0].1), (cands[1].0, cands[1].1)];
            // The buckets' words first, then the cache found on, then the versions: a writer
            // that skipped the buckets (the cache off) after this point would have to follow
            // a turn-off, and the turn-on after it empties the buckets, changing their words,
            // so `install` refuses (hot.rs invariant 5).
            if !self.cache.is_active() {
                return;
            }
            // Every write whose version was handed out before this point must be released
            // before the value is read (hot.rs invariant 2).
            let raw = self.store.raw();
            let last = raw.last_write_version();
            while raw.read_version() < last {
                std::thread::yield_now();
            }
            let snap = self.store.snapshot();
            // Expiring values are never cached (hot.rs invariant 4).
            let Ok(Some((value, accelkv_tree::NO_DEADLINE, 0))) = snap.get_item(key) else {
                continue;
            };
            if self.cache.install(b, seen, key, &value, snap.version()) {
                installed += 1;
            }
        }
    }
}

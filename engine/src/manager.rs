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
//!
//! The prediction can be wrong: when the hot set is flat and larger than the cache (Facebook's
//! ETC skew, a million equally hot keys and a cache of 16,384 buckets), the keys the sketch
//! ranks highest are merely the luckiest of many, and the cache answers 1% of the GETs while
//! every GET pays its lookup. So the engines' own hit counters judge too: once the cache
//! has been on for [`JUDGED_ROUNDS`] with enough lookups, a measured share below
//! [`MEASURED_OFF`] turns it off and keeps it off for a back-off that doubles with each such failure (up to
//! [`MAX_BACKOFF`]) and resets when a measured share reaches [`ON`]; during a back-off the
//! samplers keep 8 times fewer keys ([`SPARSE_SHIFT`]).

use crate::hot::{HotCache, MAX_CACHED_KEY};
use crate::sketch::{Hot, Sketch};
use accelkv_tree::Store;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
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
    /// How much more sparsely to sample, as a shift of the sampling interval: 0 normally,
    /// [`SPARSE_SHIFT`] while a back-off keeps the cache off (its samples then only keep
    /// the sketch current for the back-off's end).
    pub(crate) sparse: Arc<AtomicU32>,
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

    /// Counts a GET of `key`, keeping it if it is the one in `every` (and cacheable;
    /// one in `every << sparse` while the manager asks for fewer).
    pub(crate) fn see(&mut self, key: &[u8]) {
        self.gets = self.gets.wrapping_add(1);
        if !self.gets.is_multiple_of(self.every) {
            return;
        }
        let shift = self
            .channel
            .as_ref()
            .map_or(0, |ch| ch.sparse.load(Ordering::Relaxed));
        let sampled = shift == 0 || (self.gets / self.every).is_multiple_of(1 << shift);
        if sampled && key.len() <= MAX_CACHED_KEY {
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

/// During a back-off the samplers keep one GET in `sample_every << SPARSE_SHIFT` (one in
/// 64 at the default 8).
pub(crate) const SPARSE_SHIFT: u32 = 3;

/// Most keys installed per interval.
const PER_ROUND: usize = 16384;

/// Predicted share of GETs the cache would answer at which it goes on.
pub(crate) const ON: f64 = 0.10;
/// Predicted share below which it goes off again.
pub(crate) const OFF: f64 = 0.05;

/// Measured hit share below which the cache is turned off. Higher than the predicted
/// thresholds because it counts what the prediction leaves out: the lookup every GET pays
/// and the control plane's own CPU (34–107 ns per GET in `engine_bench --suites cache`, on
/// a machine where it shares two cores with the engine and the client). Measured there:
/// 15% hits made GETs 0.84× as fast as no cache, 37% 0.98–0.99×, 41–46% 1.06–1.12×.
pub(crate) const MEASURED_OFF: f64 = 0.25;

/// Rounds the cache is on before its measured hit share is judged (the manager fills it
/// meanwhile), and between judgements.
const JUDGED_ROUNDS: u64 = 50;
/// Lookups a judgement needs.
const JUDGED_LOOKUPS: u64 = 20_000;
/// The first back-off after a measured failure, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(64);

/// What the engine threads and inline readers count (cache hits and misses are added in
/// batches of about a thousand).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) completed: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
}

/// The engines' hit and miss counters, judged while the cache is on.
pub(crate) struct Judge {
    counters: Arc<Counters>,
    last: (u64, u64),
    rounds: u64,
    backoff: Duration,
    until: Option<Instant>,
}

impl Judge {
    pub(crate) fn new(counters: Arc<Counters>) -> Judge {
        Judge {
            counters,
            last: (0, 0),
            rounds: 0,
            backoff: FIRST_BACKOFF,
            until: None,
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.counters.hits.load(Ordering::Relaxed),
            self.counters.misses.load(Ordering::Relaxed),
        )
    }

    /// Whether a prediction may turn the cache on now (no back-off running).
    fn may_activate(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now >= u)
    }

    /// Called when the cache goes on: judging starts afresh.
    fn activated(&mut self) {
        self.last = self.counts();
        self.rounds = 0;
    }

    /// One round with the cache on; false when the measured share says to turn it off.
    fn keep(&mut self, now: Instant) -> bool {
        self.rounds += 1;
        let (h, m) = self.counts();
        let (dh, dm) = (h - self.last.0, m - self.last.1);
        if self.rounds < JUDGED_ROUNDS || dh + dm < JUDGED_LOOKUPS {
            return true;
        }
        self.last = (h, m);
        self.rounds = 0;
        let share = dh as f64 / (dh + dm) as f64;
        if share >= ON {
            self.backoff = FIRST_BACKOFF;
        }
        if share >= MEASURED_OFF {
            return true;
        }
        self.until = Some(now + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        false
    }
}

pub(crate) struct Manager {
    pub(crate) store: Arc<Store>,
    pub(crate) cache: Arc<HotCache>,
    pub(crate) samples: Receiver<Samples>,
    /// Where emptied sample buffers go back to the samplers.
    pub(crate) spare: Arc<Mutex<Vec<Samples>>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) interval: Duration,
    pub(crate) judge: Judge,
    /// The samplers' [`SampleChannel::sparse`].
    pub(crate) sparse: Arc<AtomicU32>,
}

impl Manager {
    pub(crate) fn run(mut self) {
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
                // While a back-off keeps the cache off, sample more sparsely: the samples
                // only keep the sketch current, and on two cores the control plane's CPU
                // is taken from the engine and its clients.
                let backing_off = !self.cache.is_active() && !self.judge.may_activate(last);
                let shift = if backing_off { SPARSE_SHIFT } else { 0 };
                self.sparse.store(shift, Ordering::Relaxed);
                // Nothing new sampled: the ranking has not changed.
                if std::mem::take(&mut fresh) {
                    let top = sketch.top(buckets);
                    let covered: u64 = top.iter().map(|(_, c, _)| u64::from(*c)).sum();
                    let share = covered as f64 / seen.max(1) as f64;
                    let now = Instant::now();
                    if self.cache.is_active() {
                        if share < OFF || !self.judge.keep(now) {
                            self.cache.deactivate();
                        }
                    } else if share >= ON && self.judge.may_activate(now) {
                        self.cache.activate();
                        self.judge.activated();
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

    /// Installs the hottest keys of `top` not found cached yet, hottest first.
    fn refresh(&self, sketch: &Sketch, top: Vec<Hot<'_>>) {
        let generation = self.cache.generation();
        let mut todo: Vec<Hot<'_>> = top
            .into_iter()
            .filter(|h| h.2.get() != generation)
            .collect();
        todo.sort_unstable_by_key(|h| std::cmp::Reverse(h.1));
        let mut installed = 0;
        for (key, count, cached) in todo {
            if installed == PER_ROUND {
                break;
            }
            if self.cache.contains(key) {
                cached.set(generation);
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
                cached.set(generation);
                installed += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge() -> (Arc<Counters>, Judge) {
        let c = Arc::new(Counters::default());
        (c.clone(), Judge::new(c))
    }

    /// A sampler keeps one GET in `every`, and one in `every << SPARSE_SHIFT` while the
    /// manager asks for fewer; a full batch goes to the manager.
    #[test]
    fn a_sampler_keeps_fewer_keys_while_asked_to() {
        let (tx, rx) = std::sync::mpsc::channel();
        let sparse = Arc::new(AtomicU32::new(0));
        let ch = SampleChannel {
            tx,
            spare: Arc::new(Mutex::new(Vec::new())),
            sparse: sparse.clone(),
        };
        let mut s = Sampler::new(Some(ch), 8);
        let kept = |s: &mut Sampler, gets: usize| {
            for i in 0..gets {
                s.see(format!("key{i}").as_bytes());
            }
            rx.try_iter().map(|b| sampled(&b).count()).sum::<usize>()
        };
        assert_eq!(kept(&mut s, 8 * SAMPLE_BATCH), SAMPLE_BATCH);
        sparse.store(SPARSE_SHIFT, Ordering::Relaxed);
        assert_eq!(kept(&mut s, 8 * SAMPLE_BATCH), 0);
        assert_eq!(
            kept(&mut s, (8 << SPARSE_SHIFT) * SAMPLE_BATCH),
            SAMPLE_BATCH
        );
    }

    /// Runs `rounds` rounds of `hits` and `misses` each; the last verdict.
    fn rounds(
        c: &Counters,
        j: &mut Judge,
        now: Instant,
        rounds: u64,
        hits: u64,
        misses: u64,
    ) -> bool {
        let mut keep = true;
        for _ in 0..rounds {
            c.hits.fetch_add(hits, Ordering::Relaxed);
            c.misses.fetch_add(misses, Ordering::Relaxed);
            keep = j.keep(now);
        }
        keep
    }

    #[test]
    fn a_cache_that_answers_few_gets_is_turned_off_and_backs_off_longer_each_time() {
        let (c, mut j) = judge();
        let t = Instant::now();
        j.activated();
        // 1% hits: kept until judged, then turned off.
        assert!(rounds(&c, &mut j, t, JUDGED_ROUNDS - 1, 10, 990));
        assert!(!rounds(&c, &mut j, t, 1, 10, 990));
        assert!(!j.may_activate(t));
        assert!(j.may_activate(t + FIRST_BACKOFF));
        // The second failure backs off twice as long.
        j.activated();
        assert!(!rounds(&c, &mut j, t, JUDGED_ROUNDS, 10, 990));
        assert!(!j.may_activate(t + FIRST_BACKOFF));
        assert!(j.may_activate(t + FIRST_BACKOFF * 2));
        // A share that pays resets the back-off.
        j.activated();
        assert!(rounds(&c, &mut j, t, JUDGED_ROUNDS, 500, 500));
        assert!(!rounds(&c, &mut j, t, JUDGED_ROUNDS, 10, 990));
        assert!(j.may_activate(t + FIRST_BACKOFF));
    }

    #[test]
    fn too_few_lookups_are_not_judged() {
        let (c, mut j) = judge();
        let t = Instant::now();
        j.activated();
        // No GETs at all (a write-only phase): the cache is not judged a failure.
        assert!(rounds(&c, &mut j, t, 10 * JUDGED_ROUNDS, 0, 10));
        // What counted before activation is not held against it.
        let (c2, mut j2) = judge();
        c2.misses.fetch_add(1 << 20, Ordering::Relaxed);
        j2.activated();
        assert!(rounds(&c2, &mut j2, t, JUDGED_ROUNDS, 600, 400));
    }
}

//! Reads on the caller's thread: a server loop (or any thread) runs a batch of GETs and
//! scans through the same interleaved walk (AMAC, amac.rs) as the engine threads, with up to
//! `G` requests in flight, without handing them to another thread and back. A GET's value is
//! handed to the caller borrowed from node memory (or the hot-key cache), so the caller
//! copies it once, straight into its reply, and a GET allocates nothing.
//!
//! Thread safety: an `InlineReader` belongs to one thread at a time (`&mut self`); each has
//! its own reader slot, so any number of them run side by side with the engine's threads
//! and the writers.
//!
//! Invariants:
//! 1. A batch's read version is taken after its slot publishes the current epoch, and the
//!    slot is cleared only after the last request of the batch has been handed to the
//!    caller (so nothing `emit` sees is freed while it looks at it).

use crate::amac::{Flight, Step};
use crate::cpu::Staging;
use crate::gets::{self, Get, Got};
use crate::hot::HotCache;
use crate::manager::Counters;
use crate::manager::Sampler;
use crate::request::{ReadRef, Reply};
use accelkv_tree::{ReaderSlot, Store};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One answer of an inline batch.
#[derive(Debug)]
pub enum Found<'v> {
    /// A GET's value (`None`: absent), borrowed until `emit` returns, and its client flags
    /// (0: none, or absent).
    Value(Option<&'v [u8]>, u32),
    /// A scan's items or an error.
    Reply(Reply),
}

impl Found<'_> {
    /// The owned reply.
    pub fn into_reply(self) -> Reply {
        match self {
            Found::Value(v, _) => Reply::Value(v.map(<[u8]>::to_vec)),
            Found::Reply(r) => r,
        }
    }
}

/// Runs read batches on the calling thread; made by [`crate::CpuEngine::reader`], sharing the
/// engine's hot-key cache and counters.
pub struct InlineReader {
    store: Arc<Store>,
    slot: ReaderSlot,
    window: usize,
    /// Which levels are walked interleaved (`EngineConfig::staging`).
    staging: Staging,
    cache: Option<Arc<HotCache>>,
    sampler: Sampler,
    counters: Arc<Counters>,
    /// Every flight this reader made, at most `window`, reused in place (for their key
    /// buffers, and so a request is never moved: a flight is a few hundred bytes).
    flights: Vec<Flight>,
    /// Indices in `flights` of the requests in flight.
    active: Vec<usize>,
    /// Indices in `flights` of finished flights.
    spare: Vec<usize>,
    /// GETs in flight on the lean path (gets.rs).
    gets: Vec<Get>,
    /// The hot-cache hash of each request of the batch (0 for scans).
    hashes: Vec<u64>,
    /// Whether a request that reaches a leaf living only in the page file is left
    /// unanswered ([`InlineReader::missed`]) instead of blocking on the read.
    defer: bool,
    /// The requests of the last batch left unanswered: (index, leaf LID).
    missed: Vec<(usize, u64)>,
}

impl InlineReader {
    pub(crate) fn new(
        store: Arc<Store>,
        window: usize,
        staging: Staging,
        cache: Option<Arc<HotCache>>,
        sampler: Sampler,
        counters: Arc<Counters>,
    ) -> InlineReader {
        let slot = store.raw().reader_slot();
        InlineReader {
            store,
            slot,
            window: window.max(1),
            staging,
            cache,
            sampler,
            counters,
            flights: Vec::with_capacity(window.max(1)),
            active: Vec::with_capacity(window.max(1)),
            spare: Vec::with_capacity(window.max(1)),
            gets: Vec::with_capacity(window.max(1)),
            hashes: Vec::new(),
            defer: false,
            missed: Vec::new(),
        }
    }

    /// With `on`, the next batches do not block on leaves that live only in the page
    /// file: a request that reaches one is not answered (no `emit`) and is listed in
    /// [`InlineReader::missed`] with the leaf, for the caller to have it read back
    /// ([`Store::read_back`], on another thread) and run the request again. Off (the
    /// default), such a leaf is read back on this thread.
    pub fn set_defer(&mut self, on: bool) {
        self.defer = on;
    }

    /// The requests of the last batch left unanswered (deferred misses): (index in the
    /// batch, LID of the leaf to read back).
    pub fn missed(&self) -> &[(usize, u64)] {
        &self.missed
    }

    /// The store read.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Runs `reqs` at one read version, up to `G` at a time interleaved, and calls
    /// `emit(i, answer)` once for each `reqs[i]`, in completion order (not request order).
    /// Returns the read version every answer was read at.
    pub fn run(&mut self, reqs: &[ReadRef<'_>], mut emit: impl FnMut(usize, Found<'_>)) -> u64 {
        let store = &self.store;
        let raw = store.raw();
        let max_key = store.config().max_key;
        // Invariant 1: publish the epoch, then take the read version.
        self.slot.enter();
        let rv = raw.read_version();
        let now = accelkv_tree::now_ms();
        let (mut hits, mut misses) = (0u64, 0u64);
        self.missed.clear();
        // Looked at after the read version is taken (hot.rs invariant 5).
        let cached = self.cache.as_ref().filter(|c| c.is_active());
        if let Some(cache) = cached {
            // The buckets of every GET of the batch at once, instead of one miss per GET,
            // each key hashed once for the prefetch and the lookup.
            self.hashes.clear();
            for r in reqs {
                let h = match r {
                    ReadRef::Get(key) => HotCache::key_hash(key),
                    _ => 0,
                };
                cache.prefetch_hashed(h);
                self.hashes.push(h);
            }
        }
        // GETs take the lean path unless more than one interior level is staged (gets.rs).
        let staged = self.staging.levels(raw);
        let lean = staged <= 1;
        let mut next = 0;
        loop {
            while self.active.len() + self.gets.len() < self.window && next < reqs.len() {
                let (tag, req) = (next, &reqs[next]);
                next += 1;
                if let Some(e) = req.invalid(max_key) {
                    emit(tag, Found::Reply(Reply::Error(e)));
                    continue;
                }
                if let (ReadRef::Get(key), true) = (req, self.cache.is_some()) {
                    self.sampler.see(key);
                    if let Some(cache) = cached {
                        let h = self.hashes[tag];
                        if cache
                            .lookup_hashed(key, h, rv, |v| emit(tag, Found::Value(Some(v), 0)))
                            .is_some()
                        {
                            hits += 1;
                            continue;
                        }
                        misses += 1;
                    }
                }
                if let (ReadRef::Get(key), true) = (req, lean) {
                    // SAFETY: the slot published an epoch before this batch's read version
                    // was taken and is cleared only after the loop (invariant 1).
                    match unsafe { gets::admit(raw, tag, key, rv, now, staged, self.defer) } {
                        Got::Flying(g) => self.gets.push(g),
                        Got::Missed(lid) => self.missed.push((tag, lid)),
                        Got::Value(v, f) => emit(tag, Found::Value(v, f)),
                        Got::Reply(r) => emit(tag, Found::Reply(r)),
                    }
                    continue;
                }
                let at = match self.spare.pop() {
                    Some(at) => {
                        self.flights[at].renew(raw, tag as u64, rv, now, req, staged);
                        at
                    }
                    None => {
                        let f = Flight::new(raw, tag as u64, rv, now, 0, 0, req.to_request())
                            .staged(staged);
                        self.flights.push(f);
                        self.flights.len() - 1
                    }
                };
                self.active.push(at);
            }
            if self.active.is_empty() && self.gets.is_empty() {
                break;
            }
            // One stage of every GET on the lean path.
            let mut i = 0;
            while i < self.gets.len() {
                let g = self.gets[i];
                let ReadRef::Get(key) = reqs[g.tag] else {
                    unreachable!("only GETs take the lean path");
                };
                // SAFETY: as above.
                let found = match unsafe { g.step(raw, key, rv, now, self.defer) } {
                    Got::Flying(g) => {
                        self.gets[i] = g;
                        i += 1;
                        continue;
                    }
                    Got::Missed(lid) => {
                        self.missed.push((g.tag, lid));
                        self.gets.swap_remove(i);
                        continue;
                    }
                    Got::Value(v, f) => Found::Value(v, f),
                    Got::Reply(r) => Found::Reply(r),
                };
                emit(g.tag, found);
                self.gets.swap_remove(i);
            }
            let mut i = 0;
            while i < self.active.len() {
                let flight = &mut self.flights[self.active[i]];
                // SAFETY: the slot published an epoch before this batch's read version was
                // taken and is cleared only after the loop (invariant 1).
                let step = unsafe { flight.step(raw, self.defer) };
                let tag = flight.tag as usize;
                let found = match step {
                    Step::Pending => {
                        i += 1;
                        continue;
                    }
                    Step::Missed(lid) => {
                        self.missed.push((tag, lid));
                        self.spare.push(self.active.swap_remove(i));
                        continue;
                    }
                    Step::Value(v, f) => Found::Value(v, f),
                    Step::Done(r) => Found::Reply(r),
                };
                emit(tag, found);
                self.spare.push(self.active.swap_remove(i));
            }
        }
        self.slot.clear();
        let c = &self.counters;
        c.completed
            .fetch_add((reqs.len() - self.missed.len()) as u64, Ordering::Relaxed);
        if hits + misses > 0 {
            c.hits.fetch_add(hits, Ordering::Relaxed);
            c.misses.fetch_add(misses, Ordering::Relaxed);
        }
        rv
    }
}

//! The server's counters: per-loop request counters on cache lines of their own, error and
//! connection counters, and per-loop latency histograms, summed when read (INFO, STATS,
//! Prometheus).

use hdrhistogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Operation classes counted in metrics.
#[derive(Clone, Copy, Debug)]
pub enum OpClass {
    Get = 0,
    Put = 1,
    Update = 2,
    Delete = 3,
    Scan = 4,
    Floor = 5,
    Other = 6,
    Atomic = 7,
    Vector = 8,
}

pub const CLASSES: [&str; 9] = [
    "get",
    "put",
    "update",
    "delete",
    "scan",
    "scan_floor",
    "other",
    "atomic",
    "vector",
];

/// The protocols whose request latency is recorded apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp = 0,
    Memcached = 1,
    Binary = 2,
}

/// [`Proto`]'s names, as the `protocol` label of the latency histograms.
pub const PROTOCOLS: [&str; 3] = ["resp", "memcached", "binary"];

/// One histogram per protocol.
type Latencies = [Mutex<Histogram<u64>>; 3];

/// Counters bumped on every request: one set per event loop, on cache lines of its own
/// (a counter shared by all loops would bounce between their cores on every request),
/// summed when read.
#[repr(align(128))]
#[derive(Default)]
pub struct Hot {
    pub ops: [AtomicU64; 9],
    pub frames: AtomicU64,
    pub resp_commands: AtomicU64,
    /// memcached commands (text and meta, TCP and UDP).
    pub memcached_commands: AtomicU64,
    pub udp_datagrams: AtomicU64,
    /// Runs of pipelined SETs written as one station batch after one interleaved descent
    /// (resp/commands/expire.rs `set_run`), and the SETs in them.
    pub set_batches: AtomicU64,
    pub set_batched: AtomicU64,
}

thread_local! {
    /// Which `Hot` set and latency histogram this thread uses (0: threads that are not loops).
    static SHARD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes this thread use the counters of event loop `i`.
pub fn use_loop_counters(i: usize) {
    SHARD.with(|s| s.set(i + 1));
}

/// This thread's counter set: its event loop's index + 1, or 0 for threads that are not
/// loops (for adapters that keep counters of their own per loop).
pub fn shard() -> usize {
    SHARD.with(|s| s.get())
}

/// Counters and histograms.
pub struct Metrics {
    hot: Box<[Hot]>,
    pub errors: AtomicU64,
    pub busy: AtomicU64,
    pub bad_input: AtomicU64,
    pub connections_total: AtomicU64,
    pub connections_rejected: AtomicU64,
    /// Latency of each input batch (a binary frame, a RESP or memcached pipeline read at
    /// once), in microseconds, per loop and protocol.
    latency: Box<[Latencies]>,
}

impl Metrics {
    pub fn new(loops: usize) -> Result<Metrics, String> {
        let shards = loops + 1;
        Ok(Metrics {
            hot: (0..shards).map(|_| Hot::default()).collect(),
            errors: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            bad_input: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            connections_rejected: AtomicU64::new(0),
            latency: (0..shards)
                .map(|_| {
                    let h = || {
                        Histogram::new_with_bounds(1, 60_000_000, 3)
                            .map(Mutex::new)
                            .map_err(|e| e.to_string())
                    };
                    Ok::<Latencies, String>([h()?, h()?, h()?])
                })
                .collect::<Result<_, _>>()?,
        })
    }

    /// This thread's counters.
    pub fn hot(&self) -> &Hot {
        &self.hot[SHARD.with(|s| s.get()) % self.hot.len()]
    }

    /// CONFIG RESETSTAT: zeroes the request, error and connection counters and the latency
    /// histograms (every loop's).
    pub fn reset(&self) {
        for h in self.hot.iter() {
            for c in h.ops.iter().chain([
                &h.frames,
                &h.resp_commands,
                &h.memcached_commands,
                &h.udp_datagrams,
                &h.set_batches,
                &h.set_batched,
            ]) {
                c.store(0, Ordering::Relaxed);
            }
        }
        for c in [
            &self.errors,
            &self.busy,
            &self.bad_input,
            &self.connections_total,
            &self.connections_rejected,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for h in self.latency.iter().flatten() {
            if let Ok(mut h) = h.lock() {
                h.reset();
            }
        }
    }

    /// A counter summed over every loop.
    pub fn sum(&self, f: impl Fn(&Hot) -> &AtomicU64) -> u64 {
        self.hot.iter().map(|h| f(h).load(Ordering::Relaxed)).sum()
    }

    /// Every loop's latencies of protocol `p` in one histogram (microseconds).
    pub fn latency(&self, p: Proto) -> Option<Histogram<u64>> {
        let mut all = self.latency[0][p as usize].lock().ok()?.clone();
        for h in &self.latency[1..] {
            let _ = all.add(&*h[p as usize].lock().ok()?);
        }
        Some(all)
    }

    pub fn count_n(&self, class: OpClass, n: usize) {
        self.hot().ops[class as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn count(&self, class: OpClass) {
        self.hot().ops[class as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Records one input batch's latency in this thread's histogram of protocol `p`.
    pub fn record_latency(&self, p: Proto, d: Duration) {
        let us = d.as_micros().max(1) as u64;
        let shard = SHARD.with(|s| s.get()) % self.latency.len();
        if let Ok(mut h) = self.latency[shard][p as usize].lock() {
            h.saturating_record(us);
        }
    }
}

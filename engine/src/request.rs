//! Requests, replies and the completion sink.

use accelkv_tree::Error;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// A read request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The value of `key`.
    Get {
        /// Key.
        key: Vec<u8>,
    },
    /// Items with keys in `[lo, hi)` (`hi = None`: unbounded), at most `limit`.
    Scan {
        /// Lower bound, inclusive.
        lo: Vec<u8>,
        /// Upper bound, exclusive.
        hi: Option<Vec<u8>>,
        /// Most items returned.
        limit: usize,
    },
    /// Honeycomb's SCAN(kl, ku): from the largest key <= `kl` (or the first key) through
    /// `ku` inclusive, at most `limit` items.
    ScanFloor {
        /// Floor probe.
        kl: Vec<u8>,
        /// Upper bound, inclusive.
        ku: Vec<u8>,
        /// Most items returned.
        limit: usize,
    },
}

impl Request {
    /// A GET.
    pub fn get(key: &[u8]) -> Request {
        Request::Get { key: key.to_vec() }
    }

    /// A SCAN of `[lo, hi)`.
    pub fn scan(lo: &[u8], hi: Option<&[u8]>, limit: usize) -> Request {
        Request::Scan {
            lo: lo.to_vec(),
            hi: hi.map(<[u8]>::to_vec),
            limit,
        }
    }

    /// A SCAN_FLOOR.
    pub fn scan_floor(kl: &[u8], ku: &[u8], limit: usize) -> Request {
        Request::ScanFloor {
            kl: kl.to_vec(),
            ku: ku.to_vec(),
            limit,
        }
    }
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// GET: the value, or `None` when absent.
    Value(Option<Vec<u8>>),
    /// SCAN and SCAN_FLOOR: the items in key order.
    Items(Vec<(Vec<u8>, Vec<u8>)>),
    /// The request was invalid (for example a key longer than the store allows).
    Error(Error),
}

/// A finished request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The tag the request was submitted with.
    pub tag: u64,
    /// The read version it ran at.
    pub version: u64,
    /// The answer.
    pub reply: Reply,
    /// Whether the hot-key cache answered it.
    pub from_cache: bool,
}

/// Where an engine delivers completions; one per submitter (a connection, a thread).
#[derive(Default)]
pub struct Sink {
    done: Mutex<Vec<Completion>>,
    ready: Condvar,
}

impl Sink {
    /// An empty sink.
    pub fn new() -> Arc<Sink> {
        Arc::new(Sink::default())
    }

    pub(crate) fn push_all(&self, c: impl IntoIterator<Item = Completion>) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        d.extend(c);
        drop(d);
        self.ready.notify_all();
    }

    /// Moves every completion that is ready into `out`; returns how many.
    pub fn poll(&self, out: &mut Vec<Completion>) -> usize {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        let n = d.len();
        out.append(&mut d);
        n
    }

    /// Waits until at least `min` completions are ready (or `timeout` passes), then moves
    /// them all into `out`; returns how many were moved.
    pub fn wait(&self, out: &mut Vec<Completion>, min: usize, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        while d.len() < min {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            d = self
                .ready
                .wait_timeout(d, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let n = d.len();
        out.append(&mut d);
        n
    }
}

//! Requests, replies and the completion sink.

use accelkv_tree::Error;
use std::sync::atomic::{AtomicUsize, Ordering};
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

    /// The error the store's API gives for this request, if any: an empty or too long GET
    /// key (scans accept any bounds). Every engine checks requests this way.
    pub fn invalid(&self, max_key: usize) -> Option<Error> {
        match self {
            Request::Get { key } => invalid_key(key, max_key),
            _ => None,
        }
    }

    /// The reference reader's answer to this request at read version `rv` and clock `now`:
    /// what an offload engine answers for a request it does not run itself (validity is
    /// the caller's to check first, with [`Request::invalid`]).
    ///
    /// # Safety
    /// As for [`accelkv_tree::Raw::reference_get`]: an epoch published before `rv` was taken
    /// is still published.
    pub unsafe fn reference_reply(&self, raw: accelkv_tree::Raw<'_>, rv: u64, now: u64) -> Reply {
        let mut items = Items::default();
        // SAFETY: the caller's published epoch protects everything reachable at `rv`.
        let r = unsafe {
            match self {
                Request::Get { key } => {
                    return match raw.reference_get(key, rv, now) {
                        Ok(v) => Reply::Value(v),
                        Err(e) => Reply::Error(e),
                    }
                }
                Request::Scan { lo, hi, limit } => {
                    raw.reference_scan(lo, hi.as_deref(), *limit, rv, now, |k, v| items.push(k, v))
                }
                Request::ScanFloor { kl, ku, limit } => {
                    raw.reference_scan_floor(kl, ku, *limit, rv, now, |k, v| items.push(k, v))
                }
            }
        };
        match r {
            Ok(()) => Reply::Items(items),
            Err(e) => Reply::Error(e),
        }
    }

    /// The request borrowed.
    pub fn as_ref(&self) -> ReadRef<'_> {
        match self {
            Request::Get { key } => ReadRef::Get(key),
            Request::Scan { lo, hi, limit } => ReadRef::Scan {
                lo,
                hi: hi.as_deref(),
                limit: *limit,
            },
            Request::ScanFloor { kl, ku, limit } => ReadRef::ScanFloor {
                kl,
                ku,
                limit: *limit,
            },
        }
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

/// The error the store gives for a GET of `key`: empty or longer than `max_key`.
fn invalid_key(key: &[u8], max_key: usize) -> Option<Error> {
    if key.is_empty() {
        Some(Error::EmptyKey)
    } else if key.len() > max_key {
        Some(Error::KeyTooLong {
            len: key.len(),
            max: max_key,
        })
    } else {
        None
    }
}

/// A read request borrowing its keys from the caller (the inline reader's input: a server
/// loop decodes requests in place and copies nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadRef<'a> {
    /// The value of a key.
    Get(&'a [u8]),
    /// Items with keys in `[lo, hi)` (`hi = None`: unbounded), at most `limit`.
    Scan {
        /// Lower bound, inclusive.
        lo: &'a [u8],
        /// Upper bound, exclusive.
        hi: Option<&'a [u8]>,
        /// Most items returned.
        limit: usize,
    },
    /// From the largest key <= `kl` (or the first key) through `ku`, at most `limit` items.
    ScanFloor {
        /// Floor probe.
        kl: &'a [u8],
        /// Upper bound, inclusive.
        ku: &'a [u8],
        /// Most items returned.
        limit: usize,
    },
}

impl ReadRef<'_> {
    /// As [`Request::invalid`].
    pub fn invalid(&self, max_key: usize) -> Option<Error> {
        match self {
            ReadRef::Get(key) => invalid_key(key, max_key),
            _ => None,
        }
    }

    /// The owned request.
    pub fn to_request(&self) -> Request {
        match *self {
            ReadRef::Get(key) => Request::get(key),
            ReadRef::Scan { lo, hi, limit } => Request::scan(lo, hi, limit),
            ReadRef::ScanFloor { kl, ku, limit } => Request::scan_floor(kl, ku, limit),
        }
    }
}

/// Items returned by a scan, stored flat (one buffer for all keys and values) so a scan
/// costs two allocations, not two per item.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Items {
    bytes: Vec<u8>,
    /// (key end, value end) offsets into `bytes` for each item.
    ends: Vec<(u32, u32)>,
}

impl Items {
    /// Appends an item.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        let k = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.ends.push((k, self.bytes.len() as u32));
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no items.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The items in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut start = 0usize;
        self.ends.iter().map(move |&(k, v)| {
            let (k, v) = (k as usize, v as usize);
            let item = (&self.bytes[start..k], &self.bytes[k..v]);
            start = v;
            item
        })
    }

    /// The items as owned pairs.
    pub fn to_vec(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
    }
}

impl<K: AsRef<[u8]>, V: AsRef<[u8]>> FromIterator<(K, V)> for Items {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Items {
        let mut items = Items::default();
        for (k, v) in iter {
            items.push(k.as_ref(), v.as_ref());
        }
        items
    }
}

impl std::fmt::Debug for Items {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), v.len())),
            )
            .finish()
    }
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// GET: the value, or `None` when absent.
    Value(Option<Vec<u8>>),
    /// SCAN and SCAN_FLOOR: the items in key order.
    Items(Items),
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
pub struct Sink {
    done: Mutex<Vec<Completion>>,
    ready: Condvar,
    /// How many completions a waiter needs (usize::MAX: nobody waits), so the engine wakes
    /// a waiter only when it can return.
    want: AtomicUsize,
    /// Called after every delivery (a poller's wake-up: an event loop's waker).
    notify: Option<Box<dyn Fn() + Send + Sync>>,
}

impl Default for Sink {
    fn default() -> Self {
        Sink {
            done: Mutex::new(Vec::new()),
            ready: Condvar::new(),
            want: AtomicUsize::new(usize::MAX),
            notify: None,
        }
    }
}

impl Sink {
    /// An empty sink.
    pub fn new() -> Arc<Sink> {
        Arc::new(Sink::default())
    }

    /// An empty sink that calls `notify` after each delivery, for a submitter that polls
    /// ([`Sink::poll`]) instead of waiting: an event loop passes its waker.
    pub fn with_notify(notify: impl Fn() + Send + Sync + 'static) -> Arc<Sink> {
        Arc::new(Sink {
            notify: Some(Box::new(notify)),
            ..Sink::default()
        })
    }

    /// Delivers completions and wakes a waiter that has enough (for engines, including
    /// back ends in other crates).
    pub fn push_all(&self, c: impl IntoIterator<Item = Completion>) {
        let mut d = self.done.lock().unwrap_or_else(|e| e.into_inner());
        d.extend(c);
        let len = d.len();
        drop(d);
        // The waiter stored `want` while holding the lock, before waiting.
        if len >= self.want.load(Ordering::Acquire) {
            self.ready.notify_all();
        }
        if let Some(n) = &self.notify {
            n();
        }
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
            self.want.store(min, Ordering::Release);
            d = self
                .ready
                .wait_timeout(d, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        self.want.store(usize::MAX, Ordering::Release);
        let n = d.len();
        out.append(&mut d);
        n
    }
}

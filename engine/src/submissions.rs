//! The submission queue of an engine with worker threads of its own (the GPU's streams, the
//! RTL simulation): batches wait here with the read version and clock they were given, and
//! the queue keeps the reclamation protocol of `accelkv_tree::raw` for them.
//!
//! Invariant: the queue's reader slot holds an epoch published before the read version of
//! every batch queued or running was taken, until that batch is delivered: the first batch
//! into an idle queue publishes its own epoch before taking its read version; later ones
//! are covered by the older epoch already held; [`Submissions::finished`] moves the slot on
//! to the oldest batch still queued, or clears it.

use crate::{Request, Sink};
use accelkv_tree::{Raw, ReaderSlot};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A batch as submitted.
pub struct Submission {
    /// The epoch published for it (the slot held it, or an older one, while it waited).
    pub epoch: u64,
    /// Its read version.
    pub rv: u64,
    /// The submitter's clock (ms since the Unix epoch), taken after `rv`.
    pub now: u64,
    /// Where its completions go.
    pub sink: Arc<Sink>,
    /// The tagged requests.
    pub reqs: Vec<(u64, Request)>,
}

#[derive(Default)]
struct Queue {
    subs: VecDeque<Submission>,
    /// The worker has taken batches it has not delivered yet.
    running: bool,
}

/// Batches waiting for one worker, and the reader slot that protects them.
pub struct Submissions {
    q: Mutex<Queue>,
    ready: Condvar,
    slot: ReaderSlot,
}

impl Submissions {
    /// An empty queue whose batches `slot` protects.
    pub fn new(slot: ReaderSlot) -> Submissions {
        Submissions {
            q: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            slot,
        }
    }

    /// Queues `reqs` at the current read version of `raw`'s store (publishing the epoch
    /// first when the queue is idle) and wakes the worker.
    pub fn push(&self, raw: Raw<'_>, sink: &Arc<Sink>, reqs: Vec<(u64, Request)>) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        // Publish before taking the read version.
        let epoch = raw.current_epoch();
        if q.subs.is_empty() && !q.running {
            self.slot.hold(epoch);
        }
        let rv = raw.read_version();
        q.subs.push_back(Submission {
            epoch,
            rv,
            now: accelkv_tree::now_ms(),
            sink: sink.clone(),
            reqs,
        });
        drop(q);
        self.ready.notify_one();
    }

    /// Every queued batch, oldest first, once there is one; `None` once `stop` is set.
    /// The worker calls [`Submissions::finished`] after delivering them.
    pub fn take_all(&self, stop: &AtomicBool) -> Option<Vec<Submission>> {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        while q.subs.is_empty() {
            if stop.load(Ordering::Relaxed) {
                return None;
            }
            q = self
                .ready
                .wait_timeout(q, Duration::from_millis(50))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        q.running = true;
        Some(q.subs.drain(..).collect())
    }

    /// The batches taken are delivered: the slot moves on to the oldest still queued.
    pub fn finished(&self) {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        q.running = false;
        match q.subs.front() {
            Some(s) => self.slot.hold(s.epoch),
            None => self.slot.clear(),
        }
    }

    /// Requests queued and not yet taken.
    pub fn queued(&self) -> u64 {
        let q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        q.subs.iter().map(|s| s.reqs.len() as u64).sum()
    }

    /// Wakes the worker (to see a stop).
    pub fn wake(&self) {
        self.ready.notify_all();
    }

    /// Releases the slot (the engine is stopping).
    pub fn clear(&self) {
        self.slot.clear();
    }
}

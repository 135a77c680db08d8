//! Reads that miss (issue 18): a small pool of threads that read leaves evicted to the page
//! file back into memory, so that a thread that must not block (a server loop's inline
//! reader, [`crate::InlineReader::set_defer`]) never waits for the disk. The loop hands the
//! LIDs its batch missed to [`Loader::submit`] with a wait number and goes on serving
//! others; a loader thread reads each leaf back ([`Store::read_back`]), then posts the
//! number to the loop's [`LoadSink`], which wakes the loop, and the loop runs the waiting
//! requests again, now against resident leaves. A pool of blocking `pread`s rather than
//! io_uring: the reads are whole pages at known offsets, mostly served from the OS page
//! cache, and a pool needs nothing the kernel or a container may refuse.
//!
//! A leaf that finds no room (the loads' bound, `Config::hard_memory_limit`) is retried for
//! up to about 100 ms while the evictor makes room: a loader thread is not pinned between
//! tries, so waiting cannot hold the evictor back.
//!
//! Bounds: a waiter has one wait at a time (a connection or a parked datagram), so the
//! queue holds at most one job per waiter. A failed read is not reported here: the waiting
//! request, run again, reaches the same leaf and reads it itself, which fails it with the
//! error (`Error::PageRead`).

use accelkv_tree::Store;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a loop learns which of its waits have their leaves read back.
pub struct LoadSink {
    done: Mutex<Vec<u64>>,
    notify: Box<dyn Fn() + Send + Sync>,
}

impl LoadSink {
    /// A sink that calls `notify` (wakes its loop) after each completed wait.
    pub fn new(notify: impl Fn() + Send + Sync + 'static) -> Arc<LoadSink> {
        Arc::new(LoadSink {
            done: Mutex::new(Vec::new()),
            notify: Box::new(notify),
        })
    }

    /// Moves the completed waits into `out`.
    pub fn take(&self, out: &mut Vec<u64>) {
        out.append(&mut lock(&self.done));
    }

    fn complete(&self, wait: u64) {
        lock(&self.done).push(wait);
        (self.notify)();
    }
}

struct Job {
    lids: Vec<u64>,
    wait: u64,
    sink: Arc<LoadSink>,
}

struct Shared {
    store: Arc<Store>,
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    stop: AtomicBool,
    /// Leaves read back, and jobs done.
    leaves: AtomicU64,
    jobs_done: AtomicU64,
}

/// The pool of loader threads; dropping it stops them.
pub struct Loader {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Loader {
    /// Starts `threads` loader threads (at least one) for `store`.
    pub fn start(store: Arc<Store>, threads: usize) -> Loader {
        let shared = Arc::new(Shared {
            store,
            jobs: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            stop: AtomicBool::new(false),
            leaves: AtomicU64::new(0),
            jobs_done: AtomicU64::new(0),
        });
        let threads = (0..threads.max(1))
            .map(|i| {
                let sh = shared.clone();
                std::thread::Builder::new()
                    .name(format!("accelkv-load-{i}"))
                    .spawn(move || run(&sh))
                    .expect("spawn loader thread")
            })
            .collect();
        Loader { shared, threads }
    }

    /// Has `lids` read back, then posts `wait` to `sink`.
    pub fn submit(&self, lids: Vec<u64>, wait: u64, sink: Arc<LoadSink>) {
        lock(&self.shared.jobs).push_back(Job { lids, wait, sink });
        self.shared.ready.notify_one();
    }

    /// Leaves read back and waits completed so far.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.shared.leaves.load(Ordering::Relaxed),
            self.shared.jobs_done.load(Ordering::Relaxed),
        )
    }
}

fn run(sh: &Shared) {
    loop {
        let job = {
            let mut q = lock(&sh.jobs);
            loop {
                if sh.stop.load(Ordering::Relaxed) {
                    return;
                }
                if let Some(j) = q.pop_front() {
                    break j;
                }
                q = sh.ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        for &lid in &job.lids {
            // No room yet: the evictor was told (the load that failed told it) and this
            // thread holds nothing back, so it waits for it a little, as writers do. Any
            // other error is found again by the request's next run (module docs).
            for _ in 0..100 {
                match sh.store.read_back(lid) {
                    Err(accelkv_tree::Error::OutOfMemory { .. }) => {
                        std::thread::sleep(std::time::Duration::from_millis(1))
                    }
                    _ => break,
                }
            }
        }
        sh.leaves
            .fetch_add(job.lids.len() as u64, Ordering::Relaxed);
        sh.jobs_done.fetch_add(1, Ordering::Relaxed);
        job.sink.complete(job.wait);
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        {
            // Under the lock, so no thread misses the flag between its check and its wait.
            let _q = lock(&self.shared.jobs);
            self.shared.ready.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn completes_every_wait_and_stops_on_drop() {
        let store = Arc::new(Store::new(accelkv_tree::Config::default()).unwrap());
        store.put(b"k", b"v").unwrap();
        let loader = Loader::start(store, 2);
        let sink = LoadSink::new(|| {});
        for w in 0..100 {
            // Resident LIDs (and one that is none at all) cost nothing and still complete.
            loader.submit(vec![1, 2, 1 << 40], w, sink.clone());
        }
        let mut done = Vec::new();
        let start = Instant::now();
        while done.len() < 100 && start.elapsed() < Duration::from_secs(10) {
            sink.take(&mut done);
            std::thread::sleep(Duration::from_millis(1));
        }
        done.sort_unstable();
        assert_eq!(done, (0..100).collect::<Vec<_>>());
        assert_eq!(loader.counts(), (300, 100));
        drop(loader);
    }
}

//! Writer threads for RESP write commands: a connection hands a pipeline's run of write
//! commands to the pool as one job and waits for it. (Binary-protocol writes and INCR go
//! through the reservation station, `station.rs`, on the connection's own thread.)
//!
//! Thread safety: any thread may submit; jobs run on the pool's threads in submission order
//! per thread, concurrently across threads (the store serialises what must be).

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send>;

/// A pool of writer threads.
pub struct Writers {
    tx: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Writers {
    /// Starts `n` writer threads (at least one).
    pub fn start(n: usize) -> Writers {
        let (tx, rx) = channel::<Job>();
        let rx: Arc<Mutex<Receiver<Job>>> = Arc::new(Mutex::new(rx));
        let threads = (0..n.max(1))
            .map(|i| {
                let rx = rx.clone();
                std::thread::Builder::new()
                    .name(format!("accelkv-writer-{i}"))
                    .spawn(move || loop {
                        let job = {
                            let rx = rx.lock().unwrap_or_else(|e| e.into_inner());
                            rx.recv()
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return, // the pool was dropped
                        }
                    })
                    .expect("spawn writer thread")
            })
            .collect();
        Writers {
            tx: Mutex::new(Some(tx)),
            threads: Mutex::new(threads),
        }
    }

    /// Runs `f` on a writer thread and returns its result (on this thread if the pool is
    /// shutting down).
    pub fn run<R: Send + 'static>(&self, f: impl FnOnce() -> R + Send + 'static) -> R {
        let (done_tx, done_rx) = sync_channel::<R>(1);
        let job: Job = Box::new(move || {
            let _ = done_tx.send(f());
        });
        let unsent = match self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(tx) => tx.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = unsent {
            job();
        }
        done_rx
            .recv()
            .expect("a writer job always sends its result unless it panicked")
    }
}

impl Drop for Writers {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        for t in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_jobs_on_writer_threads_in_order() {
        let w = Writers::start(2);
        let here = std::thread::current().id();
        let there = w.run(move || std::thread::current().id());
        assert_ne!(here, there);
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..100 {
            let log = log.clone();
            w.run(move || log.lock().unwrap().push(i));
        }
        assert_eq!(*log.lock().unwrap(), (0..100).collect::<Vec<_>>());
    }
}

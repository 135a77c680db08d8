//! How far the recovery of the data directory is, and the shape of a protocol's answer
//! while it runs (net/loading.rs serves the ports meanwhile; each adapter gives its answer).

use accelkv_durable::LoadProgress;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// How far loading is: what recovery read, and since when.
pub struct Progress {
    pub load: Arc<LoadProgress>,
    pub since: Instant,
}

impl Progress {
    /// Bytes read, bytes in all, and the percentage read.
    pub fn read(&self) -> (u64, u64, f64) {
        let read = self.load.bytes_read.load(Ordering::Relaxed);
        let total = self.load.bytes_total.load(Ordering::Relaxed);
        let perc = if total > 0 {
            read as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        (read, total, perc)
    }
}

/// A protocol's answer while loading: the LOADING reply to every whole request at the start
/// of `input`, written to `out`; the bytes they took (`None`: the input is not this
/// protocol's, close the connection).
pub type Answer = fn(input: &[u8], p: &Progress, out: &mut Vec<u8>) -> Option<usize>;

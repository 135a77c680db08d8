//! Splitting by load (docs/CLUSTER.md, "Splits"): what a range's leader served lately. The
//! serving path counts each keyed command a range's leader serves and keeps the key of
//! every [`SAMPLE_EVERY`]th, the last [`SAMPLE_KEYS`] of them, in buffers it reuses (no
//! allocation once they are warm). The split loop (`split.rs`) turns the count into
//! a rate, and splits a range busier than `--split-load` for two seconds at the sampled
//! key that leaves about half of the sample on each side. A range whose sample is mostly
//! one key is not split: a split cannot spread one key's load.

use crate::cluster::bounds::Bounds;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One command in this many has its key sampled (a power of two).
pub(crate) const SAMPLE_EVERY: u64 = 16;

/// The sample's size: the keys of the last `SAMPLE_EVERY × SAMPLE_KEYS` commands.
pub(crate) const SAMPLE_KEYS: usize = 256;

/// A range's load as its leader here served it.
#[derive(Default)]
pub(crate) struct Load {
    served: AtomicU64,
    sample: Mutex<Sample>,
}

#[derive(Default)]
struct Sample {
    /// The slot the next sampled key goes to.
    next: usize,
    keys: Vec<Vec<u8>>,
}

impl Load {
    /// Counts a command on `key` served as the range's leader.
    pub fn count(&self, key: &[u8]) {
        let n = self.served.fetch_add(1, Ordering::Relaxed);
        // One in SAMPLE_EVERY, at irregular steps (the golden ratio's multiples), so
        // clients cycling through a few keys are not sampled at one of them only.
        if n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SAMPLE_EVERY.trailing_zeros()) != 0 {
            return;
        }
        let mut s = self.sample.lock().unwrap_or_else(|e| e.into_inner());
        let at = s.next;
        match s.keys.get_mut(at) {
            Some(slot) => {
                slot.clear();
                slot.extend_from_slice(key);
            }
            None => s.keys.push(key.to_vec()),
        }
        s.next = (at + 1) % SAMPLE_KEYS;
    }

    /// Commands counted since the range opened here.
    pub fn served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    /// Forgets the sampled keys (the range split: half of them are another range's now).
    pub fn forget(&self) {
        let mut s = self.sample.lock().unwrap_or_else(|e| e.into_inner());
        s.keys.clear();
        s.next = 0;
    }

    /// Where to split range `b` so that about half the sampled commands fall on each side:
    /// the sampled key (after the range's first) that leaves the two sides closest to
    /// even, if the smaller side has at least a quarter of a full sample. `None` while
    /// fewer than half a full sample's keys lie in the range (keys sampled before it
    /// narrowed are not counted), or when one key holds most of them.
    pub fn split_key(&self, b: &Bounds) -> Option<Vec<u8>> {
        let s = self.sample.lock().unwrap_or_else(|e| e.into_inner());
        let inside = |k: &&Vec<u8>| {
            k.as_slice() > b.0.as_slice() && b.1.as_deref().is_none_or(|e| k.as_slice() < e)
        };
        let first = s
            .keys
            .iter()
            .filter(|k| k.as_slice() == b.0.as_slice())
            .count();
        let mut keys: Vec<&[u8]> = s.keys.iter().filter(inside).map(Vec::as_slice).collect();
        let n = first + keys.len();
        if n < SAMPLE_KEYS / 2 {
            return None;
        }
        keys.sort_unstable();
        // Splitting before keys[i] leaves `first + i` sampled commands on the left.
        let mut best: Option<(usize, &[u8])> = None;
        for (i, k) in keys.iter().enumerate() {
            if i > 0 && keys[i - 1] == *k {
                continue;
            }
            let left = first + i;
            let gap = left.abs_diff(n - left);
            if best.is_none_or(|(g, _)| gap < g) {
                best = Some((gap, k));
            }
        }
        let (gap, k) = best?;
        let smaller = (n - gap) / 2;
        (smaller >= SAMPLE_KEYS / 4).then(|| k.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Bounds {
        (Vec::new(), None)
    }

    fn served(keys: impl IntoIterator<Item = String>) -> Load {
        let l = Load::default();
        for k in keys {
            l.count(k.as_bytes());
        }
        l
    }

    #[test]
    fn uniform_load_splits_near_the_middle() {
        let l = served((0..8192).map(|i| format!("k{:04}", i % 1000)));
        assert_eq!(l.served(), 8192);
        let at = String::from_utf8(l.split_key(&all()).unwrap()).unwrap();
        let n: u32 = at[1..].parse().unwrap();
        assert!((400..600).contains(&n), "{at}");
    }

    #[test]
    fn a_hot_corner_moves_the_split_key_into_it() {
        // Nine commands in ten go to k0000–k0099, one in ten to the other 900 keys.
        let keys = (0..16384u32).map(|i| match i % 10 {
            0 => format!("k{:04}", 100 + (i / 10) % 900),
            _ => format!("k{:04}", i % 100),
        });
        let l = served(keys);
        let at = String::from_utf8(l.split_key(&all()).unwrap()).unwrap();
        let n: u32 = at[1..].parse().unwrap();
        assert!(n < 100, "{at}: inside the hot keys");
    }

    #[test]
    fn one_hot_key_or_a_thin_sample_is_not_split() {
        let hot = (0..8192).map(|i| match i % 20 {
            0 => format!("k{i:05}"),
            _ => "hot".to_string(),
        });
        assert_eq!(served(hot).split_key(&all()), None);
        let thin = served((0..SAMPLE_EVERY as usize * SAMPLE_KEYS / 4).map(|i| format!("k{i}")));
        assert_eq!(thin.split_key(&all()), None);
    }

    #[test]
    fn the_split_key_lies_inside_the_range_and_after_its_first_key() {
        let l = served((0..8192).map(|i| format!("k{:04}", i % 2)));
        // Two keys, evenly loaded: the split goes between them.
        assert_eq!(l.split_key(&all()).as_deref(), Some(&b"k0001"[..]));
        // Range starting at k0001 (its first key holds half): only k0001 inside, no split.
        assert_eq!(l.split_key(&(b"k0001".to_vec(), None)), None);
        l.forget();
        assert_eq!(l.split_key(&all()), None);
        let l = served((0..8192).map(|i| format!("k{:04}", i % 500)));
        let b = (b"k0100".to_vec(), Some(b"k0200".to_vec()));
        let at = l.split_key(&b);
        assert_eq!(at, None, "a fifth of the sample is inside: too thin");
    }
}

/// What counting costs the serving path (docs/BENCHMARKS.md, "Splits by load"): ns per
/// [`Load::count`] from one thread and from two at once on one range. A measurement, not
/// a test; it asserts nothing about time:
/// `cargo test --release -p accelkv-server --features cluster --lib load_costs -- --ignored --nocapture`
#[cfg(test)]
mod costs {
    use super::*;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn load_costs() {
        let keys: Vec<Vec<u8>> = (0..1024)
            .map(|i| format!("user{i:012}").into_bytes())
            .collect();
        let n = 20_000_000usize;
        for threads in [1, 2] {
            let l = Load::default();
            let t = Instant::now();
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        for i in 0..n / threads {
                            l.count(&keys[i & 1023]);
                        }
                    });
                }
            });
            let ns = t.elapsed().as_nanos() as f64 / (n / threads) as f64;
            eprintln!("{threads} thread(s): {ns:.1} ns per count (each thread's wall time over its counts)");
        }
    }
}

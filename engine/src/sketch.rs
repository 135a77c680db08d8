//! Popularity sketch for the hot-key cache's control plane: a count-min sketch estimates how
//! often each sampled key was seen, and a bounded candidate set remembers the keys with the
//! highest estimates (the heavy hitters). Counts decay by halving so the cache follows a
//! changing workload.

use crate::hash::hash;
use std::cell::Cell;
use std::collections::HashMap;

const ROWS: usize = 4;

/// Sightings before a key is a candidate for the cache.
pub(crate) const MIN_HEAT: u32 = 2;

/// A candidate: its estimate as of its last sighting (halved with the counts), and the
/// cache's generation (`HotCache::generation`) when the manager last found it cached, 0 for
/// none: a round does not look in the cache for keys it already installed. Each decay
/// resets it, so a key dropped from the cache (evicted, or cleared by a write) is looked at
/// again; emptying the cache changes the generation.
pub(crate) struct Cand {
    count: u32,
    pub(crate) cached: Cell<u64>,
}

/// Count-min sketch plus heavy-hitter candidates.
pub(crate) struct Sketch {
    width: usize,
    counts: Vec<u32>,
    candidates: HashMap<Vec<u8>, Cand>,
    capacity: usize,
    /// The largest estimate the last prune dropped (halved with the counts): a key whose
    /// estimate is not above it would be dropped again, so it does not become a candidate.
    /// Without it a flat hot set larger than the capacity (ETC's million keys) made almost
    /// every sample a new candidate, a key copied and a prune every `capacity` samples:
    /// about 2.4 µs of the control plane's CPU per sample.
    floor: u32,
    /// Prunes so far.
    prunes: u64,
}

/// One of the hottest candidates: key, estimate, whether found cached.
pub(crate) type Hot<'s> = (&'s [u8], u32, &'s Cell<u64>);

impl Sketch {
    /// A sketch that tracks about `capacity` candidate keys.
    pub(crate) fn new(capacity: usize) -> Sketch {
        let width = (capacity * 4).next_power_of_two().clamp(1024, 1 << 22);
        Sketch {
            width,
            counts: vec![0; ROWS * width],
            candidates: HashMap::new(),
            capacity: capacity.max(16),
            floor: 0,
            prunes: 0,
        }
    }

    fn cells(&self, key: &[u8]) -> [usize; ROWS] {
        let h = hash(key);
        std::array::from_fn(|r| {
            let x = h.rotate_left(16 * r as u32)
                ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(r as u64 + 1));
            r * self.width + (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 40) as usize % self.width
        })
    }

    /// Counts one sighting of `key`.
    pub(crate) fn add(&mut self, key: &[u8]) {
        let mut est = u32::MAX;
        for c in self.cells(key) {
            self.counts[c] = self.counts[c].saturating_add(1);
            est = est.min(self.counts[c]);
        }
        if let Some(v) = self.candidates.get_mut(key) {
            v.count = est;
            return;
        }
        if est < MIN_HEAT || est <= self.floor {
            // Seen once: not a candidate yet (a uniform workload, whose keys are almost all
            // seen once, then costs the control plane almost nothing); or no hotter than
            // what the last prune dropped.
            return;
        }
        self.candidates.insert(
            key.to_vec(),
            Cand {
                count: est,
                cached: Cell::new(0),
            },
        );
        if self.candidates.len() > 2 * self.capacity {
            self.prune();
        }
    }

    /// Estimated sightings of `key`.
    pub(crate) fn estimate(&self, key: &[u8]) -> u32 {
        self.cells(key)
            .iter()
            .map(|&c| self.counts[c])
            .min()
            .unwrap_or(0)
    }

    fn prune(&mut self) {
        self.prunes += 1;
        let mut v: Vec<(Vec<u8>, Cand)> = self.candidates.drain().collect();
        if v.len() > self.capacity {
            v.select_nth_unstable_by_key(self.capacity, |x| std::cmp::Reverse(x.1.count));
            self.floor = self.floor.max(v[self.capacity].1.count);
            v.truncate(self.capacity);
        }
        self.candidates = v.into_iter().collect();
    }

    /// The `n` hottest candidates, in no particular order, by the estimates kept with them
    /// (estimating each afresh cost four scattered reads per candidate per round, and
    /// sorting them all a sort of up to two million per round: together most of the
    /// control plane's time with a large cache).
    pub(crate) fn top(&self, n: usize) -> Vec<Hot<'_>> {
        let mut v: Vec<Hot<'_>> = self
            .candidates
            .iter()
            .map(|(k, c)| (k.as_slice(), c.count, &c.cached))
            .collect();
        if v.len() > n {
            v.select_nth_unstable_by_key(n, |x| std::cmp::Reverse(x.1));
            v.truncate(n);
        }
        v
    }

    /// Halves every count.
    pub(crate) fn decay(&mut self) {
        for c in &mut self.counts {
            *c /= 2;
        }
        self.floor /= 2;
        self.candidates.retain(|_, v| {
            v.count /= 2;
            v.cached.set(0);
            v.count > 0
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_heavy_hitters() {
        let mut s = Sketch::new(64);
        for round in 0..100u32 {
            for hot in 0..10u32 {
                s.add(format!("hot{hot}").as_bytes());
            }
            for cold in 0..50u32 {
                s.add(format!("cold{}", round * 50 + cold).as_bytes());
            }
        }
        let top: Vec<String> = s
            .top(10)
            .into_iter()
            .map(|(k, _, _)| String::from_utf8(k.to_vec()).unwrap())
            .collect();
        for hot in 0..10 {
            assert!(top.contains(&format!("hot{hot}")), "{top:?}");
        }
        assert!(s.estimate(b"hot3") >= 100);
        s.decay();
        assert!(s.estimate(b"hot3") >= 50 && s.estimate(b"hot3") < 100);
    }

    /// A flat hot set far larger than the capacity (every key about equally hot, and the
    /// count-min's cells shared by many keys, so every estimate is past MIN_HEAT) does not
    /// make each sighting a new candidate: keys no hotter than what a prune dropped stay
    /// out, so prunes are rare; and a key that turns hot among them is still found.
    #[test]
    fn a_flat_hot_set_does_not_churn_the_candidates() {
        let mut s = Sketch::new(64);
        let mut x = 1u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % 100_000
        };
        for _ in 0..200_000 {
            s.add(format!("flat{}", next()).as_bytes());
        }
        // 95 here; about 3,000 without the floor.
        assert!(s.prunes < 300, "{} prunes", s.prunes);
        assert!(s.candidates.len() <= 2 * 64);
        for _ in 0..2_000 {
            s.add(b"rising");
            for _ in 0..20 {
                s.add(format!("flat{}", next()).as_bytes());
            }
        }
        let top: Vec<&[u8]> = s.top(8).into_iter().map(|(k, _, _)| k).collect();
        assert!(top.contains(&&b"rising"[..]), "{:?}", top.len());
    }
}

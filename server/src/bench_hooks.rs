//! Entry points for benchmarks outside this crate (bench/examples/station_bench.rs), not a
//! stable API: the reservation station driven in process, with no network between the
//! operations and the station, so KV-Direct's comparison (atomics on one key with data
//! forwarding against one tree read and write per operation) measures the station itself.

use crate::core::op::{Done, Op};
use crate::core::ops::vector::{Elem, Overflow, Registry};
use crate::core::ops::Write;
use crate::core::station::Station;
use accelkv_tree::Store;
use smallvec::SmallVec;

/// A station of the server's default size over `store`, with or without data forwarding.
#[doc(hidden)]
pub struct StationBench {
    station: Station,
}

impl StationBench {
    #[doc(hidden)]
    pub fn new(forwarding: bool) -> StationBench {
        StationBench {
            station: Station::new(1024, forwarding, Registry::default()),
        }
    }

    /// Runs one frame of fetch-and-adds of 1 on `keys[first..]` round robin, `n` of them,
    /// as the server runs a frame's writes; returns how many succeeded.
    #[doc(hidden)]
    pub fn fetch_add_frame(
        &self,
        store: &Store,
        keys: &[Vec<u8>],
        first: usize,
        n: usize,
    ) -> usize {
        let ops = (0..n).map(|i| {
            Op::new(
                &keys[(first + i) % keys.len()],
                Write::FetchAdd {
                    elem: Elem::U64,
                    overflow: Overflow::Wrap,
                    delta: 1,
                },
            )
        });
        let mut done: SmallVec<[Done; 64]> = SmallVec::new();
        self.station.run(store, ops, &mut done);
        done.iter().filter(|d| d.outcome.is_ok()).count()
    }

    /// Tree writes the station has made.
    #[doc(hidden)]
    pub fn tree_writes(&self) -> u64 {
        self.station
            .stats
            .tree_writes
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

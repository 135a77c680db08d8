//! Latency hiding in the simulated tree-walk engine (issue 19): GETs of random keys in a
//! store of 16-byte keys and 100-byte values, with memory latencies of 0, 100, 300 and
//! 1000 ns at a 200 MHz clock (0, 20, 60 and 200 cycles), for 1 to 32 key search units.
//! The request table is kept full (64 lookups in flight); the units bound the node reads in
//! flight. Prints lookups per 1000 cycles (and Mops/s at 200 MHz), how busy the memory's
//! response bus was (64 B a cycle), the share of node visits served by the units' cache, and
//! node bytes read per lookup.
//!
//! `cargo run --release -p accelkv-rtl --features sim --example walk_latency [-- records]`

use accelkv_rtl::{Lookup, StoreMemory, WalkConfig, WalkSim};
use accelkv_tree::{Config, Store};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::time::Instant;

const CLOCK_MHZ: f64 = 200.0;

fn key(i: u64) -> Vec<u8> {
    format!("user{:012}", i.wrapping_mul(0x9e37_79b9) % 1_000_000_007).into_bytes()
}

fn main() {
    let records: u64 = std::env::args()
        .nth(1)
        .map_or(200_000, |a| a.parse().expect("records"));
    let node_size = 8192;
    let store = Store::bulk_load(
        Config {
            node_size,
            ..Config::default()
        },
        {
            let mut items: Vec<(Vec<u8>, Vec<u8>)> =
                (0..records).map(|i| (key(i), vec![b'v'; 100])).collect();
            items.sort();
            items
        },
    )
    .expect("bulk load");
    let raw = store.raw();
    let slot = raw.reader_slot();
    slot.enter();
    let rv = store.read_version();
    let mut rng = SmallRng::seed_from_u64(7);
    let keys: Vec<Vec<u8>> = (0..4000).map(|_| key(rng.gen_range(0..records))).collect();
    let lookups = Lookup::each(&keys, rv, 0);
    println!(
        "{records} records, {node_size}-byte nodes, {} lookups per run, clock {CLOCK_MHZ} MHz, \
         64 request slots, memory 64 B/cycle",
        lookups.len()
    );
    println!();
    println!("| latency | units | lookups / 1000 cycles | Mops/s at 200 MHz | memory bus busy | cache hits | node KiB / lookup |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut sim_cycles = 0u64;
    let t = Instant::now();
    for ns in [0u64, 100, 300, 1000] {
        let latency = (ns as f64 * CLOCK_MHZ / 1000.0) as u64;
        for ksus in [1usize, 2, 4, 8, 16, 32] {
            let mut sim = WalkSim::new(WalkConfig {
                slots: 64,
                ksus,
                latency,
                jitter: 0,
                root: accelkv_tree::ROOT_LID,
            });
            // SAFETY: `slot` holds an epoch published before `rv`; the store does not evict.
            let mut mem = unsafe { StoreMemory::new(raw) };
            let s = sim.run(&mut mem, &lookups, |_| {}).expect("finishes");
            sim_cycles += s.cycles;
            let n = lookups.len() as f64;
            let visits = (s.node_reads + s.cache_hits) as f64;
            println!(
                "| {ns} ns | {ksus} | {:.2} | {:.2} | {:.0}% | {:.0}% | {:.1} |",
                n * 1000.0 / s.cycles as f64,
                n / s.cycles as f64 * CLOCK_MHZ,
                100.0 * s.beats as f64 / s.cycles as f64,
                100.0 * s.cache_hits as f64 / visits,
                mem.node_bytes as f64 / n / 1024.0,
            );
        }
    }
    eprintln!(
        "simulated {sim_cycles} cycles in {:.1} s ({:.0} K cycles/s)",
        t.elapsed().as_secs_f64(),
        sim_cycles as f64 / t.elapsed().as_secs_f64() / 1000.0
    );
    slot.clear();
}

//! The page-table change stream (remap.rs): a subscriber's table copy plus the remaps it
//! drains equal the tree's page table, while writers split and merge nodes concurrently, and
//! every chunk is announced before a remap points into it.

use accelkv_tree::{Chunk, Config, Remap, Store};
use std::sync::Arc;

fn cfg() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 16,
        // A short log, so deletes restructure leaves often (a leaf is merged with a
        // sibling when a restructure finds it small).
        log_threshold: 256,
        ..Config::default()
    }
}

#[test]
fn copy_plus_remaps_track_the_page_table_under_concurrent_writers() {
    let store = Arc::new(
        Store::bulk_load(cfg(), (0..2000u32).map(|i| (i.to_be_bytes(), [7u8; 40]))).unwrap(),
    );
    let sub = store.raw().subscribe_remaps();
    let mut table = sub.table.clone();
    let mut chunks: Vec<Chunk> = Vec::new();
    let writers: Vec<_> = (0..2u32)
        .map(|t| {
            let s = store.clone();
            std::thread::spawn(move || {
                // Inserts split leaves; then deleting most keys merges them (removing LIDs).
                // The deletes go from the top down: a leaf merges with its right neighbour,
                // which is then already emptied (bottom up, a leaf shrinks while its
                // neighbour is still full, and whether any merge happens is up to timing).
                for i in 0..6000u32 {
                    let k = (i * 7 + t).wrapping_mul(2654435761) % 9000;
                    s.put(&k.to_be_bytes(), &[t as u8; 60]).unwrap();
                }
                for k in (t..9000).step_by(2).rev() {
                    if k % 10 != 0 {
                        s.delete(&k.to_be_bytes()).unwrap();
                    }
                }
            })
        })
        .collect();
    let mut remaps: Vec<Remap> = Vec::new();
    let mut last_version = 0;
    let mut applied = 0;
    let mut removed = 0;
    let chunk = store.raw().chunk_size() as u64;
    while !writers.iter().all(|w| w.is_finished()) {
        sub.feed.drain_remaps(&mut remaps);
        sub.feed.drain_chunks(&mut chunks);
        for r in remaps.drain(..) {
            assert!(r.version >= last_version, "remaps arrive in version order");
            last_version = r.version;
            if r.off == u64::MAX {
                removed += 1;
            }
            assert!(
                r.off == u64::MAX || chunks.iter().any(|c| c.index as u64 == r.off / chunk),
                "remap into chunk {} before it was announced",
                r.off / chunk
            );
            if table.len() <= r.lid as usize {
                table.resize(r.lid as usize + 1, u64::MAX);
            }
            table[r.lid as usize] = r.off;
            applied += 1;
        }
    }
    for w in writers {
        w.join().unwrap();
    }
    sub.feed.drain_remaps(&mut remaps);
    for r in remaps.drain(..) {
        if table.len() <= r.lid as usize {
            table.resize(r.lid as usize + 1, u64::MAX);
        }
        table[r.lid as usize] = r.off;
        applied += 1;
        removed += usize::from(r.off == u64::MAX);
    }
    assert!(
        applied > 100,
        "the workload split and merged nodes ({applied} remaps)"
    );
    assert!(removed > 0, "merges removed LIDs");
    let raw = store.raw();
    let mut mapped = 0;
    // Every LID the copy maps is mapped the same in the tree. (A removed LID keeps its
    // entry in the tree until reclamation frees it; the copy has it unmapped at once.)
    for (lid, &off) in table.iter().enumerate() {
        if off != u64::MAX {
            assert_eq!(off, raw.page(lid as u64).unwrap(), "LID {lid}");
            mapped += 1;
        }
    }
    // The copy maps exactly the live nodes.
    let stats = store.stats();
    assert_eq!(mapped, stats.leaves + stats.interiors);
}

#[test]
fn dropped_subscription_is_pruned() {
    let store = Store::new(cfg()).unwrap();
    let sub = store.raw().subscribe_remaps();
    drop(sub);
    for i in 0..3000u32 {
        store.put(&i.to_be_bytes(), &[1; 50]).unwrap();
    }
    assert_eq!(store.len(), 3000);
}

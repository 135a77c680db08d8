//! `Store::clear` (FLUSHALL): one write for the whole keyspace. Snapshots from before keep
//! every old item, later readers see none, writes racing it are ordered with it by their
//! versions, and the old tree's memory is reclaimed.

use accelkv_tree::{Config, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn small() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

#[test]
fn clear_removes_everything_at_one_version() {
    let s = Store::new(small()).unwrap();
    let big = vec![9u8; 3000];
    for i in 0..20_000u32 {
        let k = format!("k{i:06}");
        let v: &[u8] = if i % 25 == 0 { &big } else { k.as_bytes() };
        let d = if i % 3 == 0 { 32_503_680_000_000 } else { 0 };
        s.put_expiring(k.as_bytes(), v, d).unwrap();
    }
    let before = s.memory_used();
    let snap = s.snapshot();
    let (w, removed) = s.clear().unwrap();
    assert_eq!(removed, 20_000);
    assert!(w.existed && w.version > snap.version());
    assert_eq!((s.len(), s.expiring_len()), (0, 0));
    assert_eq!(s.get(b"k000001").unwrap(), None);
    assert!(s.scan(b"", None, 10).is_empty());
    // The snapshot from before still reads the whole old tree, large values included.
    assert_eq!(snap.scan(b"", None, usize::MAX).len(), 20_000);
    assert_eq!(snap.get(b"k000025").unwrap(), Some(big.clone()));
    drop(snap);
    // The store works as new, and the old tree's memory is given back.
    for i in 0..100u32 {
        s.put(format!("n{i}").as_bytes(), b"v").unwrap();
    }
    assert_eq!(s.len(), 100);
    assert_eq!(s.scan(b"", None, usize::MAX).len(), 100);
    assert!(
        s.memory_used() < before / 4,
        "{} bytes still used of {before}",
        s.memory_used()
    );
    assert_eq!(s.clear().unwrap().1, 100);
    assert_eq!(s.clear().unwrap().1, 0);
}

/// Writers insert unique keys while the store is cleared and scanned: a write whose
/// version is below the clear's is gone afterwards, one above it is there; every snapshot
/// sees all of the preloaded keys or none of them.
#[test]
fn clear_is_linearizable_with_writes_and_snapshots() {
    let s = Arc::new(Store::new(small()).unwrap());
    for i in 0..5_000u32 {
        s.put(format!("p{i:05}").as_bytes(), b"x").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let (s, stop) = (s.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut written = Vec::new();
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("w{t}-{i:07}");
                    written.push((k.clone(), s.put(k.as_bytes(), b"y").unwrap().version));
                    i += 1;
                }
                written
            })
        })
        .collect();
    let reader = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let snap = s.snapshot();
                match snap.scan(b"p", Some(b"q"), usize::MAX).len() {
                    5_000 => seen.0 += 1,
                    0 => seen.1 += 1,
                    n => panic!("a snapshot saw {n} of the 5000 cleared keys"),
                }
            }
            seen
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    let (w, _) = s.clear().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let mut checked = 0;
    for t in writers {
        for (k, v) in t.join().unwrap() {
            let present = s.get(k.as_bytes()).unwrap().is_some();
            assert_eq!(
                present,
                v > w.version,
                "{k} written at {v}, clear at {}",
                w.version
            );
            checked += 1;
        }
    }
    let (full, empty) = reader.join().unwrap();
    assert!(
        checked > 100 && full + empty > 2,
        "{checked} writes, {full}/{empty} scans"
    );
    assert_eq!(s.len(), s.scan(b"", None, usize::MAX).len());
}

//! Atomic batches (`Store::write_batch`): every item applies, readers at any instant see all
//! of a batch or none of it (snapshots, gets and scans, with structural changes and ordinary
//! writers running alongside), and `key_version` changes whenever a key does.

use accelkv_tree::{Config, Error, Store, MAX_BATCH};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

fn small_nodes() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

#[test]
fn a_batch_applies_every_item_in_order() {
    let s = Store::new(small_nodes()).unwrap();
    s.put(b"gone", b"x").unwrap();
    let b = s
        .write_batch(&[
            (b"a", Some(b"1")),
            (b"b", Some(b"2")),
            (b"a", Some(b"3")),
            (b"gone", None),
            (b"never", None),
            (b"", Some(b"bad key")),
        ])
        .unwrap();
    assert!(s.is_visible(b.version));
    assert_eq!(b.results.len(), 6);
    assert!(!b.results[0].as_ref().unwrap().existed);
    assert!(
        b.results[2].as_ref().unwrap().existed,
        "the batch sees its own writes"
    );
    assert!(b.results[3].as_ref().unwrap().existed);
    assert!(!b.results[4].as_ref().unwrap().existed);
    assert_eq!(b.results[5], Err(Error::EmptyKey), "a bad item fails alone");
    assert_eq!(s.get(b"a").unwrap(), Some(b"3".to_vec()));
    assert_eq!(s.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(s.get(b"gone").unwrap(), None);
    assert_eq!(s.len(), 2);
    let too_many: Vec<(&[u8], Option<&[u8]>)> = vec![(b"k", None); MAX_BATCH + 1];
    assert!(matches!(
        s.write_batch(&too_many),
        Err(Error::BatchTooLarge { .. })
    ));
}

#[test]
fn readers_never_see_part_of_a_batch() {
    // 300 keys over many small leaves; each batch sets all of them to one round number, so a
    // reader that sees two different numbers saw part of a batch. Ordinary writers on other
    // keys run alongside (their versions fall among the batch's) and force splits.
    const KEYS: usize = 300;
    const ROUNDS: usize = 60;
    let s = Arc::new(Store::new(small_nodes()).unwrap());
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| format!("k{i:05}").into_bytes()).collect();
    let init: Vec<(&[u8], Option<&[u8]>)> = keys
        .iter()
        .map(|k| (k.as_slice(), Some(&b"0000"[..])))
        .collect();
    s.write_batch(&init).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // Each reader counts its checks where the writer can see them: the rounds go on past
    // ROUNDS until both readers have checked while batches were landing (on two busy cores
    // a reader may not be scheduled at all during the first 60 rounds).
    let checks: Arc<[AtomicU64; 2]> = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let mut readers = Vec::new();
    for r in 0..2 {
        let (s, stop, keys, checks) = (s.clone(), stop.clone(), keys.clone(), checks.clone());
        readers.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if r == 0 {
                    let snap = s.snapshot();
                    let items = snap.scan(b"k", Some(b"l"), usize::MAX);
                    assert_eq!(items.len(), KEYS);
                    assert!(items.iter().all(|(_, v)| *v == items[0].1), "torn scan");
                } else {
                    let snap = s.snapshot();
                    let first = snap.get(&keys[0]).unwrap();
                    let last = snap.get(&keys[KEYS - 1]).unwrap();
                    assert_eq!(first, last, "torn snapshot");
                }
                checks[r].fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let writer = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let k = format!("w{:07}", i % 5000);
                s.put(k.as_bytes(), &[7u8; 100]).unwrap();
                i += 1;
            }
        })
    };
    let busy = |r: usize| checks[r].load(Ordering::SeqCst) >= 20;
    let mut round = 0;
    while round < ROUNDS || !(busy(0) && busy(1)) {
        round += 1;
        assert!(round < 1_000_000, "a reader never ran");
        let v = format!("{round:04}");
        let items: Vec<(&[u8], Option<&[u8]>)> = keys
            .iter()
            .map(|k| (k.as_slice(), Some(v.as_bytes())))
            .collect();
        let b = s.write_batch(&items).unwrap();
        assert!(b.results.iter().all(|r| r.as_ref().unwrap().existed));
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    for r in readers {
        r.join().unwrap();
    }
    let last = format!("{round:04}").into_bytes();
    assert!(s
        .scan(b"k", Some(b"l"), usize::MAX)
        .iter()
        .all(|(_, v)| *v == last));
}

#[test]
fn key_version_changes_whenever_the_key_does() {
    let s = Store::new(small_nodes()).unwrap();
    let v0 = s.key_version(b"key").unwrap();
    s.put(b"key", b"1").unwrap();
    let v1 = s.key_version(b"key").unwrap();
    assert!(v1 > v0);
    // An unrelated write in another leaf leaves it alone.
    for i in 0..2000u32 {
        s.put(format!("z{i:06}").as_bytes(), &[1u8; 50]).unwrap();
    }
    let v2 = s.key_version(b"key").unwrap();
    s.put(b"key", b"1").unwrap(); // same value: still a write
    let v3 = s.key_version(b"key").unwrap();
    assert!(v3 > v2);
    s.delete(b"key").unwrap();
    let v4 = s.key_version(b"key").unwrap();
    assert!(v4 > v3);
    // Many writes of the key force log merges (the key moves to the sorted block).
    let mut last = v4;
    for i in 0..500u32 {
        s.put(b"key", i.to_string().as_bytes()).unwrap();
        let v = s.key_version(b"key").unwrap();
        assert!(v > last, "write {i}: {v} <= {last}");
        last = v;
    }
    assert_eq!(s.key_version(b""), Err(Error::EmptyKey));
}

//! Writes that start at the leaf an earlier interleaved descent found
//! (`Store::locate_writes`, `Store::put_item_hinted`): they land exactly where writes
//! without hints land, even when the tree changed since the hints were found — leaves split
//! by other writes, merged away by deletes, the whole tree cleared — because a write checks
//! that its leaf and the leaf's parent are still current before it appends.

use accelkv_tree::{Config, Store, WriteHint};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn small() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{:06}", i.wrapping_mul(7919) % 100_000).into_bytes()
}

fn check(s: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(
            s.get(k).unwrap().as_ref(),
            Some(v),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let all = s.scan(b"", None, usize::MAX);
    assert_eq!(all.len(), model.len());
    assert_eq!(s.len(), model.len());
}

#[test]
fn hinted_writes_land_where_unhinted_ones_do() {
    let s = Store::new(small()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..5_000 {
        s.put(&key(i), b"v0").unwrap();
        model.insert(key(i), b"v0".to_vec());
    }
    for round in 0..20u32 {
        let keys: Vec<Vec<u8>> = (0..40).map(|j| key(round * 997 + j * 131)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let pin = s.pin();
        let mut hints: Vec<Option<WriteHint>> = vec![None; refs.len()];
        s.locate_writes(&pin, &refs, &mut hints);
        assert!(hints.iter().all(Option::is_some), "every key located");
        let v = format!("r{round}").into_bytes();
        for (k, h) in refs.iter().zip(&hints) {
            s.put_item_hinted(k, &v, 0, 0, *h).unwrap();
            model.insert(k.to_vec(), v.clone());
        }
        drop(pin);
    }
    check(&s, &model);
}

/// Hints found, then the tree restructured under them (splits from inserts between the
/// hinted keys, merges from deletes, a clear), then the writes made with the stale hints.
#[test]
fn stale_hints_are_caught_and_the_write_descends() {
    for change in ["split", "merge", "clear"] {
        let s = Store::new(small()).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..3_000 {
            s.put(&key(i), b"v0").unwrap();
            model.insert(key(i), b"v0".to_vec());
        }
        let keys: Vec<Vec<u8>> = (0..64).map(|j| key(j * 41)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let pin = s.pin();
        let mut hints: Vec<Option<WriteHint>> = vec![None; refs.len()];
        s.locate_writes(&pin, &refs, &mut hints);
        match change {
            "split" => {
                for i in 3_000..9_000 {
                    s.put(&key(i), b"new").unwrap();
                    model.insert(key(i), b"new".to_vec());
                }
            }
            "merge" => {
                for i in 64 * 41..3_000 {
                    s.delete(&key(i)).unwrap();
                    model.remove(&key(i));
                }
            }
            _ => {
                s.clear().unwrap();
                model.clear();
            }
        }
        for (k, h) in refs.iter().zip(&hints) {
            s.put_item_hinted(k, b"hinted", 0, 0, *h).unwrap();
            model.insert(k.to_vec(), b"hinted".to_vec());
        }
        drop(pin);
        check(&s, &model);
    }
}

/// Writers with hints and writers without race on the same keys while a third thread
/// splits and merges the leaves under them: every key ends with its last writer's value
/// and the store holds exactly the keys written.
#[test]
fn hinted_writers_race_restructuring() {
    let s = Arc::new(Store::new(small()).unwrap());
    for i in 0..2_000 {
        s.put(&key(i), b"base").unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("z{:06}", n % 20_000).into_bytes();
                if (n / 20_000).is_multiple_of(2) {
                    s.put(&k, b"churn").unwrap();
                } else {
                    s.delete(&k).unwrap();
                }
                n += 1;
            }
        })
    };
    let writers: Vec<_> = (0..2u32)
        .map(|t| {
            let s = s.clone();
            std::thread::spawn(move || {
                for round in 0..300u32 {
                    let keys: Vec<Vec<u8>> = (0..16)
                        .map(|j| format!("w{t}-{:04}", (round * 16 + j) % 500).into_bytes())
                        .collect();
                    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                    let pin = s.pin();
                    let mut hints: Vec<Option<WriteHint>> = vec![None; refs.len()];
                    s.locate_writes(&pin, &refs, &mut hints);
                    std::thread::yield_now();
                    let v = round.to_le_bytes();
                    for (k, h) in refs.iter().zip(&hints) {
                        let hint = if round % 3 == 0 { None } else { *h };
                        s.put_item_hinted(k, &v, 0, 0, hint).unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
    for t in 0..2u32 {
        for i in 0..500u32 {
            let k = format!("w{t}-{i:04}").into_bytes();
            // Key i was last written in the last round that covered it.
            let last = (0..300u32)
                .rev()
                .find(|r| (r * 16..r * 16 + 16).any(|x| x % 500 == i))
                .unwrap();
            assert_eq!(
                s.get(&k).unwrap(),
                Some(last.to_le_bytes().to_vec()),
                "{t}/{i}"
            );
        }
    }
    assert_eq!(s.len(), s.scan(b"", None, usize::MAX).len());
}

//! Recovery against a model, previous versions behind damaged pages, corruption and
//! truncation of a real page file, and disk errors (full disk, I/O error).

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::{Error, Options, Store, SyncPolicy};
mod common;

use common::test_options;
use proptest::prelude::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

fn opts(sync: SyncPolicy) -> Options {
    test_options(sync)
}

fn dump(s: &Store) -> BTreeMap<Vec<u8>, Vec<u8>> {
    s.scan(b"", None, usize::MAX).into_iter().collect()
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-durable-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// Random puts and deletes, with reopens in between (clean close), equal a BTreeMap.
    #[test]
    fn reopened_store_equals_a_model(
        steps in prop::collection::vec((0u16..300, 0usize..3000, 0u8..10), 1..400),
        policy in prop_oneof![Just(SyncPolicy::Sync), Just(SyncPolicy::None),
            Just(SyncPolicy::Interval(std::time::Duration::from_millis(2)))],
    ) {
        let dev = Arc::new(FaultStorage::new());
        let mut model = BTreeMap::new();
        let mut s = Store::open_storage(dev.clone(), opts(policy)).unwrap();
        for (i, (k, len, what)) in steps.into_iter().enumerate() {
            let key = format!("k{k:04}").into_bytes();
            match what {
                0..=1 => {
                    let _ = s.delete(&key);
                    model.remove(&key);
                }
                9 => {
                    drop(s);
                    s = Store::open_storage(dev.clone(), opts(policy)).unwrap();
                    prop_assert_eq!(&dump(&s), &model, "after reopen at step {}", i);
                }
                _ => {
                    let v = vec![(i % 251) as u8; len];
                    s.put(&key, &v).unwrap();
                    model.insert(key, v);
                }
            }
        }
        drop(s);
        let s = Store::open_storage(dev, opts(policy)).unwrap();
        prop_assert_eq!(dump(&s), model);
    }
}

/// Deadlines are durable with their values (inline and in extension pages), survive
/// reopening, and items expired by the time of recovery are not loaded.
#[test]
fn deadlines_survive_reopening_and_expired_items_are_dropped() {
    let dev = Arc::new(FaultStorage::new());
    let later = 32_503_680_000_000; // year 3000
                                    // Far enough ahead that every 'soon' item is committed before it expires, even in a
                                    // debug build on a loaded machine (300 ms was not, now and then).
    let soon = accelkv_tree::now_ms() + 2_000;
    let s = Store::open_storage(dev.clone(), opts(SyncPolicy::Sync)).unwrap();
    for i in 0..2000u32 {
        let k = format!("k{i:05}").into_bytes();
        let v = vec![b'v'; if i % 50 == 0 { 3000 } else { 20 }];
        let d = match i % 4 {
            0 => 0,
            1 => later + u64::from(i),
            2 => 1_000, // long expired: never visible, never loaded
            _ => soon,
        };
        s.put_expiring(&k, &v, d).unwrap();
    }
    drop(s);
    while accelkv_tree::now_ms() <= soon {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let s = Store::open_storage(dev, opts(SyncPolicy::Sync)).unwrap();
    assert_eq!(s.recovery().items, 1000);
    assert_eq!(
        s.recovery().expired,
        500,
        "the 'soon' items; long-expired ones were never committed"
    );
    for i in 0..2000u32 {
        let k = format!("k{i:05}").into_bytes();
        let got = s.get_entry(&k).unwrap();
        match i % 4 {
            0 => assert_eq!(got.map(|x| x.1), Some(0)),
            1 => {
                let (v, d) = got.unwrap();
                assert_eq!(d, later + u64::from(i));
                assert_eq!(v.len(), if i % 50 == 0 { 3000 } else { 20 });
            }
            _ => assert_eq!(got, None, "key {i}"),
        }
    }
}

/// A clear (FLUSHALL) is durable as one write: reopened right after it, the store is
/// empty; with writes after it, exactly those; and the old state's pages are freed.
#[test]
fn clear_is_durable_and_replaces_every_page() {
    for policy in [SyncPolicy::Sync, SyncPolicy::None] {
        let dev = Arc::new(FaultStorage::new());
        let s = Store::open_storage(dev.clone(), opts(policy)).unwrap();
        for i in 0..5000u32 {
            let v = vec![b'v'; if i % 40 == 0 { 4000 } else { 30 }];
            s.put(format!("k{i:05}").as_bytes(), &v).unwrap();
        }
        s.flush().unwrap();
        let pages = s.stats().live_pages;
        s.clear().unwrap();
        s.flush().unwrap();
        drop(s);
        let s = Store::open_storage(dev.clone(), opts(policy)).unwrap();
        assert_eq!(dump(&s).len(), 0, "{policy:?}: not empty after a clear");
        assert!(
            s.stats().live_pages < pages,
            "{policy:?}: old pages still live"
        );
        for i in 0..300u32 {
            s.put(format!("a{i:04}").as_bytes(), b"after").unwrap();
        }
        s.put(b"zzz", b"last").unwrap();
        s.flush().unwrap();
        drop(s);
        let s = Store::open_storage(dev, opts(policy)).unwrap();
        let d = dump(&s);
        assert_eq!(d.len(), 301, "{policy:?}");
        assert!(d.keys().all(|k| k.starts_with(b"a") || k == b"zzz"));
    }
}

/// A damaged newest page gives the previous version of its range, not an error.
#[test]
fn damaged_newest_page_falls_back_to_the_previous_version() {
    let dev = Arc::new(FaultStorage::new());
    let s = Store::open_storage(dev.clone(), opts(SyncPolicy::Sync)).unwrap();
    s.put(b"a", b"one").unwrap();
    let before = dev.durable_image();
    s.put(b"a", b"two").unwrap();
    // Before the close, which would fold the second commit's entry into a whole image.
    let mut img = dev.durable_image();
    drop(s);
    // The byte ranges the second commit changed hold its leaf page: damage them.
    let changed: Vec<usize> = (0..img.len())
        .filter(|&i| before.get(i).copied().unwrap_or(0) != img[i])
        .collect();
    assert!(!changed.is_empty());
    img[changed[changed.len() / 2]] ^= 0x40;
    let r = Store::open_storage(
        Arc::new(FaultStorage::from_image(img)),
        opts(SyncPolicy::Sync),
    )
    .unwrap();
    assert_eq!(r.get(b"a").unwrap(), Some(b"one".to_vec()));
    assert_eq!(r.recovery().torn_pages, 1, "{}", r.recovery());
}

/// Flipped bytes and truncation of a real page file: recovery succeeds with a subset of
/// versions or fails with an error, never panics; a file cut inside a slab keeps the pages
/// before the cut.
#[test]
fn corrupted_and_truncated_files_never_panic() {
    let dir = tempdir("corrupt");
    let mut model = BTreeMap::new();
    {
        let s = Store::open_with(&dir, opts(SyncPolicy::Sync)).unwrap();
        for i in 0..3000u32 {
            let k = format!("key{:05}", i * 7919 % 3000).into_bytes();
            let v = vec![i as u8; if i % 50 == 0 { 2000 } else { 40 }];
            s.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    let file = dir.join(accelkv_durable::PAGE_FILE);
    let clean = std::fs::read(&file).unwrap();
    {
        let s = Store::open_with(&dir, opts(SyncPolicy::Sync)).unwrap();
        assert_eq!(dump(&s), model);
        assert_eq!(s.recovery().torn_pages, 0);
    }
    let mut rng = SmallRng::seed_from_u64(5);
    for round in 0..40 {
        let mut bytes = clean.clone();
        if round % 4 == 3 {
            bytes.truncate(rng.gen_range(0..clean.len()));
        } else {
            for _ in 0..rng.gen_range(1..20) {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] ^= rng.gen_range(1..=255u8);
            }
        }
        std::fs::write(&file, &bytes).unwrap();
        match Store::open_with(&dir, opts(SyncPolicy::Sync)) {
            Ok(s) => {
                // Whatever came back is made of values the workload wrote, whole.
                for (k, v) in dump(&s) {
                    assert!(model.contains_key(&k), "round {round}: unknown key");
                    assert!(v.iter().all(|b| *b == v[0]), "round {round}: mixed value");
                }
            }
            Err(e) => assert!(
                matches!(e, Error::Corrupt(_)),
                "round {round}: unexpected error {e}"
            ),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A full disk fails the writes it affects with a clear error, refuses later writes while
/// it lasts, keeps the store readable, loses nothing acknowledged, and recovers by itself.
#[test]
fn disk_errors_fail_writes_and_lose_nothing_acknowledged() {
    let dev = Arc::new(FaultStorage::new());
    let s = Store::open_storage(dev.clone(), opts(SyncPolicy::Sync)).unwrap();
    for i in 0..100u32 {
        s.put(format!("k{i:03}").as_bytes(), b"before").unwrap();
    }
    dev.set_error(Some(libc::ENOSPC));
    let e = s.put(b"k000", b"during").unwrap_err();
    assert!(
        matches!(&e, Error::Disk(m) if m.contains("No space left")),
        "{e}"
    );
    // Refused before it touches the store, with the same clear error.
    let e = s.put(b"k001", b"refused").unwrap_err();
    assert!(matches!(e, Error::Disk(_)));
    assert_eq!(s.get(b"k001").unwrap(), Some(b"before".to_vec()));
    assert!(s.stats().failed.is_some());
    dev.set_error(Some(libc::EIO));
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert!(s.put(b"k002", b"refused").is_err());
    // The device comes back: the committer's retry succeeds and writes flow again.
    dev.set_error(None);
    let t = std::time::Instant::now();
    while s.put(b"k003", b"after").is_err() {
        assert!(
            t.elapsed().as_secs() < 10,
            "the store did not recover from the disk error"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(s.stats().failed.is_none());
    drop(s);
    let r = Store::open_storage(
        Arc::new(FaultStorage::from_image(dev.durable_image())),
        opts(SyncPolicy::Sync),
    )
    .unwrap();
    assert_eq!(r.get(b"k003").unwrap(), Some(b"after".to_vec()));
    assert_eq!(r.get(b"k001").unwrap(), Some(b"before".to_vec()));
    // The failed write's outcome was unknown; after the retry it is durable.
    assert_eq!(r.get(b"k000").unwrap(), Some(b"during".to_vec()));
    for i in 4..100u32 {
        assert_eq!(
            r.get(format!("k{i:03}").as_bytes()).unwrap(),
            Some(b"before".to_vec())
        );
    }
}

/// A second open of a data directory in use is refused.
#[test]
fn a_data_directory_opens_once() {
    let dir = tempdir("lock");
    let s = Store::open(&dir).unwrap();
    assert!(matches!(Store::open(&dir), Err(Error::Locked(_))));
    drop(s);
    drop(Store::open(&dir).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Slots of shadowed pages are reused: rewriting the same keys does not grow the file.
#[test]
fn rewrites_reuse_slots() {
    let dir = tempdir("reuse");
    let s = Store::open_with(&dir, opts(SyncPolicy::Sync)).unwrap();
    let round = |tag: u8| {
        for i in 0..2000u32 {
            s.put(format!("k{i:05}").as_bytes(), &[tag; 60]).unwrap();
        }
    };
    round(1);
    round(2);
    let len = std::fs::metadata(dir.join(accelkv_durable::PAGE_FILE))
        .unwrap()
        .len();
    for t in 3..8 {
        round(t);
    }
    let after = std::fs::metadata(dir.join(accelkv_durable::PAGE_FILE))
        .unwrap()
        .len();
    assert!(after <= len, "file grew from {len} to {after}");
    drop(s);
    let r = Store::open_with(&dir, opts(SyncPolicy::Sync)).unwrap();
    assert_eq!(r.get(b"k01999").unwrap(), Some(vec![7; 60]));
    drop(r);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Rewrites a page file image as format 1 wrote it: superblock version 1, no commit numbers
/// in the page headers.
fn as_format_1(mut img: Vec<u8>) -> Vec<u8> {
    use accelkv_durable::format::{
        decode_header, decode_page, decode_slab, decode_super, encode_ext, encode_leaf, CommitTag,
        Page, BLOCK,
    };
    let slab = decode_super(&img[..BLOCK as usize]).unwrap().slab_size;
    img[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&img[0..24]);
    img[24..28].copy_from_slice(&crc.to_le_bytes());
    let mut base = BLOCK;
    while base < img.len() as u64 {
        let b = base as usize;
        let end = (b + slab as usize).min(img.len());
        if let Ok(d) = decode_slab(&img[b..end]) {
            // (A real format-1 file has no slots below 4 KiB; upgrade.rs opens one.)
            let size = accelkv_durable::format::slot_bytes(d.class).unwrap() as usize;
            let mut off = b + BLOCK as usize;
            while off + size <= end {
                if decode_header(&img[off..]).is_ok() {
                    let bytes = match decode_page(&img[off..off + size], off as u64) {
                        Ok(Page::Leaf(mut p)) => {
                            p.commit = CommitTag::default();
                            encode_leaf(&p, off as u64)
                        }
                        Ok(Page::Ext(mut p)) => {
                            p.commit = CommitTag::default();
                            encode_ext(&p, off as u64)
                        }
                        // Format 1 had no clock pages: an empty slot.
                        Ok(Page::Clock(_)) => vec![0; accelkv_durable::format::HEADER],
                        Ok(Page::Delta(_)) => panic!("format 1 had no delta pages"),
                        Err(_) => Vec::new(),
                    };
                    img[off..off + bytes.len()].copy_from_slice(&bytes);
                }
                off += size;
            }
        }
        base += slab;
    }
    img
}

/// A page file written by format 1 (no commit numbers) opens with everything in it, is
/// upgraded to format 2, and takes new writes that survive a reopen.
#[test]
fn format_1_files_are_read_and_upgraded() {
    let dev = Arc::new(FaultStorage::new());
    let mut model = BTreeMap::new();
    {
        // Whole images only: format 1 had no delta pages.
        let whole = accelkv_durable::Options {
            deltas: accelkv_durable::Deltas::OFF,
            ..opts(SyncPolicy::Sync)
        };
        let s = Store::open_storage(dev.clone(), whole).unwrap();
        for i in 0..800u32 {
            let k = format!("key{:04}", i * 37 % 800).into_bytes();
            let v = vec![i as u8; if i % 9 == 0 { 3000 } else { 30 }];
            s.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    let old = Arc::new(FaultStorage::from_image(as_format_1(dev.durable_image())));
    {
        let s = Store::open_storage(old.clone(), opts(SyncPolicy::Sync)).unwrap();
        assert_eq!(dump(&s), model);
        assert_eq!(s.recovery().commit, 0, "{}", s.recovery());
        let sup = accelkv_durable::format::decode_super(&old.durable_image()[..4096]).unwrap();
        assert_eq!(sup.version, accelkv_durable::format::FORMAT_VERSION);
        for i in 0..100u32 {
            let k = format!("key{:04}", i * 3).into_bytes();
            s.put(&k, b"new").unwrap();
            model.insert(k, b"new".to_vec());
        }
    }
    let s = Store::open_storage(
        Arc::new(FaultStorage::from_image(old.durable_image())),
        opts(SyncPolicy::Sync),
    )
    .unwrap();
    assert_eq!(dump(&s), model);
    assert!(s.recovery().commit > 0, "{}", s.recovery());
}

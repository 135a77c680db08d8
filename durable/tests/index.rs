//! The index of a clean close (issue 57, item 3): an open after a clean close reads the
//! index instead of scanning the page file and recovers exactly what the scan recovers;
//! every state a crash can leave in the close sequence (no record, a record without its
//! index, a damaged or cut index, an index left from an earlier close) recovers by the
//! scan; and an index is never used once the store wrote a page after opening.

mod common;

use accelkv_durable::index::{CLOSE_AT, CLOSE_LEN};
use accelkv_durable::{Options, Store, SyncPolicy, INDEX_FILE, PAGE_FILE};
use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d =
            std::env::temp_dir().join(format!("accelkv-index-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        TempDir(d)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// What a crash or damage does to a copy of a data directory.
type Damage = Box<dyn Fn(&Path)>;

fn key(i: u32) -> Vec<u8> {
    format!("k{:08x}", i.wrapping_mul(0x9E37_79B9)).into_bytes()
}

/// Writes of every shape: small values, values for extension pages, values in delta
/// entries, deletes; `round` makes each round's values its own.
fn write(s: &Store, model: &mut Model, round: u32, n: u32) {
    for i in 0..n {
        let k = key(i * 7 % 5000);
        if i % 11 == 5 {
            s.delete(&k).unwrap();
            model.remove(&k);
            continue;
        }
        let len = match i % 9 {
            0 => 3000,
            1 => 9000,
            _ => 20,
        };
        let mut v = format!("{round}:{i}:").into_bytes();
        v.resize(len, b'a' + (i % 26) as u8);
        s.put(&k, &v).unwrap();
        model.insert(k, v);
        if i % 500 == 499 {
            s.flush().unwrap();
        }
    }
}

fn contents(s: &Store) -> Model {
    s.tree()
        .try_scan(b"", None, usize::MAX)
        .unwrap()
        .into_iter()
        .collect()
}

fn options(budget: Option<usize>) -> Options {
    let mut o = common::test_options(SyncPolicy::Interval(std::time::Duration::from_millis(2)));
    if let Some(leaves) = budget {
        o.config.evict = true;
        o.config.memory_limit = leaves * o.config.node_size;
    }
    o
}

/// A copy of the data directory `from` (the page file and the index, if any).
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for f in [PAGE_FILE, INDEX_FILE] {
        if from.join(f).exists() {
            std::fs::copy(from.join(f), to.join(f)).unwrap();
        }
    }
}

fn close_record(dir: &Path) -> Vec<u8> {
    let f = std::fs::File::open(dir.join(PAGE_FILE)).unwrap();
    let mut b = vec![0u8; CLOSE_LEN];
    f.read_exact_at(&mut b, CLOSE_AT).unwrap();
    b
}

fn set_close_record(dir: &Path, b: &[u8]) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(PAGE_FILE))
        .unwrap();
    f.write_all_at(b, CLOSE_AT).unwrap();
}

/// Opens `dir` and checks it holds `model`; returns whether the open used the index.
fn reopen_check(dir: &Path, opts: &Options, model: &Model, what: &str) -> bool {
    let s = Store::open_with(dir, opts.clone()).unwrap();
    let rep = s.recovery().clone();
    assert!(contents(&s) == *model, "{what}: contents differ ({rep})");
    assert_eq!(s.tree().len(), model.len(), "{what}: count ({rep})");
    rep.from_index
}

#[test]
fn a_clean_close_reopens_from_the_index_as_the_scan_would() {
    for budget in [None, Some(16)] {
        let dir = TempDir::new("clean");
        let opts = options(budget);
        let mut model = Model::new();
        for round in 0..3 {
            {
                let s = Store::open_with(&dir.0, opts.clone()).unwrap();
                assert!(contents(&s) == model, "round {round}: {}", s.recovery());
                assert_eq!(s.recovery().from_index, round > 0, "{}", s.recovery());
                if round > 0 && budget.is_some() {
                    assert!(s.recovery().evicted_leaves > 0, "{}", s.recovery());
                }
                assert!(
                    !dir.0.join(INDEX_FILE).exists(),
                    "an open removes the index it read"
                );
                write(&s, &mut model, round, 4000);
            }
            assert!(dir.0.join(INDEX_FILE).exists(), "a clean close writes one");
            // The same state from the scan: a copy without the close record.
            let scan = TempDir::new("scan");
            copy_dir(&dir.0, &scan.0);
            set_close_record(&scan.0, &[0u8; CLOSE_LEN]);
            let used = reopen_check(&scan.0, &opts, &model, "scan");
            assert!(!used, "no close record, no index");
        }
        let s = Store::open_with(&dir.0, opts.clone()).unwrap();
        let rep = s.recovery().clone();
        assert!(rep.from_index, "{rep}");
        // A clean close folds every delta entry into a whole image: the open reads no
        // delta page.
        assert_eq!((rep.delta_keys, rep.delta_pages), (0, 0), "{rep}");
        // Writes after an open from the index, then a clean close and a scan of it.
        let mut m2 = model.clone();
        write(&s, &mut m2, 9, 2000);
        drop(s);
        let scan = TempDir::new("scan2");
        copy_dir(&dir.0, &scan.0);
        set_close_record(&scan.0, &[0u8; CLOSE_LEN]);
        assert!(!reopen_check(&scan.0, &opts, &m2, "scan after writes"));
        assert!(reopen_check(&dir.0, &opts, &m2, "index after writes"));
    }
}

#[test]
fn every_state_the_close_sequence_can_leave_recovers_by_the_scan() {
    let dir = TempDir::new("steps");
    let opts = options(None);
    let mut model = Model::new();
    {
        let s = Store::open_with(&dir.0, opts.clone()).unwrap();
        write(&s, &mut model, 0, 3000);
    }
    let index = std::fs::read(dir.0.join(INDEX_FILE)).unwrap();
    let cases: Vec<(&str, Damage)> = vec![
        // A crash before the record was written (the index renamed or not).
        (
            "no close record",
            Box::new(|d| set_close_record(d, &[0u8; CLOSE_LEN])),
        ),
        (
            "the index still under its temporary name",
            Box::new(|d| {
                std::fs::rename(d.join(INDEX_FILE), d.join(format!("{INDEX_FILE}.tmp"))).unwrap()
            }),
        ),
        (
            "a torn close record",
            Box::new(|d| {
                let mut r = close_record(d);
                r[3] ^= 0x40;
                set_close_record(d, &r);
            }),
        ),
        // Damage the record's CRC does not cover.
        (
            "a cut index",
            Box::new(|d| {
                let b = std::fs::read(d.join(INDEX_FILE)).unwrap();
                std::fs::write(d.join(INDEX_FILE), &b[..b.len() / 2]).unwrap();
            }),
        ),
        (
            "a flipped byte in the index",
            Box::new(|d| {
                let mut b = std::fs::read(d.join(INDEX_FILE)).unwrap();
                let at = b.len() / 3;
                b[at] ^= 1;
                std::fs::write(d.join(INDEX_FILE), &b).unwrap();
            }),
        ),
    ];
    for (what, damage) in cases {
        let case = TempDir::new("case");
        copy_dir(&dir.0, &case.0);
        damage(&case.0);
        assert!(!reopen_check(&case.0, &opts, &model, what), "{what}");
        // That open's clean close wrote an index of its own, which the next open uses.
        assert!(
            reopen_check(&case.0, &opts, &model, what),
            "{what}, then closed"
        );
    }
    // The untouched directory opens from its index.
    assert!(reopen_check(&dir.0, &opts, &model, "clean"));
    // That open cleared the record and removed the index. A store that then writes and
    // crashes (a copy of its files while it runs) recovers by the scan, even with the old
    // index put back beside its page file: no record names it any more.
    let s = Store::open_with(&dir.0, opts.clone()).unwrap();
    let mut m2 = model.clone();
    write(&s, &mut m2, 1, 1500);
    s.flush().unwrap();
    let crash = TempDir::new("crash");
    copy_dir(&dir.0, &crash.0);
    drop(s);
    std::fs::write(crash.0.join(INDEX_FILE), &index).unwrap();
    assert!(!reopen_check(
        &crash.0,
        &opts,
        &m2,
        "old index after a crash"
    ));
}

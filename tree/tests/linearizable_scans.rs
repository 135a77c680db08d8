//! Linearizable scans (Honeycomb §3.4): one writer inserts keys in increasing order while
//! leaves and interior nodes split under it; scanners run concurrently.
//!
//! Checks, for every concurrent scan:
//! 1. (the issue's check) a scan that contains key i also contains every key below i whose
//!    insert was acknowledged before the scan began — here in its stronger form: the result
//!    is a prefix 0..m of the keys with m >= the number acknowledged before the scan began;
//! 2. (exact snapshot) a scan at read version rv returns exactly the keys whose write
//!    version is <= rv: with m keys returned, version(m-1) <= rv < version(m).
//!
//! With MVCC old-version pointers switched off (`Config::debug_no_old_versions`), check 2
//! fails: a reader at rv that reaches a leaf merged or split after rv has no older version
//! to go to and reads the newer one, so it returns keys written after its snapshot. The
//! test `exact_snapshot_check_fails_without_old_versions` below runs the same harness with
//! old versions off and asserts that the check catches it; a typical failure message is
//!
//! ```text
//! scan at rv 5 returned 6 keys, but key 5 has version 6 > rv
//! ```
//!
//! Check 1 alone does not catch it in this design: right-sibling links are immutable and a
//! split keeps the left half's LID, so a reader walking the latest leaves left to right
//! still sees a prefix. Check 2 is what MVCC adds: the scan is one snapshot.

use accelkv_tree::{Config, Store};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const N: u64 = 60_000;

fn key(i: u64) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

struct Shared {
    store: Store,
    acked: AtomicU64,
    versions: Vec<AtomicU64>,
    done: AtomicBool,
    /// Scans finished so far (both scanners).
    scans: AtomicU64,
}

/// The writer waits for one more scan every this many inserts, so scans overlap the splits
/// however the threads are scheduled (on a loaded 2-core machine the writer could finish
/// all its inserts before the scanners ran ten scans).
const PACE: u64 = N / 32;

/// (read version, keys returned) of each snapshot scan, checked once versions are known.
type Observed = Vec<(u64, u64)>;

fn harness(cfg: Config, deadline: Duration) -> Result<usize, String> {
    let sh = Arc::new(Shared {
        store: Store::new(cfg).map_err(|e| e.to_string())?,
        acked: AtomicU64::new(0),
        versions: (0..N).map(|_| AtomicU64::new(u64::MAX)).collect(),
        done: AtomicBool::new(false),
        scans: AtomicU64::new(0),
    });
    let writer = {
        let sh = sh.clone();
        std::thread::spawn(move || {
            let value = [7u8; 100];
            let paced = Instant::now();
            for i in 0..N {
                if i % PACE == 0 {
                    while sh.scans.load(Ordering::Acquire) < i / PACE
                        && paced.elapsed() < deadline / 2
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                let w = sh.store.put(&key(i), &value).expect("put");
                sh.versions[i as usize].store(w.version, Ordering::Release);
                sh.acked.store(i + 1, Ordering::Release);
            }
            sh.done.store(true, Ordering::Release);
        })
    };
    let scanners: Vec<_> = (0..2)
        .map(|s| {
            let sh = sh.clone();
            std::thread::spawn(move || -> Result<Observed, String> {
                let mut observed = Vec::new();
                let mut n = 0u64;
                while !sh.done.load(Ordering::Acquire) {
                    n += 1;
                    let acked = sh.acked.load(Ordering::Acquire);
                    // Alternate full scans and scans from a point in the middle.
                    let lo = if (n + s).is_multiple_of(2) { 0 } else { acked / 2 };
                    let snap = sh.store.snapshot();
                    let got = snap.scan(&key(lo), None, usize::MAX);
                    for (j, (k, _)) in got.iter().enumerate() {
                        if *k != key(lo + j as u64) {
                            return Err(format!(
                                "scan from {lo} is not a prefix: position {j} holds {:?}",
                                String::from_utf8_lossy(k)
                            ));
                        }
                    }
                    let m = lo + got.len() as u64;
                    if m < acked {
                        return Err(format!(
                            "scan returned keys {lo}..{m} but {acked} were acknowledged before it began"
                        ));
                    }
                    observed.push((snap.version(), m));
                    sh.scans.fetch_add(1, Ordering::Release);
                    // The plain (non-snapshot) scan must be a prefix as well.
                    let plain = sh.store.scan(&key(lo), None, usize::MAX);
                    if plain.iter().enumerate().any(|(j, (k, _))| *k != key(lo + j as u64)) {
                        return Err("plain scan is not a prefix".into());
                    }
                }
                Ok(observed)
            })
        })
        .collect();
    let start = Instant::now();
    while !sh.done.load(Ordering::Acquire) {
        if start.elapsed() > deadline {
            return Err("writer did not finish in time".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    writer.join().map_err(|_| "writer panicked")?;
    let mut scans = 0;
    for s in scanners {
        let observed = s.join().map_err(|_| "scanner panicked")??;
        for (rv, m) in observed {
            scans += 1;
            let version = |i: u64| sh.versions[i as usize].load(Ordering::Acquire);
            if m > 0 && version(m - 1) > rv {
                return Err(format!(
                    "scan at rv {rv} returned {m} keys, but key {} has version {} > rv",
                    m - 1,
                    version(m - 1)
                ));
            }
            if m < N && version(m) <= rv {
                return Err(format!(
                    "scan at rv {rv} missed key {m} with version {} <= rv",
                    version(m)
                ));
            }
        }
    }
    let s = sh.store.stats();
    if s.splits == 0 || s.root_splits == 0 {
        return Err(format!("no splits happened: {s:?}"));
    }
    Ok(scans)
}

fn small() -> Config {
    Config {
        node_size: 4096,
        chunk_size: 1 << 20,
        ..Config::default()
    }
}

#[test]
fn scans_are_linearizable_during_splits() {
    let scans = harness(small(), Duration::from_secs(120)).unwrap();
    assert!(scans > 10, "only {scans} scans ran");
}

#[test]
fn exact_snapshot_check_fails_without_old_versions() {
    let cfg = Config {
        debug_no_old_versions: true,
        ..small()
    };
    // The harness must report a violation; try a few times in case a run is too short to
    // catch a scan overlapping a node rebuild. Without old versions a reader can also follow
    // a child that is not published yet and fall off the page table (a scanner panic); that
    // run proves nothing about the checker, so it is retried, and only the checker's own
    // report (which names the versions) counts.
    let mut seen = Vec::new();
    for _ in 0..10 {
        match harness(cfg.clone(), Duration::from_secs(120)) {
            Err(msg) if msg.contains("version") => {
                eprintln!("caught as expected: {msg}");
                return;
            }
            Err(msg) => seen.push(msg),
            Ok(scans) => seen.push(format!("passed with {scans} scans")),
        }
    }
    panic!("with old versions off the snapshot check never failed: {seen:?}");
}

//! Splits end to end (docs/CLUSTER.md, "Splits"): a real etcd and three real server
//! processes with a small `--split-size`, so ranges split again and again while clients
//! write and scan, plus a `CLUSTER SPLIT` by hand and a follower killed with -9 and
//! restarted in the middle. The promise tried: no error reaches a client beyond redirects
//! (`-MOVED`, `-TRYAGAIN`, and `-CROSSSLOT` for a scan planned on a map a split changed
//! since), and no key is lost or duplicated: every cluster-wide scan (one RANGE per range,
//! merged in key order) holds each acknowledged key exactly once, and once the load stops
//! every replica holds exactly what the leaders hold. Needs `--features cluster` and etcd.

mod cluster_support;
mod common;

use accelkv_proto::resp::Value;
use cluster_support::client::{Client, Conn, Outcome};
use cluster_support::harness::Cluster;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The ranges as `CLUSTER RANGES` shows them: `(id, start, end)`, asked of the first of
/// `seeds` that answers.
fn ranges(seeds: &[SocketAddr]) -> Vec<(i64, Vec<u8>, Option<Vec<u8>>)> {
    let rs = seeds
        .iter()
        .find_map(|a| {
            let s = std::net::TcpStream::connect_timeout(a, Duration::from_millis(500)).ok()?;
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            match Conn::from_stream(s).try_call(&[b"CLUSTER", b"RANGES"]) {
                Some(Value::Array(Some(rs))) => Some(rs),
                _ => None,
            }
        })
        .expect("no node answered CLUSTER RANGES");
    rs.into_iter()
        .map(|r| match r {
            Value::Array(Some(f)) => match (&f[0], &f[1], &f[2]) {
                (Value::Integer(id), Value::Bulk(Some(s)), Value::Bulk(e)) => {
                    (*id, s.clone(), e.clone())
                }
                f => panic!("CLUSTER RANGES entry {f:?}"),
            },
            r => panic!("CLUSTER RANGES entry {r:?}"),
        })
        .collect()
}

/// Pages of `RANGE lo hi CURSOR` through `call` (a read), appended to `out`; `Err` with the
/// error a page answered.
fn scan_range(
    call: &mut dyn FnMut(&[&[u8]]) -> Option<Value>,
    lo: &[u8],
    hi: Option<&[u8]>,
    out: &mut Vec<Vec<u8>>,
) -> Result<(), String> {
    let hi = hi.unwrap_or(b"+");
    let mut from = lo.to_vec();
    loop {
        match call(&[b"RANGE", &from, hi, b"LIMIT", b"500", b"CURSOR"]) {
            Some(Value::Array(Some(mut page))) if page.len() == 2 => {
                let Value::Array(Some(items)) = page.pop().unwrap() else {
                    return Err("RANGE page without items".into());
                };
                for kv in items.chunks(2) {
                    match &kv[0] {
                        Value::Bulk(Some(k)) => out.push(k.clone()),
                        v => return Err(format!("RANGE item {v:?}")),
                    }
                }
                match page.pop().unwrap() {
                    Value::Bulk(Some(next)) => from = next,
                    Value::Bulk(None) => return Ok(()),
                    v => return Err(format!("RANGE cursor {v:?}")),
                }
            }
            Some(Value::Error(e)) => return Err(e),
            v => return Err(format!("RANGE answered {v:?}")),
        }
    }
}

/// A scan of every key, one RANGE per range of the map as it was read, merged in key
/// order; `None` if a split changed the map under it (`-CROSSSLOT`: plan it again).
fn cluster_scan(cl: &mut Client, seeds: &[SocketAddr]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for (_, lo, hi) in ranges(seeds) {
        let mut call = |args: &[&[u8]]| match cl.call(args, false, Duration::from_secs(20)) {
            Outcome::Done(v) => Some(v),
            Outcome::Unknown => None,
        };
        match scan_range(&mut call, &lo, hi.as_deref(), &mut out) {
            Ok(()) => {}
            Err(e) if e.starts_with("CROSSSLOT") => return None,
            Err(e) => panic!("a scan of [{lo:?}, {hi:?}) failed: {e}"),
        }
    }
    Some(out)
}

/// Checks a scan: strictly increasing (no key twice), every key acknowledged before it
/// began present, nothing that was never written.
fn check_scan(keys: &[Vec<u8>], acked_before: &BTreeSet<Vec<u8>>, tried: &BTreeSet<Vec<u8>>) {
    for w in keys.windows(2) {
        assert!(w[0] < w[1], "the scan repeats or misorders {:?}", w);
    }
    let got: BTreeSet<_> = keys.iter().cloned().collect();
    let lost: Vec<_> = acked_before.difference(&got).take(5).collect();
    assert!(
        lost.is_empty(),
        "acknowledged keys missing from a scan: {lost:?}"
    );
    let alien: Vec<_> = got.difference(tried).take(5).collect();
    assert!(alien.is_empty(), "keys nobody wrote: {alien:?}");
}

#[test]
fn ranges_split_under_load_and_no_key_is_lost_or_duplicated() {
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let mut c = Cluster::start_with(
        3,
        "split",
        &["--split-size", "48k", "--raft-snapshot-every", "300"],
    );
    let seeds = c.seeds();
    let acked = Arc::new(Mutex::new(BTreeSet::<Vec<u8>>::new()));
    let tried = Arc::new(Mutex::new(BTreeSet::<Vec<u8>>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let unknown = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let writers: Vec<_> = (0..3)
        .map(|t| {
            let (acked, tried, stop, seeds, unknown) = (
                acked.clone(),
                tried.clone(),
                stop.clone(),
                seeds.clone(),
                unknown.clone(),
            );
            std::thread::spawn(move || {
                let mut cl = Client::new(seeds);
                cl.aim(t);
                let value = vec![b'v'; 120];
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    // Spread over the key space, so every range keeps taking writes.
                    let key = format!("{:x}:{t}:{n}", (n * 7919 + t as u64 * 31) % 4096);
                    n += 1;
                    tried.lock().unwrap().insert(key.clone().into_bytes());
                    match cl.call(
                        &[b"SET", key.as_bytes(), &value],
                        true,
                        Duration::from_secs(20),
                    ) {
                        Outcome::Done(Value::Simple(s)) if s == "OK" => {
                            acked.lock().unwrap().insert(key.into_bytes());
                        }
                        Outcome::Done(v) => panic!("SET {key} answered {v:?}"),
                        // The connection broke with the write sent (the test kills a
                        // node): it may or may not have been applied.
                        Outcome::Unknown => unknown.lock().unwrap().push(Instant::now()),
                    }
                }
                (n, cl.redirects)
            })
        })
        .collect();
    let scanner = {
        let (acked, tried, stop, seeds) =
            (acked.clone(), tried.clone(), stop.clone(), seeds.clone());
        std::thread::spawn(move || {
            let mut cl = Client::new(seeds.clone());
            let (mut scans, mut replanned) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                let before = acked.lock().unwrap().clone();
                let first = scans % seeds.len();
                let order: Vec<_> = seeds[first..]
                    .iter()
                    .chain(&seeds[..first])
                    .copied()
                    .collect();
                match cluster_scan(&mut cl, &order) {
                    Some(keys) => {
                        check_scan(&keys, &before, &tried.lock().unwrap());
                        scans += 1;
                    }
                    None => replanned += 1,
                }
            }
            (scans, replanned)
        })
    };

    // A split by hand, while the load runs: at a key inside the first range.
    std::thread::sleep(Duration::from_millis(1500));
    let mut admin = Client::new(seeds.clone());
    match admin.call(&[b"CLUSTER", b"SPLIT", b"8"], true, Duration::from_secs(20)) {
        Outcome::Done(Value::Integer(id)) => assert!(id > 1, "the new range's id {id}"),
        o => panic!("CLUSTER SPLIT answered {o:?}"),
    }
    // A follower of range 1 killed -9 and restarted, while ranges keep splitting.
    std::thread::sleep(Duration::from_millis(1500));
    let leader = c.leader(Duration::from_secs(10));
    let victim = (leader + 1) % 3;
    let killed = Instant::now();
    c.kill9(victim);
    std::thread::sleep(Duration::from_millis(1500));
    c.restart(victim);
    std::thread::sleep(Duration::from_millis(4000));
    stop.store(true, Ordering::Relaxed);
    let mut writes = 0;
    for w in writers {
        writes += w.join().expect("a writer failed").0;
    }
    let (scans, replanned) = scanner.join().expect("the scanner failed");
    let acked = acked.lock().unwrap().clone();
    let tried = tried.lock().unwrap().clone();

    let map = ranges(&seeds);
    eprintln!(
        "{writes} SETs ({} acknowledged), {scans} whole scans ({replanned} planned again), {} ranges",
        acked.len(),
        map.len()
    );
    assert!(map.len() >= 4, "the ranges did not split: {map:?}");
    // A write whose outcome is unknown is one whose connection the kill broke.
    for u in unknown.lock().unwrap().iter() {
        let after = u.saturating_duration_since(killed);
        assert!(
            *u >= killed && after < Duration::from_secs(5),
            "a write had no answer {after:?} after the kill"
        );
    }
    assert!(scans >= 3, "too few scans finished: {scans}");

    // The final scan through the leaders, then each replica's own copy (READONLY), once
    // replication has caught up: all the same keys.
    let mut cl = Client::new(seeds.clone());
    let fin = loop {
        if let Some(k) = cluster_scan(&mut cl, &seeds) {
            break k;
        }
    };
    check_scan(&fin, &acked, &tried);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, addr) in seeds.iter().enumerate() {
        loop {
            let mut conn = Conn::connect(*addr);
            conn.try_call(&[b"READONLY"]);
            let mut keys = Vec::new();
            let mut all = Ok(());
            for (_, lo, hi) in ranges(&[*addr]) {
                let mut call = |args: &[&[u8]]| conn.try_call(args);
                all = all.and(scan_range(&mut call, &lo, hi.as_deref(), &mut keys));
            }
            if all.is_ok() && keys == fin {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {} holds {} keys ({all:?}), the leaders {}\n{}",
                i + 1,
                keys.len(),
                fin.len(),
                c.log(i)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let logs: String = (0..3).map(|i| c.log(i)).collect();
    if std::env::var_os("ACCELKV_SHOW_LOGS").is_some() {
        eprintln!("victim node {}:\n{}", victim + 1, c.log(victim));
    }
    assert!(
        logs.contains("split off range"),
        "no split by size:\n{logs}"
    );
}

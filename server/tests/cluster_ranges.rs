//! Splits and moves end to end (docs/CLUSTER.md, "Splits" and "Moves"): a real etcd and
//! real server processes while clients write and scan. Splits: a small `--split-size`, so
//! ranges split again and again, plus a `CLUSTER SPLIT` by hand and a follower killed with
//! -9 and restarted in the middle. Moves: a range split off by hand (its group started from
//! a seed) has its leader move its own replica to a fourth node. The promise tried: no error reaches a client beyond redirects (`-MOVED`,
//! `-TRYAGAIN`, and `-CROSSSLOT` for a scan planned on a map that changed since), and no key
//! is lost or duplicated: every cluster-wide scan (`ClusterClient::scan`, the Rust client's
//! merge of RANGE pages in key order) holds each acknowledged key exactly once, and once
//! the load stops every replica holds exactly what the leaders hold. One writer is the
//! Rust cluster client (its own map, routing and redirects), the others send everything to
//! one node, which proxies. Needs `--features cluster` and etcd.

mod cluster_support;
mod common;

use accelkv_client::{ClientError, ClusterClient};
use accelkv_proto::resp::Value;
use cluster_support::client::{commands_led, Client, Conn, Outcome};
use cluster_support::harness::Cluster;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tests run one at a time: each starts its own cluster.
static SERIAL: Mutex<()> = Mutex::new(());

/// A range as `CLUSTER RANGES` shows it: id, start, end, replicas' node ids.
type RangeRow = (i64, Vec<u8>, Option<Vec<u8>>, Vec<i64>);

/// The ranges as `CLUSTER RANGES` shows them, asked of the first of `seeds` that answers
/// (read by the cluster client, which parses the reply).
fn ranges(seeds: &[SocketAddr]) -> Vec<RangeRow> {
    let c = ClusterClient::connect(seeds).expect("no node answered CLUSTER RANGES");
    c.ranges()
        .iter()
        .map(|r| {
            let nodes = r.replicas.iter().map(|(n, _)| *n as i64).collect();
            (r.id as i64, r.start.clone(), r.end.clone(), nodes)
        })
        .collect()
}

/// `CLUSTER SPLIT 8` by hand, while the load runs: the new range's id.
fn split_at_8(seeds: &[SocketAddr]) -> i64 {
    let mut admin = Client::new(seeds.to_vec());
    match admin.call(&[b"CLUSTER", b"SPLIT", b"8"], true, Duration::from_secs(20)) {
        Outcome::Done(Value::Integer(id)) => id,
        o => panic!("CLUSTER SPLIT answered {o:?}"),
    }
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

/// A scan of every key through the Rust cluster client, merged across ranges.
fn cluster_scan(cl: &mut ClusterClient) -> Vec<Vec<u8>> {
    match cl.scan(b"", None, usize::MAX) {
        Ok(items) => items.into_iter().map(|(k, _)| k).collect(),
        Err(e) => panic!("a cluster-wide scan failed: {e}"),
    }
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

/// Three writers of unique keys spread over the key space and one scanner of the whole
/// map, until [`Churn::finish`].
struct Churn {
    acked: Arc<Mutex<BTreeSet<Vec<u8>>>>,
    tried: Arc<Mutex<BTreeSet<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
    unknown: Arc<Mutex<Vec<Instant>>>,
    writers: Vec<std::thread::JoinHandle<u64>>,
    scanner: std::thread::JoinHandle<(usize, accelkv_client::cluster::ClusterStats)>,
    writer_stats: Arc<Mutex<accelkv_client::cluster::ClusterStats>>,
}

/// What a churn saw.
struct Seen {
    writes: u64,
    acked: BTreeSet<Vec<u8>>,
    tried: BTreeSet<Vec<u8>>,
    /// When writes of unknown outcome (their connection broke) ended.
    unknown: Vec<Instant>,
    scans: usize,
    /// The scanning cluster client's redirects, retries and map loads.
    scanner: accelkv_client::cluster::ClusterStats,
    /// The writing cluster client's.
    writer: accelkv_client::cluster::ClusterStats,
}

impl Churn {
    fn start(seeds: &[SocketAddr]) -> Churn {
        let acked = Arc::new(Mutex::new(BTreeSet::<Vec<u8>>::new()));
        let tried = Arc::new(Mutex::new(BTreeSet::<Vec<u8>>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let unknown = Arc::new(Mutex::new(Vec::<Instant>::new()));
        let writer_stats = Arc::new(Mutex::new(Default::default()));
        let writers = (0..3)
            .map(|t| {
                let (acked, tried, stop, seeds, unknown, smart_stats) = (
                    acked.clone(),
                    tried.clone(),
                    stop.clone(),
                    seeds.to_vec(),
                    unknown.clone(),
                    writer_stats.clone(),
                );
                std::thread::spawn(move || {
                    // Writer 0 is the Rust cluster client; the others go through one node
                    // each, which proxies what it does not lead.
                    let mut smart = (t == 0).then(|| ClusterClient::connect(&seeds).unwrap());
                    let mut cl = Client::new(seeds);
                    cl.aim(t);
                    let value = vec![b'v'; 120];
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        // Spread over the key space, so every range keeps taking writes.
                        let key = format!("{:x}:{t}:{n}", (n * 7919 + t as u64 * 31) % 4096);
                        n += 1;
                        tried.lock().unwrap().insert(key.clone().into_bytes());
                        let outcome = match &mut smart {
                            Some(c) => match c.set(key.as_bytes(), &value) {
                                Ok(()) => Ok(()),
                                Err(ClientError::Unknown(why)) => Err(why),
                                Err(e) => panic!("SET {key} through the cluster client: {e}"),
                            },
                            None => {
                                let set: [&[u8]; 3] = [b"SET", key.as_bytes(), &value];
                                match cl.call(&set, true, Duration::from_secs(20)) {
                                    Outcome::Done(Value::Simple(s)) if s == "OK" => Ok(()),
                                    Outcome::Done(v) => panic!("SET {key} answered {v:?}"),
                                    Outcome::Unknown => Err(cl.why_unknown.clone()),
                                }
                            }
                        };
                        match outcome {
                            Ok(()) => {
                                acked.lock().unwrap().insert(key.into_bytes());
                            }
                            // The connection broke with the write sent (a test kills a
                            // node): it may or may not have been applied.
                            Err(why) => {
                                eprintln!("SET {key}: unknown outcome: {why}");
                                unknown.lock().unwrap().push(Instant::now());
                            }
                        }
                    }
                    if let Some(c) = smart {
                        *smart_stats.lock().unwrap() = c.stats();
                    }
                    n
                })
            })
            .collect();
        let scanner = {
            let (acked, tried, stop, seeds) =
                (acked.clone(), tried.clone(), stop.clone(), seeds.to_vec());
            std::thread::spawn(move || {
                let mut cl = ClusterClient::connect(&seeds).unwrap();
                let mut scans = 0;
                while !stop.load(Ordering::Relaxed) {
                    let before = acked.lock().unwrap().clone();
                    let keys = cluster_scan(&mut cl);
                    check_scan(&keys, &before, &tried.lock().unwrap());
                    scans += 1;
                }
                (scans, cl.stats())
            })
        };
        Churn {
            acked,
            tried,
            stop,
            unknown,
            writers,
            scanner,
            writer_stats,
        }
    }

    fn finish(self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let mut writes = 0;
        for w in self.writers {
            writes += w.join().expect("a writer failed");
        }
        let (scans, scanner) = self.scanner.join().expect("the scanner failed");
        let seen = Seen {
            writes,
            acked: self.acked.lock().unwrap().clone(),
            tried: self.tried.lock().unwrap().clone(),
            unknown: self.unknown.lock().unwrap().clone(),
            scans,
            scanner,
            writer: *self.writer_stats.lock().unwrap(),
        };
        eprintln!(
            "{} SETs ({} acknowledged, {} unknown), {} whole scans; cluster clients: writer {:?}, scanner {:?}",
            seen.writes,
            seen.acked.len(),
            seen.unknown.len(),
            seen.scans,
            seen.writer,
            seen.scanner,
        );
        assert!(seen.scans >= 3, "too few scans finished: {}", seen.scans);
        seen
    }
}

/// The final scan through the leaders, checked against what the churn saw; then each
/// node's own copy of its ranges (READONLY), once replication caught up, must hold the
/// same keys. Answers the final scan.
fn replicas_agree(c: &Cluster, seen: &Seen) -> Vec<Vec<u8>> {
    let seeds = c.seeds();
    let fin = cluster_scan(&mut ClusterClient::connect(&seeds).unwrap());
    check_scan(&fin, &seen.acked, &seen.tried);
    let deadline = Instant::now() + Duration::from_secs(30);
    for (i, addr) in seeds.iter().enumerate() {
        loop {
            let mut conn = Conn::connect(*addr);
            conn.try_call(&[b"READONLY"]);
            let me = c.nodes[i].id as i64;
            // The keys of the ranges this node holds a replica of.
            let mine: Vec<_> = ranges(&[*addr])
                .into_iter()
                .filter(|r| r.3.contains(&me))
                .collect();
            let want: Vec<Vec<u8>> = fin
                .iter()
                .filter(|k| {
                    mine.iter().any(|(_, lo, hi, _)| {
                        k.as_slice() >= lo.as_slice()
                            && hi.as_ref().is_none_or(|h| k.as_slice() < h.as_slice())
                    })
                })
                .cloned()
                .collect();
            let mut keys = Vec::new();
            let mut all = Ok(());
            for (_, lo, hi, _) in &mine {
                let mut call = |args: &[&[u8]]| conn.try_call(args);
                all = all.and(scan_range(&mut call, lo, hi.as_deref(), &mut keys));
            }
            if all.is_ok() && keys == want {
                break;
            }
            if Instant::now() >= deadline {
                // Which ranges differ, and a few of the keys, for the report.
                let (got, wanted): (BTreeSet<_>, BTreeSet<_>) =
                    (keys.iter().collect(), want.iter().collect());
                let range_of = |k: &[u8]| {
                    mine.iter()
                        .find(|(_, lo, hi, _)| {
                            k >= lo.as_slice() && hi.as_ref().is_none_or(|h| k < h.as_slice())
                        })
                        .map_or(0, |r| r.0)
                };
                let show = |d: Vec<&&Vec<u8>>| -> Vec<String> {
                    d.iter()
                        .take(8)
                        .map(|k| format!("{} (range {})", String::from_utf8_lossy(k), range_of(k)))
                        .collect()
                };
                panic!(
                    "node {} holds {} keys ({all:?}), the leaders {} of its ranges; missing {:?}, extra {:?}\n{}",
                    i + 1,
                    keys.len(),
                    want.len(),
                    show(wanted.difference(&got).collect()),
                    show(got.difference(&wanted).collect()),
                    c.log(i)
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    fin
}

#[test]
fn ranges_split_under_load_and_no_key_is_lost_or_duplicated() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let mut c = Cluster::start_with(
        3,
        "split",
        &["--split-size", "48k", "--raft-snapshot-every", "300"],
    );
    let seeds = c.seeds();
    let churn = Churn::start(&seeds);

    // A split by hand, while the load runs: at a key inside the first range.
    std::thread::sleep(Duration::from_millis(1500));
    let id = split_at_8(&seeds);
    assert!(id > 1, "the new range's id {id}");
    // A follower of range 1 killed -9 and restarted, while ranges keep splitting.
    std::thread::sleep(Duration::from_millis(1500));
    let leader = c.leader(Duration::from_secs(10));
    let victim = (leader + 1) % 3;
    let killed = Instant::now();
    c.kill9(victim);
    std::thread::sleep(Duration::from_millis(1500));
    c.restart(victim);
    std::thread::sleep(Duration::from_millis(4000));
    let seen = churn.finish();

    let map = ranges(&seeds);
    assert!(map.len() >= 4, "the ranges did not split: {map:?}");
    // A write whose outcome is unknown is one whose connection the kill broke.
    for u in &seen.unknown {
        let after = u.saturating_duration_since(killed);
        assert!(
            *u >= killed && after < Duration::from_secs(5),
            "a write had no answer {after:?} after the kill"
        );
    }
    replicas_agree(&c, &seen);
    // The cluster scanner noticed the map change (a scan planned up to a range's old end
    // answers CROSSSLOT, and the client asks for the map again). The writer need not: a
    // key a split gave away waits on its node for the map, and the node that led it leads
    // the new range too, so its stale route still reaches the leader.
    assert!(
        seen.scanner.map_loads > 1,
        "the cluster scanner never reloaded the map: {:?}",
        seen.scanner
    );
    let logs: String = (0..3).map(|i| c.log(i)).collect();
    if std::env::var_os("ACCELKV_SHOW_LOGS").is_some() {
        eprintln!("victim node {}:\n{}", victim + 1, c.log(victim));
    }
    assert!(
        logs.contains("split off range"),
        "no split by size:\n{logs}"
    );
}

#[test]
fn a_range_moves_to_another_node_under_load() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(
        4,
        "move",
        // No snapshot by the policy before the move (see below).
        &["--split-size", "0", "--raft-snapshot-every", "1000000"],
    );
    let seeds = c.seeds();
    let churn = Churn::start(&seeds);
    std::thread::sleep(Duration::from_millis(2000));
    // The range moved is one split off by hand under the load: its group starts from a
    // seed at log index 0, and with no snapshot taken since (the policy's threshold is out
    // of reach) the new replica has the keys written before the split only if it is sent
    // that seed.
    let child = split_at_8(&seeds);
    std::thread::sleep(Duration::from_millis(1000));
    // Its leader (the harness probes a key above "8") moves its own replica to the node
    // that holds none.
    let leader = c.leader(Duration::from_secs(10));
    let before = ranges(&seeds);
    let row = |rs: &[RangeRow]| rs.iter().find(|r| r.0 == child).cloned().unwrap();
    let holders = &row(&before).3;
    let spare = c
        .nodes
        .iter()
        .find(|n| !holders.contains(&(n.id as i64)))
        .expect("a fourth node")
        .id;
    let from = c.nodes[leader].id;
    let args = [
        b"CLUSTER".to_vec(),
        b"MOVE".to_vec(),
        child.to_string().into_bytes(),
        from.to_string().into_bytes(),
        spare.to_string().into_bytes(),
    ];
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
    let mut admin = Client::new(seeds.clone());
    match admin.call(&args, true, Duration::from_secs(60)) {
        Outcome::Done(Value::Simple(s)) if s == "OK" => {}
        o => panic!("CLUSTER MOVE answered {o:?}"),
    }
    std::thread::sleep(Duration::from_millis(2000));
    let seen = churn.finish();
    assert!(seen.unknown.is_empty(), "writes without an answer");
    // The cluster client writing went on at the new leader: sent a -MOVED (or asked to
    // wait while the old leader drained) and followed it.
    assert!(
        seen.writer.redirects + seen.writer.retries > 0,
        "the cluster client never saw the leader move: {:?}",
        seen.writer
    );
    let after = ranges(&seeds);
    let mut now = row(&after).3;
    now.sort_unstable();
    let mut want: Vec<i64> = holders
        .iter()
        .filter(|n| **n != from as i64)
        .copied()
        .collect();
    want.push(spare as i64);
    want.sort_unstable();
    assert_eq!(now, want, "range {child}'s replicas after the move");
    let fin = replicas_agree(&c, &seen);
    assert!(fin.len() > 1000, "only {} keys", fin.len());
    // The old replica lets go of the range once what it was serving settled (its log
    // says so), and then answers for it only with a redirect.
    let t = Instant::now();
    let gone = format!("range {child} moved away from this node");
    while !c.log(leader).contains(&gone) {
        assert!(t.elapsed() < Duration::from_secs(20), "{}", c.log(leader));
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut old = Conn::connect(c.nodes[leader].resp);
    old.try_call(&[b"CLUSTER", b"NOPROXY"]);
    let moved_key = fin
        .iter()
        .find(|k| k.as_slice() >= b"8".as_slice())
        .unwrap();
    match old.try_call(&[b"GET", moved_key]) {
        Some(Value::Error(e)) if e.starts_with("MOVED ") => {}
        v => panic!("the old replica answered {v:?}"),
    }
}

#[test]
fn a_busy_range_splits_by_load_inside_its_hot_keys() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(3, "load", &["--split-size", "0", "--split-load", "1000"]);
    let seeds = c.seeds();
    let key = |i: usize| format!("user{i:04}").into_bytes();
    let mut loader = ClusterClient::connect(&seeds).unwrap();
    let before = commands_led(&seeds);
    for i in 0..1000 {
        loader.set(&key(i), &key(i)).unwrap();
    }
    for i in 0..500 {
        assert_eq!(loader.get(&key(i)).unwrap(), Some(key(i)));
    }
    // Each command counted once towards the load, a read too (it is placed again after
    // its read index).
    assert_eq!(commands_led(&seeds) - before, 1500);
    // Five clients for six seconds, nine commands in ten on user0000–user0199, the rest on
    // user0200–user0999: the balanced split lies inside the hot fifth of the keys. Two are
    // Rust cluster clients that read; three are plain RESP connections, one to each node
    // (proxied where it does not lead), that read and write the value a key holds: for
    // them a split must be invisible, not even a -TRYAGAIN.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..5u64)
        .map(|t| {
            let (seeds, stop) = (seeds.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut cl = ClusterClient::connect(&seeds).unwrap();
                let mut plain = (t >= 2).then(|| Conn::connect(seeds[t as usize - 2]));
                let mut reads = 0u64;
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ t;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let i = match x % 10 {
                        0 => 200 + (x >> 8) as usize % 800,
                        _ => (x >> 8) as usize % 200,
                    };
                    let k = format!("user{i:04}").into_bytes();
                    reads += 1;
                    let Some(c) = plain.as_mut() else {
                        // Redirects and splits are the client's to follow: any error fails.
                        assert_eq!(cl.get(&k).unwrap(), Some(k), "a read answered wrongly");
                        continue;
                    };
                    match reads % 2 {
                        0 => assert_eq!(c.call(&[b"GET", &k]), Value::Bulk(Some(k))),
                        _ => assert_eq!(c.call(&[b"SET", &k, &k]), Value::Simple("OK".into())),
                    }
                }
                reads
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(6));
    stop.store(true, Ordering::Relaxed);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let logs: String = (0..3).map(|i| c.log(i)).collect();
    for l in logs.lines().filter(|l| l.contains("--split-load")) {
        eprintln!("{reads} reads; {l}");
    }
    assert!(
        logs.contains("over --split-load"),
        "no split by load after {reads} reads:\n{logs}"
    );
    let map = ranges(&seeds);
    assert!(map.len() >= 2, "{map:?}");
    let first_end = map[0].2.clone().expect("the first range has an end");
    assert!(
        first_end > key(0) && first_end < key(200),
        "the first split is not inside the hot keys: {map:?}"
    );
    // Every key is still there, once.
    let mut cl = ClusterClient::connect(&seeds).unwrap();
    let want: Vec<_> = (0..1000).map(key).collect();
    assert_eq!(cluster_scan(&mut cl), want);
}

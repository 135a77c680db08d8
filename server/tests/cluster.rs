//! Cluster mode end to end (docs/CLUSTER.md): a real etcd and three real server processes
//! on loopback, driven by clients that follow redirects. Each test tries to break one
//! promise: a kill -9 of the leader under load loses no acknowledged write and the recorded
//! history (reads and scans included) stays linearizable; a partitioned node neither
//! serves stale reads nor splits the brain, and heals; etcd restarting under the cluster
//! loses neither the map nor service. Needs `--features cluster` and etcd (etcd-server).

mod cluster_support;
mod common;

use accelkv_proto::resp::Value;
use cluster_support::client::{Client, Outcome};
use cluster_support::harness::Cluster;
use cluster_support::linearizable::{check, Op, Record};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The tests run one at a time: each starts its own cluster, and elections want the CPU.
static SERIAL: Mutex<()> = Mutex::new(());

const KEYS: [&str; 4] = ["k0", "k1", "k2", "k3"];

/// A load of SET (unique values), GET and whole-map RANGE from `clients` threads, recorded
/// as a history, until `stop`.
struct Load {
    history: Arc<Mutex<Vec<Record>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<u64>>,
    start: Instant,
}

impl Load {
    fn start(c: &Cluster, clients: usize, seed: u64) -> Load {
        Load::start_as(c, clients, seed, false)
    }

    /// [`Load::start`]; `hash`: the keys are fields of one hash (HSET, HGET, HGETALL),
    /// each value long enough that the hash keeps its fields as subkeys.
    fn start_as(c: &Cluster, clients: usize, seed: u64, hash: bool) -> Load {
        let history = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let threads = (0..clients)
            .map(|t| {
                let (history, stop, seeds) = (history.clone(), stop.clone(), c.seeds());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed * 100 + t as u64);
                    let mut cl = Client::new(seeds);
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        n += 1;
                        let key = KEYS[rng.gen_range(0..KEYS.len())];
                        let dice = rng.gen_range(0..100);
                        if rng.gen_range(0..4) == 0 {
                            // As a client that connected to any node: followers must
                            // redirect, never answer from their own state.
                            cl.aim(rng.gen_range(0..3));
                        }
                        let value = match hash {
                            true => format!("c{t}-{n}-{}", "x".repeat(72)),
                            false => format!("c{t}-{n}"),
                        };
                        let r = run_as(&mut cl, hash, (key, dice, &value), start);
                        history.lock().unwrap().push(r);
                    }
                    cl.redirects
                })
            })
            .collect();
        Load {
            history,
            stop,
            threads,
            start,
        }
    }

    fn finish(self) -> (Vec<Record>, Instant) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let h = std::mem::take(&mut *self.history.lock().unwrap());
        (h, self.start)
    }
}

fn ns(start: Instant) -> u64 {
    start.elapsed().as_nanos() as u64
}

fn text(v: &[u8]) -> String {
    String::from_utf8_lossy(v).into_owned()
}

/// The hash whose fields a hash load reads and writes.
const HASH: &[u8] = b"{lin}h";

/// One operation: `dice` < 50 a SET, < 85 a GET, else a scan of every key of the load (the
/// test's probes write keys outside it); `hash`: on the fields of [`HASH`] (HSET, HGET,
/// HGETALL).
fn run_as(
    cl: &mut Client,
    hash: bool,
    (key, dice, value): (&str, u32, &str),
    start: Instant,
) -> Record {
    let call = ns(start);
    let patience = Duration::from_secs(15);
    let (k, v) = (key.as_bytes(), value.as_bytes());
    let (op, outcome) = if dice < 50 {
        let o = match hash {
            true => cl.call(&[b"HSET", HASH, k, v], true, patience),
            false => cl.call(&[b"SET", k, v], true, patience),
        };
        let op = Op::Set {
            key: key.into(),
            value: value.into(),
        };
        match o {
            Outcome::Done(Value::Simple(s)) if s == "OK" => (op, true),
            Outcome::Done(Value::Integer(0 | 1)) if hash => (op, true),
            Outcome::Done(v) => panic!("SET answered {v:?}"),
            Outcome::Unknown => (op, false),
        }
    } else if dice < 85 {
        let o = match hash {
            true => cl.call(&[b"HGET", HASH, k], false, patience),
            false => cl.call(&[b"GET", k], false, patience),
        };
        match o {
            Outcome::Done(Value::Bulk(got)) => (
                Op::Get {
                    key: key.into(),
                    got: got.map(|g| text(&g)),
                },
                true,
            ),
            Outcome::Done(v) => panic!("GET answered {v:?}"),
            Outcome::Unknown => (
                Op::Get {
                    key: key.into(),
                    got: None,
                },
                false,
            ),
        }
    } else {
        let o = match hash {
            true => cl.call(&[b"HGETALL", HASH], false, patience),
            false => cl.call(&[b"RANGE", b"k", b"l"], false, patience),
        };
        match o {
            Outcome::Done(Value::Array(Some(items))) => {
                let flat: Vec<String> = items
                    .into_iter()
                    .map(|v| match v {
                        Value::Bulk(Some(b)) => text(&b),
                        v => panic!("RANGE item {v:?}"),
                    })
                    .collect();
                let got = flat
                    .chunks(2)
                    .map(|p| (p[0].clone(), p[1].clone()))
                    .collect();
                (Op::Scan { got }, true)
            }
            Outcome::Done(v) => panic!("RANGE answered {v:?}"),
            Outcome::Unknown => (Op::Scan { got: vec![] }, false),
        }
    };
    Record {
        op,
        call,
        ret: outcome.then(|| ns(start)),
    }
}

/// Reads every key once the cluster settled (added to the history, so every acknowledged
/// write must show in them or have been overwritten in a linearizable order).
fn final_reads(c: &Cluster, history: &mut Vec<Record>, start: Instant) {
    final_reads_as(c, history, start, false)
}

/// [`final_reads`] of a load on the fields of [`HASH`] (`hash`) or on keys.
fn final_reads_as(c: &Cluster, history: &mut Vec<Record>, start: Instant, hash: bool) {
    let mut cl = Client::new(c.seeds());
    for k in KEYS {
        let r = run_as(&mut cl, hash, (k, 60, ""), start);
        assert!(r.ret.is_some(), "the final read of {k} failed");
        history.push(r);
    }
    let r = run_as(&mut cl, hash, ("", 99, ""), start);
    assert!(r.ret.is_some(), "the final scan failed");
    history.push(r);
}

fn summary(h: &[Record]) -> String {
    let known = h.iter().filter(|r| r.ret.is_some()).count();
    let sets = h
        .iter()
        .filter(|r| matches!(r.op, Op::Set { .. }) && r.ret.is_some())
        .count();
    format!(
        "{} operations ({known} answered, {sets} acknowledged SETs)",
        h.len()
    )
}

#[test]
fn a_killed_leader_loses_no_acknowledged_write_and_reads_stay_linearizable() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start(3, "kill");
    killed_leaders(c, false);
}

/// The same in slot mode (`--slots redis`) on the fields of one hash kept as subkeys: the
/// collection's history is linearizable too.
#[test]
fn in_slot_mode_a_hash_stays_linearizable_through_killed_leaders() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(3, "kill-slots", &["--slots", "redis"]);
    killed_leaders(c, true);
}

/// Kills the leader under a load (of keys, or of [`HASH`]'s fields), restarts it, kills
/// the new one, and checks the history.
fn killed_leaders(mut c: Cluster, hash: bool) {
    let leader = c.leader(Duration::from_secs(20));
    let load = Load::start_as(&c, 4, 1, hash);
    std::thread::sleep(Duration::from_millis(1500));
    let killed_at = Instant::now();
    c.kill9(leader);
    // Failover: the first acknowledged write after the kill.
    let mut probe = Client::new(c.seeds());
    loop {
        if let Outcome::Done(_) =
            probe.call(&[b"SET", b"failover", b"1"], true, Duration::from_secs(30))
        {
            break;
        }
    }
    let failover = killed_at.elapsed();
    let new_leader = c.leader(Duration::from_secs(20));
    assert_ne!(new_leader, leader);
    std::thread::sleep(Duration::from_millis(1000));
    c.restart(leader);
    std::thread::sleep(Duration::from_millis(1500));
    // Now the new leader dies too: the restarted node and the third one carry on, so what
    // they serve must include everything acknowledged, the restarted node's share rebuilt
    // from its log and snapshot.
    c.kill9(new_leader);
    std::thread::sleep(Duration::from_millis(1500));
    let (mut h, start) = load.finish();
    final_reads_as(&c, &mut h, start, hash);
    eprintln!(
        "kill -9 of the leader: failover in {failover:?}; {}",
        summary(&h)
    );
    let after_kill = h
        .iter()
        .filter(|r| matches!(r.op, Op::Set { .. }))
        .filter(|r| {
            r.ret.is_some_and(|t| {
                t > (killed_at - start).as_nanos() as u64 + failover.as_nanos() as u64
            })
        })
        .count();
    assert!(
        after_kill > 0,
        "no write was acknowledged after the failover"
    );
    check(&h).unwrap();
}

/// Which nodes answer a read themselves (each believes it leads and can prove it to a
/// quorum); the others redirect or fail.
fn serving(c: &Cluster) -> Vec<usize> {
    (0..c.nodes.len())
        .filter(|&i| c.alive(i))
        .filter(|&i| {
            let Ok(s) = std::net::TcpStream::connect(c.nodes[i].resp) else {
                return false;
            };
            let _ = s.set_read_timeout(Some(Duration::from_secs(8)));
            let mut c = cluster_support::client::Conn::from_stream(s);
            c.try_call(&[b"CLIENT", b"SETNAME", b"accelkv-proxy-test"]); // no proxying
            let v = c.try_call(&[b"GET", b"probe"]);
            matches!(v, Some(Value::Bulk(_)))
        })
        .collect()
}

#[test]
fn a_partitioned_leader_serves_nothing_stale_and_the_cluster_heals() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start(3, "part");
    let old = c.leader(Duration::from_secs(20));
    let load = Load::start(&c, 4, 2);
    std::thread::sleep(Duration::from_millis(1500));
    c.partition(old);
    // The majority side elects a leader of its own and takes writes; the cut-off node
    // cannot prove its leadership to a quorum, so it answers no read and commits no write.
    let t = Instant::now();
    let other = loop {
        let s = serving(&c);
        if let [one] = s[..] {
            if one != old {
                break one;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no leader on the majority side: {s:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut probe = Client::new(vec![c.nodes[other].resp]);
    assert!(matches!(
        probe.call(
            &[b"SET", b"during", b"partition"],
            true,
            Duration::from_secs(10)
        ),
        Outcome::Done(_)
    ));
    std::thread::sleep(Duration::from_millis(1500));
    c.heal();
    std::thread::sleep(Duration::from_millis(2000));
    let (mut h, start) = load.finish();
    final_reads(&c, &mut h, start);
    eprintln!("partition of the leader: {}", summary(&h));
    check(&h).unwrap();
    // One leader after healing, and the healed node has the write made without it.
    let s = serving(&c);
    assert_eq!(s.len(), 1, "after healing, {s:?} serve reads");
    let mut cl = Client::new(vec![c.nodes[old].resp]);
    match cl.call(&[b"GET", b"during"], false, Duration::from_secs(10)) {
        Outcome::Done(Value::Bulk(Some(v))) => assert_eq!(v, b"partition"),
        o => panic!("the write made during the partition: {o:?}"),
    }
}

#[test]
fn etcd_restarting_under_the_cluster_loses_neither_map_nor_service() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let mut c = Cluster::start(3, "etcd");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let coord = |c: &Cluster| {
        rt.block_on(accelkv_cluster::Coordinator::connect(
            &[c.etcd.endpoint()],
            "etcd",
        ))
        .unwrap()
    };
    let (before, _) = rt.block_on(coord(&c).map()).unwrap().unwrap();
    let mut cl = Client::new(c.seeds());
    let set = |cl: &mut Client, k: &str| {
        let o = cl.call(&[b"SET", k.as_bytes(), b"v"], true, Duration::from_secs(10));
        assert!(
            matches!(o, Outcome::Done(Value::Simple(_))),
            "SET {k}: {o:?}"
        );
    };
    set(&mut cl, "before");
    // etcd dies: the ranges are served by their groups, which do not need it.
    c.etcd.kill();
    for i in 0..20 {
        set(&mut cl, &format!("without-etcd-{i}"));
    }
    std::thread::sleep(Duration::from_secs(4)); // past the nodes' lease TTL
    c.etcd.restart();
    // The map is as it was, and every node registers again.
    let t = Instant::now();
    loop {
        let co = coord(&c);
        let live = rt.block_on(co.live_nodes()).unwrap_or_default();
        if live.len() == 3 {
            let (after, _) = rt.block_on(co.map()).unwrap().unwrap();
            assert_eq!(after, before);
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "nodes did not register again: {live:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // A node restarted now reads the map from etcd and rejoins its range.
    let follower = (0..3)
        .find(|&i| i != c.leader(Duration::from_secs(10)))
        .unwrap();
    c.restart(follower);
    let mut cl = Client::new(c.seeds()); // the old client may have been talking to it
    set(&mut cl, "after");
    for k in ["before", "without-etcd-19", "after"] {
        let o = cl.call(&[b"GET", k.as_bytes()], false, Duration::from_secs(10));
        assert!(
            matches!(&o, Outcome::Done(Value::Bulk(Some(v))) if v == b"v"),
            "{k}: {o:?}"
        );
    }
}

#[test]
fn any_node_serves_any_key_through_its_proxy() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start(3, "proxy");
    let leader = c.leader(Duration::from_secs(20));
    let plain = |i: usize| {
        let s = std::net::TcpStream::connect(c.nodes[i].resp).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        cluster_support::client::Conn::from_stream(s)
    };
    // A client that never follows a redirect writes and reads through every node.
    for i in 0..3 {
        let mut conn = plain(i);
        let k = format!("via-{i}");
        assert_eq!(
            conn.try_call(&[b"SET", k.as_bytes(), b"v"]),
            Some(Value::Simple("OK".into()))
        );
        assert_eq!(
            conn.try_call(&[b"INCR", b"counter"]),
            Some(Value::Integer(i as i64 + 1))
        );
    }
    for i in 0..3 {
        let mut conn = plain(i);
        for j in 0..3 {
            let k = format!("via-{j}");
            assert_eq!(
                conn.try_call(&[b"GET", k.as_bytes()]),
                Some(Value::Bulk(Some(b"v".to_vec())))
            );
        }
        let got = conn.try_call(&[b"RANGE", b"via-", b"via-~"]);
        assert!(
            matches!(got, Some(Value::Array(Some(ref a))) if a.len() == 6),
            "{got:?}"
        );
    }
    // RESP3 answers are relayed as RESP3.
    let follower = (0..3).find(|&i| i != leader).unwrap();
    let mut raw = std::net::TcpStream::connect(c.nodes[follower].resp).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    use std::io::{Read, Write};
    raw.write_all(b"HELLO 3\r\n").unwrap();
    let mut b = vec![0u8; 4096];
    let n = raw.read(&mut b).unwrap();
    assert_eq!(b[0], b'%', "{:?}", String::from_utf8_lossy(&b[..n]));
    raw.write_all(b"GET absent\r\nGET via-0\r\n").unwrap();
    let mut got = Vec::new();
    while got.len() < b"_\r\n$1\r\nv\r\n".len() {
        let n = raw.read(&mut b).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&b[..n]);
    }
    assert_eq!(got, b"_\r\n$1\r\nv\r\n");
    // A connection named as a proxy gets the redirect instead (no proxy chains).
    let mut conn = plain(follower);
    conn.try_call(&[b"CLIENT", b"SETNAME", b"accelkv-proxy-9"]);
    match conn.try_call(&[b"GET", b"via-0"]) {
        Some(Value::Error(e)) => {
            assert!(e.starts_with("MOVED 1 "), "{e}");
            assert!(e.ends_with(&c.nodes[leader].resp.to_string()), "{e}");
        }
        v => panic!("{v:?}"),
    }
    // CLUSTER RANGES: one range over every key, its leader and its three replicas.
    let mut conn = plain(follower);
    let Some(Value::Array(Some(ranges))) = conn.try_call(&[b"CLUSTER", b"RANGES"]) else {
        panic!("CLUSTER RANGES");
    };
    assert_eq!(ranges.len(), 1);
    let Value::Array(Some(r)) = &ranges[0] else {
        panic!("{ranges:?}")
    };
    assert_eq!(r[0], Value::Integer(1));
    assert_eq!(r[1], Value::Bulk(Some(Vec::new())));
    assert_eq!(r[2], Value::Bulk(None));
    let leader_addr = c.nodes[leader].resp.to_string().into_bytes();
    assert_eq!(r[3], Value::Bulk(Some(leader_addr)));
    assert!(matches!(&r[4], Value::Array(Some(v)) if v.len() == 3));
    match conn.try_call(&[b"CLUSTER", b"INFO"]) {
        Some(Value::Bulk(Some(text))) => {
            let text = String::from_utf8(text).unwrap();
            assert!(text.contains("cluster_enabled:1\r\n"), "{text}");
            assert!(text.contains("cluster_ranges_led_here:0\r\n"), "{text}");
        }
        v => panic!("CLUSTER INFO: {v:?}"),
    }
    // redis-cli itself, without -c, on a follower.
    if let Ok(out) = std::process::Command::new("redis-cli")
        .args(["-h", &c.nodes[follower].ip.to_string()])
        .args(["-p", &c.nodes[follower].resp.port().to_string()])
        .args(["GET", "via-1"])
        .output()
    {
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "v");
    }
}

#[test]
fn a_replica_that_missed_the_log_is_sent_a_snapshot_of_the_store() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    // Snapshots every 50 entries, keeping 25 behind: a replica away for more than that
    // can only catch up from a snapshot.
    let mut c = Cluster::start_with(3, "snap", &["--raft-snapshot-every", "50"]);
    let leader = c.leader(Duration::from_secs(20));
    let away = (0..3).find(|&i| i != leader).unwrap();
    let mut cl = Client::new(vec![c.nodes[leader].resp]);
    let mut call = |args: &[&[u8]]| match cl.call(args, true, Duration::from_secs(10)) {
        Outcome::Done(v) => v,
        Outcome::Unknown => panic!("{args:?}: unknown outcome"),
    };
    call(&[b"SET", b"before", b"1"]);
    c.kill9(away);
    for i in 0..1500 {
        let (k, v) = (format!("s{i:04}"), format!("v{i}"));
        let args: Vec<&[u8]> = match i % 3 {
            0 => vec![b"SET", k.as_bytes(), v.as_bytes(), b"PX", b"600000"],
            _ => vec![b"SET", k.as_bytes(), v.as_bytes()],
        };
        assert_eq!(call(&args), Value::Simple("OK".into()));
    }
    for i in (0..1500).step_by(10) {
        call(&[b"DEL", format!("s{i:04}").as_bytes()]);
    }
    call(&[b"INCRBY", b"counter", b"7"]);
    c.restart(away);
    // READONLY: the replica answers from its own state.
    let s = std::net::TcpStream::connect(c.nodes[away].resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = cluster_support::client::Conn::from_stream(s);
    assert_eq!(r.try_call(&[b"READONLY"]), Some(Value::Simple("OK".into())));
    let t = Instant::now();
    while r.try_call(&[b"GET", b"counter"]) != Some(Value::Bulk(Some(b"7".to_vec()))) {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the replica did not catch up"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..1500 {
        let k = format!("s{i:04}");
        let want = (i % 10 != 0).then(|| format!("v{i}").into_bytes());
        assert_eq!(
            r.try_call(&[b"GET", k.as_bytes()]),
            Some(Value::Bulk(want)),
            "{k}"
        );
        if i % 10 != 0 {
            let ttl = r.try_call(&[b"PTTL", k.as_bytes()]);
            let has_deadline = matches!(ttl, Some(Value::Integer(ms)) if ms > 500_000);
            assert_eq!(has_deadline, i % 3 == 0, "{k}: PTTL {ttl:?}");
        }
    }
    assert_eq!(
        r.try_call(&[b"GET", b"before"]),
        Some(Value::Bulk(Some(b"1".to_vec())))
    );
    // It was sent the leader's snapshot (the log it missed was gone): the range's leaves
    // as pages, several of them.
    let log = c.log(away);
    let sent = log
        .lines()
        .filter_map(|l| l.split_once("installed a snapshot of ").map(|p| p.1))
        .filter_map(|l| {
            let w: Vec<&str> = l.split(' ').collect();
            Some((
                w.first()?.parse::<usize>().ok()?,
                w.get(3)?.parse::<usize>().ok()?,
            ))
        })
        .any(|(items, pages)| items >= 1300 && pages > 1);
    assert!(sent, "no snapshot of the range was installed:\n{log}");
    // /metrics shows the groups: the leader leads range 1 and built snapshots, the replica
    // keeps the one it was sent, and both applied what the leader committed.
    let sample = |i: usize, name: &str| -> f64 {
        let text = c.metrics(i);
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} on node {}:\n{text}", i + 1))
    };
    assert_eq!(sample(leader, "accelkv_raft_leader{range=\"1\"}"), 1.0);
    assert_eq!(sample(away, "accelkv_raft_leader{range=\"1\"}"), 0.0);
    assert!(sample(leader, "accelkv_raft_snapshots_built_total") >= 1.0);
    assert!(sample(leader, "accelkv_raft_leader_changes_total") >= 1.0);
    assert!(sample(away, "accelkv_raft_snapshot_bytes{range=\"1\"}") > 10_000.0);
    let applied = sample(leader, "accelkv_raft_applied_index{range=\"1\"}");
    assert!(applied > 1600.0, "applied index {applied}");
    assert!(sample(away, "accelkv_raft_term{range=\"1\"}") >= 1.0);
}

#[test]
fn a_write_sent_again_with_its_request_id_applies_once() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    // Snapshots every 20 entries: the table of clients' last writes must survive them.
    let mut c = Cluster::start_with(3, "once", &["--raft-snapshot-every", "20"]);
    let wait = Duration::from_secs(20);
    let call = |cl: &mut Client, args: &[&[u8]]| match cl.call(args, true, wait) {
        Outcome::Done(v) => v,
        Outcome::Unknown => panic!("{args:?}: unknown outcome"),
    };
    let once = |cl: &mut Client, seq: &str, cmd: &[&[u8]]| {
        let mut args: Vec<&[u8]> = vec![b"ACCELKV.ONCE", b"42", seq.as_bytes()];
        args.extend_from_slice(cmd);
        call(cl, &args)
    };
    let mut cl = Client::new(c.seeds());
    assert_eq!(once(&mut cl, "1", &[b"INCR", b"n"]), Value::Integer(1));
    assert_eq!(
        once(&mut cl, "1", &[b"INCR", b"n"]),
        Value::Integer(1),
        "the same request again gets its first reply"
    );
    assert_eq!(once(&mut cl, "2", &[b"INCR", b"n"]), Value::Integer(2));
    match once(&mut cl, "1", &[b"INCR", b"n"]) {
        Value::Error(e) => assert!(e.contains("arrived after its request 2"), "{e}"),
        v => panic!("{v:?}"),
    }
    // Through every node (a follower proxies it), the same.
    for i in 0..3 {
        cl.aim(i);
        assert_eq!(once(&mut cl, "2", &[b"INCR", b"n"]), Value::Integer(2));
    }
    assert_eq!(once(&mut cl, "3", &[b"INCR", b"z"]), Value::Integer(1));
    // Refused: an id that is not two numbers, a read, a command without keys.
    for bad in [
        &[&b"ACCELKV.ONCE"[..], b"x", b"1", b"INCR", b"n"][..],
        &[b"ACCELKV.ONCE", b"42", b"9", b"GET", b"n"],
        &[b"ACCELKV.ONCE", b"42", b"9", b"PING"],
        &[b"ACCELKV.ONCE", b"42"],
    ] {
        match call(&mut cl, bad) {
            Value::Error(e) => assert!(e.starts_with("ERR"), "{e}"),
            v => panic!("{bad:?}: {v:?}"),
        }
    }
    // Many more entries (snapshots taken, the log before them dropped), then every node
    // restarted: each rebuilds the table from its snapshot and the log after it.
    for i in 0..200 {
        let k = format!("fill-{i}");
        assert_eq!(
            call(&mut cl, &[b"SET", k.as_bytes(), b"v"]),
            Value::Simple("OK".into())
        );
    }
    for i in 0..3 {
        c.restart(i);
    }
    let mut cl = Client::new(c.seeds());
    assert_eq!(once(&mut cl, "3", &[b"INCR", b"z"]), Value::Integer(1));
    assert_eq!(
        call(&mut cl, &[b"GET", b"n"]),
        Value::Bulk(Some(b"2".to_vec()))
    );
    // kill -9 the leader: the next one applied the same log.
    let leader = c.leader(wait);
    c.kill9(leader);
    let mut cl = Client::new(c.seeds());
    assert_eq!(once(&mut cl, "3", &[b"INCR", b"z"]), Value::Integer(1));
    // A split: the new range remembers the old range's clients (request 3 wrote "z",
    // which is the new range's now).
    match call(&mut cl, &[b"CLUSTER", b"SPLIT", b"m"]) {
        Value::Integer(_) => {}
        v => panic!("CLUSTER SPLIT: {v:?}"),
    }
    assert_eq!(once(&mut cl, "3", &[b"INCR", b"z"]), Value::Integer(1));
    assert_eq!(
        call(&mut cl, &[b"GET", b"z"]),
        Value::Bulk(Some(b"1".to_vec()))
    );
    assert_eq!(once(&mut cl, "4", &[b"INCR", b"z"]), Value::Integer(2));
}

/// Writes `SET <tag><i> <i>` one after another through node `via` (which proxies them to
/// the range's leader) while `stop` stops the leader: the outcomes, and the longest time
/// between two acknowledged writes from the moment the leader was told to stop.
fn writes_across(
    c: &mut Cluster,
    via: usize,
    tag: &'static str,
    stop: impl FnOnce(&mut Cluster),
) -> (Vec<(Vec<u8>, Outcome)>, Duration) {
    let seeds = vec![c.nodes[via].resp];
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let writer = std::thread::spawn(move || {
        let mut cl = Client::new(seeds);
        let mut out = Vec::new();
        let mut i = 0u64;
        while !d.load(Ordering::Relaxed) {
            let (k, v) = (format!("{tag}{i}"), i.to_string());
            let o = cl.call(
                &[b"SET", k.as_bytes(), v.as_bytes()],
                true,
                Duration::from_secs(10),
            );
            let mut k = k.into_bytes();
            if matches!(o, Outcome::Unknown) {
                k.extend_from_slice(format!(" ({})", cl.why_unknown).as_bytes());
            }
            out.push((k, o, Instant::now()));
            i += 1;
        }
        out
    });
    std::thread::sleep(Duration::from_millis(1000));
    let t = Instant::now();
    stop(c);
    std::thread::sleep(Duration::from_millis(2500));
    done.store(true, Ordering::Relaxed);
    let seen = writer.join().unwrap();
    let acked: Vec<Instant> = seen
        .iter()
        .filter(|(_, o, _)| matches!(o, Outcome::Done(_)))
        .map(|(.., at)| *at)
        .filter(|at| *at > t)
        .collect();
    let gap = std::iter::once(t)
        .chain(acked)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1] - w[0])
        .max()
        .unwrap_or_default();
    (seen.into_iter().map(|(k, o, _)| (k, o)).collect(), gap)
}

#[test]
fn a_planned_stop_of_the_leader_hands_over_and_no_write_is_lost_or_unknown() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let mut c = Cluster::start(3, "handover");
    let leader = c.leader(Duration::from_secs(20));
    let via = (leader + 1) % 3;
    let mut exited_cleanly = false;
    let (seen, planned) = writes_across(&mut c, via, "p", |c| exited_cleanly = c.stop(leader));
    assert!(exited_cleanly, "SIGTERM: {}", c.log(leader));
    assert!(
        c.log(leader).contains("handed 1 led range(s) over"),
        "{}",
        c.log(leader)
    );
    for (k, o) in &seen {
        assert!(
            matches!(o, Outcome::Done(Value::Simple(ok)) if ok == "OK"),
            "{}: {o:?}",
            String::from_utf8_lossy(k)
        );
    }
    let next = c.leader(Duration::from_secs(10));
    assert_ne!(next, leader);
    // The same, with the new leader killed -9 instead: the election timeout's cost.
    c.restart(leader);
    let via = (next + 1) % 3;
    let (_, crashed) = writes_across(&mut c, via, "k", |c| c.kill9(next));
    eprintln!(
        "longest pause in acknowledged writes: planned stop of the leader {planned:?}, \
         leader killed -9 {crashed:?}"
    );
    // Every acknowledged write of the planned stop is there.
    c.restart(next);
    let mut cl = Client::new(c.seeds());
    for (k, _) in &seen {
        let got = cl.call(&[b"GET", k], false, Duration::from_secs(10));
        let want = String::from_utf8_lossy(&k[1..]).into_owned().into_bytes();
        assert!(
            matches!(got, Outcome::Done(Value::Bulk(Some(ref v))) if *v == want),
            "{got:?}"
        );
    }
}

//! A data set several times `--memory-limit` with `--data-dir` (issue 18): the real
//! server loads it, serves every read and write from a leaf cache over the page file, keeps
//! its memory near the budget, and loses no acknowledged write when killed with SIGKILL
//! while writers, evictions and write-backs run; a restart rebuilds only interior nodes and
//! the leaves no page holds whole.

mod common;

use accelkv_client::Client;
use accelkv_proto::resp::{self, Value};
use accelkv_proto::Limits;
use common::Server;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const KEYS: u64 = 40_000;
/// 1 MiB with 4 KiB nodes: 256 buffers; the data set is about 6 MB of pages.
const BUDGET_MIB: &str = "1";

fn data_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-ltm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn key(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// A value that names its key and the step that wrote it, 100 bytes.
fn value(i: u64, step: u64) -> Vec<u8> {
    let mut v = format!("{i}:{step}:").into_bytes();
    v.resize(100, b'.');
    v
}

fn step_of(i: u64, v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    let mut parts = s.split(':');
    assert_eq!(parts.next().unwrap(), i.to_string(), "value of another key");
    parts.next().unwrap().parse().unwrap()
}

fn info_field(info: &str, name: &str) -> u64 {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("no {name} in INFO:\n{info}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} is not a number"))
}

fn start(d: &str) -> Server {
    start_with(d, &[])
}

/// The budgeted server of these tests with `extra` flags.
fn start_with(d: &str, extra: &[&str]) -> Server {
    let mut args = vec![
        "--data-dir",
        d,
        "--memory-limit-mib", // the older spelling of --memory-limit, still read
        BUDGET_MIB,
        "--node-size",
        "4096",
    ];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn a_data_set_larger_than_the_budget_serves_everything_and_survives_kill_9() {
    let dir = data_dir("serve");
    let d = dir.to_str().unwrap().to_string();
    let mut acked: BTreeMap<u64, u64> = BTreeMap::new();
    let server = start(&d);
    {
        let mut c = Client::connect(server.bin, None).unwrap();
        for i in 0..KEYS {
            c.put(&key(i), &value(i, 0)).unwrap();
            acked.insert(i, 0);
        }
        c.put(b"probe", b"x").unwrap();
        // Every key reads back, most of them from the page file.
        for i in (0..KEYS).step_by(3) {
            let v = c.get(&key(i)).unwrap().expect("loaded key present");
            assert_eq!(step_of(i, &v), 0);
        }
        let info = c.stats().unwrap();
        let budget = info_field(&info, "leaf_cache_budget_bytes");
        assert_eq!(budget, 1 << 20);
        assert!(info_field(&info, "leaf_cache_evictions") > 500, "{info}");
        assert!(info_field(&info, "leaf_cache_loads") > 500, "{info}");
        assert!(
            info_field(&info, "leaf_cache_evicted_leaves") > 500,
            "{info}"
        );
        // The documented bound: writers stop at 1.25 x budget + 32 nodes; reads of evicted
        // leaves may take up to 2 x budget + 64 nodes while the evictor catches up.
        let resident = info_field(&info, "leaf_cache_resident_bytes");
        assert!(resident <= 2 * budget + 64 * 4096, "{resident} of {budget}");
    }
    drop(server);
    // Rounds of random updates killed at a random moment.
    for round in 1..=4u64 {
        let mut server = start(&d);
        {
            let mut c = Client::connect(server.bin, None).unwrap();
            for (&i, &step) in acked.iter().step_by(7) {
                let v = c
                    .get(&key(i))
                    .unwrap()
                    .unwrap_or_else(|| panic!("round {round}: acknowledged key {i} lost"));
                assert!(step_of(i, &v) >= step, "round {round}: key {i} went back");
            }
            if round == 1 {
                let info = c.stats().unwrap();
                assert!(info.contains("leaves left in the page file"), "{info}");
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3u64)
            .map(|t| {
                let (stop, bin) = (stop.clone(), server.bin);
                std::thread::spawn(move || {
                    let mut mine: BTreeMap<u64, u64> = BTreeMap::new();
                    let Ok(mut c) = Client::connect(bin, None) else {
                        return mine;
                    };
                    let mut x = round * 7919 + t * 104_729;
                    let mut step = round * 1_000_000;
                    while !stop.load(Ordering::Relaxed) {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        // Writer t owns the keys i ≡ t (mod 3).
                        let i = (x >> 33) % KEYS / 3 * 3 + t;
                        if i >= KEYS {
                            continue;
                        }
                        step += 1;
                        match c.put(&key(i), &value(i, step)) {
                            Ok(_) => {
                                mine.insert(i, step);
                            }
                            Err(_) => break,
                        }
                        // Reads mixed in: loads race with the writes and evictions.
                        if step.is_multiple_of(4) {
                            let j = (x >> 17) % KEYS;
                            if c.get(&key(j)).is_err() {
                                break;
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400 + 250 * round));
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        let mut wrote = 0;
        for w in writers {
            let mine = w.join().unwrap();
            wrote += mine.len();
            acked.extend(mine);
        }
        assert!(wrote > 0, "round {round}: nothing acknowledged");
    }
    // Everything, after the last kill: each key at its acknowledged step or later.
    let server = start(&d);
    let mut c = Client::connect(server.bin, None).unwrap();
    for (&i, &step) in &acked {
        let v = c.get(&key(i)).unwrap().expect("acknowledged key present");
        assert!(step_of(i, &v) >= step, "key {i} went back");
    }
    drop(c);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Sends `cmds` at once (a pipeline) and reads their replies, in order.
fn pipeline(s: &mut std::net::TcpStream, buf: &mut Vec<u8>, cmds: &[Vec<Vec<u8>>]) -> Vec<Value> {
    use std::io::{Read, Write};
    let mut out = Vec::new();
    for c in cmds {
        let args: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
        resp::command(&mut out, &args);
    }
    s.write_all(&out).unwrap();
    let mut replies = Vec::new();
    while replies.len() < cmds.len() {
        if let Some((v, used)) = resp::parse_reply(buf, &Limits::default()).unwrap() {
            buf.drain(..used);
            replies.push(v);
            continue;
        }
        let mut b = [0u8; 65536];
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "server closed the connection");
        buf.extend_from_slice(&b[..n]);
    }
    replies
}

/// Checks a GET's reply for key `i` (absent when `i >= KEYS`); keys `i ≡ 0 (mod 7)` are
/// being rewritten, so only their owner is checked.
fn check_get(i: u64, v: &Value) {
    match v {
        Value::Bulk(Some(b)) if i < KEYS => {
            let step = step_of(i, b);
            assert!(i.is_multiple_of(7) || step == 0, "key {i} at step {step}");
        }
        Value::Bulk(None) if i >= KEYS => {}
        other => panic!("GET of key {i}: {other:?}"),
    }
}

#[test]
fn one_loop_serves_many_resp_clients_while_their_reads_wait_for_the_page_file() {
    let dir = data_dir("defer");
    let d = dir.to_str().unwrap().to_string();
    let server = start_with(&d, &["--threads", "1"]);
    {
        let mut c = Client::connect(server.bin, None).unwrap();
        for i in 0..KEYS {
            c.put(&key(i), &value(i, 0)).unwrap();
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    // A writer keeps leaves dirty and moving while the readers' leaves come and go.
    let writer = {
        let (stop, bin) = (stop.clone(), server.bin);
        std::thread::spawn(move || {
            let mut c = Client::connect(bin, None).unwrap();
            let mut step = 1;
            while !stop.load(Ordering::Relaxed) {
                let i = step * 14 % KEYS / 14 * 14;
                c.put(&key(i), &value(i, step)).unwrap();
                step += 1;
            }
        })
    };
    // A RESP writer whose SETs wait for their leaves without blocking the loop, each read
    // back in the same pipeline (read-your-writes across the wait).
    let resp_writer = {
        let (stop, addr) = (stop.clone(), server.resp);
        std::thread::spawn(move || {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = Vec::new();
            let mut step = 1u64;
            while !stop.load(Ordering::Relaxed) {
                let i = (step * 7919 * 14 % KEYS) / 14 * 14 + 7;
                let cmds = vec![
                    vec![b"SET".to_vec(), key(i), value(i, step)],
                    vec![b"GET".to_vec(), key(i)],
                ];
                let r = pipeline(&mut s, &mut buf, &cmds);
                assert_eq!(r[0], Value::Simple("OK".into()), "SET of key {i}");
                assert_eq!(
                    r[1],
                    Value::Bulk(Some(value(i, step))),
                    "GET after SET of {i}"
                );
                step += 1;
            }
            step
        })
    };
    let readers: Vec<_> = (0..6u64)
        .map(|t| {
            let (stop, addr) = (stop.clone(), server.resp);
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut buf = Vec::new();
                let mut x = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(t + 1);
                let mut rounds = 0u64;
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x % (KEYS + KEYS / 10)
                };
                while !stop.load(Ordering::Relaxed) || rounds < 20 {
                    rounds += 1;
                    // GETs (some of absent keys), an MGET, EXISTS and STRLEN in one pipeline.
                    let gets: Vec<u64> = (0..12).map(|_| next()).collect();
                    let mget: Vec<u64> = (0..5).map(|_| next()).collect();
                    let probe = next();
                    let mut cmds: Vec<Vec<Vec<u8>>> = gets
                        .iter()
                        .map(|&i| vec![b"GET".to_vec(), key(i)])
                        .collect();
                    let mut m = vec![b"MGET".to_vec()];
                    m.extend(mget.iter().map(|&i| key(i)));
                    cmds.push(m);
                    cmds.push(vec![b"EXISTS".to_vec(), key(probe)]);
                    cmds.push(vec![b"STRLEN".to_vec(), key(probe)]);
                    let r = pipeline(&mut s, &mut buf, &cmds);
                    for (&i, v) in gets.iter().zip(&r) {
                        check_get(i, v);
                    }
                    match &r[12] {
                        Value::Array(Some(vs)) => {
                            assert_eq!(vs.len(), 5);
                            for (&i, v) in mget.iter().zip(vs) {
                                check_get(i, v);
                            }
                        }
                        other => panic!("MGET: {other:?}"),
                    }
                    let present = probe < KEYS;
                    assert_eq!(r[13], Value::Integer(i64::from(present)), "EXISTS {probe}");
                    assert_eq!(
                        r[14],
                        Value::Integer(if present { 100 } else { 0 }),
                        "STRLEN {probe}"
                    );
                }
                rounds
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let rounds: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    writer.join().unwrap();
    assert!(
        resp_writer.join().unwrap() > 10,
        "the RESP writer made no progress"
    );
    let mut c = Client::connect(server.bin, None).unwrap();
    let info = c.stats().unwrap();
    // Reads missed the cache and waited for the loader threads, not on the loop's thread.
    assert!(
        info_field(&info, "leaf_cache_deferred_waits") > 100,
        "{rounds} rounds\n{info}"
    );
    assert!(
        info_field(&info, "leaf_cache_deferred_loads") > 100,
        "{info}"
    );
    drop(c);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Binary-protocol writes over TCP and UDP whose leaves live only in the page file wait for
/// the loader threads, not on the loop's thread: one loop serves several writers (writes
/// only, so every wait INFO counts is a write's), and every write is there afterwards.
#[test]
fn binary_writes_that_miss_wait_for_their_leaves_without_blocking_the_loop() {
    let dir = data_dir("defer-writes");
    let d = dir.to_str().unwrap().to_string();
    let server = start_with(&d, &["--threads", "1", "--load-threads", "3"]);
    let waits_before = {
        let mut c = Client::connect(server.bin, None).unwrap();
        for i in 0..KEYS {
            c.put(&key(i), &value(i, 0)).unwrap();
        }
        info_field(&c.stats().unwrap(), "leaf_cache_deferred_waits")
    };
    let stop = Arc::new(AtomicBool::new(false));
    // Writer t owns the keys i with i % 5 == t; TCP writers 0..4, a UDP writer 4.
    let writers: Vec<_> = (0..5u64)
        .map(|t| {
            let (stop, bin) = (stop.clone(), server.bin);
            std::thread::spawn(move || {
                let mut tcp = (t < 4).then(|| Client::connect(bin, None).unwrap());
                let mut udp =
                    (t == 4).then(|| accelkv_client::UdpClient::connect(bin, None).unwrap());
                let mut written = BTreeMap::new();
                let mut step = 1u64;
                while !stop.load(Ordering::Relaxed) || step < 20 {
                    let i = (step * 7919 * 5 % KEYS) / 5 * 5 + t;
                    let v = value(i, step);
                    match (&mut tcp, &mut udp) {
                        // Writes only: every wait counted below is a write's.
                        (Some(c), _) => {
                            c.put(&key(i), &v).unwrap();
                        }
                        (_, Some(u)) => {
                            u.put(&key(i), &v).unwrap();
                        }
                        _ => unreachable!(),
                    }
                    written.insert(i, step);
                    step += 1;
                }
                written
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let written: Vec<_> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    let mut c = Client::connect(server.bin, None).unwrap();
    let info = c.stats().unwrap();
    let waits_after = info_field(&info, "leaf_cache_deferred_waits");
    assert!(
        waits_after > waits_before + 50,
        "writes waited for their leaves: {waits_before} before\n{info}"
    );
    for (i, step) in written.into_iter().flatten() {
        let v = c.get(&key(i)).unwrap().expect("written key");
        assert_eq!(step_of(i, &v), step, "key {i}");
    }
    drop(c);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

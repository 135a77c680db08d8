//! What a client sees while a cluster splits and moves a range (docs/CLUSTER.md,
//! "Measured"): writer threads (SET) and reader threads (GET) run through the Rust cluster
//! client over a fixed key space while, at set times, a range is split by hand (`CLUSTER
//! SPLIT`) and then its replica on the leader's node is moved to a spare node (`CLUSTER
//! MOVE`). For each change it prints how long the command took, the longest time no
//! operation completed (the pause), the slowest operation, and the operations done in the
//! three seconds after it against the three seconds before the first change. Any error
//! other than a redirect fails the run. `scripts/bench-cluster-changes.sh` starts the
//! cluster and runs it.
//!
//! ```text
//! cargo run --release -p accelkv-client --example cluster_changes -- \
//!     127.0.0.1:18101,127.0.0.1:18102,127.0.0.1:18103 <spare node id> [threads]
//! ```

use accelkv_client::{ClientError, ClusterClient};
use accelkv_proto::resp::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 100_000;
const WINDOW: Duration = Duration::from_secs(3);

/// One operation: when it started and ended, from the run's start.
#[derive(Clone, Copy)]
struct Op {
    start: Duration,
    end: Duration,
}

fn key(n: u64) -> Vec<u8> {
    format!("key:{n:08}").into_bytes()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: cluster_changes <seed,seed,…> <spare node id> [threads]");
        std::process::exit(2);
    }
    let seeds: Vec<String> = args[0].split(',').map(str::to_string).collect();
    let spare: u64 = args[1].parse().expect("the spare node's id");
    let threads: usize = args.get(2).map_or(4, |t| t.parse().expect("threads"));

    // Load every key once, so reads find values: MSETs of 500 keys (the cluster starts
    // with one range, so each lies in one range).
    let mut admin = ClusterClient::connect(&seeds).expect("connect");
    for first in (0..KEYS).step_by(500) {
        let keys: Vec<Vec<u8>> = (first..(first + 500).min(KEYS)).map(key).collect();
        let mut args: Vec<&[u8]> = vec![b"MSET"];
        for k in &keys {
            args.extend([k.as_slice(), b"0123456789abcdef"]);
        }
        admin.command(&keys[0], &args, true).expect("load");
    }
    let t0 = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (seeds, stop) = (seeds.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = ClusterClient::connect(&seeds).expect("connect");
                let mut ops = Vec::with_capacity(1 << 20);
                let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = key(x % KEYS);
                    let start = t0.elapsed();
                    let r = if t % 2 == 0 {
                        c.set(&k, b"0123456789abcdef").map(|_| ())
                    } else {
                        c.get(&k).map(|_| ())
                    };
                    match r {
                        Ok(()) => ops.push(Op {
                            start,
                            end: t0.elapsed(),
                        }),
                        Err(e) => panic!("thread {t}: {e}"),
                    }
                }
                (ops, c.stats())
            })
        })
        .collect();

    let mut events = Vec::new();
    std::thread::sleep(WINDOW + Duration::from_millis(500));
    // A split of the range holding the middle key, at that key.
    let at = key(KEYS / 2);
    let began = t0.elapsed();
    let split = admin.command(&at, &[b"CLUSTER", b"SPLIT", &at], true);
    events.push(("split", began, t0.elapsed() - began, show(split)));
    std::thread::sleep(WINDOW + Duration::from_millis(500));
    // The first range's replica on its leader's node moves to the spare node.
    admin.refresh().expect("map");
    let r = admin.ranges()[0].clone();
    let leader = r
        .replicas
        .iter()
        .find(|(_, a)| Some(a) == r.leader.as_ref())
        .map(|(id, _)| *id)
        .expect("the first range's leader");
    let (id, from, to) = (r.id.to_string(), leader.to_string(), spare.to_string());
    let began = t0.elapsed();
    let moved = admin.command(
        &r.start,
        &[
            b"CLUSTER",
            b"MOVE",
            id.as_bytes(),
            from.as_bytes(),
            to.as_bytes(),
        ],
        true,
    );
    events.push(("move", began, t0.elapsed() - began, show(moved)));
    std::thread::sleep(WINDOW + Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);

    let mut ops = Vec::new();
    let (mut redirects, mut retries) = (0, 0);
    for w in workers {
        let (o, s) = w.join().expect("a worker failed");
        ops.extend(o);
        redirects += s.redirects;
        retries += s.retries;
    }
    ops.sort_by_key(|o| o.end);
    let quiet = ops
        .iter()
        .filter(|o| {
            o.end >= Duration::from_millis(500) && o.end < WINDOW + Duration::from_millis(500)
        })
        .count();
    println!(
        "{} threads ({} SET, {} GET), {} operations, {redirects} redirects and {retries} retries followed",
        threads,
        threads.div_ceil(2),
        threads / 2,
        ops.len()
    );
    println!(
        "before any change: {quiet} operations in {} s",
        WINDOW.as_secs()
    );
    println!(
        "change  answer          took      pause     slowest op  ops in next {} s",
        WINDOW.as_secs()
    );
    for (name, at, took, answer) in events {
        let window: Vec<&Op> = ops
            .iter()
            .filter(|o| o.end >= at && o.end < at + WINDOW)
            .collect();
        let mut pause = Duration::ZERO;
        let mut last = at;
        for o in &window {
            pause = pause.max(o.end - last);
            last = o.end;
        }
        let slowest = ops
            .iter()
            .filter(|o| o.start >= at && o.start < at + WINDOW)
            .map(|o| o.end - o.start)
            .max()
            .unwrap_or_default();
        println!(
            "{name:<7} {answer:<15} {:>6} ms {:>6} ms {:>10} ms  {} ({:.0}%)",
            took.as_millis(),
            pause.as_millis(),
            slowest.as_millis(),
            window.len(),
            100.0 * window.len() as f64 / quiet.max(1) as f64
        );
    }
}

fn show(r: Result<Value, ClientError>) -> String {
    match r {
        Ok(Value::Integer(n)) => format!("range {n}"),
        Ok(Value::Simple(s)) => s,
        Ok(v) => panic!("unexpected answer {v:?}"),
        Err(e) => panic!("the change failed: {e}"),
    }
}

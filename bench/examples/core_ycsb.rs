//! The store's own YCSB loop on one thread, for the side-by-side runs with Masstree
//! (docs/EVALUATION.md, "Honeycomb"; scripts/masstree-ycsb.sh): the same loop as
//! bench/masstree/ycsb.hh runs inside Masstree's test driver — same keys ("user" and 12
//! digits of the key number's FNV hash, 16 bytes), 16-byte values, same mixes and key
//! choice — with no driver between the loop and the store (accelkv-bench validates every
//! answer and records a latency per operation, which Masstree's driver does not).
//!
//! Readers: `reference` (the tree's reader, one request at a time on this thread) or
//! `inline` (reads gathered into batches of `--batch` and run through the CPU engine's
//! interleaved walk on this thread, as the server's event loops do); writes run on this
//! thread as they come.
//!
//! `cargo run --release -p accelkv-bench --example core_ycsb -- --mix c --dist zipfian`

use accelkv_bench::generator::{fnvhash64, ScrambledZipfian, Zipfian};
use accelkv_engine::{CpuEngine, EngineConfig, Found, InlineReader, ReadEngine, ReadRef, Reply};
use accelkv_tree::{Config, Store};
use clap::Parser;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
struct Args {
    /// Records loaded (by PUTs, in key-number order, which the hash scatters).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Seconds of the run.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Run exactly this many operations instead of `--secs` (for instruction counts:
    /// callgrind of two runs that differ only here gives the cost per operation, the load
    /// cancelled).
    #[arg(long)]
    ops: Option<u64>,
    /// b (95% reads, 5% updates), c (reads), d (95% reads of the newest, 5% inserts),
    /// cloud<P> (P% scans of 3–4 items, the rest inserts).
    #[arg(long, default_value = "c")]
    mix: String,
    /// uniform or zipfian (d always reads the newest).
    #[arg(long, default_value = "zipfian")]
    dist: String,
    /// reference or inline.
    #[arg(long, default_value = "inline")]
    reader: String,
    /// Reads per engine batch (inline).
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Key bytes (16 to 255): the 16-byte key, then `x` bytes (Honeycomb's key-size sweep).
    #[arg(long, default_value_t = 16)]
    key_len: usize,
    /// Items per scan (0: 3 or 4, the cloud-storage scans).
    #[arg(long, default_value_t = 0)]
    scan_len: usize,
    /// `off`: new node versions keep no old-version pointer (Honeycomb's MVCC-off mode; a
    /// benchmark mode, `Config::debug_no_old_versions`).
    #[arg(long, default_value = "on")]
    mvcc: String,
    /// The log-block threshold in bytes (`Config::log_threshold`; default 1024).
    #[arg(long)]
    log_threshold: Option<usize>,
    /// Buckets of the engine's hot-key cache (inline reader), with its control plane on a
    /// thread of its own, as the server runs it (`--cache-buckets`, default 65,536); 0
    /// turns it off.
    #[arg(long, default_value_t = 1 << 16)]
    cache_buckets: usize,
}

/// Longest key the loop makes.
const MAX_KEY: usize = 255;

/// A key: `user`, 12 decimal digits of the key number's hash (as the Masstree side's
/// loop writes it), then `x` up to the key length: written into a caller's buffer, so the
/// loop moves key numbers, not key bytes.
fn write_key(n: u64, dst: &mut [u8]) {
    dst[..4].copy_from_slice(b"user");
    let mut h = fnvhash64(n as i64) as u64 % 1_000_000_000_000;
    for d in dst[4..16].iter_mut().rev() {
        *d = b'0' + (h % 10) as u8;
        h /= 10;
    }
}

/// What one operation is, with its key number.
#[derive(Clone, Copy)]
enum Op {
    Read(u64),
    Scan(u64, usize),
    Write(u64),
}

struct Mix {
    read: f64,
    scan: f64,
    inserts: bool,
    latest: bool,
}

fn mix(name: &str) -> Mix {
    let mut m = Mix {
        read: 1.0,
        scan: 0.0,
        inserts: false,
        latest: false,
    };
    match name {
        "b" => m.read = 0.95,
        "c" => {}
        "d" => {
            m.read = 0.95;
            m.inserts = true;
            m.latest = true;
        }
        s if s.starts_with("cloud") => {
            m.read = 0.0;
            m.scan = s[5..].parse::<f64>().expect("cloud<percent>") / 100.0;
            m.inserts = true;
        }
        other => panic!("unknown mix {other}"),
    }
    m
}

fn main() {
    let a = Args::parse();
    let m = mix(&a.mix);
    let kl = a.key_len.clamp(16, MAX_KEY);
    // The key buffer of writes and reference reads ('x' past the formatted 16 bytes).
    let mut key = [b'x'; MAX_KEY];
    let defaults = Config::default();
    let config = Config {
        debug_no_old_versions: a.mvcc == "off",
        log_threshold: a.log_threshold.unwrap_or(defaults.log_threshold),
        ..defaults
    };
    let store = Arc::new(Store::new(config).expect("store"));
    let value = [b'v'; 16];
    for n in 0..a.records {
        write_key(n, &mut key);
        store.put(&key[..kl], &value).expect("load");
    }
    let scan_len = |rng: &mut SmallRng| {
        if a.scan_len == 0 {
            3 + rng.gen_range(0..2)
        } else {
            a.scan_len
        }
    };
    let engine = CpuEngine::start(
        store.clone(),
        EngineConfig {
            threads: 0,
            cache_buckets: a.cache_buckets,
            ..EngineConfig::default()
        },
    );
    let mut reader = engine.reader();
    let mut rng = SmallRng::seed_from_u64(31949);
    let mut scrambled = ScrambledZipfian::new(0, a.records - 1);
    let mut recent = Zipfian::new(0, a.records - 1);
    let mut inserted = a.records;
    let zipfian = a.dist == "zipfian";
    let mut next_op = |rng: &mut SmallRng| -> Op {
        let u: f64 = rng.gen();
        let mut existing = |rng: &mut SmallRng, last: u64| -> u64 {
            if m.latest {
                last - 1 - recent.next_from(last, rng.gen()).min(last - 1)
            } else if zipfian {
                scrambled.next(rng) % last
            } else {
                rng.gen_range(0..last)
            }
        };
        if u < m.read {
            Op::Read(existing(rng, inserted))
        } else if u < m.read + m.scan {
            Op::Scan(existing(rng, inserted), scan_len(rng))
        } else if m.inserts {
            inserted += 1;
            Op::Write(inserted - 1)
        } else {
            Op::Write(existing(rng, inserted))
        }
    };
    let inline = a.reader == "inline";
    let (mut ops, mut found) = (0u64, 0u64);
    let mut out: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut pending: Vec<Op> = Vec::with_capacity(a.batch);
    // The keys of the pending batch, `kl` bytes each.
    let mut keys: Vec<u8> = vec![b'x'; a.batch * kl];
    let start = Instant::now();
    let more = |ops: u64| match a.ops {
        Some(n) => ops < n,
        None => start.elapsed().as_secs_f64() < a.secs,
    };
    while more(ops) {
        for _ in 0..a.ops.map_or(256, |n| (n - ops).min(256)) {
            let op = next_op(&mut rng);
            ops += 1;
            match op {
                Op::Write(n) => {
                    write_key(n, &mut key);
                    store.put(&key[..kl], &value).expect("put");
                }
                Op::Read(n) | Op::Scan(n, _) if inline => {
                    let at = pending.len() * kl;
                    write_key(n, &mut keys[at..at + kl]);
                    pending.push(op);
                    if pending.len() == a.batch {
                        found += run_batch(&mut reader, &pending, &keys, kl, &mut out);
                        pending.clear();
                    }
                }
                Op::Read(n) => {
                    write_key(n, &mut key);
                    out.clear();
                    found += u64::from(
                        store
                            .get_with(&key[..kl], |v| out.extend_from_slice(v))
                            .expect("get")
                            .is_some(),
                    );
                }
                Op::Scan(n, len) => {
                    write_key(n, &mut key);
                    out.clear();
                    store
                        .scan_with(&key[..kl], None, len, |k, v| {
                            out.extend_from_slice(k);
                            out.extend_from_slice(v);
                        })
                        .expect("scan");
                    found += u64::from(!out.is_empty());
                }
            }
        }
    }
    found += run_batch(&mut reader, &pending, &keys, kl, &mut out);
    let secs = start.elapsed().as_secs_f64();
    std::hint::black_box(found);
    println!("{} {} {} {:.0}", a.mix, a.dist, a.reader, ops as f64 / secs);
    let st = engine.stats();
    if st.cache_hits + st.cache_misses > 0 {
        eprintln!(
            "hot cache: {:.1}% of {} GETs hit, {} installs, {} items now",
            100.0 * st.cache_hits as f64 / (st.cache_hits + st.cache_misses) as f64,
            st.cache_hits + st.cache_misses,
            st.cache_installs,
            engine.cache().map_or(0, |c| c.stats().items)
        );
    }
}

/// Runs the reads and scans of `ops` (their keys `kl` bytes each in `keys`, in order) as
/// one engine batch; how many found something.
fn run_batch(
    reader: &mut InlineReader,
    ops: &[Op],
    keys: &[u8],
    kl: usize,
    out: &mut Vec<u8>,
) -> u64 {
    let reqs: Vec<ReadRef<'_>> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            let k = &keys[i * kl..(i + 1) * kl];
            match *op {
                Op::Scan(_, limit) => ReadRef::Scan {
                    lo: k,
                    hi: None,
                    limit,
                },
                _ => ReadRef::Get(k),
            }
        })
        .collect();
    let mut found = 0;
    out.clear();
    reader.run(&reqs, |_, f| match f {
        Found::Value(Some(v), _) => {
            out.extend_from_slice(v);
            found += 1;
        }
        Found::Reply(Reply::Items(items)) => found += u64::from(!items.is_empty()),
        Found::Reply(_) => {}
        Found::Value(None, _) => {}
    });
    found
}

//! The reservation station measured over loopback, side by side in one run: two servers in
//! this process, one with data forwarding and one writing every operation to the tree
//! (`--forwarding false`), driven by the same clients.
//!
//! 1. Single-key fetch-and-add: client threads sending frames of `--batch` FETCH_ADDs on
//!    one key (and one per frame).
//! 2. PUT on scrambled-Zipfian (θ = 0.99) keys, frames of `--batch`.
//! 3. Vector update of 64–1024-byte vectors, 16 per frame: VECTOR update_scalar2vector `add`
//!    vs the client fetching them (a frame of GETs), changing them and writing them back (a
//!    frame of PUTs).
//!
//! `cargo run --release -p accelkv-bench --example station_bench -- --secs 3`

use accelkv_bench::generator::ScrambledZipfian;
use accelkv_client::Client;
use accelkv_proto::frame::operand::{U32, U64, UPDATE_SCALAR2VECTOR, WRAP};
use accelkv_proto::Request;
use accelkv_server::config::{Args, Settings};
use clap::Parser;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

#[derive(Parser)]
struct Opts {
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Client threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Operations per frame.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Keys of the Zipfian PUT test.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Key counts of the fetch-and-add sweep (KV-Direct's atomics against the number of
    /// keys): frames of `--batch` increments spread round robin over this many keys.
    #[arg(long, default_value = "1,4,64,1024")]
    faa_keys: String,
    /// Run only the in-process table.
    #[arg(long)]
    in_process_only: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Starts a server in this process; returns its binary-protocol address.
fn server(forwarding: bool) -> SocketAddr {
    let port = free_port();
    let args = Args {
        port: Some(port),
        resp_port: Some(free_port()),
        admin_port: Some(free_port()),
        forwarding: Some(forwarding),
        ..Args::default()
    };
    let settings = Settings::resolve(args).expect("settings");
    std::thread::spawn(move || accelkv_server::serve(settings).expect("serve"));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let t = Instant::now();
    while Client::connect(addr, None).is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    addr
}

/// Runs `f` on `threads` clients for `secs`; returns operations per second.
fn rate(
    addr: SocketAddr,
    threads: usize,
    secs: f64,
    f: impl Fn(&mut Client, &mut SmallRng, usize) -> u64 + Sync,
) -> f64 {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let f = &f;
                s.spawn(move || {
                    let mut c = Client::connect(addr, None).expect("connect");
                    let mut rng = SmallRng::seed_from_u64(t as u64 + 1);
                    let mut n = 0;
                    while Instant::now() < deadline {
                        n += f(&mut c, &mut rng, t);
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("client")).sum()
    });
    total as f64 / start.elapsed().as_secs_f64()
}

fn faa_frame(c: &mut Client, batch: usize) -> u64 {
    faa_keys_frame(c, batch, &[b"hot".to_vec()], 0)
}

/// A frame of `batch` increments over `keys`, round robin from `first`.
fn faa_keys_frame(c: &mut Client, batch: usize, keys: &[Vec<u8>], first: usize) -> u64 {
    let ops: Vec<Request<'_>> = (0..batch)
        .map(|i| Request::FetchAdd {
            id: i as u16,
            key: &keys[(first + i) % keys.len()],
            kind: U64,
            overflow: WRAP,
            delta: 1,
        })
        .collect();
    let answers = c.execute(&ops).expect("frame");
    assert!(answers
        .iter()
        .all(|a| a.status == accelkv_proto::Status::Ok));
    batch as u64
}

/// The key sets of the fetch-and-add sweep: for each count in `--faa-keys`, that many
/// counter keys.
fn counter_keys(o: &Opts) -> Vec<(usize, Vec<Vec<u8>>)> {
    o.faa_keys
        .split(',')
        .filter_map(|x| x.trim().parse::<usize>().ok())
        .map(|n| {
            (
                n,
                (0..n.max(1))
                    .map(|i| format!("ctr{i}").into_bytes())
                    .collect(),
            )
        })
        .collect()
}

/// KV-Direct's atomics in process: one thread runs frames of `--batch` fetch-and-adds over
/// `n` keys through the station itself (no network), with forwarding and without; ops/s of
/// each and the tree writes per operation.
fn in_process(o: &Opts) {
    use accelkv_server::bench_hooks::StationBench;
    println!(
        "\nIn process, one thread, frames of {} through the station (no network):\n",
        o.batch
    );
    println!("| keys | with forwarding | tree writes/op | every operation to the tree | tree writes/op | ratio |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for (n, keys) in counter_keys(o) {
        let run = |forwarding: bool| {
            let store = accelkv_tree::Store::new(accelkv_tree::Config::default()).expect("store");
            let st = StationBench::new(forwarding);
            let start = Instant::now();
            let (mut ops, mut first) = (0u64, 0usize);
            while start.elapsed().as_secs_f64() < o.secs {
                for _ in 0..64 {
                    ops += st.fetch_add_frame(&store, &keys, first, o.batch) as u64;
                    first = (first + 7) % keys.len();
                }
            }
            let rate = ops as f64 / start.elapsed().as_secs_f64();
            (rate, st.tree_writes() as f64 / ops.max(1) as f64)
        };
        let (a, wa) = run(true);
        let (b, wb) = run(false);
        println!(
            "| {n} | {a:.0} ops/s | {wa:.3} | {b:.0} ops/s | {wb:.3} | {:.1}× |",
            a / b
        );
    }
}

fn main() {
    let o = Opts::parse();
    in_process(&o);
    if o.in_process_only {
        return;
    }
    let on = server(true);
    let off = server(false);
    println!(
        "| measurement | with the station (forwarding) | every operation to the tree | ratio |"
    );
    println!("|---|---:|---:|---:|");
    let row = |name: &str, a: f64, b: f64| {
        println!(
            "| {name} | {:.0} ops/s | {:.0} ops/s | {:.1}× |",
            a,
            b,
            a / b
        );
    };
    for batch in [o.batch, 1] {
        let f = |c: &mut Client, _: &mut SmallRng, _: usize| faa_frame(c, batch);
        let (a, b) = (
            rate(on, o.threads, o.secs, f),
            rate(off, o.threads, o.secs, f),
        );
        row(
            &format!(
                "fetch-and-add, one key, {} threads, {batch} per frame",
                o.threads
            ),
            a,
            b,
        );
    }
    for (n, keys) in counter_keys(&o) {
        let f = |c: &mut Client, rng: &mut SmallRng, _: usize| {
            let first = rand::Rng::gen_range(rng, 0..keys.len());
            faa_keys_frame(c, o.batch, &keys, first)
        };
        let (a, b) = (
            rate(on, o.threads, o.secs, f),
            rate(off, o.threads, o.secs, f),
        );
        row(
            &format!(
                "fetch-and-add over {n} keys, {} threads, {} per frame",
                o.threads, o.batch
            ),
            a,
            b,
        );
    }
    let zipf = ScrambledZipfian::new(0, o.keys - 1);
    let put = |c: &mut Client, rng: &mut SmallRng, _: usize| {
        let mut z = zipf.clone();
        let keys: Vec<Vec<u8>> = (0..o.batch)
            .map(|_| format!("k{:012}", z.next(rng)).into_bytes())
            .collect();
        let ops: Vec<Request<'_>> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| Request::Put {
                id: i as u16,
                key: k,
                value: b"0123456789abcdef",
            })
            .collect();
        c.execute(&ops).expect("frame");
        o.batch as u64
    };
    let (a, b) = (
        rate(on, o.threads, o.secs, put),
        rate(off, o.threads, o.secs, put),
    );
    row(
        &format!("PUT, Zipf 0.99 over {} keys, {} per frame", o.keys, o.batch),
        a,
        b,
    );

    println!();
    println!(
        "| vector bytes | VECTOR s2v add, frames of 16 | GB/s | GET frame, change, PUT frame (client) | GB/s | ratio |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for bytes in [64usize, 128, 256, 512, 1024] {
        // Each client thread updates its own 16 vectors.
        let keys = |t: usize| -> Vec<Vec<u8>> {
            (0..16)
                .map(|i| format!("vec{bytes}-{t}-{i}").into_bytes())
                .collect()
        };
        let mut c = Client::connect(on, None).expect("connect");
        for t in 0..o.threads {
            for k in keys(t) {
                c.put(&k, &vec![0u8; bytes]).expect("put");
            }
        }
        let one = 1u32.to_le_bytes();
        let server_side = rate(on, o.threads, o.secs, |c, _, t| {
            let ks = keys(t);
            let ops: Vec<Request<'_>> = ks
                .iter()
                .enumerate()
                .map(|(i, k)| Request::Vector {
                    id: i as u16,
                    key: k,
                    op: UPDATE_SCALAR2VECTOR,
                    elem: U32,
                    overflow: WRAP,
                    function: b"add",
                    operand: &one,
                })
                .collect();
            let a = c.execute(&ops).expect("vector frame");
            assert!(a.iter().all(|a| a.status == accelkv_proto::Status::Ok));
            16
        });
        let client_side = rate(on, o.threads, o.secs, |c, _, t| {
            let ks = keys(t);
            let gets: Vec<Request<'_>> = ks
                .iter()
                .enumerate()
                .map(|(i, k)| Request::Get {
                    id: i as u16,
                    key: k,
                })
                .collect();
            let mut values: Vec<Vec<u8>> = c
                .execute(&gets)
                .expect("get frame")
                .into_iter()
                .map(|a| a.into_value().expect("get").expect("value"))
                .collect();
            for v in &mut values {
                for e in v.chunks_mut(4) {
                    let x = u32::from_le_bytes(e.try_into().expect("4 bytes")).wrapping_add(1);
                    e.copy_from_slice(&x.to_le_bytes());
                }
            }
            let puts: Vec<Request<'_>> = ks
                .iter()
                .zip(&values)
                .enumerate()
                .map(|(i, (k, v))| Request::Put {
                    id: i as u16,
                    key: k,
                    value: v,
                })
                .collect();
            c.execute(&puts).expect("put frame");
            16
        });
        let gbs = |ops: f64| ops * bytes as f64 / 1e9;
        println!(
            "| {bytes} | {server_side:.0} ops/s | {:.3} | {client_side:.0} ops/s | {:.3} | {:.1}× |",
            gbs(server_side),
            gbs(client_side),
            server_side / client_side
        );
    }
    std::process::exit(0);
}

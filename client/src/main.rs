//! `accelkv`: command-line client for accelkv-server's binary protocol.
//!
//! ```text
//! accelkv put user:1 alice
//! accelkv get user:1
//! accelkv scan user: user; --limit 10
//! accelkv incr hits 5                              # fetch-and-add, prints the old value
//! accelkv cas lock "" owner-1 --absent              # compare-and-swap
//! accelkv vput v --elem u32 1 2 3 4                 # a vector value
//! accelkv vector reduce v add 0 --elem u32          # 10
//! accelkv bench --ops 100000 --batch 64
//! accelkv --cluster 127.0.0.1:7001,127.0.0.1:7002 put user:1 alice   # a cluster (RESP)
//! accelkv --cluster 127.0.0.1:7001 scan "" ""                        # across every range
//! accelkv --cluster 127.0.0.1:7001 ranges                            # the range map
//! ```

use accelkv_client::{Client, ClientError, ClusterClient};
use accelkv_proto::operand::{Elem, Overflow, Scalar, VectorOp};
use accelkv_proto::Request;
use clap::{Parser, Subcommand};
use std::time::Instant;

#[derive(Parser)]
#[command(
    version,
    about = "Command-line client for accelkv-server (binary protocol over TCP)"
)]
struct Cli {
    /// Server address (the binary protocol port).
    #[arg(long, default_value = "127.0.0.1:7707")]
    addr: String,
    /// Password (or set ACCELKV_PASSWORD).
    #[arg(long, env = "ACCELKV_PASSWORD")]
    password: Option<String>,
    /// A cluster's nodes (their RESP addresses, comma-separated; docs/CLUSTER.md): get,
    /// put, delete, scan and ranges go through the cluster client, which routes each key
    /// to its range's leader and merges scans across ranges.
    #[arg(long, value_delimiter = ',')]
    cluster: Vec<String>,
    /// Connect over TLS (the server's --tls-binary-port), checking the server's
    /// certificate against --cacert.
    #[arg(long, requires = "cacert")]
    tls: bool,
    /// CA certificates (PEM) the server's certificate must chain to.
    #[arg(long)]
    cacert: Option<std::path::PathBuf>,
    /// This client's certificate (PEM), for a server that requires one (with --key).
    #[arg(long, requires = "key")]
    cert: Option<std::path::PathBuf>,
    /// The key of --cert (PEM).
    #[arg(long, requires = "cert")]
    key: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (default: the host of --addr).
    #[arg(long)]
    sni: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the value of a key.
    Get { key: String },
    /// Set a key to a value.
    Put { key: String, value: String },
    /// Delete a key.
    Delete { key: String },
    /// Print the items with keys in [lo, hi) ("" for hi: no upper bound).
    Scan {
        lo: String,
        #[arg(default_value = "")]
        hi: String,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Print the items from the largest key <= kl through ku.
    Floor {
        kl: String,
        ku: String,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
    /// Fetch-and-add on a 64-bit counter; prints the previous value.
    Incr {
        key: String,
        #[arg(default_value_t = 1, allow_negative_numbers = true)]
        delta: i64,
        /// Signed (i64) instead of unsigned (u64).
        #[arg(long)]
        signed: bool,
        /// wrap, checked or saturate.
        #[arg(long, default_value = "wrap")]
        overflow: String,
    },
    /// Compare-and-swap: set KEY to NEW if its value is EXPECTED (or, with --absent, if the
    /// key is absent).
    Cas {
        key: String,
        expected: String,
        new: String,
        #[arg(long)]
        absent: bool,
    },
    /// Set a key to a vector of numbers (little-endian elements of --elem).
    Vput {
        key: String,
        #[arg(allow_negative_numbers = true)]
        values: Vec<String>,
        /// u8, u16, u32, u64, i32, i64, f32 or f64.
        #[arg(long, default_value = "u32")]
        elem: String,
    },
    /// A vector operation: s2s, s2v, v2v, reduce or filter, with a registered function
    /// (add, sub, min, max, and, or, xor, set; eq, ne, lt, le, gt, ge for filters) and its
    /// operand (one number, or one per element for v2v). Prints the answer as numbers.
    Vector {
        op: String,
        key: String,
        function: String,
        #[arg(allow_negative_numbers = true)]
        operand: Vec<String>,
        #[arg(long, default_value = "u32")]
        elem: String,
        /// wrap, checked or saturate.
        #[arg(long, default_value = "wrap")]
        overflow: String,
    },
    /// Print the cluster's range map (with --cluster).
    Ranges,
    /// Check the server answers.
    Ping,
    /// Print server statistics.
    Stats,
    /// Load keys and time GETs, batching operations per frame.
    Bench {
        /// Operations of each kind.
        #[arg(long, default_value_t = 100_000)]
        ops: u32,
        /// Operations per frame.
        #[arg(long, default_value_t = 64)]
        batch: u32,
    },
}

fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => {}
        // A usage error is not a connection's.
        Err(ClientError::Io(e)) if e.kind() == std::io::ErrorKind::InvalidInput => {
            eprintln!("accelkv: {e}");
            std::process::exit(2);
        }
        Err(e) => {
            eprintln!("accelkv: {e}");
            std::process::exit(1);
        }
    }
}

fn usage(m: String) -> ClientError {
    ClientError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, m))
}

fn policy(s: &str) -> Result<u8, ClientError> {
    Overflow::from_name(s.as_bytes())
        .map(|o| o as u8)
        .ok_or_else(|| {
            usage(format!(
                "unknown overflow policy '{s}' (wrap, checked, saturate)"
            ))
        })
}

fn elem_of(s: &str) -> Result<u8, ClientError> {
    Elem::from_name(s.as_bytes())
        .map(|e| e as u8)
        .ok_or_else(|| {
            usage(format!(
                "unknown element type '{s}' (u8, u16, u32, u64, i32, i64, f32, f64)"
            ))
        })
}

/// The element type of a wire byte `elem_of` gave.
fn elem(code: u8) -> Result<Elem, ClientError> {
    Elem::from_u8(code).ok_or_else(|| usage(format!("unknown element type byte {code}")))
}

/// Numbers as little-endian elements of type `elem`.
fn encode_numbers(code: u8, xs: &[String]) -> Result<Vec<u8>, ClientError> {
    let e = elem(code)?;
    let mut out = Vec::with_capacity(xs.len() * e.width());
    for x in xs {
        let bad = || {
            usage(format!(
                "'{x}' is not a {}",
                format!("{e:?}").to_lowercase()
            ))
        };
        let n = match e {
            Elem::F32 => Scalar::Float(x.parse::<f32>().map_err(|_| bad())?.into()),
            Elem::F64 => Scalar::Float(x.parse::<f64>().map_err(|_| bad())?),
            _ => {
                let n: i128 = x.parse().map_err(|_| bad())?;
                let (lo, hi) = e.int_range();
                if !(lo..=hi).contains(&n) {
                    return Err(bad());
                }
                Scalar::Int(n)
            }
        };
        e.write(n, &mut out);
    }
    Ok(out)
}

/// Little-endian elements of type `elem` as numbers.
fn decode_numbers(code: u8, b: &[u8]) -> Result<Vec<String>, ClientError> {
    let e = elem(code)?;
    Ok(b.chunks(e.width())
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            match (e, e.read(&w)) {
                (Elem::F32, Scalar::Float(f)) => (f as f32).to_string(),
                (_, Scalar::Float(f)) => f.to_string(),
                (_, Scalar::Int(i)) => i.to_string(),
            }
        })
        .collect())
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The commands a cluster serves, through the cluster client.
fn run_cluster(cli: Cli) -> Result<(), ClientError> {
    let mut c = ClusterClient::with_password(&cli.cluster, cli.password.as_deref())?;
    match cli.cmd {
        Cmd::Get { key } => match c.get(key.as_bytes())? {
            Some(v) => println!("{}", show(&v)),
            None => println!("(nil)"),
        },
        Cmd::Put { key, value } => {
            c.set(key.as_bytes(), value.as_bytes())?;
            println!("OK");
        }
        Cmd::Delete { key } => print_deleted(c.del(key.as_bytes())?),
        Cmd::Scan { lo, hi, limit } => {
            let hi = (!hi.is_empty()).then_some(hi.as_bytes());
            print_items((c.scan(lo.as_bytes(), hi, limit as usize)?, false))
        }
        Cmd::Ranges => {
            for r in c.ranges() {
                let end = r.end.as_deref().map_or("+∞".into(), |e| format!("{:?}", show(e)));
                let leader = r.leader.as_deref().unwrap_or("?");
                let reps: Vec<String> = r.replicas.iter().map(|(n, a)| format!("{n}@{a}")).collect();
                println!(
                    "range {} [{:?}, {end}) leader {leader} replicas {}",
                    r.id,
                    show(&r.start),
                    reps.join(" ")
                );
            }
        }
        _ => {
            return Err(usage(
                "with --cluster: get, put, delete, scan and ranges (other commands: redis-cli -c against any node)".into(),
            ))
        }
    }
    Ok(())
}

fn run(cli: Cli) -> Result<(), ClientError> {
    if !cli.cluster.is_empty() {
        return run_cluster(cli);
    }
    if matches!(cli.cmd, Cmd::Ranges) {
        return Err(usage("ranges needs --cluster host:port[,…]".into()));
    }
    let mut c = if cli.tls {
        let tls = accelkv_client::TlsOptions {
            ca: cli.cacert.clone().unwrap_or_default(),
            cert: cli.cert.clone(),
            key: cli.key.clone(),
            server_name: cli.sni.clone(),
        };
        Client::connect_tls(&cli.addr, &tls, cli.password.as_deref())?
    } else {
        Client::connect(&cli.addr, cli.password.as_deref())?
    };
    match cli.cmd {
        Cmd::Get { key } => match c.get(key.as_bytes())? {
            Some(v) => println!("{}", show(&v)),
            None => {
                println!("(nil)");
            }
        },
        Cmd::Put { key, value } => {
            let v = c.put(key.as_bytes(), value.as_bytes())?;
            println!("OK (version {v})");
        }
        Cmd::Delete { key } => print_deleted(c.delete(key.as_bytes())?),
        Cmd::Scan { lo, hi, limit } => print_items(c.scan(lo.as_bytes(), hi.as_bytes(), limit)?),
        Cmd::Floor { kl, ku, limit } => {
            print_items(c.scan_floor(kl.as_bytes(), ku.as_bytes(), limit)?)
        }
        Cmd::Incr {
            key,
            delta,
            signed,
            overflow,
        } => {
            let kind = if signed { Elem::I64 } else { Elem::U64 } as u8;
            let old = c.fetch_add(key.as_bytes(), delta, kind, policy(&overflow)?)?;
            if signed {
                println!("{}", i64::from_le_bytes(old));
            } else {
                println!("{}", u64::from_le_bytes(old));
            }
        }
        Cmd::Cas {
            key,
            expected,
            new,
            absent,
        } => {
            let exp = (!absent).then_some(expected.as_bytes());
            let swapped = c.cas(key.as_bytes(), exp, new.as_bytes())?;
            println!("{}", if swapped { "swapped" } else { "mismatch" });
        }
        Cmd::Vput { key, values, elem } => {
            let e = elem_of(&elem)?;
            let v = c.put(key.as_bytes(), &encode_numbers(e, &values)?)?;
            println!("OK (version {v})");
        }
        Cmd::Vector {
            op,
            key,
            function,
            operand: args,
            elem,
            overflow,
        } => {
            let code = VectorOp::from_name(op.as_bytes())
                .map(|o| o as u8)
                .ok_or_else(|| {
                    usage(format!(
                        "unknown vector operation '{op}' (s2s, s2v, v2v, reduce, filter)"
                    ))
                })?;
            let e = elem_of(&elem)?;
            let out = c.vector(
                key.as_bytes(),
                code,
                e,
                policy(&overflow)?,
                &function,
                &encode_numbers(e, &args)?,
            )?;
            println!("{}", decode_numbers(e, &out)?.join(" "));
        }
        Cmd::Ranges => unreachable!("answered before connecting"),
        Cmd::Ping => {
            let t = Instant::now();
            c.ping(b"")?;
            println!("PONG ({:.0} µs)", t.elapsed().as_secs_f64() * 1e6);
        }
        Cmd::Stats => print!("{}", c.stats()?.replace("\r\n", "\n")),
        Cmd::Bench { ops, batch } => bench(&mut c, ops, batch.clamp(1, 1024))?,
    }
    Ok(())
}

fn print_deleted(found: bool) {
    println!("{}", if found { "deleted" } else { "(not found)" });
}

fn print_items((items, truncated): accelkv_client::ScanReply) {
    for (k, v) in &items {
        println!("{} = {}", show(k), show(v));
    }
    println!(
        "({} items{})",
        items.len(),
        if truncated {
            ", cut at the server's limit"
        } else {
            ""
        }
    );
}

fn bench(c: &mut Client, ops: u32, batch: u32) -> Result<(), ClientError> {
    let key = |i: u32| format!("bench:{i:010}").into_bytes();
    for (phase, is_put) in [("PUT", true), ("GET", false)] {
        let bar = indicatif::ProgressBar::new(u64::from(ops));
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} {per_sec}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(phase);
        let t = Instant::now();
        let mut done = 0u32;
        while done < ops {
            let n = batch.min(ops - done);
            let keys: Vec<Vec<u8>> = (done..done + n).map(key).collect();
            let reqs: Vec<Request<'_>> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    if is_put {
                        Request::Put {
                            id: i as u16,
                            key: k,
                            value: b"0123456789abcdef",
                        }
                    } else {
                        Request::Get {
                            id: i as u16,
                            key: k,
                        }
                    }
                })
                .collect();
            c.execute(&reqs)?;
            done += n;
            bar.inc(u64::from(n));
        }
        let secs = t.elapsed().as_secs_f64();
        bar.finish_and_clear();
        println!(
            "{phase}: {ops} operations in {secs:.2} s = {:.0} ops/s ({batch} per frame)",
            f64::from(ops) / secs
        );
    }
    Ok(())
}

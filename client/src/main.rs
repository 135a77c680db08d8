//! `accelkv`: command-line client for accelkv-server's binary protocol.
//!
//! ```text
//! accelkv put user:1 alice
//! accelkv get user:1
//! accelkv scan user: user; --limit 10
//! accelkv bench --ops 100000 --batch 64
//! ```

use accelkv_client::{Client, ClientError};
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
    if let Err(e) = run(cli) {
        eprintln!("accelkv: {e}");
        std::process::exit(1);
    }
}

fn show(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cli: Cli) -> Result<(), ClientError> {
    let mut c = Client::connect(&cli.addr, cli.password.as_deref())?;
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
        Cmd::Delete { key } => println!(
            "{}",
            if c.delete(key.as_bytes())? {
                "deleted"
            } else {
                "(not found)"
            }
        ),
        Cmd::Scan { lo, hi, limit } => print_items(c.scan(lo.as_bytes(), hi.as_bytes(), limit)?),
        Cmd::Floor { kl, ku, limit } => {
            print_items(c.scan_floor(kl.as_bytes(), ku.as_bytes(), limit)?)
        }
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

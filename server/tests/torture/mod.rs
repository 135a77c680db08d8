//! The crash-torture harness: the real server with a data directory, a write load over
//! RESP (SET with values inline and large enough for extension pages, overwrites that
//! change a value between the two, DEL), SIGKILL at a random moment (mostly while the load
//! runs, sometimes once it has stopped), a restart, and the checks of `check.rs` on what
//! recovery built: (a) a prefix of the writes sent, (b) nothing acknowledged lost under
//! `sync`, and under the relaxed policies only writes acknowledged within the policy's
//! window. Again and again on the same data directory, so recovery runs over a page file
//! with a long history (slots reused, incomplete commits wiped).

pub mod check;
pub mod resp;

use crate::common::Server;
use check::{id, judge, Id, Outcome, Write};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use resp::{command, Conn, Reply};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One torture run.
#[derive(Clone, Debug)]
pub struct Config {
    /// `--sync` of the server.
    pub sync: String,
    /// `--node-size` of the server.
    pub node_size: u32,
    /// Kills (each followed by a restart and the checks).
    pub crashes: usize,
    /// Keys the load writes (`t:000000` …).
    pub keys: u32,
    /// Longest the load runs before a kill.
    pub max_run: Duration,
    /// Most commands in one pipelined batch.
    pub max_batch: usize,
    pub seed: u64,
    /// `--memory-limit` of the server (the leaf cache's budget), if not the default.
    pub memory_limit: Option<String>,
    /// Write every key once before the first kill (a data set larger than the leaf cache
    /// from the start).
    pub preload: bool,
}

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub crashes: usize,
    /// Kills while the load was running (the rest: after it stopped).
    pub under_load: usize,
    pub sent: usize,
    pub acked: usize,
    /// Acknowledged writes lost, over all crashes, and the crashes that lost any.
    pub lost: usize,
    pub crashes_losing: usize,
    /// The longest any lost write had been acknowledged when the server was killed.
    pub max_lost_age: Duration,
    /// Per crash that lost something: how long before the kill its oldest lost write was
    /// acknowledged.
    pub lost_ages: Vec<Duration>,
    /// The widest spread of acknowledgement times among one crash's lost writes.
    pub max_lost_span: Duration,
    /// The policy's bound as the server reported it (INFO `durable_max_lag_ms`).
    pub max_lag: Duration,
    /// Recovery times the server reported, and the most items recovered.
    pub recovery_secs: Vec<f64>,
    pub max_items: usize,
    /// Pages of incomplete commits that recoveries discarded, summed.
    pub incomplete_pages: u64,
    /// Restarts whose recovery left leaves in the page file (a leaf cache smaller than the
    /// data), and the most delta-entry keys a recovery found.
    pub left_in_file: usize,
    pub delta_keys: u64,
    /// Writes refused with an error (a leaf cache out of room), not applied.
    pub refused: usize,
}

/// A key's name.
fn key(k: u32) -> Vec<u8> {
    format!("t:{k:06}").into_bytes()
}

/// The value written with `id`: its length and bytes follow from the id, so a value that
/// comes back torn, cut or mixed with another cannot pass. Lengths: mostly small (inline),
/// a third large enough for an extension page (up to 6 KB), some just under the inline
/// limit.
pub fn value(id: Id) -> Vec<u8> {
    let h = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let len = match h % 10 {
        0..=5 => 24 + (h >> 8) % 100,
        6..=8 => 600 + (h >> 8) % 5400,
        _ => 200 + (h >> 8) % 260,
    } as usize;
    let mut v = format!("v{id:016x}:").into_bytes();
    let mut x = h;
    while v.len() < len {
        x = x.rotate_left(7).wrapping_add(0x5851_F42D_4C95_7F2D);
        v.push(b'a' + (x % 26) as u8);
    }
    v
}

/// The id of a value read back, checking that it is whole.
fn id_of(v: &[u8]) -> Result<Id, String> {
    let bad = || {
        format!(
            "a value that was never written whole: {:?}",
            String::from_utf8_lossy(&v[..v.len().min(40)])
        )
    };
    let hex = v.get(1..17).ok_or_else(bad)?;
    let id =
        u64::from_str_radix(std::str::from_utf8(hex).map_err(|_| bad())?, 16).map_err(|_| bad())?;
    if value(id) != v {
        return Err(bad());
    }
    Ok(id)
}

/// Every key's value id, read with MGET.
fn read_all(c: &mut Conn, keys: u32) -> Result<HashMap<u32, Id>, String> {
    let mut out = HashMap::new();
    for lo in (0..keys).step_by(256) {
        let hi = (lo + 256).min(keys);
        let names: Vec<Vec<u8>> = (lo..hi).map(key).collect();
        let mut args: Vec<&[u8]> = vec![b"MGET"];
        args.extend(names.iter().map(Vec::as_slice));
        match c.call(&args)? {
            Reply::Array(items) if items.len() == names.len() => {
                for (k, r) in (lo..hi).zip(items) {
                    match r {
                        Reply::Bulk(Some(v)) => {
                            out.insert(k, id_of(&v)?);
                        }
                        Reply::Bulk(None) => {}
                        r => return Err(format!("MGET item {r:?}")),
                    }
                }
            }
            r => return Err(format!("MGET answered {r:?}")),
        }
    }
    match c.call(&[b"DBSIZE"])? {
        Reply::Int(n) if n as usize == out.len() => Ok(out),
        r => Err(format!(
            "DBSIZE says {r:?} but {} keys of the key space are present",
            out.len()
        )),
    }
}

/// Sets every key once, pipelined, each acknowledged (a SET refused for memory, which a
/// leaf cache answers while its evictor catches up, is sent again); then waits well past
/// the relaxed policies' window, so the preloaded state is what a kill leaves.
fn preload(c: &mut Conn, keys: u32) -> Result<(), String> {
    let mut buf = Vec::new();
    let mut todo: Vec<u32> = (0..keys).collect();
    let mut rounds = 0;
    while !todo.is_empty() {
        rounds += 1;
        if rounds > 1000 {
            return Err(format!("{} preload SETs still refused", todo.len()));
        }
        let mut refused = Vec::new();
        for batch in todo.chunks(500) {
            buf.clear();
            for &k in batch {
                command(&mut buf, &[b"SET", &key(k), &value(id(0x7fff_ffff, k))]);
            }
            c.send(&buf).map_err(|e| e.to_string())?;
            let mut got = 0;
            while got < batch.len() {
                let (replies, _) = c.replies().map_err(|e| e.to_string())?;
                for r in replies {
                    match &r {
                        Reply::Simple(s) if s == "OK" => {}
                        Reply::Error(e) if e.starts_with("OOM") => refused.push(batch[got]),
                        _ => return Err(format!("preload SET answered {r:?}")),
                    }
                    got += 1;
                }
            }
        }
        if !refused.is_empty() {
            std::thread::sleep(Duration::from_millis(20));
        }
        todo = refused;
    }
    std::thread::sleep(Duration::from_millis(200));
    Ok(())
}

/// The write load of one cycle: pipelined batches on one connection until `stop` or the
/// connection dies. Returns the writes sent, with their acknowledgement times.
fn load(
    addr: std::net::SocketAddr,
    cfg: &Config,
    cycle: u32,
    seed: u64,
    stop: &AtomicBool,
) -> Result<Vec<Write>, String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut c = Conn::connect(addr).map_err(|e| e.to_string())?;
    let mut history: Vec<Write> = Vec::new();
    let mut buf = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let n = rng.gen_range(1..=cfg.max_batch);
        let first = history.len();
        buf.clear();
        for _ in 0..n {
            let k = rng.gen_range(0..cfg.keys);
            let name = key(k);
            if rng.gen_ratio(3, 20) {
                command(&mut buf, &[b"DEL", &name]);
                history.push(Write {
                    key: k,
                    value: 0,
                    acked: None,
                    refused: false,
                });
            } else {
                let v = id(cycle, history.len() as u32);
                command(&mut buf, &[b"SET", &name, &value(v)]);
                history.push(Write {
                    key: k,
                    value: v,
                    acked: None,
                    refused: false,
                });
            }
        }
        if c.send(&buf).is_err() {
            return Ok(history);
        }
        let mut next = first;
        while next < history.len() {
            let Ok((replies, at)) = c.replies() else {
                return Ok(history);
            };
            for r in replies {
                let w = history.get_mut(next).ok_or("more replies than commands")?;
                next += 1;
                match (&r, w.value) {
                    (Reply::Simple(s), v) if s == "OK" && v != 0 => {}
                    (Reply::Int(0 | 1), 0) => {}
                    // A leaf cache refuses a write while its evictor cannot make room (a
                    // clear error; the write is not applied): judged as never acknowledged.
                    (Reply::Error(e), _) if cfg.memory_limit.is_some() && e.starts_with("OOM") => {
                        w.refused = true;
                        continue;
                    }
                    _ => return Err(format!("write {} answered {r:?}", next - 1)),
                }
                w.acked = Some(at);
            }
        }
    }
    Ok(history)
}

fn info_value<'a>(info: &'a [(String, String)], k: &str) -> Option<&'a str> {
    info.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
}

/// Runs `cfg.crashes` kill-restart-check cycles in a fresh data directory. `Err` on the
/// first violation, saying what was found.
pub fn run(cfg: &Config) -> Result<Summary, String> {
    let dir = std::env::temp_dir().join(format!(
        "accelkv-torture-{}-{}-{}-{}",
        cfg.sync.replace('=', ""),
        cfg.node_size,
        cfg.memory_limit.as_deref().unwrap_or("all"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().ok_or("temp dir is not UTF-8")?.to_string();
    let ns = cfg.node_size.to_string();
    let mut args = vec![
        "--data-dir",
        d.as_str(),
        "--sync",
        cfg.sync.as_str(),
        "--node-size",
        ns.as_str(),
        "--engine",
        "cpu",
    ];
    if let Some(m) = &cfg.memory_limit {
        args.extend(["--memory-limit", m.as_str()]);
    }
    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut sum = Summary::default();
    let mut base: HashMap<u32, Id> = HashMap::new();
    let mut pending: Option<(Vec<Write>, Instant)> = None;
    for cycle in 0..=cfg.crashes as u32 {
        let mut server = Server::start(&args);
        let mut c = Conn::connect(server.resp).map_err(|e| e.to_string())?;
        if cycle == 0 && cfg.preload {
            preload(&mut c, cfg.keys)?;
        }
        let info = c.info()?;
        let recovered = read_all(&mut c, cfg.keys).map_err(|e| format!("cycle {cycle}: {e}"))?;
        if let Some(secs) = info_value(&info, "recovery")
            .and_then(|r| r.split(" in ").nth(1))
            .and_then(|r| r.split(' ').next())
            .and_then(|s| s.parse::<f64>().ok())
        {
            sum.recovery_secs.push(secs);
        }
        if let Some(n) = info_value(&info, "recovery")
            .and_then(|r| r.split(" pages of an incomplete commit").next())
            .and_then(|r| r.rsplit(' ').next())
            .and_then(|s| s.parse::<u64>().ok())
        {
            sum.incomplete_pages += n;
        }
        let rec = info_value(&info, "recovery").unwrap_or("");
        if rec.contains("leaves left in the page file") {
            sum.left_in_file += 1;
        }
        if let Some(n) = rec
            .split(" keys newer than their leaf page")
            .next()
            .and_then(|r| r.rsplit(['(', ' ']).next())
            .and_then(|s| s.parse::<u64>().ok())
        {
            sum.delta_keys = sum.delta_keys.max(n);
        }
        sum.max_lag = info_value(&info, "durable_max_lag_ms")
            .and_then(|s| s.parse::<f64>().ok())
            .map(|ms| Duration::from_secs_f64(ms / 1e3))
            .unwrap_or_default();
        sum.max_items = sum.max_items.max(recovered.len());
        if let Some((history, killed)) = pending.take() {
            let o: Outcome = judge(&base, &history, &recovered, killed).map_err(|e| {
                format!(
                    "{} node {} cycle {cycle}: {e} (recovery: {})",
                    cfg.sync,
                    cfg.node_size,
                    info_value(&info, "recovery").unwrap_or("?")
                )
            })?;
            sum.sent += o.sent;
            sum.acked += o.acked;
            if o.lost > 0 {
                sum.lost += o.lost;
                sum.crashes_losing += 1;
                let age = o.oldest_lost_age.unwrap_or_default();
                sum.lost_ages.push(age);
                sum.max_lost_age = sum.max_lost_age.max(age);
                sum.max_lost_span = sum.max_lost_span.max(o.lost_span.unwrap_or_default());
            }
        }
        base = recovered;
        drop(c);
        if cycle as usize == cfg.crashes {
            break;
        }
        // The load, then the kill: mostly while it runs, one time in four once it stopped.
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, stop2, cfg2, seed) = (server.resp, stop.clone(), cfg.clone(), rng.gen());
        let writer = std::thread::spawn(move || load(addr, &cfg2, cycle, seed, &stop2));
        std::thread::sleep(Duration::from_micros(
            rng.gen_range(0..cfg.max_run.as_micros() as u64),
        ));
        let idle = rng.gen_ratio(1, 4);
        if idle {
            stop.store(true, Ordering::Relaxed);
            while !writer.is_finished() {
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_micros(rng.gen_range(0..30_000)));
        } else {
            sum.under_load += 1;
        }
        let killed = Instant::now();
        server.child.kill().map_err(|e| e.to_string())?;
        let _ = server.child.wait();
        stop.store(true, Ordering::Relaxed);
        let mut history = writer
            .join()
            .map_err(|_| "the load thread panicked".to_string())??;
        sum.refused += history.iter().filter(|w| w.refused).count();
        history.retain(|w| !w.refused);
        sum.crashes += 1;
        pending = Some((history, killed));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(sum)
}

/// One line of the report table.
pub fn report_row(cfg: &Config, s: &Summary) -> String {
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
    let mut ages = s.lost_ages.clone();
    ages.sort();
    let p = |q: f64| {
        ages.get(((ages.len() as f64 - 1.0) * q).round() as usize)
            .map_or("-".to_string(), |d| ms(*d))
    };
    let mut rec = s.recovery_secs.clone();
    rec.sort_by(f64::total_cmp);
    let sync = match &cfg.memory_limit {
        Some(m) => format!("{}`, `--memory-limit {m}", cfg.sync),
        None => cfg.sync.clone(),
    };
    format!(
        "| `{}` | {} | {} ({} under load) | {} | {} | {} in {} crashes | {} / {} / {} | {} | {} | {:.3} / {:.3} | {} |",
        sync,
        cfg.node_size,
        s.crashes,
        s.under_load,
        s.sent,
        s.acked,
        s.lost,
        s.crashes_losing,
        p(0.5),
        p(0.99),
        ms(s.max_lost_age),
        ms(s.max_lost_span),
        ms(s.max_lag),
        rec.get(rec.len() / 2).copied().unwrap_or(0.0),
        rec.last().copied().unwrap_or(0.0),
        s.incomplete_pages
    )
}

/// The header of the report table.
pub const REPORT_HEADER: &str = "| `--sync` | node | kills | writes sent | acknowledged | acknowledged and lost | age of the oldest lost write at the kill, ms (median / p99 / max) | spread of lost acks, ms (max) | bound (`durable_max_lag_ms`) | recovery s (median / max) | pages of incomplete commits wiped |\n|---|---|---|---|---|---|---|---|---|---|---|";

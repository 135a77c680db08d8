//! The driver at tiny scale (`--quick`) against every in-process target, a target that answers
//! wrongly (it must fail the run), and the network targets against real servers: the
//! `accelkv-server` binary, and Redis and memcached when installed (`.ci/run` installs them;
//! under CI their absence fails the test).

use accelkv_bench::record::RecordShape;
use accelkv_bench::runner::Length;
use accelkv_bench::suite::{run_suite, Suite};
use accelkv_bench::target::{self, Conn, Op, Outcome, Target};
use accelkv_bench::workload::{Dist, Workload};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn check_complete(suite: &Suite) {
    let r = run_suite(suite, |l| eprintln!("{l}"));
    assert!(!r.failed(), "{}", accelkv_bench::report::markdown(&r, None));
    let targets = suite.targets.len();
    // D runs once; every other workload once per distribution.
    let per_target = (suite.workloads.len() - 1) * suite.dists.len() + 1;
    assert_eq!(r.runs.len(), targets * per_target);
    for run in &r.runs {
        if run.skipped.is_some() {
            continue;
        }
        assert!(run.ops > 0, "{run:?}");
        assert!(
            run.validated > 0,
            "{} {} validated nothing",
            run.target,
            run.workload
        );
        assert!(run.throughput > 0.0);
    }
}

#[test]
fn quick_suite_runs_every_in_process_target() {
    check_complete(&Suite::quick(Suite::local_targets()));
}

/// The durable targets (accelkv with a data directory under each sync policy, and RocksDB
/// and LMDB with the same policies when built with them) answer every workload correctly.
#[test]
fn quick_suite_runs_the_durable_targets() {
    let mut t = vec![
        "accelkv-durable".to_string(),
        "accelkv-durable=none".into(),
        "accelkv-durable=interval=2".into(),
    ];
    if cfg!(feature = "rocksdb") {
        t.extend(["rocksdb=sync".to_string(), "rocksdb=none".into()]);
    }
    if cfg!(feature = "lmdb") {
        t.extend(["lmdb=sync".to_string(), "lmdb=none".into()]);
        assert!(target::parse("lmdb=cache=32", None).is_err());
    }
    let mut s = Suite::quick(t);
    s.settings.shape = RecordShape::Ycsb;
    check_complete(&s);
    assert!(target::parse("accelkv-durable=sometimes", None).is_err());
}

#[test]
fn quick_suite_with_ycsb_records_and_single_operations() {
    let mut s = Suite::quick(vec!["accelkv".into(), "accelkv-engine".into()]);
    s.settings.shape = RecordShape::Ycsb;
    s.settings.batch = 1;
    s.settings.length = Length::Time(Duration::from_millis(100));
    check_complete(&s);
}

/// A target that answers like a `BTreeMap` except for one planted fault.
struct Faulty {
    inner: Box<dyn Target>,
    fault: Fault,
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Reads return another key's value.
    SwapValues,
    /// Reads of some keys find nothing.
    LoseKeys,
    /// Scans skip their first item.
    ScanSkipsStart,
    /// Values come back one byte short.
    Truncate,
}

struct FaultyConn {
    inner: Box<dyn Conn>,
    fault: Fault,
    last: Option<Vec<u8>>,
    n: u64,
}

impl Target for Faulty {
    fn name(&self) -> String {
        format!("faulty-{:?}", self.fault)
    }

    fn connect(&self) -> target::Result<Box<dyn Conn>> {
        Ok(Box::new(FaultyConn {
            inner: self.inner.connect()?,
            fault: self.fault,
            last: None,
            n: 0,
        }))
    }
}

impl Conn for FaultyConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> target::Result<()> {
        let from = out.len();
        self.inner.execute(ops, out)?;
        for o in &mut out[from..] {
            self.n += 1;
            match (self.fault, o) {
                (Fault::SwapValues, Outcome::Value(Some(v))) => {
                    let prev = self.last.replace(v.clone());
                    if let Some(p) = prev.filter(|p| p != v) {
                        *v = p;
                    }
                }
                (Fault::LoseKeys, Outcome::Value(v)) if self.n.is_multiple_of(97) => *v = None,
                (Fault::ScanSkipsStart, Outcome::Items(items)) if !items.is_empty() => {
                    items.remove(0);
                }
                (Fault::Truncate, Outcome::Value(Some(v))) => {
                    v.pop();
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[test]
fn a_wrong_answer_fails_the_run() {
    let s = Suite::quick(Vec::new()).settings;
    for (fault, workload) in [
        (Fault::SwapValues, Workload::C),
        (Fault::LoseKeys, Workload::B),
        (Fault::ScanSkipsStart, Workload::E),
        (Fault::Truncate, Workload::F),
    ] {
        let t = Faulty {
            inner: target::parse("btreemap", None).expect("btreemap"),
            fault,
        };
        let (state, _) = accelkv_bench::runner::load(&t, &s).expect("load");
        let r = accelkv_bench::runner::run(&t, &state, workload, Dist::Uniform, &s, 1);
        assert!(r.error.is_some(), "{fault:?} was not caught: {r:?}");
        eprintln!("{fault:?}: {}", r.error.unwrap_or_default());
    }
}

#[test]
fn unknown_targets_and_missing_addresses_are_clear_errors() {
    let e = target::parse("mongodb", None).err().expect("unknown").0;
    assert!(e.contains("unknown target 'mongodb'"), "{e}");
    let e = target::parse("redis", None).err().expect("no address").0;
    assert!(e.contains("redis=HOST:PORT"), "{e}");
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A server process, killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listening on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The workspace's accelkv-server binary (built by `cargo test --workspace`; built here if
/// this crate's tests run alone).
fn server_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let profile_dir = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent()?.parent().map(PathBuf::from))
        .unwrap_or_else(|| target.join("debug"));
    let bin = profile_dir.join("accelkv-server");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let release = profile_dir.ends_with("release");
        let mut c = Command::new(cargo);
        c.args(["build", "-p", "accelkv-server"]);
        if release {
            c.arg("--release");
        }
        assert!(c.status().expect("cargo build").success());
    }
    bin
}

fn have(cmd: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        accelkv_testkit::skip(&format!(
            "{cmd} is not installed: its runs are left out (.ci/run installs it)"
        ));
    }
    found
}

/// A fresh accelkv-server (each network target gets its own, so one target's records do not
/// meet the next one's) and its listening line.
fn accelkv_server() -> (Proc, String) {
    let mut child = Command::new(server_binary())
        .args([
            "--port",
            "0",
            "--resp-port",
            "0",
            "--admin-port",
            "0",
            "--engine-threads",
            "1",
            "--password",
            "bench-secret",
        ])
        .env_remove("ACCELKV_PASSWORD")
        .stdout(Stdio::piped())
        .spawn()
        .expect("start accelkv-server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("listening line");
    (Proc(child), line)
}

fn addr(line: &str, tag: &str) -> String {
    let at = line.find(tag).expect("address tag") + tag.len();
    line[at..]
        .split_whitespace()
        .next()
        .expect("address")
        .to_string()
}

#[test]
fn quick_suite_over_the_network() {
    let mut servers = Vec::new();
    let mut targets = Vec::new();
    for (kind, tag) in [
        ("accelkv-tcp", "tcp+udp "),
        ("accelkv-udp", "tcp+udp "),
        ("accelkv-resp", "resp "),
    ] {
        let (p, line) = accelkv_server();
        targets.push(format!("{kind}={}", addr(&line, tag)));
        servers.push(p);
    }
    let mut peers = Vec::new();
    if have("redis-server") {
        let port = free_port();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        peers.push(Proc(child));
        wait_for_port(port);
        targets.push(format!("redis=127.0.0.1:{port}"));
    }
    if have("memcached") {
        let port = free_port();
        let child = Command::new("memcached")
            .args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-m",
                "256",
                "-u",
                "root",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("start memcached");
        peers.push(Proc(child));
        wait_for_port(port);
        targets.push(format!("memcached=127.0.0.1:{port}"));
    }
    let mut s = Suite::quick(targets);
    s.password = Some("bench-secret".into());
    check_complete(&s);
}

#[test]
fn the_binary_runs_quick_and_writes_its_report() {
    let dir = std::env::temp_dir().join(format!("accelkv-bench-quick-{}", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_accelkv-bench"))
        .args([
            "--quick",
            "-t",
            "accelkv",
            "-t",
            "btreemap",
            "--baseline",
            "btreemap",
        ])
        .arg("--out")
        .arg(&dir)
        .output()
        .expect("run accelkv-bench");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let md = String::from_utf8_lossy(&o.stdout);
    assert!(md.contains("| A | uniform |"), "{md}");
    assert!(md.contains("×)"), "ratios to the baseline: {md}");
    for f in ["report.md", "results.json", "throughput.svg"] {
        assert!(dir.join(f).exists(), "{f} written");
    }
    // The results merge back into the same report.
    let m = Command::new(env!("CARGO_BIN_EXE_accelkv-bench"))
        .arg("--merge")
        .arg(dir.join("results.json"))
        .output()
        .expect("merge");
    assert!(m.status.success());
    assert!(String::from_utf8_lossy(&m.stdout).contains("| cloud-90 | zipfian |"));
    let _ = std::fs::remove_dir_all(&dir);

    let bad = Command::new(env!("CARGO_BIN_EXE_accelkv-bench"))
        .args(["--quick", "-t", "mongodb"])
        .output()
        .expect("run accelkv-bench");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown target 'mongodb'"));
}

//! The server's log (server/src/logging.rs): at the default level its startup events carry
//! a timestamp, the level and the module; `--log-level warn` leaves the INFO events out;
//! `--log-format json --log-file F` appends one JSON object per line to F and nothing to
//! stderr; a bad level or format is refused at start with the flag's name.

mod common;

use common::Server;
use std::io::Read;
use std::process::{Command, Stdio};

/// Starts the server with `args` (on free ports; its listening line read), asks it to stop
/// (SIGTERM), and answers what it wrote to stderr.
fn run(args: &[&str]) -> String {
    let all: Vec<&str> = ["--engine", "cpu"].iter().chain(args).copied().collect();
    let mut srv = Server::start_with(&all, |cmd| {
        cmd.env_remove("RUST_LOG").stderr(Stdio::piped());
    });
    let child = &mut srv.child;
    // SAFETY: kill(2) on the child's own pid, which this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

#[test]
fn default_level_logs_startup_with_time_level_and_module() {
    let err = run(&[]);
    let line = err
        .lines()
        .find(|l| l.contains("shutting down"))
        .unwrap_or_else(|| panic!("{err}"));
    // `2026-11-26T15:00:00.123456Z  INFO accelkv_server: shutting down`
    assert!(line.starts_with("20") && line.contains('T'), "{line}");
    assert!(
        line.contains(" INFO ") && line.contains("accelkv_server"),
        "{line}"
    );
    assert!(
        !line.contains('\u{1b}'),
        "no colours off a terminal: {line:?}"
    );
}

#[test]
fn warn_level_leaves_info_out() {
    let err = run(&["--log-level", "warn"]);
    assert!(!err.contains("INFO"), "{err}");
    assert!(!err.contains("shutting down"), "{err}");
}

#[test]
fn json_lines_go_to_the_log_file() {
    let path = std::env::temp_dir().join(format!("accelkv-log-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let p = path.to_str().unwrap();
    let err = run(&["--log-format", "json", "--log-file", p]);
    assert!(err.is_empty(), "stderr: {err}");
    let text = std::fs::read_to_string(&path).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let stop = events
        .iter()
        .find(|e| e["fields"]["message"] == "shutting down")
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(stop["level"], "INFO");
    assert!(stop["timestamp"]
        .as_str()
        .is_some_and(|t| t.starts_with("20")));
    // Appends: a second run adds its lines after the first's.
    run(&["--log-format", "json", "--log-file", p]);
    let again = std::fs::read_to_string(&path).unwrap();
    assert!(again.starts_with(&text) && again.len() > text.len());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_bad_level_or_format_is_refused_at_start() {
    for (flag, value) in [
        ("--log-level", "loud"),
        ("--log-level", "info,warn=x=y"),
        ("--log-format", "xml"),
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
            .args([
                flag,
                value,
                "--port",
                "0",
                "--resp-port",
                "0",
                "--admin-port",
                "0",
            ])
            .args(["--memcached-port", "off"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let t = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > std::time::Duration::from_secs(20) {
                let _ = child.kill();
                panic!("{flag} {value}: the server started");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(2));
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(err.contains(&format!("{flag} {value}")), "{err}");
    }
}

//! While the data directory is recovered the ports answer instead of hanging: `-LOADING`
//! over RESP (redis-py raises its BusyLoadingError), `SERVER_ERROR loading` over memcached,
//! status LOADING in binary frames, /health 503 with how far recovery has read, /metrics
//! `accelkv_loading 1`; a connection made meanwhile is served as any other once recovery
//! ends, with the command it had half sent.
//!
//! `ACCELKV_TEST_LOAD_DELAY_US` (as Redis's `key-load-delay`) makes recovery of a small store
//! last long enough to look at.

mod common;

use accelkv_proto::frame::{decode_response, encode_request};
use accelkv_proto::{Limits, Request, Status};
use common::{RespConn, Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to `addr` once the server bound it.
fn connect(addr: SocketAddr) -> TcpStream {
    let t = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{addr} never bound");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes `req` and reads until the reply ends with `end`.
fn ask(s: &mut TcpStream, req: &[u8], end: &[u8]) -> String {
    s.write_all(req).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !got.ends_with(end) {
        let n = s.read(&mut b).expect("a reply");
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&b[..n]);
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn http(addr: SocketAddr, path: &str) -> String {
    let mut s = connect(addr);
    write!(s, "GET {path} HTTP/1.1\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text
}

/// A data directory holding `n` keys `key:N` (DEBUG POPULATE), written and then the server
/// killed with SIGKILL.
fn store_of(n: usize) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("accelkv-loading-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut srv = Server::start(&["--data-dir", dir.to_str().unwrap()]);
    let mut c = RespConn::new(&srv);
    c.str(&["DEBUG", "POPULATE", &n.to_string()]);
    let _ = srv.child.kill();
    let _ = srv.child.wait();
    dir
}

#[test]
fn every_port_answers_loading_during_recovery_then_serves() {
    let dir = store_of(20_000);
    let ports: Vec<u16> = (0..4).map(|_| free_port()).collect();
    let at = |i: usize| SocketAddr::from(([127, 0, 0, 1], ports[i]));
    let mut child = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args([
            "--port",
            &ports[0].to_string(),
            "--resp-port",
            &ports[1].to_string(),
        ])
        .args(["--admin-port", &ports[2].to_string()])
        .args(["--memcached-port", &ports[3].to_string()])
        .arg("--data-dir")
        .arg(&dir)
        .env("ACCELKV_TEST_LOAD_DELAY_US", "4000")
        .env_remove("ACCELKV_PASSWORD")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });

    let mut resp = connect(at(1));
    let ping = ask(&mut resp, b"*1\r\n$4\r\nPING\r\n", b"\r\n");
    assert_eq!(
        ping,
        "-LOADING accelkv is loading the dataset in memory\r\n"
    );
    let info = ask(&mut resp, b"*1\r\n$4\r\nINFO\r\n", b"\r\n\r\n");
    assert!(info.contains("loading:1\r\n"), "{info}");
    let mut mc = connect(at(3));
    let got = ask(
        &mut mc,
        b"get key:1\r\nset a 0 0 1\r\nx\r\nmn\r\n",
        b"MN\r\n",
    );
    assert_eq!(
        got,
        "SERVER_ERROR loading\r\nSERVER_ERROR loading\r\nMN\r\n"
    );
    binary_answers_loading(at(0));
    let health = http(at(2), "/health");
    assert!(health.starts_with("HTTP/1.1 503"), "{health}");
    assert!(health.contains("loading: "), "{health}");
    let metrics = http(at(2), "/metrics");
    assert!(metrics.contains("\naccelkv_loading 1"), "{metrics}");
    redis_py_sees_busy_loading(ports[1]);
    // Half a command now, the rest once the server serves: the loop that adopts the
    // connection runs it.
    resp.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nke").unwrap();
    let line = listening
        .recv_timeout(Duration::from_secs(120))
        .expect("recovery ended");
    assert!(line.contains("listening"), "{line}");
    assert_eq!(
        ask(&mut resp, b"y:7\r\n", b"value:7\r\n"),
        "$7\r\nvalue:7\r\n"
    );
    assert_eq!(
        ask(&mut resp, b"*1\r\n$4\r\nPING\r\n", b"\r\n"),
        "+PONG\r\n"
    );
    assert!(http(at(2), "/health").starts_with("HTTP/1.1 200"));
    assert!(http(at(2), "/metrics").contains("\naccelkv_loading 0"));
    let got = ask(&mut mc, b"get key:3\r\n", b"END\r\n");
    assert_eq!(got, "VALUE key:3 0 7\r\nvalue:3\r\nEND\r\n");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A frame of two operations: each answered LOADING with its id.
fn binary_answers_loading(addr: SocketAddr) {
    let mut s = connect(addr);
    let mut frame = Vec::new();
    let ops = [
        Request::Get {
            id: 4,
            key: b"key:1",
        },
        Request::Get {
            id: 9,
            key: b"key:2",
        },
    ];
    encode_request(&mut frame, 77, None, &ops);
    s.write_all(&frame).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    let limits = Limits::default();
    loop {
        if let Ok((h, answers)) = decode_response(&got, &limits) {
            assert_eq!(h.frame_id, 77);
            let seen: Vec<(u16, Status)> = answers.iter().map(|a| (a.id, a.status)).collect();
            assert_eq!(seen, [(4, Status::Loading), (9, Status::Loading)]);
            return;
        }
        let n = s.read(&mut b).expect("a binary reply");
        assert!(n > 0, "closed");
        got.extend_from_slice(&b[..n]);
    }
}

/// redis-py (where installed; else skipped and listed) raises BusyLoadingError, its class for
/// Redis's `-LOADING` (with its retries off: by default it retries that error).
fn redis_py_sees_busy_loading(port: u16) {
    let py = format!(
        "import redis\nfrom redis.retry import Retry\nfrom redis.backoff import NoBackoff\ntry:\n    redis.Redis(port={port}, retry=Retry(NoBackoff(), 0)).get('key:1')\nexcept redis.exceptions.BusyLoadingError as e:\n    print('busy:', e)\n"
    );
    match Command::new("python3").args(["-c", &py]).output() {
        Ok(o) if o.status.success() => {
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(out.starts_with("busy: "), "{out}{err}");
        }
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'redis'") => {
            accelkv_testkit::skip("redis-py is not installed (.ci/run installs it)")
        }
        Err(_) => accelkv_testkit::skip("python3 is not installed"),
        Ok(o) => panic!("redis-py: {}", String::from_utf8_lossy(&o.stderr)),
    }
}

//! SHUTDOWN stops the server as SIGTERM does: the connection closes without a reply, the
//! process exits 0, and with a data directory what was written is there after a restart
//! (under `--sync interval=60000`, so the last writes are synced by the shutdown's final
//! flush, not by the interval); NOSAVE exits too, keeping what was written; the refusals
//! (ABORT, SAVE with NOSAVE, inside MULTI) leave the server serving.

mod common;

use accelkv_proto::resp::Value;
use common::{err_starts, RespConn, Server};
use std::time::{Duration, Instant};

/// Sends SHUTDOWN with `args`: no reply, the connection closed, the process gone with 0.
fn shut_down(mut srv: Server, args: &[&str]) {
    let mut c = RespConn::new(&srv);
    let mut cmd = vec!["SHUTDOWN"];
    cmd.extend_from_slice(args);
    let a: Vec<&[u8]> = cmd.iter().map(|a| a.as_bytes()).collect();
    assert_eq!(
        c.try_call(&a),
        None,
        "SHUTDOWN answers nothing: the connection closes"
    );
    let t = Instant::now();
    loop {
        if let Some(status) = srv.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_stops_an_in_memory_server() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    assert!(err_starts(
        &c.str(&["SHUTDOWN", "ABORT"]),
        "ERR No shutdown in progress"
    ));
    assert!(err_starts(
        &c.str(&["SHUTDOWN", "SAVE", "NOSAVE"]),
        "ERR syntax error"
    ));
    assert!(err_starts(
        &c.str(&["SHUTDOWN", "LATER"]),
        "ERR syntax error"
    ));
    c.str(&["MULTI"]);
    assert!(err_starts(
        &c.str(&["SHUTDOWN"]),
        "ERR Command not allowed inside a transaction"
    ));
    c.str(&["DISCARD"]);
    assert_eq!(c.str(&["PING"]), Value::Simple("PONG".into()));
    shut_down(srv, &["NOW"]);
}

#[test]
fn shutdown_flushes_the_data_directory_and_nosave_exits_too() {
    let dir = std::env::temp_dir().join(format!("accelkv-shutdown-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    // Synced once a minute: the final flush is what syncs the writes below.
    let args = ["--data-dir", d, "--sync", "interval=60000"];
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    for i in 0..500 {
        c.str(&["SET", &format!("k{i}"), &format!("v{i}")]);
    }
    c.str(&["HSET", "h", "f", "v"]);
    drop(c);
    shut_down(srv, &[]);
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(501));
    assert_eq!(c.str(&["GET", "k499"]), Value::Bulk(Some(b"v499".to_vec())));
    assert_eq!(c.str(&["HGET", "h", "f"]), Value::Bulk(Some(b"v".to_vec())));
    drop(c);
    shut_down(srv, &["NOSAVE"]);
    // What was durable before stays.
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(501));
    drop(c);
    shut_down(srv, &["SAVE"]);
    let _ = std::fs::remove_dir_all(&dir);
}

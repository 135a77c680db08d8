//! MONITOR against a real `redis-server`: a script of commands (a pipeline with MULTI/EXEC,
//! an aborted transaction, a script, passwords, another database, odd bytes, a command the
//! gate refuses, an administrative one) run on both with a monitor attached, and the lines
//! compared without their times and addresses; a blocked command shown once; a monitor's
//! end with RESET and with its connection.

mod common;

use accelkv_proto::resp::Value;
use common::{beside_redis, wait_blocked, RespConn, Server};

/// A monitor line without its time and client address: `db` (or `db lua`) and the
/// arguments as quoted.
fn shape(v: Value) -> String {
    let Value::Simple(line) = v else {
        panic!("not a monitor line: {v:?}")
    };
    let (_, rest) = line.split_once(" [").expect("a [db addr] part");
    let (client, args) = rest.split_once("] ").expect("its end");
    let db = client.split(' ').next().unwrap_or_default();
    match client.ends_with(" lua") {
        true => format!("{db} lua {args}"),
        false => format!("{db} {args}"),
    }
}

const SCRIPT: &[&[&str]] = &[
    &["SET", "k", "a b\"c\\\n\u{1}"],
    &["GET", "k"],
    &["MULTI"],
    &["SET", "x", "1"],
    &["INCR", "x"],
    &["EXEC"],
    &["MULTI"],
    &["NOSUCHCOMMAND"],
    &["EXEC"],
    &[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])",
        "1",
        "s",
        "v",
    ],
    &["AUTH", "nobody", "secret"],
    &["CONFIG", "GET", "maxmemory"],
    &["SELECT", "3"],
    &["LPUSH", "l", "x"],
    &["SELECT", "0"],
    &["GET"],
];

#[test]
fn monitor_lines_are_redis_lines() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let ports = [both.ours.peer_port(), both.theirs.peer_port()];
    let mut runs = Vec::new();
    for (c, port) in [&mut both.ours, &mut both.theirs].into_iter().zip(ports) {
        let mut mon = RespConn::connect(([127, 0, 0, 1], port).into());
        assert_eq!(mon.str(&["MONITOR"]), Value::Simple("OK".into()));
        for args in SCRIPT {
            c.str(args);
        }
        c.str(&["ECHO", "end"]);
        let mut got = Vec::new();
        loop {
            let l = shape(mon.read());
            if l.ends_with("\"echo\" \"end\"") || l.ends_with("\"ECHO\" \"end\"") {
                break;
            }
            got.push(l);
        }
        runs.push(got);
    }
    assert_eq!(runs[0], runs[1], "accelkv, then redis");
}

#[test]
fn a_blocked_command_is_shown_once_and_reset_ends_monitoring() {
    let srv = Server::start(&[]);
    let (mut mon, mut c, mut blocked) = (
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
    );
    assert_eq!(mon.str(&["MONITOR"]), Value::Simple("OK".into()));
    blocked.send(&["BLPOP", "q", "0"]);
    wait_blocked(&mut c, 1);
    c.str(&["LPUSH", "q", "1"]);
    blocked.read();
    c.str(&["LPUSH", "q", "2"]);
    let mut lines = Vec::new();
    while lines.len() < 3 {
        let l = shape(mon.read());
        if !l.contains("\"info\"") && !l.contains("\"client\"") {
            lines.push(l);
        }
    }
    assert_eq!(
        lines,
        [
            "0 \"BLPOP\" \"q\" \"0\"",
            "0 \"LPUSH\" \"q\" \"1\"",
            "0 \"LPUSH\" \"q\" \"2\""
        ]
    );
    // RESET ends monitoring: the next command's line never comes, the reply does.
    assert_eq!(mon.str(&["RESET"]), Value::Simple("RESET".into()));
    c.str(&["SET", "after", "1"]);
    assert_eq!(mon.str(&["PING"]), Value::Simple("PONG".into()));
    // A monitor that closes leaves nothing behind: the server goes on serving.
    let mut gone = RespConn::new(&srv);
    gone.str(&["MONITOR"]);
    drop(gone);
    for i in 0..100 {
        c.str(&["SET", "k", &i.to_string()]);
    }
    assert_eq!(c.str(&["GET", "k"]), common::bulk("99"));
}

//! SLOWLOG over RESP: a command slower than `slowlog-log-slower-than` is logged with its
//! duration, arguments, address and name, newest first, at most `slowlog-max-len`; fast
//! ones, disabled logging, AUTH and EXEC are not; a password CONFIG SET sets is redacted.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};

fn entries(c: &mut RespConn) -> Vec<Vec<Value>> {
    let Value::Array(Some(es)) = c.str(&["SLOWLOG", "GET", "-1"]) else {
        panic!("SLOWLOG GET");
    };
    es.into_iter()
        .map(|e| match e {
            Value::Array(Some(f)) => f,
            other => panic!("entry {other:?}"),
        })
        .collect()
}

fn args(e: &[Value]) -> Vec<String> {
    let Value::Array(Some(a)) = &e[3] else {
        panic!("args");
    };
    a.iter()
        .map(|v| match v {
            Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn slow_commands_are_logged_as_redis_logs_them() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    // Only what passes the threshold.
    c.str(&["CONFIG", "SET", "slowlog-log-slower-than", "100000"]);
    c.str(&["SLOWLOG", "RESET"]);
    c.str(&["CLIENT", "SETNAME", "sleeper"]);
    c.str(&["INCR", "n"]);
    c.str(&["DEBUG", "SLEEP", "0.2"]);
    let e = entries(&mut c);
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(args(&e[0]), ["DEBUG", "SLEEP", "0.2"]);
    let Value::Integer(micros) = e[0][2] else {
        panic!()
    };
    // Timed with the calibrated TSC clock (quanta), whose rate can be off by a fraction of
    // a percent: a 200 ms sleep once measured just under 200,000 µs.
    assert!(micros >= 198_000, "{micros}");
    assert_eq!(e[0][5], Value::Bulk(Some(b"sleeper".to_vec())));
    let Value::Bulk(Some(addr)) = &e[0][4] else {
        panic!()
    };
    assert!(String::from_utf8_lossy(addr).starts_with("127.0.0.1:"));
    // Everything, newest first; EXEC's commands but not EXEC; a password redacted; long
    // arguments trimmed; at most slowlog-max-len.
    c.str(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    c.str(&["SLOWLOG", "RESET"]);
    c.str(&["HSET", "h", "f", "v"]);
    c.str(&["MULTI"]);
    c.str(&["INCR", "n"]);
    c.str(&["EXEC"]);
    c.str(&["CONFIG", "SET", "requirepass", ""]);
    let long = "x".repeat(200);
    c.str(&["APPEND", "s", &long]);
    let e = entries(&mut c);
    let all: Vec<Vec<String>> = e.iter().map(|e| args(e)).collect();
    assert_eq!(all[0][0], "APPEND");
    assert!(all[0][2].ends_with("... (72 more bytes)"), "{:?}", all[0]);
    assert_eq!(all[1], ["CONFIG", "SET", "requirepass", "(redacted)"]);
    assert_eq!(all[2], ["INCR", "n"]);
    assert_eq!(all[3], ["MULTI"]);
    assert_eq!(all[4], ["HSET", "h", "f", "v"]);
    assert!(all.iter().all(|a| a[0] != "EXEC"));
    let Value::Integer(first) = e[e.len() - 1][0] else {
        panic!()
    };
    let Value::Integer(last) = e[0][0] else {
        panic!()
    };
    assert!(last > first, "ids grow");
    c.str(&["CONFIG", "SET", "slowlog-max-len", "2"]);
    c.str(&["HSET", "h", "g", "w"]);
    assert_eq!(c.str(&["SLOWLOG", "LEN"]), Value::Integer(2));
    let Value::Array(Some(one)) = c.str(&["SLOWLOG", "GET", "1"]) else {
        panic!()
    };
    assert_eq!(one.len(), 1);
    // Off.
    c.str(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]);
    c.str(&["SLOWLOG", "RESET"]);
    c.str(&["DEBUG", "SLEEP", "0.01"]);
    assert_eq!(c.str(&["SLOWLOG", "LEN"]), Value::Integer(0));
    assert!(common::err_starts(
        &c.str(&["SLOWLOG", "GET", "-2"]),
        "ERR count should be greater than or equal to -1"
    ));
}

//! LATENCY over RESP: a command slower than `latency-monitor-threshold` is an event with
//! its latest and largest sample and a history; GRAPH, DOCTOR and RESET answer from them;
//! LATENCY HISTOGRAM counts each command's runs by power-of-two microseconds.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};

fn ints(v: &Value) -> Vec<i64> {
    let Value::Array(Some(a)) = v else {
        panic!("{v:?}");
    };
    a.iter()
        .map(|x| match x {
            Value::Integer(n) => *n,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn latency_events_and_histograms() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["LATENCY", "LATEST"]), Value::Array(Some(vec![])));
    c.str(&["CONFIG", "SET", "latency-monitor-threshold", "100"]);
    c.str(&["DEBUG", "SLEEP", "0.01"]); // below the threshold
    c.str(&["DEBUG", "SLEEP", "0.15"]);
    let Value::Array(Some(latest)) = c.str(&["LATENCY", "LATEST"]) else {
        panic!()
    };
    assert_eq!(latest.len(), 1);
    let Value::Array(Some(e)) = &latest[0] else {
        panic!()
    };
    assert_eq!(e[0], Value::Bulk(Some(b"command".to_vec())));
    let Value::Integer(ms) = e[2] else { panic!() };
    assert!((150..1000).contains(&ms), "{ms}");
    let Value::Array(Some(h)) = c.str(&["LATENCY", "HISTORY", "command"]) else {
        panic!()
    };
    assert_eq!(h.len(), 1);
    assert_eq!(ints(&h[0])[1], ms);
    let Value::Bulk(Some(g)) = c.str(&["LATENCY", "GRAPH", "command"]) else {
        panic!()
    };
    assert!(
        String::from_utf8_lossy(&g).starts_with(&format!("command - high {ms} ms, low {ms} ms"))
    );
    let Value::Bulk(Some(d)) = c.str(&["LATENCY", "DOCTOR"]) else {
        panic!()
    };
    assert!(String::from_utf8_lossy(&d).contains("command: 1 latency spikes"));
    assert!(common::err_starts(
        &c.str(&["LATENCY", "GRAPH", "nope"]),
        "ERR No samples"
    ));
    assert_eq!(c.str(&["LATENCY", "RESET", "nope"]), Value::Integer(0));
    assert_eq!(c.str(&["LATENCY", "RESET"]), Value::Integer(1));
    assert_eq!(c.str(&["LATENCY", "LATEST"]), Value::Array(Some(vec![])));
    // Histograms: two SETs and a GET since the reset of the statistics.
    c.str(&["CONFIG", "RESETSTAT"]);
    c.str(&["SET", "a", "b"]);
    c.str(&["SET", "c", "d"]);
    c.str(&["GET", "a"]);
    let Value::Array(Some(h)) = c.str(&["LATENCY", "HISTOGRAM", "set", "nosuch", "get"]) else {
        panic!()
    };
    assert_eq!(h.len(), 4, "{h:?}");
    assert_eq!(h[0], Value::Bulk(Some(b"set".to_vec())));
    let Value::Array(Some(set)) = &h[1] else {
        panic!()
    };
    assert_eq!(set[1], Value::Integer(2));
    let steps = ints(&set[3]);
    assert_eq!(steps.last(), Some(&2), "cumulative: {steps:?}");
    assert!(common::err_starts(
        &c.str(&["LATENCY", "HELP", "x"]),
        "ERR wrong number of arguments for 'latency|help' command"
    ));
}

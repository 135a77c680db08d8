//! `--cluster-mode emulated` (docs/CLUSTER.md, "Emulated cluster mode"): one server answers
//! as a Redis Cluster of one node owning every hash slot, in Redis 7's formats, and refuses
//! multi-key commands over several slots with `-CROSSSLOT` on every path a command takes
//! (one command, a pipelined run of MGETs, inside MULTI, from a script); a server without
//! the flag keeps Redis's standalone answer.

mod common;

use accelkv_proto::resp::Value;
use accelkv_proto::slot::key_slot;
use common::{bulk, RespConn, Server};

fn ints(v: &Value) -> Vec<i64> {
    match v {
        Value::Array(Some(items)) => items
            .iter()
            .filter_map(|i| match i {
                Value::Integer(n) => Some(*n),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// A reply as text: bulk strings as UTF-8, nested arrays and maps flattened.
fn text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).to_string(),
        Value::Array(Some(items)) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        Value::Integer(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

fn is_crossslot(v: &Value) -> bool {
    matches!(v, Value::Error(e) if e.starts_with("CROSSSLOT Keys in request don't hash to the same slot"))
}

#[test]
fn one_node_owns_every_slot_in_redis_formats() {
    let srv = Server::start(&["--cluster-mode", "emulated"]);
    let mut c = RespConn::new(&srv);
    let port = i64::from(srv.resp.port());
    let Value::Bulk(Some(id)) = c.str(&["CLUSTER", "MYID"]) else {
        panic!("MYID")
    };
    assert_eq!(id.len(), 40);
    assert!(id.iter().all(u8::is_ascii_hexdigit));
    // SLOTS: one range of all slots, this node's address (the one connected to), its id.
    let Value::Array(Some(ranges)) = c.str(&["CLUSTER", "SLOTS"]) else {
        panic!("SLOTS")
    };
    assert_eq!(ranges.len(), 1);
    let Value::Array(Some(r)) = &ranges[0] else {
        panic!("a range")
    };
    assert_eq!(ints(&ranges[0]), vec![0, 16383]);
    let Value::Array(Some(node)) = &r[2] else {
        panic!("a node")
    };
    assert_eq!(node[0], bulk("127.0.0.1"));
    assert_eq!(node[1], Value::Integer(port));
    assert_eq!(node[2], Value::Bulk(Some(id.clone())));
    // SHARDS: slots 0-16383 and one online primary.
    let shards = text(&c.str(&["CLUSTER", "SHARDS"]));
    for want in ["slots", "nodes", "master", "online", &port.to_string()] {
        assert!(shards.contains(want), "{want}: {shards}");
    }
    let Value::Bulk(Some(nodes)) = c.str(&["CLUSTER", "NODES"]) else {
        panic!("NODES")
    };
    let line = String::from_utf8(nodes).unwrap();
    let want = format!(
        "{} 127.0.0.1:{port}@{} myself,master - 0 0 1 connected 0-16383\n",
        String::from_utf8_lossy(&id),
        port + 10_000
    );
    assert_eq!(line, want);
    let Value::Bulk(Some(info)) = c.str(&["CLUSTER", "INFO"]) else {
        panic!("INFO")
    };
    let info = String::from_utf8(info).unwrap();
    for want in [
        "cluster_state:ok",
        "cluster_slots_assigned:16384",
        "cluster_known_nodes:1",
    ] {
        assert!(info.contains(want), "{want}: {info}");
    }
    // KEYSLOT is Redis's CRC16 with hash tags.
    for (k, slot) in [("foo", 12182), ("{foo}bar", 12182), ("somekey", 11058)] {
        assert_eq!(
            c.str(&["CLUSTER", "KEYSLOT", k]),
            Value::Integer(slot),
            "{k}"
        );
    }
    c.str(&["MSET", "{u}1", "a", "{u}2", "b", "{u}3", "c"]);
    c.str(&["SET", "other", "x"]);
    let slot = key_slot(b"u").to_string();
    assert_eq!(
        c.str(&["CLUSTER", "COUNTKEYSINSLOT", &slot]),
        Value::Integer(3)
    );
    let Value::Array(Some(keys)) = c.str(&["CLUSTER", "GETKEYSINSLOT", &slot, "2"]) else {
        panic!("GETKEYSINSLOT")
    };
    assert_eq!(keys, vec![bulk("{u}1"), bulk("{u}2")]);
    assert!(matches!(
        c.str(&["CLUSTER", "COUNTKEYSINSLOT", "16384"]),
        Value::Error(_)
    ));
    assert!(
        matches!(c.str(&["CLUSTER", "NOPE"]), Value::Error(e) if e.contains("unknown subcommand"))
    );
    assert_eq!(
        c.str(&["INFO", "cluster"]),
        bulk("# Cluster\r\ncluster_enabled:1\r\n")
    );
    assert_eq!(c.str(&["ASKING"]), Value::Simple("OK".into()));
    assert_eq!(c.str(&["READONLY"]), Value::Simple("OK".into()));
}

#[test]
fn keys_of_several_slots_are_refused_on_every_path() {
    let srv = Server::start(&["--cluster-mode", "emulated"]);
    let mut c = RespConn::new(&srv);
    assert!(is_crossslot(&c.str(&["MSET", "a", "1", "b", "2"])));
    assert!(is_crossslot(&c.str(&["DEL", "a", "b"])));
    assert!(is_crossslot(&c.str(&["SUNIONSTORE", "{x}d", "{x}s", "t"])));
    assert_eq!(
        c.str(&["MSET", "{t}a", "1", "{t}b", "2"]),
        Value::Simple("OK".into())
    );
    assert_eq!(
        c.str(&["MGET", "{t}a", "{t}b"]),
        Value::Array(Some(vec![bulk("1"), bulk("2")]))
    );
    // A pipelined run of MGETs: each one is checked, not only the first.
    let run: [&[&str]; 3] = [
        &["MGET", "{t}a", "{t}b"],
        &["MGET", "a", "b"],
        &["MGET", "{t}a"],
    ];
    for cmd in run {
        c.send(cmd);
    }
    let replies: Vec<Value> = (0..3).map(|_| c.read()).collect();
    assert_eq!(replies[0], Value::Array(Some(vec![bulk("1"), bulk("2")])));
    assert!(is_crossslot(&replies[1]), "{replies:?}");
    assert_eq!(replies[2], Value::Array(Some(vec![bulk("1")])));
    // Inside MULTI the transaction is aborted, as a cluster's is.
    c.str(&["MULTI"]);
    assert!(is_crossslot(&c.str(&["MSET", "a", "1", "b", "2"])));
    assert!(matches!(c.str(&["EXEC"]), Value::Error(e) if e.starts_with("EXECABORT")));
    // A script's keys.
    let r = c.str(&[
        "EVAL",
        "return redis.call('MGET', KEYS[1], KEYS[2])",
        "2",
        "a",
        "b",
    ]);
    assert!(is_crossslot(&r), "{r:?}");
    // Standalone, the same command runs and CLUSTER answers Redis's standalone error.
    let plain = Server::start(&[]);
    let mut p = RespConn::new(&plain);
    assert_eq!(
        p.str(&["MSET", "a", "1", "b", "2"]),
        Value::Simple("OK".into())
    );
    assert!(
        matches!(p.str(&["CLUSTER", "SLOTS"]), Value::Error(e) if e.contains("cluster support disabled"))
    );
    assert_eq!(
        p.str(&["INFO", "cluster"]),
        bulk("# Cluster\r\ncluster_enabled:0\r\n")
    );
}

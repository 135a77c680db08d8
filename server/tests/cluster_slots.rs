//! Slot mode end to end (`--slots redis`, docs/CLUSTER.md "Slot mode"): a real etcd and
//! real server processes. The promises tried: Redis Cluster's answers (`CLUSTER SLOTS`
//! covering all 16,384 slots, `-MOVED <slot> <host:port>`, `-CROSSSLOT`, the refusals of
//! other databases); every type works through any node, before and after ranges split at
//! slot bounds, and a collection's fields travel with its key: a range moved to a node
//! that held nothing serves every hash, sorted set, list and stream of it whole from that
//! node's own copy; MULTI/EXEC over one hash tag is one transaction, through the leader or
//! a proxying follower; a blocking pop waits and is woken by another connection's push;
//! scripts run on the range's replicas. Then redis-py's `RedisCluster`, go-redis's
//! `ClusterClient` and `JedisCluster` each run their session (tests/clients/) against three
//! nodes, redis-py across a split and a kill -9 of the leader. Needs `--features cluster`
//! and etcd.

mod cluster_support;
mod common;

use accelkv_proto::resp::Value;
use cluster_support::harness::Cluster;
use common::{clients_dir, have, strings, RespConn};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests run one at a time: each starts its own cluster.
static SERIAL: Mutex<()> = Mutex::new(());

fn conn(addr: SocketAddr) -> RespConn {
    let s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    RespConn::from_stream(s)
}

/// `args`, sent again while the answer is `-TRYAGAIN` (a split or an election under way).
fn call(c: &mut RespConn, args: &[&str]) -> Value {
    let t = Instant::now();
    loop {
        let v = c.str(args);
        match &v {
            Value::Error(e)
                if e.starts_with("TRYAGAIN") && t.elapsed() < Duration::from_secs(20) =>
            {
                std::thread::sleep(Duration::from_millis(100))
            }
            _ => return v,
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::Simple(s) | Value::Error(s) => s.clone(),
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Value::Integer(n) => n.to_string(),
        other => format!("{other:?}"),
    }
}

/// `CLUSTER SLOTS` as (first, last, primary's port) runs, in slot order.
fn slot_runs(c: &mut RespConn) -> Vec<(i64, i64, i64)> {
    let Value::Array(Some(entries)) = c.str(&["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is not an array")
    };
    let mut runs: Vec<(i64, i64, i64)> = entries
        .iter()
        .map(|e| match e {
            Value::Array(Some(f)) => match (&f[0], &f[1], &f[2]) {
                (Value::Integer(a), Value::Integer(b), Value::Array(Some(node))) => {
                    match &node[1] {
                        Value::Integer(p) => (*a, *b, *p),
                        o => panic!("a node's port: {o:?}"),
                    }
                }
                o => panic!("a CLUSTER SLOTS entry: {o:?}"),
            },
            o => panic!("a CLUSTER SLOTS entry: {o:?}"),
        })
        .collect();
    runs.sort_unstable();
    runs
}

/// Asserts the runs cover every slot once, in order.
fn covers_every_slot(runs: &[(i64, i64, i64)]) {
    let mut next = 0;
    for &(a, b, _) in runs {
        assert_eq!(a, next, "{runs:?}");
        assert!(b >= a, "{runs:?}");
        next = b + 1;
    }
    assert_eq!(next, 16384, "{runs:?}");
}

/// Writes the collections of key `i` through `c`.
fn write_types(c: &mut RespConn, i: usize) {
    let (h, z, l, x) = (
        format!("h{i}"),
        format!("z{i}"),
        format!("l{i}"),
        format!("x{i}"),
    );
    for f in 0..40 {
        let (fs, v) = (format!("f{f}"), format!("v{i}-{f}"));
        assert_eq!(call(c, &["HSET", &h, &fs, &v]), Value::Integer(1));
        assert_eq!(
            call(c, &["ZADD", &z, &f.to_string(), &fs]),
            Value::Integer(1)
        );
        assert_eq!(call(c, &["RPUSH", &l, &v]), Value::Integer(f as i64 + 1));
        let id = format!("{}-1", f + 1);
        assert!(matches!(
            call(c, &["XADD", &x, &id, "f", &v]),
            Value::Bulk(Some(_))
        ));
    }
}

/// Reads the collections of key `i` back through `c` whole.
fn read_types(c: &mut RespConn, i: usize, node: &str) {
    let (h, z, l, x) = (
        format!("h{i}"),
        format!("z{i}"),
        format!("l{i}"),
        format!("x{i}"),
    );
    let want: Vec<String> = (0..40).map(|f| format!("v{i}-{f}")).collect();
    let mut got = strings(call(c, &["HGETALL", &h]));
    assert_eq!(got.len(), 80, "{node}: HGETALL {h}: {got:?}");
    got.sort();
    assert_eq!(
        strings(call(c, &["LRANGE", &l, "0", "-1"])),
        want,
        "{node}: {l}"
    );
    let zs = strings(call(c, &["ZRANGE", &z, "0", "-1"]));
    assert_eq!(zs.len(), 40, "{node}: {z}");
    assert_eq!(zs[39], "f39", "{node}: {z}");
    assert_eq!(call(c, &["XLEN", &x]), Value::Integer(40), "{node}: {x}");
    let Value::Array(Some(entries)) = call(c, &["XRANGE", &x, "-", "+"]) else {
        panic!("{node}: XRANGE {x}")
    };
    assert_eq!(entries.len(), 40, "{node}: {x}");
}

/// CLUSTER SPLIT at `key`'s slot, through `c`; the new range's id.
fn split(c: &mut RespConn, key: &str) -> i64 {
    match call(c, &["CLUSTER", "SPLIT", key]) {
        Value::Integer(id) => id,
        o => panic!("CLUSTER SPLIT {key}: {o:?}"),
    }
}

#[test]
fn slot_mode_answers_as_redis_cluster_and_collections_travel_with_their_keys() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(
        4,
        "slots",
        &["--slots", "redis", "--split-size", "0", "--replicas", "3"],
    );
    let leader = c.leader(Duration::from_secs(20));
    let follower = (leader + 1) % 3;
    let mut l = conn(c.nodes[leader].resp);
    let mut f = conn(c.nodes[follower].resp);

    // Redis Cluster's answers: one run of every slot, led by the leader.
    let runs = slot_runs(&mut f);
    covers_every_slot(&runs);
    assert_eq!(
        runs[0].2,
        i64::from(c.nodes[leader].resp.port()),
        "{runs:?}"
    );
    let id = text(&f.str(&["CLUSTER", "MYID"]));
    assert!(
        id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{id}"
    );
    assert!(text(&f.str(&["CLUSTER", "INFO"])).contains("cluster_state:ok"));
    assert_eq!(f.str(&["CLUSTER", "KEYSLOT", "foo"]), Value::Integer(12182));
    let e = text(&f.str(&["MSET", "a", "1", "b", "2"]));
    assert!(
        e.starts_with("CROSSSLOT Keys in request don't hash to the same slot"),
        "{e}"
    );
    assert_eq!(
        f.str(&["MSET", "{t}a", "1", "{t}b", "2"]),
        Value::Simple("OK".into())
    );
    assert!(text(&f.str(&["SELECT", "1"])).contains("not allowed in cluster mode"));
    assert_eq!(f.str(&["SELECT", "0"]), Value::Simple("OK".into()));
    // A client that follows redirects is sent the slot and the leader's address.
    let mut direct = conn(c.nodes[follower].resp);
    direct.str(&["CLUSTER", "NOPROXY"]);
    let moved = text(&direct.str(&["GET", "foo"]));
    assert_eq!(
        moved,
        format!("MOVED 12182 {}", c.nodes[leader].resp),
        "{moved}"
    );

    // Every type, through a proxying follower, in keys of many slots.
    for i in 0..24 {
        write_types(&mut f, i);
    }
    assert_eq!(
        f.str(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]),
        Value::Integer(0)
    );
    f.str(&["SET", "foo", "bar"]);
    // The leader's copy (a follower applies the write a moment later).
    assert_eq!(
        l.str(&["CLUSTER", "COUNTKEYSINSLOT", "12182"]),
        Value::Integer(1)
    );
    assert_eq!(
        strings(l.str(&["CLUSTER", "GETKEYSINSLOT", "12182", "5"])),
        ["foo"]
    );

    // Splits at slot bounds: the runs still cover every slot, and every collection reads
    // back whole through any node.
    let child = split(&mut l, "h7");
    split(&mut l, "h3");
    split(&mut l, "h19");
    // (The follower sees each split once the map's change reaches it, a moment later.)
    let t = Instant::now();
    let runs = loop {
        let runs = slot_runs(&mut f);
        covers_every_slot(&runs);
        if runs.len() == 4 || t.elapsed() > Duration::from_secs(10) {
            break runs;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(runs.len(), 4, "{runs:?}");
    let slot_h7 = match f.str(&["CLUSTER", "KEYSLOT", "h7"]) {
        Value::Integer(s) => s,
        o => panic!("{o:?}"),
    };
    assert!(
        runs.iter().any(|r| r.0 == slot_h7),
        "a run starts at h7's slot: {runs:?}"
    );
    for i in 0..24 {
        read_types(&mut f, i, "follower");
        write_types(&mut f, 100 + i);
    }

    // The range split off at h7's slot moves one replica to node 4, which held nothing:
    // its copy, sent as the range's pages, holds every key of the range with its fields.
    let holders: Vec<u64> = (0..3)
        .map(|i| c.nodes[i].id)
        .filter(|id| *id != c.nodes[leader].id)
        .collect();
    let args = format!("CLUSTER MOVE {child} {} 4", holders[0]);
    let args: Vec<&str> = args.split(' ').collect();
    assert_eq!(call(&mut l, &args), Value::Simple("OK".into()));
    let mut four = conn(c.nodes[3].resp);
    four.str(&["READONLY"]);
    let in_child: Vec<usize> = (0..24)
        .chain(100..124)
        .filter(|i| {
            let r = runs.iter().find(|r| r.0 == slot_h7).unwrap();
            let s = match f.str(&["CLUSTER", "KEYSLOT", &format!("h{i}")]) {
                Value::Integer(s) => s,
                o => panic!("{o:?}"),
            };
            (r.0..=r.1).contains(&s)
        })
        .collect();
    assert!(in_child.contains(&7));
    let t = Instant::now();
    loop {
        let v = four.str(&["HLEN", "h7"]);
        if v == Value::Integer(40) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "node 4 never served h7: {v:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for &i in &in_child {
        // h{i} is in the moved range; z{i}, l{i}, x{i} may lie elsewhere.
        let h = format!("h{i}");
        let mut got = strings(four.str(&["HGETALL", &h]));
        got.sort();
        assert_eq!(got.len(), 80, "node 4: HGETALL {h}");
    }
}

#[test]
fn transactions_blocking_pops_and_scripts_in_slot_mode() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(3, "slots-tx", &["--slots", "redis", "--split-size", "0"]);
    let leader = c.leader(Duration::from_secs(20));
    let mut l = conn(c.nodes[leader].resp);
    let mut f = conn(c.nodes[(leader + 1) % 3].resp);
    split(&mut l, "{user}");

    // MULTI/EXEC over one hash tag, through the follower (proxied) and the leader.
    for c in [&mut f, &mut l] {
        assert_eq!(c.str(&["MULTI"]), Value::Simple("OK".into()));
        assert_eq!(
            c.str(&["SET", "{user}a", "1", "EX", "100"]),
            Value::Simple("QUEUED".into())
        );
        assert_eq!(c.str(&["INCR", "{user}n"]), Value::Simple("QUEUED".into()));
        assert_eq!(
            c.str(&["HSET", "{user}h", "f", "v"]),
            Value::Simple("QUEUED".into())
        );
        let Value::Array(Some(r)) = c.str(&["EXEC"]) else {
            panic!("EXEC")
        };
        assert_eq!(r.len(), 3);
        assert_eq!(r[0], Value::Simple("OK".into()));
    }
    assert_eq!(l.str(&["GET", "{user}n"]), Value::Bulk(Some(b"2".to_vec())));
    let ttl = l.str(&["TTL", "{user}a"]);
    assert!(
        matches!(ttl, Value::Integer(t) if t > 90 && t <= 100),
        "{ttl:?}"
    );
    // Keys of two slots in one transaction: refused whole, nothing applied.
    f.str(&["MULTI"]);
    f.str(&["SET", "{user}b", "1"]);
    f.str(&["SET", "other", "1"]);
    let e = text(&f.str(&["EXEC"]));
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    assert_eq!(l.str(&["EXISTS", "{user}b"]), Value::Integer(0));
    // An unknown command queued aborts the transaction.
    f.str(&["MULTI"]);
    assert!(text(&f.str(&["NOSUCH"])).starts_with("ERR unknown command"));
    assert!(text(&f.str(&["EXEC"])).starts_with("EXECABORT"));
    assert!(text(&f.str(&["WATCH", "{user}a"])).contains("WATCH is not served"));

    // A blocking pop waits (on the leader, through the follower) and is woken by a push.
    let addr = c.nodes[(leader + 1) % 3].resp;
    let popper = std::thread::spawn(move || {
        let mut p = conn(addr);
        let t = Instant::now();
        let v = p.str(&["BLPOP", "{q}jobs", "10"]);
        (v, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(l.str(&["RPUSH", "{q}jobs", "job1"]), Value::Integer(1));
    let (v, took) = popper.join().unwrap();
    assert_eq!(strings(v), ["{q}jobs", "job1"]);
    assert!(
        took >= Duration::from_millis(400),
        "it did not wait: {took:?}"
    );
    // With nothing pushed it answers nil at its timeout, not before.
    let t = Instant::now();
    assert_eq!(l.str(&["BRPOP", "{q}jobs", "0.5"]), Value::Array(None));
    assert!(
        t.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t.elapsed()
    );
    // A popped element is gone on every replica.
    assert_eq!(f.str(&["LLEN", "{q}jobs"]), Value::Integer(0));

    // Scripts: EVAL runs on the range's replicas; EVALSHA goes on as EVAL.
    let body = "redis.call('SET', KEYS[1], ARGV[1]); return redis.call('INCR', KEYS[2])";
    assert_eq!(
        f.str(&["EVAL", body, "2", "{s}a", "{s}n", "x"]),
        Value::Integer(1)
    );
    let sha = text(&f.str(&["SCRIPT", "LOAD", body]));
    assert_eq!(
        f.str(&["EVALSHA", &sha, "2", "{s}a", "{s}n", "y"]),
        Value::Integer(2)
    );
    assert_eq!(l.str(&["GET", "{s}a"]), Value::Bulk(Some(b"y".to_vec())));
    assert!(text(&f.str(&["EVALSHA", &"0".repeat(40), "1", "k"])).starts_with("NOSCRIPT"));
    assert!(text(&f.str(&["EVAL", "return 1", "0"])).contains("names the keys"));

    // A pipeline of writes goes to its range together (one wait for the run) and each is
    // answered in order, whatever follows: a read, a write to another slot, an error.
    for c in [&mut l, &mut f] {
        for i in 0..200 {
            c.send(&["SET", "{p}k", &i.to_string()]);
        }
        c.send(&["INCR", "{p}k"]);
        c.send(&["GET", "{p}k"]);
        c.send(&["SET", "elsewhere", "1"]);
        c.send(&["LPUSH", "{p}k", "x"]);
        c.send(&["RPUSH", "{p}l", "a", "b"]);
        c.send(&["SET", "{p}last", "1"]);
        for i in 0..200 {
            assert_eq!(c.read(), Value::Simple("OK".into()), "SET {i}");
        }
        assert_eq!(c.read(), Value::Integer(200));
        assert_eq!(c.read(), Value::Bulk(Some(b"200".to_vec())));
        assert_eq!(c.read(), Value::Simple("OK".into()));
        assert!(text(&c.read()).starts_with("WRONGTYPE"));
        assert!(matches!(c.read(), Value::Integer(2 | 4)));
        assert_eq!(c.read(), Value::Simple("OK".into()));
    }
    assert_eq!(f.str(&["LLEN", "{p}l"]), Value::Integer(4));

    // A user's permissions are checked on the node that received the command, before it
    // is routed: a replica applies it as the server's own.
    let ok = Value::Simple("OK".into());
    assert_eq!(
        f.str(&["ACL", "SETUSER", "app", "on", ">pw", "~{app}*", "+@all"]),
        ok
    );
    let mut app = conn(c.nodes[(leader + 1) % 3].resp);
    assert_eq!(app.str(&["AUTH", "app", "pw"]), ok);
    assert_eq!(app.str(&["SET", "{app}a", "1"]), ok);
    assert!(text(&app.str(&["SET", "{other}a", "1"])).starts_with("NOPERM"));
    assert_eq!(l.str(&["EXISTS", "{other}a"]), Value::Integer(0));
}

/// Runs a client session against the cluster; panics with its output unless it succeeds.
fn session(client: &str, dir: &Path, cmd: &mut Command) {
    let out = cmd
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{client}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{client} failed:\n{text}");
    eprintln!("{client}:\n{text}");
}

/// Three nodes in slot mode, a leader elected; `None` when etcd is missing (skipped).
fn three(name: &str) -> Option<(Cluster, usize)> {
    if !accelkv_cluster::testing::etcd_or_skip() {
        return None;
    }
    let c = Cluster::start_with(3, name, &["--slots", "redis", "--split-size", "0"]);
    let leader = c.leader(Duration::from_secs(20));
    Some((c, leader))
}

#[test]
fn redis_py_cluster_client_across_a_split_and_a_leaders_kill() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let python = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .status()
        .is_ok_and(|s| s.success());
    if !python {
        return accelkv_testkit::skip(
            "redis-py RedisCluster: python3 with redis-py not installed (.ci/run prepares it)",
        );
    }
    let Some((mut c, leader)) = three("slots-py") else {
        return;
    };
    let seed = c.nodes[(leader + 1) % 3].resp;
    // The session runs, then (on a line from here) again with the same client after a
    // split and a kill -9 of the leader of every range.
    let mut py = Command::new("python3")
        .args(["cluster_session.py", &seed.port().to_string()])
        .current_dir(clients_dir().join("python"))
        .env("ACCELKV_CLUSTER_HOST", seed.ip().to_string())
        .env("ACCELKV_CLUSTER_NODES", "3")
        .env("ACCELKV_CLUSTER_PAUSE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(py.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push(line.clone());
        if line.contains("paused") {
            break;
        }
    }
    let mut l = conn(c.nodes[leader].resp);
    split(&mut l, "{tag}");
    c.kill9(leader);
    writeln!(py.stdin.as_mut().unwrap(), "go").unwrap();
    said.extend(lines.map_while(Result::ok));
    let ok = py.wait().unwrap().success();
    assert!(ok, "redis-py RedisCluster failed:\n{}", said.join("\n"));
    assert!(
        said.iter().any(|l| l.contains("redis-py RedisCluster: ok")),
        "{said:?}"
    );
}

#[test]
fn go_redis_cluster_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have("go", "version") {
        return accelkv_testkit::skip(
            "go-redis ClusterClient: go not installed (.ci/run prepares it)",
        );
    }
    let Some((c, _)) = three("slots-go") else {
        return;
    };
    session(
        "go-redis ClusterClient",
        &clients_dir().join("go"),
        Command::new("go")
            .args(["test", "-count=1", "-v", "-run", "TestCluster", "."])
            .env("ACCELKV_CLUSTER_ADDR", c.nodes[0].resp.to_string()),
    );
}

#[test]
fn jedis_cluster_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let java = clients_dir().join("java");
    if !have("java", "-version") || !java.join("target/lib").exists() {
        return accelkv_testkit::skip(
            "JedisCluster: java or the built tests/clients/java missing (.ci/run prepares it)",
        );
    }
    let Some((c, _)) = three("slots-jedis") else {
        return;
    };
    session(
        "JedisCluster",
        &java,
        Command::new("java")
            .args([
                "-cp",
                "target/classes:target/lib/*",
                "dev.accelkv.ClusterSession",
            ])
            .env("ACCELKV_CLUSTER_ADDR", c.nodes[1].resp.to_string())
            .env("ACCELKV_CLUSTER_NODES", "3"),
    );
}

/// Native mode keeps collections' fields at the end of the key space: once the cluster has
/// split, a collection command for a key of another range is refused with the way out,
/// never half applied.
#[test]
fn native_mode_refuses_collections_whose_fields_lie_in_another_range() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    let c = Cluster::start_with(3, "native-types", &["--split-size", "0"]);
    let leader = c.leader(Duration::from_secs(20));
    let mut l = conn(c.nodes[leader].resp);
    assert_eq!(call(&mut l, &["HSET", "a", "f", "1"]), Value::Integer(1));
    split(&mut l, "m");
    let e = text(&call(&mut l, &["HSET", "a", "g", "2"]));
    assert!(e.contains("--slots redis"), "{e}");
    assert!(text(&call(&mut l, &["LPUSH", "b", "x"])).contains("--slots redis"));
    // Keys of the last range, which holds the fields, are served; strings everywhere.
    assert_eq!(call(&mut l, &["HSET", "z", "f", "1"]), Value::Integer(1));
    assert_eq!(
        call(&mut l, &["SET", "a2", "v"]),
        Value::Simple("OK".into())
    );
}

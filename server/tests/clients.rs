//! The client matrix (tests/clients/README.md): the real server, with a password, driven by
//! the Redis clients people use, each running the same scripted session from its own
//! directory — redis-py (RESP2 and RESP3, with and without hiredis), go-redis v9 (RESP2 and
//! RESP3), ioredis and node-redis v4, BullMQ's job queue, Jedis 5 (RESP2 and RESP3) — plus `redis-cli --pipe`
//! mass insertion and redis-benchmark's tests of the commands accelkv serves; and on the
//! memcached port, pymemcache and gomemcache, and memcslap from libmemcached-tools.
//!
//! A client whose toolchain or prepared dependencies are missing is skipped and listed
//! (accelkv-testkit), except with `ACCELKV_REQUIRE_TOOLS` set, where `.ci/run` prepares
//! every one and a skip is a failure.

mod common;

use common::{clients_dir, have, Server};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Skips (listed) or fails (tools required) for a client that is not prepared.
fn unprepared(client: &str, why: &str) {
    accelkv_testkit::skip(&format!("{client}: {why} (.ci/run prepares it)"));
}

/// Runs `cmd` in `dir` against `srv`; panics with its output unless it succeeds.
fn run(client: &str, srv: &Server, dir: &Path, cmd: &mut Command) {
    let out = cmd
        .current_dir(dir)
        .env("ACCELKV_RESP_ADDR", srv.resp.to_string())
        .env("ACCELKV_MEMCACHED_ADDR", srv.memcached.to_string())
        .env("ACCELKV_PASSWORD", "pw")
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

#[test]
fn redis_py() {
    let python_ok = Command::new("python3")
        .args(["-c", "import redis"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !python_ok {
        return unprepared("redis-py", "python3 with redis-py not installed");
    }
    let srv = Server::start(&["--password", "pw"]);
    let port = srv.resp.port().to_string();
    run(
        "redis-py",
        &srv,
        &clients_dir().join("python"),
        Command::new("python3").args(["session.py", &port, "pw"]),
    );
}

/// redis-py's `RedisCluster` against a server in emulated cluster mode (docs/CLUSTER.md).
#[test]
fn redis_py_cluster() {
    let python_ok = Command::new("python3")
        .args(["-c", "import redis.cluster"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !python_ok {
        return unprepared("redis-py", "python3 with redis-py not installed");
    }
    let srv = Server::start(&["--cluster-mode", "emulated"]);
    let port = srv.resp.port().to_string();
    run(
        "redis-py RedisCluster",
        &srv,
        &clients_dir().join("python"),
        Command::new("python3").args(["cluster_session.py", &port]),
    );
}

#[test]
fn go_redis() {
    if !have("go", "version") {
        return unprepared("go-redis", "go not installed");
    }
    let srv = Server::start(&["--password", "pw"]);
    run(
        "go-redis",
        &srv,
        &clients_dir().join("go"),
        Command::new("go").args(["test", "-count=1", "-v", "."]),
    );
}

/// go-redis's `ClusterClient` against a server in emulated cluster mode (docs/CLUSTER.md).
#[test]
fn go_redis_cluster() {
    if !have("go", "version") {
        return unprepared("go-redis", "go not installed");
    }
    let srv = Server::start(&["--cluster-mode", "emulated"]);
    run(
        "go-redis ClusterClient",
        &srv,
        &clients_dir().join("go"),
        Command::new("go")
            .args(["test", "-count=1", "-v", "-run", "TestCluster", "."])
            .env("ACCELKV_CLUSTER_ADDR", srv.resp.to_string()),
    );
}

#[test]
fn pymemcache() {
    let ok = Command::new("python3")
        .args(["-c", "import pymemcache"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !ok {
        return unprepared("pymemcache", "python3 with pymemcache not installed");
    }
    let srv = Server::start(&[]);
    let port = srv.memcached.port().to_string();
    run(
        "pymemcache",
        &srv,
        &clients_dir().join("python"),
        Command::new("python3").args(["memcached_session.py", &port]),
    );
}

#[test]
fn gomemcache() {
    if !have("go", "version") {
        return unprepared("gomemcache", "go not installed");
    }
    let srv = Server::start(&[]);
    run(
        "gomemcache",
        &srv,
        &clients_dir().join("go"),
        Command::new("go").args(["test", "-count=1", "-v", "./memcache/"]),
    );
}

/// libmemcached-tools against the port: memccapable's protocol conformance tests (every
/// ASCII test must pass, as they do against memcached 1.6), and memcslap, memcached's own
/// load tool, setting and getting with no failure.
#[test]
fn memccapable_and_memcslap() {
    if !have("memcslap", "--version") {
        return unprepared("memcslap", "memcslap (libmemcached-tools) not installed");
    }
    let srv = Server::start(&[]);
    let port = srv.memcached.port().to_string();
    let out = Command::new("memccapable")
        .args(["-h", "127.0.0.1", "-p", &port, "-a"])
        .output()
        .expect("memccapable");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("All tests passed"),
        "memccapable -a:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let servers = format!("--servers={}", srv.memcached);
    for test in ["set", "get"] {
        let out = Command::new("memcslap")
            .args([
                &servers,
                &format!("--test={test}"),
                "--concurrency=4",
                "--execute-number=2000",
            ])
            .output()
            .expect("memcslap");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "memcslap --test={test}:\n{text}");
        assert!(!text.to_lowercase().contains("failure"), "{text}");
        eprintln!("memcslap --test={test}:\n{text}");
    }
}

#[test]
fn ioredis_and_node_redis() {
    let dir = clients_dir().join("node");
    if !have("node", "--version") || !dir.join("node_modules/ioredis").exists() {
        return unprepared(
            "ioredis/node-redis",
            "node or tests/clients/node/node_modules missing (npm ci)",
        );
    }
    let srv = Server::start(&["--password", "pw"]);
    run(
        "ioredis/node-redis",
        &srv,
        &dir,
        Command::new("node").arg("session.mjs"),
    );
}

/// BullMQ (tests/clients/node/bullmq): a job queue whose own Lua scripts use cmsgpack,
/// sorted sets, lists, hashes and streams, with QueueEvents reading by XREAD BLOCK.
#[test]
fn bullmq_job_queue() {
    let dir = clients_dir().join("node/bullmq");
    if !have("node", "--version") || !dir.join("node_modules/bullmq").exists() {
        return unprepared(
            "BullMQ",
            "node or tests/clients/node/bullmq/node_modules missing (npm ci)",
        );
    }
    let srv = Server::start(&["--password", "pw"]);
    run("BullMQ", &srv, &dir, Command::new("node").arg("queue.mjs"));
}

#[test]
fn jedis() {
    let dir = clients_dir().join("java");
    if !have("java", "-version") || !dir.join("target/lib").exists() {
        return unprepared(
            "Jedis",
            "java or the built tests/clients/java (mvn package) missing",
        );
    }
    let srv = Server::start(&["--password", "pw"]);
    run(
        "Jedis",
        &srv,
        &dir,
        Command::new("java").args(["-cp", "target/classes:target/lib/*", "dev.accelkv.Session"]),
    );
}

/// `JedisCluster` against a server in emulated cluster mode (docs/CLUSTER.md).
#[test]
fn jedis_cluster() {
    let dir = clients_dir().join("java");
    if !have("java", "-version") || !dir.join("target/lib").exists() {
        return unprepared(
            "JedisCluster",
            "java or the built tests/clients/java (mvn package) missing",
        );
    }
    let srv = Server::start(&["--cluster-mode", "emulated"]);
    run(
        "JedisCluster",
        &srv,
        &dir,
        Command::new("java")
            .args([
                "-cp",
                "target/classes:target/lib/*",
                "dev.accelkv.ClusterSession",
            ])
            .env("ACCELKV_CLUSTER_ADDR", srv.resp.to_string()),
    );
}

/// `redis-cli --pipe` mass insertion of 100,000 keys, then redis-benchmark's tests of the
/// commands accelkv serves, with no error.
#[test]
fn redis_cli_pipe_and_redis_benchmark() {
    if !have("redis-cli", "--version") || !have("redis-benchmark", "--version") {
        return unprepared("redis-cli/redis-benchmark", "redis-tools not installed");
    }
    let srv = Server::start(&[]);
    let port = srv.resp.port().to_string();
    let mut input = Vec::new();
    for i in 0..100_000 {
        let (k, v) = (format!("mass:{i:06}"), format!("value-{i}"));
        accelkv_proto::resp::command(&mut input, &[b"SET", k.as_bytes(), v.as_bytes()]);
    }
    let mut cli = Command::new("redis-cli")
        .args(["-p", &port, "--pipe"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    cli.stdin.take().unwrap().write_all(&input).unwrap();
    let out = cli.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("errors: 0, replies: 100000"), "{text}");
    let dbsize = Command::new("redis-cli")
        .args(["-p", &port, "DBSIZE"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&dbsize.stdout).trim(), "100000");
    let bench = Command::new("redis-benchmark")
        .args([
            "-p",
            &port,
            "-n",
            "20000",
            "-q",
            "-t",
            "ping,set,get,incr,mset",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&bench.stdout).replace('\r', "\n");
    assert!(bench.status.success(), "{text}");
    for test in [
        "PING_INLINE:",
        "PING_MBULK:",
        "SET:",
        "GET:",
        "INCR:",
        "MSET (10 keys):",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(test) && l.contains("requests per second")),
            "{test} did not complete:\n{text}"
        );
    }
    assert!(!text.to_lowercase().contains("error"), "{text}");
}

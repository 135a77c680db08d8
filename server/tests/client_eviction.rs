//! Bounds on what connections hold, through the real server: client eviction
//! (`maxmemory-clients`, bytes or a percentage of `maxmemory`), largest connection first and
//! only until the rest fit, never one marked `CLIENT NO-EVICT on`; CLIENT LIST's `qbuf`,
//! `omem` and `tot-mem`; `client-output-buffer-limit` (a hard limit at once, a soft one after
//! its seconds, even for a client that sends nothing more); and CONFIG SET of several
//! parameters at once, all or none.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, bulk_array, closed_by_server, info_field, RespConn, Server};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn ok() -> Value {
    Value::Simple("OK".into())
}

/// A connection named `name` that has sent the start of a command whose second argument
/// is `size` bytes, of which it sends all but the last (its query buffer holds them).
fn holding(srv: &Server, name: &str, size: usize) -> TcpStream {
    let mut c = RespConn::new(srv);
    assert_eq!(c.str(&["CLIENT", "SETNAME", name]), ok());
    let mut s = c.into_stream();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${size}\r\n").into_bytes();
    req.extend(std::iter::repeat_n(b'v', size - 1));
    s.write_all(&req).unwrap();
    s
}

/// CLIENT LIST's field `f` of the connection named `name` (`None`: no such connection).
fn field(c: &mut RespConn, name: &str, f: &str) -> Option<u64> {
    let Value::Bulk(Some(list)) = c.str(&["CLIENT", "LIST"]) else {
        panic!("CLIENT LIST answers a bulk string")
    };
    let list = String::from_utf8(list).unwrap();
    let line = list
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))?;
    let v = line
        .split(' ')
        .find_map(|kv| kv.strip_prefix(&format!("{f}=")))?;
    Some(v.parse().unwrap())
}

/// Waits until CLIENT LIST shows `name`'s `qbuf` at `at_least` bytes (its input read).
fn wait_qbuf(c: &mut RespConn, name: &str, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(c, name, "qbuf").unwrap_or(0) < at_least {
        assert!(Instant::now() < deadline, "{name}'s input never arrived");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_largest_clients_go_first_and_only_until_the_rest_fit() {
    let srv = Server::start(&[]);
    let mut control = RespConn::new(&srv);
    assert_eq!(control.str(&["CLIENT", "NO-EVICT", "on"]), ok());
    let mut small = holding(&srv, "small", 100_000);
    let mut medium = holding(&srv, "medium", 1_000_000);
    let mut large = holding(&srv, "large", 2_000_000);
    for (name, size) in [
        ("small", 100_000),
        ("medium", 1_000_000),
        ("large", 2_000_000),
    ] {
        wait_qbuf(&mut control, name, size - 1);
        let tot = field(&mut control, name, "tot-mem").unwrap();
        assert!(tot >= size, "{name}'s tot-mem {tot} counts its argument");
    }
    let total: u64 = ["small", "medium", "large"]
        .iter()
        .map(|n| field(&mut control, n, "tot-mem").unwrap())
        .sum();
    let used: u64 = info_field(&mut control, "memory", "mem_clients_normal")
        .parse()
        .unwrap();
    assert!(
        used >= total,
        "INFO's sum {used} covers the three ({total})"
    );

    // Room for all but the largest: it alone goes, at once.
    let limit = used - 1_500_000;
    let set = ["CONFIG", "SET", "maxmemory-clients", &limit.to_string()];
    assert_eq!(control.str(&set), ok());
    assert_eq!(field(&mut control, "large", "qbuf"), None);
    assert!(closed_by_server(&mut large), "the largest is closed");
    assert!(field(&mut control, "medium", "qbuf").is_some());
    assert!(field(&mut control, "small", "qbuf").is_some());
    assert_eq!(info_field(&mut control, "stats", "evicted_clients"), "1");
    assert_eq!(
        control.str(&["CONFIG", "GET", "maxmemory-clients"]),
        bulk_array(&["maxmemory-clients", &limit.to_string()])
    );

    // A limit of one byte: every connection but the one marked no-evict goes.
    assert_eq!(
        control.str(&["CONFIG", "SET", "maxmemory-clients", "1"]),
        ok()
    );
    assert!(closed_by_server(&mut medium));
    assert!(closed_by_server(&mut small));
    assert_eq!(control.str(&["PING"]), Value::Simple("PONG".into()));
    assert_eq!(info_field(&mut control, "stats", "evicted_clients"), "3");
}

#[test]
fn a_command_with_a_big_argument_is_evicted_before_it_runs() {
    let srv = Server::start(&[]);
    let mut control = RespConn::new(&srv);
    assert_eq!(
        control.str(&["CONFIG", "SET", "maxmemory-clients", "1mb"]),
        ok()
    );
    let mut c = RespConn::new(&srv);
    // Under the limit: it runs.
    let small = "v".repeat(100_000);
    assert_eq!(c.str(&["SET", "k", &small]), ok());
    // Its argument alone is past the limit: the connection is closed, the SET not run.
    let big = "w".repeat(1 << 20);
    c.send(&["SET", "k", &big]);
    assert!(closed_by_server(&mut c.into_stream()));
    assert_eq!(control.str(&["STRLEN", "k"]), Value::Integer(100_000));
    // The control connection itself is small: it stays.
    assert_eq!(control.str(&["PING"]), Value::Simple("PONG".into()));
}

#[test]
fn a_percentage_of_maxmemory_and_its_errors() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["CONFIG", "SET", "maxmemory", "10mb"]), ok());
    assert_eq!(c.str(&["CONFIG", "SET", "maxmemory-clients", "10%"]), ok());
    assert_eq!(
        c.str(&["CONFIG", "GET", "maxmemory-clients"]),
        bulk_array(&["maxmemory-clients", "10%"])
    );
    // 10% of 10 MiB is 1 MiB: a client holding 1.5 MB goes.
    let mut big = holding(&srv, "big", 1_500_000);
    assert!(closed_by_server(&mut big));
    for (v, why) in [
        ("200%", "percentage argument must be less or equal to 100"),
        ("x", "argument must be a memory or percent value"),
    ] {
        let Value::Error(e) = c.str(&["CONFIG", "SET", "maxmemory-clients", v]) else {
            panic!("{v} is refused")
        };
        assert_eq!(
            e,
            format!(
                "ERR CONFIG SET failed (possibly related to argument 'maxmemory-clients') - {why}"
            )
        );
    }
}

#[test]
fn config_set_of_several_parameters_is_all_or_none() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let get = |c: &mut RespConn, p: &str| match c.str(&["CONFIG", "GET", p]) {
        Value::Array(Some(v)) => v[1].clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(c.str(&["CONFIG", "SET", "maxmemory", "10000002"]), ok());
    let before = get(&mut c, "hash-max-listpack-entries");
    // The third is refused: the first two get their values back.
    let Value::Error(e) = c.str(&[
        "CONFIG",
        "SET",
        "maxmemory",
        "10000001",
        "hash-max-listpack-entries",
        "7",
        "maxmemory-clients",
        "200%",
    ]) else {
        panic!("refused")
    };
    assert!(e.contains("'maxmemory-clients') - percentage"), "{e}");
    assert_eq!(get(&mut c, "maxmemory"), bulk("10000002"));
    assert_eq!(get(&mut c, "hash-max-listpack-entries"), before);
    // All of them well: all set.
    assert_eq!(
        c.str(&[
            "CONFIG",
            "SET",
            "maxmemory",
            "10000001",
            "hash-max-listpack-entries",
            "7"
        ]),
        ok()
    );
    assert_eq!(get(&mut c, "maxmemory"), bulk("10000001"));
    assert_eq!(get(&mut c, "hash-max-listpack-entries"), bulk("7"));
    let Value::Error(e) = c.str(&["CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"]) else {
        panic!("a parameter twice is refused")
    };
    assert!(e.contains("duplicate parameter"), "{e}");
    let Value::Error(e) = c.str(&["CONFIG", "SET", "maxmemory", "1", "timeout"]) else {
        panic!("an odd count is refused")
    };
    assert!(e.contains("wrong number of arguments"), "{e}");
    let Value::Error(e) = c.str(&["CONFIG", "SET", "daemonize", "yes"]) else {
        panic!("a start-only parameter is refused")
    };
    assert!(e.contains("immutable"), "{e}");
}

/// A server holding `k`, a 1 MiB string, and a connection to it.
fn with_a_big_value() -> (Server, RespConn, String) {
    let srv = Server::start(&[]);
    let mut control = RespConn::new(&srv);
    let value = "v".repeat(1 << 20);
    assert_eq!(control.str(&["SET", "k", &value]), ok());
    (srv, control, value)
}

/// A connection that sent `n` GETs of `k` and reads none of their replies.
fn unread_gets(srv: &Server, n: usize) -> TcpStream {
    let mut s = RespConn::new(srv).into_stream();
    let pipeline = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(n);
    s.write_all(&pipeline).unwrap();
    s
}

#[test]
fn an_output_past_its_hard_limit_closes_the_client() {
    let (srv, mut control, value) = with_a_big_value();
    let set = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 3mb 0 0",
    ];
    assert_eq!(control.str(&set), ok());
    assert_eq!(
        control.str(&["CONFIG", "GET", "client-output-buffer-limit"]),
        bulk_array(&[
            "client-output-buffer-limit",
            "normal 3145728 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        ])
    );
    // One 1 MiB reply at a time, read: under the limit.
    let mut reader = RespConn::new(&srv);
    for _ in 0..5 {
        assert_eq!(reader.str(&["GET", "k"]), bulk(&value));
    }
    // Ten at once, unread: past it.
    let mut s = unread_gets(&srv, 10);
    std::thread::sleep(Duration::from_millis(300));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(closed_by_server(&mut s), "closed, its replies dropped");
    assert_eq!(control.str(&["PING"]), Value::Simple("PONG".into()));
    let Value::Error(e) =
        control.str(&["CONFIG", "SET", "client-output-buffer-limit", "normal 1 2"])
    else {
        panic!("refused")
    };
    assert!(
        e.contains("Wrong number of arguments in buffer limit"),
        "{e}"
    );
}

#[test]
fn an_output_past_its_soft_limit_too_long_closes_a_client_that_sends_nothing() {
    let (srv, mut control, _) = with_a_big_value();
    let set = [
        "CONFIG",
        "SET",
        "client-output-buffer-limit",
        "normal 0 2mb 1",
    ];
    assert_eq!(control.str(&set), ok());
    // 32 MiB of replies it never reads (more than the sockets' buffers take), then
    // nothing more from it.
    let mut s = unread_gets(&srv, 32);
    // Past the soft limit for its second, it is closed by the loop's once-a-second check.
    std::thread::sleep(Duration::from_millis(3500));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(closed_by_server(&mut s));
    assert_eq!(control.str(&["PING"]), Value::Simple("PONG".into()));
}

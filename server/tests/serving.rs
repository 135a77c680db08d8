//! The serving path's promises, tried against the real server: memory stays within the
//! output limit when a client pipelines big replies and does not read them (and the replies
//! all arrive once it does), SIGTERM stops the server within a bound whatever its clients do,
//! writes from many event loops to one key lose nothing (RESP INCR and binary fetch-and-add
//! through the one write door), with one loop and with four, and a writer stalled between
//! taking and completing its version holds back only the visibility of later writes, never
//! another loop's reads.

mod common;

use accelkv_client::Client;
use common::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn resp(addr: std::net::SocketAddr, cmd: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(cmd).unwrap();
    let mut b = vec![0u8; 1 << 20];
    let n = s.read(&mut b).unwrap();
    String::from_utf8_lossy(&b[..n]).into_owned()
}

/// Sets `big` to a 512 KiB value and returns the pipeline of `n` GETs of it.
fn big_value_pipeline(srv: &Server, n: usize) -> Vec<u8> {
    let value = vec![b'x'; 512 * 1024];
    let mut c = Client::connect(srv.bin, None).unwrap();
    c.put(b"big", &value).unwrap();
    b"GET big\r\n".repeat(n)
}

#[test]
fn a_client_that_does_not_read_cannot_grow_the_server_past_its_output_limit() {
    let srv = Server::start(&["--max-output", "8MiB", "--threads", "2"]);
    let pipeline = big_value_pipeline(&srv, 2000);
    let base = srv.rss_kib();
    // Two clients send 2,000 GETs of 512 KiB each (1 GiB of replies) and read nothing.
    let mut stalled: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut s = TcpStream::connect(srv.resp).unwrap();
            s.write_all(&pipeline).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let grown_mib = srv.rss_kib().saturating_sub(base) / 1024;
    // At most twice the limit (8 MiB) per connection, plus slack; the old path grew by
    // 0.6-1.1 GB per such client.
    assert!(
        grown_mib < 2 * (2 * 8) + 24,
        "the server grew by {grown_mib} MiB for two stalled clients"
    );
    // Others are still served meanwhile.
    assert_eq!(resp(srv.resp, b"PING\r\n"), "+PONG\r\n");
    // Backpressure, not loss: the stalled client gets every reply once it reads.
    let s = &mut stalled[0];
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let one = 512 * 1024 + b"$524288\r\n\r\n".len();
    let mut got = 0usize;
    let mut b = vec![0u8; 1 << 20];
    while got < 2000 * one {
        match s.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => panic!("reading the replies: {e} after {got} bytes"),
        }
    }
    assert_eq!(got, 2000 * one, "every reply arrives, in full");
}

#[test]
fn sigterm_stops_the_server_promptly_whatever_its_clients_do() {
    let mut srv = Server::start(&["--max-output", "8MiB"]);
    let pipeline = big_value_pipeline(&srv, 500);
    let _stalled: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = TcpStream::connect(srv.resp).unwrap();
            s.write_all(&pipeline).unwrap();
            s
        })
        .collect();
    // A client that sends half a command and waits.
    let mut half = TcpStream::connect(srv.resp).unwrap();
    half.write_all(b"*2\r\n$3\r\nGET\r\n$10\r\nabc").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let start = Instant::now();
    // SAFETY: kill(2) on the child's pid is a plain system call.
    unsafe { libc::kill(srv.child.id() as i32, libc::SIGTERM) };
    loop {
        if let Some(status) = srv.child.try_wait().unwrap() {
            assert!(status.success(), "clean exit: {status}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "still running 3 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn many_loops_write_one_key(threads: &str) {
    let srv = Server::start(&["--threads", threads]);
    const CLIENTS: usize = 6;
    const EACH: usize = 400;
    let handles: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (resp_addr, bin) = (srv.resp, srv.bin);
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    // RESP INCR, pipelined 8 at a time.
                    let mut s = TcpStream::connect(resp_addr).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut b = [0u8; 4096];
                    for _ in 0..EACH / 8 {
                        s.write_all(&b"INCR counter\r\n".repeat(8)).unwrap();
                        let mut lines = 0;
                        while lines < 8 {
                            let n = s.read(&mut b).unwrap();
                            assert!(n > 0);
                            assert!(b[0] == b':', "{}", String::from_utf8_lossy(&b[..n]));
                            lines += b[..n].iter().filter(|&&c| c == b'\n').count();
                        }
                    }
                } else {
                    // Binary fetch-and-add on another key, and SETs of the first.
                    let mut c = Client::connect(bin, None).unwrap();
                    use accelkv_proto::frame::operand::{U64, WRAP};
                    for _ in 0..EACH {
                        c.fetch_add(b"adder", 1, U64, WRAP).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let expect = (CLIENTS / 2 * EACH) as u64;
    assert_eq!(
        resp(srv.resp, b"GET counter\r\n"),
        format!("${}\r\n{expect}\r\n", expect.to_string().len())
    );
    let mut c = Client::connect(srv.bin, None).unwrap();
    let v = c.get(b"adder").unwrap().unwrap();
    assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), expect);
}

#[test]
fn one_loop_writes_from_many_clients_lose_nothing() {
    many_loops_write_one_key("1");
}

#[test]
fn four_loops_writing_one_key_lose_nothing() {
    many_loops_write_one_key("4");
}

#[test]
fn pipelines_mixing_reads_and_writes_answer_in_order() {
    for threads in ["1", "4"] {
        let srv = Server::start(&["--threads", threads]);
        let mut cmds = Vec::new();
        let mut want = String::new();
        for i in 0..300 {
            cmds.extend_from_slice(format!("SET k{i} v{i}\r\nGET k{i}\r\n").as_bytes());
            want.push_str(&format!("+OK\r\n${}\r\nv{i}\r\n", format!("v{i}").len()));
            if i % 50 == 0 {
                cmds.extend_from_slice(format!("MGET k{i} nosuch k0\r\n").as_bytes());
                want.push_str(&format!(
                    "*3\r\n${}\r\nv{i}\r\n$-1\r\n$2\r\nv0\r\n",
                    format!("v{i}").len()
                ));
            }
        }
        let mut s = TcpStream::connect(srv.resp).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&cmds).unwrap();
        let mut got = Vec::new();
        let mut b = [0u8; 65536];
        while got.len() < want.len() {
            let n = s.read(&mut b).unwrap();
            assert!(n > 0, "closed early");
            got.extend_from_slice(&b[..n]);
        }
        assert_eq!(String::from_utf8_lossy(&got), want, "--threads {threads}");
    }
}

/// Reads whatever `s` has within `wait`: `None` if nothing came.
fn try_read(s: &mut TcpStream, wait: Duration) -> Option<String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut b = [0u8; 4096];
    match s.read(&mut b) {
        Ok(n) if n > 0 => Some(String::from_utf8_lossy(&b[..n]).into_owned()),
        Ok(_) => panic!("closed"),
        Err(_) => None,
    }
}

#[test]
fn a_descheduled_writer_stalls_no_other_loop() {
    let srv = Server::start_with(&["--threads", "2"], |cmd| {
        cmd.env("ACCELKV_TEST_STALL_WRITES", "slow:2000");
    });
    assert_eq!(resp(srv.resp, b"SET k0 v0\r\n"), "+OK\r\n");
    // A: its loop's thread stops inside the write of `slow` for 2 s (version taken, not
    // completed): the test's stand-in for a writer the OS descheduled.
    let mut a = TcpStream::connect(srv.resp).unwrap();
    a.write_all(b"SET slow 1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // B and C are taken by the other loop (A's is asleep).
    let mut b = TcpStream::connect(srv.resp).unwrap();
    let mut c = TcpStream::connect(srv.resp).unwrap();
    for _ in 0..50 {
        b.write_all(b"GET k0\r\n").unwrap();
        assert_eq!(
            try_read(&mut b, Duration::from_secs(1)).as_deref(),
            Some("$2\r\nv0\r\n")
        );
    }
    // B writes: its write completes, but must not be answered before the older one is
    // visible (else a reader could miss an acknowledged write).
    b.write_all(b"SET k1 v1\r\n").unwrap();
    assert_eq!(
        try_read(&mut b, Duration::from_millis(300)),
        None,
        "answered too early"
    );
    // Meanwhile B's loop keeps serving C: the parked write does not block it.
    for _ in 0..20 {
        c.write_all(b"GET k0\r\n").unwrap();
        assert_eq!(
            try_read(&mut c, Duration::from_secs(1)).as_deref(),
            Some("$2\r\nv0\r\n")
        );
    }
    assert_eq!(
        try_read(&mut a, Duration::from_millis(10)),
        None,
        "A is still stalled"
    );
    // Once the stalled writer completes, both writes are answered and visible.
    assert_eq!(
        try_read(&mut a, Duration::from_secs(5)).as_deref(),
        Some("+OK\r\n")
    );
    assert_eq!(
        try_read(&mut b, Duration::from_secs(5)).as_deref(),
        Some("+OK\r\n")
    );
    c.write_all(b"MGET slow k1\r\n").unwrap();
    assert_eq!(
        try_read(&mut c, Duration::from_secs(1)).as_deref(),
        Some("*2\r\n$1\r\n1\r\n$2\r\nv1\r\n")
    );
}

/// Pipelines that write a key and read it back, from several connections on two loops at
/// once: a read waits for the connection's own write to become visible (another loop's
/// older write may hold it back), and the rest of the pipeline must still be answered
/// without the client sending anything more.
#[test]
fn concurrent_write_then_read_pipelines_are_answered_in_full() {
    let srv = Server::start(&["--threads", "2"]);
    let handles: Vec<_> = (0..4)
        .map(|c| {
            let addr = srv.resp;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut b = [0u8; 65536];
                for round in 0..400 {
                    let mut cmds = String::new();
                    let mut want = String::new();
                    for j in 0..4 {
                        let (k, v) = (format!("c{c}k{j}"), format!("{round:08}"));
                        cmds.push_str(&format!("SET {k} {v}\r\nGET {k}\r\n"));
                        want.push_str(&format!("+OK\r\n$8\r\n{v}\r\n"));
                    }
                    s.write_all(cmds.as_bytes()).unwrap();
                    let mut got = Vec::new();
                    while got.len() < want.len() {
                        match s.read(&mut b) {
                            Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                            other => panic!("round {round}: {other:?} after {got:?}"),
                        }
                    }
                    assert_eq!(String::from_utf8_lossy(&got), want, "round {round}");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn arr(args: &[&str]) -> String {
    let mut s = format!("*{}\r\n", args.len());
    for a in args {
        s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s
}

fn bulk(v: Option<&str>) -> String {
    v.map_or("$-1\r\n".to_string(), |v| {
        format!("${}\r\n{v}\r\n", v.len())
    })
}

/// Many connections' GETs gathered into one batch per loop turn still answer each
/// connection in its own order, see its own writes, and respect AUTH: 24 connections on one
/// loop send their pipelines before any is read, round after round.
#[test]
fn gathered_gets_answer_every_connection_in_order() {
    let srv = Server::start(&["--threads", "1", "--password", "pw"]);
    let mut conns: Vec<TcpStream> = (0..24)
        .map(|_| {
            let s = TcpStream::connect(srv.resp).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            s
        })
        .collect();
    let read_exactly = |s: &mut TcpStream, n: usize| {
        let mut got = vec![0u8; n];
        s.read_exact(&mut got).unwrap();
        String::from_utf8_lossy(&got).into_owned()
    };
    // Connections 0..20 authenticate; 20..24 do not.
    for s in &mut conns[..20] {
        s.write_all(arr(&["AUTH", "pw"]).as_bytes()).unwrap();
        assert_eq!(read_exactly(s, 5), "+OK\r\n");
    }
    conns[0]
        .write_all(arr(&["SET", "shared", "everyone"]).as_bytes())
        .unwrap();
    assert_eq!(read_exactly(&mut conns[0], 5), "+OK\r\n");
    for round in 0..40 {
        let mut want = Vec::new();
        for (c, s) in conns.iter_mut().enumerate() {
            let own = format!("c{c}");
            let val = format!("r{round}");
            let mut cmds = String::new();
            for a in [
                vec!["GET", "shared"],
                vec!["GET", own.as_str()],
                vec!["SET", own.as_str(), val.as_str()],
                vec!["GET", own.as_str()],
                vec!["GET", "nosuch"],
            ] {
                cmds.push_str(&arr(&a));
            }
            s.write_all(cmds.as_bytes()).unwrap();
            want.push(if c < 20 {
                let prev = (round > 0).then(|| format!("r{}", round - 1));
                [
                    bulk(Some("everyone")),
                    bulk(prev.as_deref()),
                    "+OK\r\n".to_string(),
                    bulk(Some(&val)),
                    bulk(None),
                ]
                .concat()
            } else {
                "-NOAUTH Authentication required.\r\n".repeat(5)
            });
        }
        for (c, s) in conns.iter_mut().enumerate() {
            assert_eq!(
                read_exactly(s, want[c].len()),
                want[c],
                "connection {c}, round {round}"
            );
        }
    }
}

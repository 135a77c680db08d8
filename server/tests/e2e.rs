//! End-to-end tests: start the real `accelkv-server` binary on free ports and drive it with
//! the Rust client over TCP and UDP, with raw bytes, and over RESP with raw commands,
//! `redis-cli` and `redis-py` (installed by .ci/run; where missing, those tests are skipped
//! and listed, or fail with `ACCELKV_REQUIRE_TOOLS` set).

use accelkv_client::{AsyncClient, Client, ClientError, Owned, UdpClient};
use accelkv_proto::frame::{decode_response, encode_request};
use accelkv_proto::{Body, Limits, Request, Status};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::process::Command;

mod common;
use common::Server;
use std::time::{Duration, Instant};

/// Sends raw RESP and reads until the reply stops arriving.
fn resp_raw(addr: SocketAddr, input: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    s.write_all(input).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(r: Result<u64, ClientError>) -> Option<Status> {
    match r {
        Err(ClientError::Status(s, _)) => Some(s),
        _ => None,
    }
}

#[test]
fn tcp_binary_protocol() {
    let srv = Server::start(&[]);
    let mut c = Client::connect(srv.bin, None).unwrap();
    assert_eq!(c.ping(b"hi").unwrap(), b"hi");
    let v1 = c.put(b"user:1", b"alice").unwrap();
    assert_eq!(c.get(b"user:1").unwrap(), Some(b"alice".to_vec()));
    let v2 = c.update(b"user:1", b"alice2").unwrap();
    assert!(v2 > v1);
    assert_eq!(status_of(c.update(b"user:9", b"x")), Some(Status::NotFound));
    assert_eq!(c.get(b"user:9").unwrap(), None);
    for i in 2..=5 {
        c.put(format!("user:{i}").as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    let (items, cut) = c.scan(b"user:2", b"user:5", 100).unwrap();
    assert_eq!(items.len(), 3);
    assert!(!cut);
    let (items, _) = c.scan_floor(b"user:3x", b"user:4", 10).unwrap();
    assert_eq!(
        items.iter().map(|x| x.0.clone()).collect::<Vec<_>>(),
        vec![b"user:3".to_vec(), b"user:4".to_vec()]
    );
    assert!(c.delete(b"user:1").unwrap());
    assert!(!c.delete(b"user:1").unwrap());
    // Many operations in one frame; answers come back by id.
    let keys: Vec<Vec<u8>> = (0..200)
        .map(|i| format!("batch:{i:04}").into_bytes())
        .collect();
    let puts: Vec<Request> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Request::Put {
            id: i as u16,
            key: k,
            value: k,
        })
        .collect();
    let a = c.execute(&puts).unwrap();
    assert_eq!(a.len(), 200);
    assert!(a.iter().all(|x| x.status == Status::Ok));
    let gets: Vec<Request> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| Request::Get {
            id: i as u16,
            key: k,
        })
        .collect();
    let a = c.execute(&gets).unwrap();
    for (i, x) in a.iter().enumerate() {
        assert_eq!(x.id, i as u16);
        assert_eq!(x.body, Owned::Bytes(keys[i].clone()));
    }
    assert!(c.stats().unwrap().contains("keys:204"));
    // Prometheus metrics.
    let mut h = TcpStream::connect(srv.admin).unwrap();
    h.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    h.read_to_string(&mut text).unwrap();
    assert!(text.contains("accelkv_ops_total{op=\"get\"}"), "{text}");
    assert!(
        text.contains("accelkv_request_duration_seconds_bucket{protocol=\"binary\",le=\"0.001\"}")
    );
    assert!(text.contains("accelkv_engine_queue_depth "));
    assert!(text.contains("accelkv_hot_cache_hit_ratio "));
}

#[test]
fn udp_reads_and_idempotent_writes() {
    udp_session(&[]);
}

#[test]
fn udp_with_busy_polling() {
    udp_session(&["--udp-busy-poll", "true"]);
}

fn udp_session(args: &[&str]) {
    let srv = Server::start(args);
    let mut u = UdpClient::connect(srv.bin, None).unwrap();
    u.put(b"k", b"v").unwrap();
    assert_eq!(u.get(b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(u.get(b"nope").unwrap(), None);
    let a = u
        .execute(&[Request::Update {
            id: 0,
            key: b"k",
            value: b"w",
        }])
        .unwrap();
    assert_eq!(a[0].status, Status::Unsupported);
    // No amplification: an unpadded, unauthenticated GET of a 300-byte value gets TOO_LARGE.
    let mut c = Client::connect(srv.bin, None).unwrap();
    c.put(b"big", &[7u8; 300]).unwrap();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut frame = Vec::new();
    encode_request(&mut frame, 9, None, &[Request::Get { id: 1, key: b"big" }]);
    sock.send_to(&frame, srv.bin).unwrap();
    let mut buf = [0u8; 2048];
    let n = sock.recv(&mut buf).unwrap();
    assert!(
        n <= frame.len(),
        "reply of {n} bytes to a {}-byte datagram",
        frame.len()
    );
    let (_, ops) = decode_response(&buf[..n], &Limits::default()).unwrap();
    assert_eq!(ops[0].status, Status::TooLarge);
    // The client pads its datagrams (512 bytes by default), so the value comes back.
    assert_eq!(u.get(b"big").unwrap(), Some(vec![7u8; 300]));
    // A burst of datagrams (taken by recvmmsg in batches) gets every reply.
    let mut sent = Vec::new();
    for id in 0..100u32 {
        let mut f = Vec::new();
        encode_request(
            &mut f,
            1000 + id,
            None,
            &[
                Request::Get { id: 0, key: b"k" },
                Request::Pad { id: 1, len: 64 },
            ],
        );
        sock.send_to(&f, srv.bin).unwrap();
        sent.push(1000 + id);
    }
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let n = sock
            .recv(&mut buf)
            .expect("a reply for every datagram of the burst");
        let (h, ops) = decode_response(&buf[..n], &Limits::default()).unwrap();
        assert_eq!(ops[0].body, Body::Bytes(b"v"));
        got.push(h.frame_id);
    }
    got.sort_unstable();
    assert_eq!(got, sent);
    // Garbage datagrams are dropped, and the server keeps answering.
    sock.send_to(b"garbage", srv.bin).unwrap();
    assert_eq!(u.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn auth_is_enforced_everywhere() {
    let srv = Server::start(&["--password", "s3cret"]);
    let mut anon = Client::connect(srv.bin, None).unwrap();
    assert_eq!(status_of(anon.put(b"k", b"v")), Some(Status::Unauthorized));
    let mut c = Client::connect(srv.bin, Some("s3cret")).unwrap();
    c.put(b"k", b"v").unwrap();
    assert_eq!(c.get(b"k").unwrap(), Some(b"v".to_vec()));
    let mut wrong = Client::connect(srv.bin, Some("nope")).unwrap();
    assert!(matches!(
        wrong.get(b"k"),
        Err(ClientError::Status(Status::Unauthorized, _))
    ));
    // An AUTH operation authenticates the rest of the connection.
    let a = anon
        .execute(&[Request::Auth {
            id: 0,
            password: b"s3cret",
        }])
        .unwrap();
    assert_eq!(a[0].status, Status::Ok);
    assert_eq!(anon.get(b"k").unwrap(), Some(b"v".to_vec()));
    let mut u = UdpClient::connect(srv.bin, Some("s3cret")).unwrap();
    assert_eq!(u.get(b"k").unwrap(), Some(b"v".to_vec()));
    let mut u_anon = UdpClient::connect(srv.bin, None).unwrap();
    assert!(matches!(
        u_anon.get(b"k"),
        Err(ClientError::Status(Status::Unauthorized, _))
    ));
    let r = resp_raw(srv.resp, b"GET k\r\nAUTH bad\r\nAUTH s3cret\r\nGET k\r\n");
    assert_eq!(r, "-NOAUTH Authentication required.\r\n-WRONGPASS invalid username-password pair or user is disabled.\r\n+OK\r\n$1\r\nv\r\n");
}

#[test]
fn limits_return_their_documented_errors() {
    let srv = Server::start(&[
        "--max-value",
        "1000",
        "--max-scan-items",
        "5",
        "--max-ops-per-frame",
        "8",
    ]);
    let mut c = Client::connect(srv.bin, None).unwrap();
    assert_eq!(status_of(c.put(&[b'k'; 461], b"v")), Some(Status::TooLarge));
    assert_eq!(status_of(c.put(b"k", &[0u8; 1001])), Some(Status::TooLarge));
    assert_eq!(status_of(c.put(b"", b"v")), Some(Status::Malformed));
    for i in 0..20 {
        c.put(format!("s{i:02}").as_bytes(), b"x").unwrap();
    }
    let (items, cut) = c.scan(b"s", b"", 100).unwrap();
    assert_eq!(items.len(), 5);
    assert!(cut, "the reply says it was cut at the server's limit");
    let (items, cut) = c.scan(b"s", b"", 3).unwrap();
    assert_eq!((items.len(), cut), (3, false));
    // A frame with more operations than allowed ends the connection.
    let gets: Vec<Request> = (0..9)
        .map(|i| Request::Get { id: i, key: b"s01" })
        .collect();
    assert!(matches!(c.execute(&gets), Err(ClientError::Io(_))));
    let mut c = Client::connect(srv.bin, None).unwrap();
    assert_eq!(c.get(b"s01").unwrap(), Some(b"x".to_vec()));
    // RESP: unknown command, wrong arity, a bad expire time, bad integer.
    let r = resp_raw(
        srv.resp,
        b"NOPE a\r\nGET\r\nSET a b EX 0\r\nSET n x\r\nINCR n\r\n",
    );
    assert_eq!(
        r,
        "-ERR unknown command 'NOPE', with args beginning with: 'a'\r\n\
         -ERR wrong number of arguments for 'get' command\r\n\
         -ERR invalid expire time in 'set' command\r\n\
         +OK\r\n-ERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn bad_input_leaves_the_server_healthy() {
    let srv = Server::start(&["--idle-timeout-secs", "1"]);
    let rss_before = srv.rss_kib();
    // Random bytes, a truncated frame, a huge declared length.
    for junk in [
        &b"\x00\x01\x02garbage"[..],
        &[0xAC, 0x4B, 0x01, 0x00, 0xFF, 0xFF, 0xFF, 0x7F][..],
    ] {
        let mut s = TcpStream::connect(srv.bin).unwrap();
        s.write_all(junk).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
        assert!(common::closed_by_server(&mut s), "connection closed");
    }
    let mut frame = Vec::new();
    encode_request(&mut frame, 1, None, &[Request::Get { id: 0, key: b"k" }]);
    let mut s = TcpStream::connect(srv.bin).unwrap();
    s.write_all(&frame[..frame.len() - 3]).unwrap();
    drop(s);
    // RESP garbage gets a protocol error and a closed connection.
    assert!(resp_raw(srv.resp, b"*1\r\n$-5\r\n").starts_with("-ERR Protocol error"));
    assert!(resp_raw(srv.resp, b"*99999999\r\n").starts_with("-ERR Protocol error"));
    // Thousands of connections opened and dropped.
    for _ in 0..2000 {
        let _ = TcpStream::connect(srv.bin);
    }
    // A client that sends and never reads is dropped after the idle timeout.
    let mut hog = TcpStream::connect(srv.bin).unwrap();
    hog.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut big = Vec::new();
    let ops: Vec<Request> = (0..64)
        .map(|i| Request::Ping {
            id: i,
            payload: &[1u8; 4096],
        })
        .collect();
    encode_request(&mut big, 1, None, &ops);
    let start = Instant::now();
    let mut sent = 0usize;
    while start.elapsed() < Duration::from_secs(8) {
        match hog.write_all(&big) {
            Ok(()) => sent += big.len(),
            Err(_) => break,
        }
    }
    assert!(
        start.elapsed() < Duration::from_secs(8),
        "the server kept a non-reading client ({sent} bytes sent)"
    );
    // A good client is still served, and memory stayed bounded.
    std::thread::sleep(Duration::from_millis(1200));
    let mut c = Client::connect(srv.bin, None).unwrap();
    c.put(b"after", b"ok").unwrap();
    assert_eq!(c.get(b"after").unwrap(), Some(b"ok".to_vec()));
    let grown = srv.rss_kib().saturating_sub(rss_before);
    assert!(grown < 256 * 1024, "server grew by {grown} KiB");
}

fn have(cmd: &str, arg: &str) -> bool {
    let ok = Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        accelkv_testkit::skip(&format!("{cmd} is not installed (.ci/run installs it)"));
    }
    ok
}

#[test]
fn redis_cli_session() {
    if !have("redis-cli", "--version") {
        return;
    }
    let srv = Server::start(&[]);
    let port = srv.resp.port().to_string();
    let cli = |args: &[&str]| -> String {
        let o = Command::new("redis-cli")
            .args(["-p", &port])
            .args(args)
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(cli(&["PING"]), "PONG");
    assert_eq!(cli(&["SET", "greeting", "hello"]), "OK");
    assert_eq!(cli(&["GET", "greeting"]), "hello");
    assert_eq!(cli(&["INCRBY", "counter", "5"]), "5");
    assert_eq!(cli(&["MSET", "a", "1", "b", "2", "c", "3"]), "OK");
    assert_eq!(cli(&["RANGE", "a", "c"]), "a\n1\nb\n2");
    assert_eq!(cli(&["FLOOR", "bz", "c"]), "b\n2\nc\n3");
    assert_eq!(cli(&["MGET", "a", "zz"]), "1");
    assert_eq!(cli(&["DEL", "a", "zz"]), "1");
    assert_eq!(cli(&["EXISTS", "a", "b"]), "1");
    assert_eq!(cli(&["DBSIZE"]), "4");
    assert!(cli(&["INFO"]).contains("loading:0"));
    assert_eq!(cli(&["SET", "b", "x", "NX"]), "");
    assert_eq!(cli(&["GETSET", "b", "y"]), "2");
    assert_eq!(cli(&["STRLEN", "greeting"]), "5");
    assert_eq!(cli(&["FLUSHALL"]), "OK");
    assert_eq!(cli(&["DBSIZE"]), "0");
}

#[test]
fn redis_py_session() {
    if !have("python3", "--version")
        || !Command::new("python3")
            .args(["-c", "import redis"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    {
        accelkv_testkit::skip("redis-py is not installed (.ci/run installs it)");
        return;
    }
    // redis-py's defaults (RESP3 since redis-py 6: HELLO 3 AUTH on connect), then RESP2.
    for protocol in ["None", "2"] {
        let srv = Server::start(&["--password", "pw"]);
        let script = format!(
            "import redis\n\
             r = redis.Redis(host='127.0.0.1', port={}, password='pw', protocol={protocol})\n\
             assert r.ping()\n\
             r.set('k', 'v')\n\
             assert r.get('k') == b'v'\n\
             assert r.get('missing') is None\n\
             assert r.set('k', 'w', get=True) == b'v'\n\
             assert r.set('k', 'x', nx=True) is None\n\
             assert r.incr('n') == 1 and r.incrby('n', 9) == 10\n\
             p = r.pipeline(transaction=False)\n\
             for i in range(100): p.set(f'p{{i:03}}', i)\n\
             p.execute()\n\
             assert r.mget(['p000', 'p099', 'none']) == [b'0', b'99', None]\n\
             assert r.execute_command('RANGE', 'p010', 'p013') == [b'p010', b'10', b'p011', b'11', b'p012', b'12']\n\
             assert r.dbsize() == 102\n\
             assert r.config_get('appendonly') == {{'appendonly': 'no'}}, r.config_get('appendonly')\n\
             assert 'redis_version' in r.info()\n\
             r.client_setname('tester')\n\
             assert r.client_getname() in ('tester', b'tester')\n\
             print('ok')\n",
            srv.resp.port()
        );
        let o = Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("python3");
        assert!(
            o.status.success(),
            "protocol={protocol}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("ok"));
    }
}

/// `HELLO` as Redis 7 answers it: protocol 3 switches replies to RESP3 (nulls `_`, maps
/// `%`), 2 back; bad versions and options get Redis's errors; AUTH and SETNAME inside it.
#[test]
fn hello_switches_the_reply_protocol() {
    let srv = Server::start(&["--password", "pw"]);
    let mut s = TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut ask = |cmd: &str| -> String {
        s.write_all(cmd.as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut b = vec![0u8; 4096];
        let n = s.read(&mut b).unwrap();
        String::from_utf8_lossy(&b[..n]).into_owned()
    };
    assert!(ask("HELLO 3\r\n").starts_with("-NOAUTH HELLO must be called"));
    assert_eq!(
        ask("HELLO 4\r\n"),
        "-NOPROTO sorry, this protocol version is not supported\r\n"
    );
    assert!(ask("HELLO x\r\n").starts_with("-ERR Protocol version is not an integer"));
    assert!(ask("HELLO 3 AUTH default nope\r\n").starts_with("-WRONGPASS"));
    assert_eq!(
        ask("HELLO 3 AUTH default pw BOGUS\r\n"),
        "-ERR Syntax error in HELLO option 'BOGUS'\r\n"
    );
    let hello = ask("HELLO 3 AUTH default pw SETNAME me\r\n");
    assert!(
        hello.starts_with("%7\r\n$6\r\nserver\r\n$7\r\naccelkv\r\n"),
        "{hello}"
    );
    assert!(hello.contains("$5\r\nproto\r\n:3\r\n"), "{hello}");
    assert_eq!(ask("CLIENT GETNAME\r\n"), "$2\r\nme\r\n");
    assert_eq!(ask("GET nosuch\r\n"), "_\r\n");
    assert_eq!(ask("MGET nosuch nosuch\r\n"), "*2\r\n_\r\n_\r\n");
    assert_eq!(
        ask("CONFIG GET appendonly\r\n"),
        "%1\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"
    );
    assert!(ask("INFO\r\n").starts_with('='));
    assert!(ask("HELLO 2\r\n").starts_with("*14\r\n"));
    assert_eq!(ask("GET nosuch\r\n"), "$-1\r\n");
}

#[test]
fn scan_reply_carries_items() {
    // Body::Items decodes with owned keys through the client.
    let srv = Server::start(&[]);
    let mut c = Client::connect(srv.bin, None).unwrap();
    c.put(b"x1", b"1").unwrap();
    let a = c
        .execute(&[Request::Scan {
            id: 0,
            lo: b"x",
            hi: b"",
            limit: 10,
        }])
        .unwrap();
    assert_eq!(
        a[0].body,
        Owned::Items(vec![(b"x1".to_vec(), b"1".to_vec())], false)
    );
    let _ = Body::Empty;
}

#[test]
fn help_config_file_and_graceful_shutdown() {
    let help = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .arg("--help")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--bind",
        "--port",
        "--resp-port",
        "--admin-port",
        "--password",
        "--max-connections",
        "--config",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}");
    }
    // Settings from a TOML file; a flag overrides the file.
    let dir = std::env::temp_dir().join(format!("accelkv-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("server.toml");
    std::fs::write(
        &file,
        "password = \"fromfile\"\nmax_scan_items = 2\nresp_port = 1\n",
    )
    .unwrap();
    let srv = Server::start(&["--config", file.to_str().unwrap()]);
    assert_ne!(
        srv.resp.port(),
        1,
        "the --resp-port flag overrides the file"
    );
    let mut c = Client::connect(srv.bin, Some("fromfile")).unwrap();
    for k in [b"a", b"b", b"c"] {
        c.put(k, b"1").unwrap();
    }
    let (items, cut) = c.scan(b"", b"", 10).unwrap();
    assert_eq!((items.len(), cut), (2, true));
    // A bad file is a clear error at start.
    std::fs::write(&file, "no_such_setting = 1\n").unwrap();
    let bad = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no_such_setting"));
    // SIGTERM stops the server cleanly.
    let mut srv = srv;
    let pid = srv.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let start = Instant::now();
    loop {
        if let Some(status) = srv.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "server did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn async_client_and_cli() {
    let srv = Server::start(&[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = AsyncClient::connect(srv.bin, None).await.unwrap();
        c.put(b"ak", b"av").await.unwrap();
        assert_eq!(c.get(b"ak").await.unwrap(), Some(b"av".to_vec()));
        assert_eq!(c.scan(b"a", b"", 10).await.unwrap().0.len(), 1);
        assert!(c.delete(b"ak").await.unwrap());
        assert_eq!(c.get(b"ak").await.unwrap(), None);
        use accelkv_proto::frame::operand::{REDUCE, U32, U64, WRAP};
        assert_eq!(c.fetch_add(b"an", 3, U64, WRAP).await.unwrap(), [0; 8]);
        assert_eq!(
            c.fetch_add(b"an", 1, U64, WRAP).await.unwrap(),
            3u64.to_le_bytes()
        );
        assert!(c.cas(b"ac", None, b"x").await.unwrap());
        assert!(!c.cas(b"ac", None, b"y").await.unwrap());
        c.put(b"av", &[1, 0, 0, 0, 2, 0, 0, 0]).await.unwrap();
        let sum = c
            .vector(b"av", REDUCE, U32, WRAP, "add", &[0; 4])
            .await
            .unwrap();
        assert_eq!(sum, 3u32.to_le_bytes());
    });
    // The accelkv CLI (built beside the server in the same workspace target directory).
    let cli = std::path::Path::new(env!("CARGO_BIN_EXE_accelkv-server")).with_file_name("accelkv");
    if !cli.exists() {
        accelkv_testkit::skip(&format!(
            "the CLI part: {} is not built (cargo test --workspace builds it)",
            cli.display()
        ));
        return;
    }
    let run = |args: &[&str]| -> String {
        let o = Command::new(&cli)
            .arg("--addr")
            .arg(srv.bin.to_string())
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert!(run(&["put", "greeting", "hello"]).starts_with("OK"));
    assert_eq!(run(&["get", "greeting"]), "hello\n");
    assert!(run(&["scan", "g"]).contains("greeting = hello"));
    assert!(run(&["bench", "--ops", "2000", "--batch", "16"]).contains("GET: 2000 operations"));
    assert_eq!(run(&["incr", "hits", "5"]), "0\n");
    assert_eq!(run(&["incr", "hits", "-2"]), "5\n");
    assert_eq!(run(&["cas", "lock", "", "me", "--absent"]), "swapped\n");
    assert_eq!(run(&["cas", "lock", "you", "me"]), "mismatch\n");
    assert!(run(&["vput", "v", "--elem", "i32", "-1", "2", "3"]).starts_with("OK"));
    assert_eq!(
        run(&["vector", "reduce", "v", "add", "0", "--elem", "i32"]),
        "4\n"
    );
    assert_eq!(
        run(&["vector", "filter", "v", "gt", "0", "--elem", "i32"]),
        "2 3\n"
    );
    assert_eq!(
        run(&["vector", "s2v", "v", "max", "0", "--elem", "i32"]),
        "-1 2 3\n"
    );
    assert_eq!(
        run(&["vector", "reduce", "v", "min", "100", "--elem", "i32"]),
        "0\n"
    );
}

#[test]
fn busy_and_frame_size_limits() {
    let srv = Server::start(&["--max-inflight", "2", "--max-frame", "2000"]);
    let mut c = Client::connect(srv.bin, None).unwrap();
    let gets: Vec<Request> = (0..3).map(|i| Request::Get { id: i, key: b"k" }).collect();
    let a = c.execute(&gets).unwrap();
    assert!(a.iter().all(|x| x.status == Status::Busy), "{a:?}");
    let two: Vec<Request> = (0..2).map(|i| Request::Get { id: i, key: b"k" }).collect();
    assert!(c
        .execute(&two)
        .unwrap()
        .iter()
        .all(|x| x.status == Status::NotFound));
    // A frame over --max-frame ends the connection; a new one is served.
    assert!(matches!(c.put(b"k", &[0u8; 3000]), Err(ClientError::Io(_))));
    let mut c = Client::connect(srv.bin, None).unwrap();
    c.put(b"k", b"small").unwrap();
    assert!(resp_raw(srv.resp, b"MGET a b c\r\n").starts_with("-BUSY"));
}

#[test]
fn connection_limit() {
    // Its own server: the bad-input test's one-second idle timeout would close held
    // connections while the slow part of this test runs.
    let srv = Server::start(&["--max-connections", "64"]);
    let held: Vec<TcpStream> = (0..64)
        .filter_map(|_| TcpStream::connect(srv.resp).ok())
        .collect();
    assert_eq!(held.len(), 64);
    let filled = Instant::now();
    while srv.connections() < 64 {
        assert!(
            filled.elapsed() < Duration::from_secs(10),
            "the server never accepted them"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(resp_raw(srv.resp, b"PING\r\n").contains("max number of clients"));
    let mut c = TcpStream::connect(srv.bin).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert!(
        common::closed_by_server(&mut c),
        "a binary connection past the limit is closed"
    );
    // The slots come back when clients leave.
    drop(held);
    let freed = Instant::now();
    while srv.connections() > 0 {
        assert!(
            freed.elapsed() < Duration::from_secs(10),
            "closed connections were never released"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(resp_raw(srv.resp, b"PING\r\n"), "+PONG\r\n");
}

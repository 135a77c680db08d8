//! TLS on the client ports (`--tls-port`, `--tls-memcached-port`, `--tls-binary-port`): the
//! real server with certificates made here (a CA, the server's, a client's signed by the
//! CA, and a stranger's from another CA). Every protocol answers over TLS; a client
//! certificate is required and checked (no certificate and a stranger's are refused in the
//! handshake, and nothing they sent runs); `--tls-auth-clients optional` lets a client
//! without one in; redis-cli `--tls` and redis-py's `ssl=True` are driven against it; a
//! pipeline larger than rustls's output buffer comes back whole; the plain ports keep
//! working beside the TLS ones; a bad certificate file is a clear error at start.

mod common;
#[path = "common/pki.rs"]
mod pki;

use accelkv_proto::frame::{self, Body, Request, Status};
use accelkv_proto::Limits;
use common::Server;
use pki::Pki;
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// The server's TLS flags, client certificates checked against the CA.
fn server_args(pki: &Pki) -> Vec<String> {
    [
        ("--tls-port", "0".to_string()),
        ("--tls-memcached-port", "0".to_string()),
        ("--tls-binary-port", "0".to_string()),
        ("--tls-cert", pki.path("server.pem")),
        ("--tls-key", pki.path("server.key")),
        ("--tls-ca", pki.path("ca.pem")),
    ]
    .into_iter()
    .flat_map(|(f, v)| [f.to_string(), v])
    .collect()
}

/// The server with TLS on every protocol (`server_args`) and `extra` flags.
fn start(pki: &Pki, extra: &[&str]) -> Server {
    let mut args = server_args(pki);
    args.extend(extra.iter().map(|a| a.to_string()));
    Server::start(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The TLS ports of the listening line (`tls resp=ADDR memcached=ADDR binary=ADDR`).
fn tls_ports(srv: &Server) -> (SocketAddr, SocketAddr, SocketAddr) {
    let at = |tag| tls_port(&srv.line, tag);
    (at("resp"), at("memcached"), at("binary"))
}

/// The address after ` <name>=` in a listening line.
fn tls_port(line: &str, name: &str) -> SocketAddr {
    let tag = format!(" {name}=");
    let i = line
        .find(&tag)
        .unwrap_or_else(|| panic!("no {tag} in {line}"))
        + tag.len();
    line[i..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> Tls {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// Sends `req` and reads until `done` says the answer is whole (or the stream ends).
fn exchange(s: &mut Tls, req: &[u8], done: impl Fn(&[u8]) -> bool) -> std::io::Result<Vec<u8>> {
    s.write_all(req)?;
    s.flush()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    while !done(&got) {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(got)
}

fn resp_over_tls(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> std::io::Result<Vec<u8>> {
    let mut s = connect(addr, cfg);
    exchange(
        &mut s,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nv1\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
        |g| g.ends_with(b"$2\r\nv1\r\n"),
    )
}

#[test]
fn every_protocol_answers_over_tls_with_a_client_certificate() {
    let pki = Pki::make("protocols");
    let srv = start(&pki, &[]);
    let (resp, mc, bin) = tls_ports(&srv);
    let cfg = pki.client(Some("client"));
    assert_eq!(resp_over_tls(resp, &cfg).unwrap(), b"+OK\r\n$2\r\nv1\r\n");

    let mut s = connect(mc, &cfg);
    let got = exchange(&mut s, b"set m 0 0 3\r\nabc\r\nget m\r\n", |g| {
        g.ends_with(b"END\r\n")
    });
    assert_eq!(got.unwrap(), b"STORED\r\nVALUE m 0 3\r\nabc\r\nEND\r\n");

    let mut s = connect(bin, &cfg);
    let mut req = Vec::new();
    let ops = [
        Request::Put {
            id: 1,
            key: b"b",
            value: b"binary",
        },
        Request::Get { id: 2, key: b"b" },
    ];
    frame::encode_request(&mut req, 7, None, &ops);
    let limits = Limits::default();
    let got = exchange(&mut s, &req, |g| frame::decode_response(g, &limits).is_ok()).unwrap();
    let (_, answers) = frame::decode_response(&got, &limits).unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0].status, Status::Ok);
    assert_eq!(answers[1].body, Body::Bytes(b"binary"));

    // The plain ports serve beside them, the same store.
    let mut plain = common::RespConn::new(&srv);
    assert_eq!(plain.str(&["GET", "m"]), common::bulk("abc"));
}

#[test]
fn a_client_without_the_cas_certificate_is_refused() {
    let pki = Pki::make("refused");
    let srv = start(&pki, &[]);
    let (resp, _, _) = tls_ports(&srv);
    for who in [None, Some("stranger")] {
        let got = resp_over_tls(resp, &pki.client(who));
        assert!(
            !got.as_ref().is_ok_and(|g| g.starts_with(b"+OK")),
            "{who:?} was served: {got:?}"
        );
    }
    // Nothing they sent ran.
    let mut plain = common::RespConn::new(&srv);
    assert_eq!(plain.str(&["EXISTS", "k"]), redis_int(0));
    // `optional`: a client without a certificate comes in; a stranger's is still refused.
    let srv = start(&pki, &["--tls-auth-clients", "optional"]);
    let (resp, _, _) = tls_ports(&srv);
    assert_eq!(
        resp_over_tls(resp, &pki.client(None)).unwrap(),
        b"+OK\r\n$2\r\nv1\r\n"
    );
    assert!(resp_over_tls(resp, &pki.client(Some("stranger"))).is_err());
}

fn redis_int(n: i64) -> common::Value {
    common::Value::Integer(n)
}

/// A pipeline whose replies are many times rustls's 64 KiB output buffer comes back whole
/// and in order while the client reads slowly (the loop waits for the socket, as on a
/// plain connection).
#[test]
fn a_large_pipeline_comes_back_whole_over_tls() {
    let pki = Pki::make("pipeline");
    let srv = start(&pki, &[]);
    let (resp, _, _) = tls_ports(&srv);
    let mut s = connect(resp, &pki.client(Some("client")));
    let value = "x".repeat(10_000);
    let set = format!(
        "*3\r\n$3\r\nSET\r\n$1\r\nv\r\n${}\r\n{value}\r\n",
        value.len()
    );
    s.write_all(set.as_bytes()).unwrap();
    let n = 2_000;
    let gets = "*2\r\n$3\r\nGET\r\n$1\r\nv\r\n".repeat(n);
    s.write_all(gets.as_bytes()).unwrap();
    let one = format!("${}\r\n{value}\r\n", value.len());
    let want = 5 + n * one.len();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < want {
        std::thread::sleep(Duration::from_micros(50));
        let k = s.read(&mut buf).unwrap();
        assert!(k > 0, "closed after {} of {want} bytes", got.len());
        got.extend_from_slice(&buf[..k]);
    }
    assert_eq!(&got[..5], b"+OK\r\n");
    assert!(got[5..].chunks(one.len()).all(|c| c == one.as_bytes()));
}

/// A big value over TLS is read into its own memory as on a plain connection (the
/// decrypted bytes go there), then read back whole.
#[test]
fn a_big_value_streams_over_tls() {
    let pki = Pki::make("bigvalue");
    let srv = start(&pki, &[]);
    let (resp, _, _) = tls_ports(&srv);
    let mut s = connect(resp, &pki.client(Some("client")));
    let value: Vec<u8> = (0..900_000u32).map(|i| (i % 253) as u8).collect();
    let mut req = format!("*3\r\n$3\r\nSET\r\n$1\r\nb\r\n${}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n");
    let want = 5 + format!("${}\r\n", value.len()).len() + value.len() + 2;
    let got = exchange(&mut s, &req, |g| g.len() >= want).unwrap();
    assert_eq!(&got[..5], b"+OK\r\n");
    assert_eq!(&got[got.len() - 2 - value.len()..got.len() - 2], &value[..]);
}

#[test]
fn redis_cli_and_redis_py_speak_tls() {
    let pki = Pki::make("clients");
    let srv = start(&pki, &[]);
    let (resp, _, _) = tls_ports(&srv);
    let port = resp.port().to_string();
    let have = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if have("redis-cli", &["--version"]) {
        let tls = [
            "--tls",
            "--cacert",
            &pki.path("ca.pem"),
            "--cert",
            &pki.path("client.pem"),
            "--key",
            &pki.path("client.key"),
        ];
        let cli = |extra: &[&str], args: &[&str]| {
            let o = Command::new("redis-cli")
                .args(["-p", &port])
                .args(extra)
                .args(args)
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
                + &String::from_utf8_lossy(&o.stderr)
        };
        assert_eq!(cli(&tls, &["SET", "cli", "over tls"]), "OK");
        assert_eq!(cli(&tls, &["GET", "cli"]), "over tls");
        let refused = cli(&tls[..3], &["GET", "cli"]);
        assert!(
            !refused.contains("over tls"),
            "served without a certificate: {refused}"
        );
    } else {
        accelkv_testkit::skip("redis-cli is not installed (.ci/run installs it)");
    }
    if !have("python3", &["-c", "import redis"]) {
        return accelkv_testkit::skip("redis-py is not installed (.ci/run installs it)");
    }
    let script = format!(
        "import redis\n\
         r = redis.Redis(port={port}, ssl=True, ssl_ca_certs={ca:?}, ssl_certfile={cert:?}, ssl_keyfile={key:?})\n\
         p = r.pipeline(transaction=False)\n\
         for i in range(1000): p.set(f'py{{i}}', i)\n\
         p.execute()\n\
         print(sum(int(v) for v in r.mget([f'py{{i}}' for i in range(1000)])), r.incr('py0', 5))\n\
         try:\n\
         \x20   redis.Redis(port={port}, ssl=True, ssl_ca_certs={ca:?}).ping()\n\
         \x20   print('served without a certificate')\n\
         except redis.exceptions.ConnectionError:\n\
         \x20   print('refused')\n",
        ca = pki.path("ca.pem"),
        cert = pki.path("client.pem"),
        key = pki.path("client.key"),
    );
    let o = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        out.trim(),
        "499500 5\nrefused",
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Mistakes in the TLS flags stop the server at start with what is wrong.
#[test]
fn bad_tls_settings_are_clear_errors() {
    let pki = Pki::make("errors");
    let run = |args: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
            .args(["--port", "0", "--resp-port", "0", "--admin-port", "0"])
            .args(["--memcached-port", "off"])
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} started");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = run(&["--tls-port", "0"]);
    assert!(e.contains("--tls-cert and --tls-key"), "{e}");
    let (cert, key, ca) = (
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    );
    let e = run(&["--tls-port", "0", "--tls-cert", &key, "--tls-key", &key]);
    assert!(e.contains("no certificate in the file"), "{e}");
    let e = run(&["--tls-port", "0", "--tls-cert", &cert, "--tls-key", &cert]);
    assert!(e.contains("cannot read a private key"), "{e}");
    let missing = Path::new(&ca).with_file_name("missing.pem");
    let e = run(&[
        "--tls-port",
        "0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-ca",
    ]
    .iter()
    .copied()
    .chain([missing.to_str().unwrap()])
    .collect::<Vec<_>>());
    assert!(e.contains("missing.pem"), "{e}");
    let e = run(&[
        "--tls-port",
        "0",
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
        "--tls-auth-clients",
        "yes",
    ]);
    assert!(e.contains("needs --tls-ca"), "{e}");
}

/// The Rust client (`Client::connect_tls`) and the `accelkv` CLI (`--tls`) on the binary
/// protocol's TLS port, with and without the client certificate the server requires.
#[test]
fn the_rust_client_and_the_cli_speak_tls() {
    let pki = Pki::make("client");
    let srv = start(&pki, &[]);
    let (_, _, bin) = tls_ports(&srv);
    let addr = bin.to_string();
    let mut opts = accelkv_client::TlsOptions {
        ca: pki.dir.join("ca.pem"),
        cert: Some(pki.dir.join("client.pem")),
        key: Some(pki.dir.join("client.key")),
        server_name: Some("localhost".into()),
    };
    let mut c = accelkv_client::Client::connect_tls(&addr, &opts, None).unwrap();
    c.put(b"rust", b"over tls").unwrap();
    assert_eq!(c.get(b"rust").unwrap(), Some(b"over tls".to_vec()));
    assert_eq!(c.scan(b"", b"~", 10).unwrap().0.len(), 1);
    // The name dialled is checked: 127.0.0.1 is in the certificate too.
    opts.server_name = None;
    let mut c = accelkv_client::Client::connect_tls(&addr, &opts, None).unwrap();
    assert_eq!(c.get(b"rust").unwrap(), Some(b"over tls".to_vec()));
    opts.server_name = Some("elsewhere.example".into());
    assert!(accelkv_client::Client::connect_tls(&addr, &opts, None)
        .and_then(|mut c| c.get(b"rust"))
        .is_err());
    let (cert, key) = (opts.cert.take(), opts.key.take());
    opts.server_name = None;
    assert!(accelkv_client::Client::connect_tls(&addr, &opts, None)
        .and_then(|mut c| c.get(b"rust"))
        .is_err());

    let cli = Path::new(env!("CARGO_BIN_EXE_accelkv-server")).with_file_name("accelkv");
    if !cli.exists() {
        return accelkv_testkit::skip(&format!(
            "the CLI part: {} is not built (scripts/test.sh builds it)",
            cli.display()
        ));
    }
    let run = |extra: &[&std::ffi::OsStr]| {
        Command::new(&cli)
            .args(["--addr", &addr, "--tls", "--cacert"])
            .arg(&opts.ca)
            .args(extra)
            .args(["get", "rust"])
            .output()
            .unwrap()
    };
    let (cert, key) = (cert.unwrap(), key.unwrap());
    let o = run(&[
        "--cert".as_ref(),
        cert.as_os_str(),
        "--key".as_ref(),
        key.as_os_str(),
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "over tls\n", "{o:?}");
    let o = run(&[]);
    assert!(!o.status.success(), "served without a certificate: {o:?}");
}

/// `--tls-only`: no plain port is opened (the listening line says so, and the default
/// ports stay free), and RESP over TLS serves.
#[test]
fn tls_only_opens_no_plain_port() {
    use std::io::BufRead;
    let pki = Pki::make("only");
    let mut args = server_args(&pki);
    args.extend(
        [
            "--tls-only",
            "--admin-port",
            "0",
            "--port",
            "0",
            "--resp-port",
            "0",
        ]
        .map(String::from),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let resp = tls_port(&line, "resp");
    let served = resp_over_tls(resp, &pki.client(Some("client")));
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("plain ports off"), "{line}");
    assert!(!line.contains("tcp+udp"), "{line}");
    assert_eq!(served.unwrap(), b"+OK\r\n$2\r\nv1\r\n");
    // Without a TLS port it is refused at start.
    let o = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--tls-only", "--admin-port", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--tls-only needs a TLS port"));
}

/// During the recovery of a data directory the TLS ports answer too (`-LOADING` over RESP
/// after the handshake), and the connection, its TLS session and a half-sent command
/// included, is served once recovery ends.
#[test]
fn tls_ports_answer_loading_during_recovery_then_serve() {
    let pki = Pki::make("loading");
    let dir = std::env::temp_dir().join(format!("accelkv-tls-loading-data-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut srv = Server::start(&["--data-dir", dir.to_str().unwrap()]);
    let mut c = common::RespConn::new(&srv);
    c.str(&["DEBUG", "POPULATE", "20000"]);
    let _ = srv.child.kill();
    let _ = srv.child.wait();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut args = server_args(&pki);
    args.retain(|a| a != "--tls-port");
    let i = args.iter().position(|a| a == "0").unwrap();
    args.remove(i); // the --tls-port value
    let mut child = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--port", "0", "--resp-port", "0", "--admin-port", "0"])
        .args([
            "--memcached-port",
            "off",
            "--tls-port",
            &port.port().to_string(),
        ])
        .args(&args)
        .arg("--data-dir")
        .arg(&dir)
        .env("ACCELKV_TEST_LOAD_DELAY_US", "4000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut line = String::new();
        let _ = std::io::BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let t = std::time::Instant::now();
    let mut s = loop {
        if TcpStream::connect(port).is_ok() {
            break connect(port, &pki.client(Some("client")));
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{port} never bound");
        std::thread::sleep(Duration::from_millis(5));
    };
    let got = exchange(&mut s, b"*1\r\n$4\r\nPING\r\n", |g| g.ends_with(b"\r\n")).unwrap();
    let done = listening.try_recv().is_ok();
    s.write_all(b"*2\r\n$3\r\nGET\r\n$5\r\nke").unwrap();
    let line = listening.recv_timeout(Duration::from_secs(120));
    let after = exchange(&mut s, b"y:7\r\n", |g| g.ends_with(b"value:7\r\n"));
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!done, "recovery ended before the test could look");
    assert_eq!(
        String::from_utf8_lossy(&got),
        "-LOADING accelkv is loading the dataset in memory\r\n"
    );
    assert!(line.expect("recovery ended").contains("listening"));
    assert_eq!(after.unwrap(), b"$7\r\nvalue:7\r\n");
}

//! Mutual TLS on the Raft port (`--tls-cert`, `--tls-key` and `--tls-ca` in cluster mode):
//! three real nodes and a real etcd, every node's certificate signed by one CA. The
//! replicas elect a leader and commit writes over TLS (through the test's TCP proxies,
//! which pass the bytes through); the Raft port refuses a connection without a certificate,
//! one with a certificate from another CA, and plain TCP that sends a frame, and answers
//! none of them, while a client holding a node's certificate completes the handshake.

mod cluster_support;
mod common;
#[path = "common/pki.rs"]
mod pki;

use accelkv_proto::resp::Value;
use cluster_support::harness::Cluster;
use rcgen::ExtendedKeyUsagePurpose;
use rustls::pki_types::ServerName;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// What a TLS client with `cfg` meets at the Raft port at `addr` when it sends bytes that
/// are no Raft frame: `Ok` when the TLS session was taken (the port then hangs up on the
/// bytes, without an alert), `Err` with the TLS error (an alert) when it was refused.
fn handshake(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> Result<(), String> {
    let sock = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let name = ServerName::try_from(addr.ip().to_string()).unwrap();
    let conn = rustls::ClientConnection::new(cfg.clone(), name).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    // TLS 1.3: the server checks the client's certificate after the client's side of the
    // handshake is done; a refusal arrives as an alert on the first read.
    let sent = s
        .write_all(&[4, 0, 0, 0, 9, 9, 9, 9])
        .and_then(|_| s.flush());
    let mut b = [0u8; 16];
    let read = sent.and_then(|_| s.read(&mut b));
    match read {
        Err(e) if e.to_string().contains("alert") || e.to_string().contains("certificate") => {
            Err(e.to_string())
        }
        _ => Ok(()),
    }
}

#[test]
fn replicas_speak_mutual_tls_and_the_raft_port_refuses_strangers() {
    if !accelkv_cluster::testing::etcd_or_skip() {
        return;
    }
    // One certificate for every node, naming the nodes' addresses (127.0.0.11…), for both
    // ends of a connection.
    let names = (11..=14).map(|i| format!("127.0.0.{i}")).collect();
    let usages = [
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let pki = pki::Pki::make_for("cluster", names, &usages);
    let (cert, key, ca) = (
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem"),
    );
    let args = ["--tls-cert", &cert, "--tls-key", &key, "--tls-ca", &ca];
    let c = Cluster::start_with(3, "tls", &args);
    let leader = c.leader(Duration::from_secs(20));
    // Writes through every node commit (a majority of the replicas, over TLS) and read back.
    for i in 0..3 {
        let s = TcpStream::connect(c.nodes[i].resp).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut conn = cluster_support::client::Conn::from_stream(s);
        let k = format!("tls-{i}");
        assert_eq!(
            conn.try_call(&[b"SET", k.as_bytes(), b"v"]),
            Some(Value::Simple("OK".into())),
            "{}",
            c.log(i)
        );
    }
    let s = TcpStream::connect(c.nodes[leader].resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut conn = cluster_support::client::Conn::from_stream(s);
    let got = conn.try_call(&[b"RANGE", b"tls-", b"tls-~"]);
    assert!(
        matches!(got, Some(Value::Array(Some(ref a))) if a.len() == 6),
        "{got:?}"
    );
    // The Raft port (not the proxy in front of it).
    let port = c.nodes[(leader + 1) % 3].raft;
    // A client holding a node's certificate: what a peer is.
    let node = pki.client(Some("server"));
    assert_eq!(
        handshake(port, &node),
        Ok(()),
        "a node's certificate is taken"
    );
    for (who, cfg) in [
        ("no certificate", pki.client(None)),
        ("another CA's certificate", pki.client(Some("stranger"))),
    ] {
        let e = handshake(port, &cfg);
        assert!(e.is_err(), "{who} was taken");
        eprintln!("{who}: {e:?}");
    }
    // Plain TCP: a frame's worth of bytes, and the port hangs up without a frame back.
    let mut plain = TcpStream::connect(port).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain.write_all(&[4, 0, 0, 0, 2, 0, 0, 0]).unwrap();
    let mut b = [0u8; 64];
    let n = plain.read(&mut b).unwrap_or(0);
    assert!(
        n == 0 || b[0] == 0x15 || b[0] == 0x16,
        "a plain client was answered {:?}",
        &b[..n]
    );
    // The cluster still serves.
    assert_eq!(
        conn.try_call(&[b"GET", b"tls-1"]),
        Some(Value::Bulk(Some(b"v".to_vec())))
    );
}

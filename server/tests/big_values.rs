//! Values past the 1 MiB default: `--max-value` alone lets RESP commands carry them (the
//! input limit follows it), so Redis's "Very big payload in GET/SET" passes; a value over
//! the limit gets Redis's `invalid bulk length` with the limit named, and the connection
//! closes.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};
use std::io::{Read, Write};

#[test]
fn a_big_payload_round_trips_when_the_limit_allows_it() {
    let srv = Server::start(&["--max-value", &(16 << 20).to_string()]);
    let mut c = RespConn::new(&srv);
    let big: Vec<u8> = (0..10_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    assert_eq!(c.call(&[b"SET", b"big", &big]), Value::Simple("OK".into()));
    assert_eq!(c.call(&[b"GET", b"big"]), Value::Bulk(Some(big.clone())));
    assert_eq!(c.call(&[b"STRLEN", b"big"]), Value::Integer(10_000_000));
    // Two of them in one command (MSET) fit too.
    assert_eq!(
        c.call(&[b"MSET", b"a", &big, b"b", &big]),
        Value::Simple("OK".into())
    );
}

#[test]
fn a_value_over_the_limit_is_refused_with_the_limit_named() {
    let srv = Server::start(&[]);
    let mut s = std::net::TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    s.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000000\r\n")
        .unwrap();
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert!(
        got.starts_with("-ERR Protocol error: invalid bulk length (4000000 bytes exceed"),
        "{got}"
    );
}

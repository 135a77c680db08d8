//! Malformed RESP input gets Redis's error texts (the ones clients and Redis's own tests
//! look for): each case sent on a fresh connection to accelkv and to a real `redis-server`,
//! the first reply compared (or both silent). Inline commands with quoted arguments too.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const CASES: &[&[u8]] = &[
    b"*abc\r\n",
    b"*-5\r\nPING\r\n",
    b"*-1\r\nPING\r\n",
    b"*2\r\n$abc\r\n",
    b"*2\r\n$-5\r\n",
    b"*1\r\n$-1\r\n",
    b"*2\r\n+PING\r\n",
    b"*1\r\n:5\r\n",
    b"*2\r\n$4\r\nECHO\r\n,1.5\r\n",
    b"*1\r\n_\r\n",
    b"*3000000000\r\n",
    b"\"unbalanced\r\n",
    b"PING \"a\r\n",
    b"ECHO \"a\"b\r\n",
    b"ECHO \"hello world\"\r\n",
    b"ECHO 'single quoted'\r\n",
    b"SET \"k 1\" v\r\nGET \"k 1\"\r\n",
    b"   \r\nPING\r\n",
    b"%1\r\n",
];

/// What `input` gets back on a fresh connection (empty when nothing comes in 300 ms).
fn reply(addr: SocketAddr, input: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    s.write_all(input).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 512];
    while let Ok(n) = s.read(&mut b) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&b[..n]);
    }
    got
}

#[test]
fn malformed_input_gets_redis_error_texts() {
    let Some(redis) = common::Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return;
    };
    let srv = common::Server::start(&[]);
    let theirs: SocketAddr = ([127, 0, 0, 1], redis.port).into();
    let mut differ = Vec::new();
    for case in CASES {
        let (a, b) = (reply(srv.resp, case), reply(theirs, case));
        if a != b {
            differ.push(format!(
                "{:?}: accelkv {:?}, redis {:?}",
                String::from_utf8_lossy(case),
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b)
            ));
        }
    }
    assert!(differ.is_empty(), "replies differ:\n{}", differ.join("\n"));
}

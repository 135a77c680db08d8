//! Redis's bit commands over RESP against the real server: every reply to one script is
//! the reply a real `redis-server` gives (run on both), and SETBIT from several clients on
//! one key loses no bit (each is one read-modify-write through the reservation station).

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};

/// The script both servers run (edges where Redis versions differ are left out: argument
/// errors on a missing key).
const SCRIPT: &[&str] = &[
    "SETBIT b 7 1",
    "GET b",
    "SETBIT b 7 0",
    "GET b",
    "SETBIT b 100 1",
    "STRLEN b",
    "GETBIT b 100",
    "GETBIT b 99",
    "GETBIT b 100000",
    "GETBIT missing 3",
    "SETBIT b -1 1",
    "SETBIT b x 1",
    "SETBIT b 4294967296 1",
    "SETBIT b 1 2",
    "SETBIT b 1 -1",
    "SETBIT z 0 0",
    "GET z",
    "SET s foobar",
    "BITCOUNT s",
    "BITCOUNT s 0 0",
    "BITCOUNT s 1 1",
    "BITCOUNT s 1 1 BYTE",
    "BITCOUNT s 5 30 BIT",
    "BITCOUNT s -2 -1",
    "BITCOUNT s -100 100",
    "BITCOUNT s 4 2",
    "BITCOUNT s 0",
    "BITCOUNT s 0 1 WORD",
    "BITCOUNT s a b",
    "BITCOUNT missing",
    "BITCOUNT missing 0 -1",
    "SET p \u{0}\u{ff}\u{f0}",
    "BITPOS p 1",
    "BITPOS p 0",
    "BITPOS p 1 2",
    "BITPOS p 1 2 -1 BYTE",
    "BITPOS p 1 7 15 BIT",
    "BITPOS p 0 8 15 BIT",
    "SET ones \u{ff}\u{ff}",
    "BITPOS ones 0",
    "BITPOS ones 0 0",
    "BITPOS ones 0 0 -1",
    "BITPOS ones 1 5 1",
    "BITPOS ones 2",
    "BITPOS missing 1",
    "BITPOS missing 0",
    "SET x1 abc",
    "SET x2 ab",
    "BITOP AND d x1 x2",
    "GET d",
    "BITOP OR d x1 x2",
    "GET d",
    "BITOP XOR d x1 x2 x1",
    "GET d",
    "BITOP NOT d x2",
    "GET d",
    "BITOP NOT d x1 x2",
    "BITOP NAND d x1",
    "BITOP AND d nothing none",
    "EXISTS d",
    "BITOP OR d x1 missing",
    "GET d",
    "GETBIT",
    "SETBIT b 1",
    "BITOP AND d",
];

#[test]
fn bit_commands_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

/// Four clients set 256 bits each (interleaved offsets) of one key, pipelined: every bit
/// is set at the end, and each SETBIT answered 0 (no client saw another's bit as its own).
#[test]
fn concurrent_setbits_lose_nothing() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for i in 0..256u64 {
                    let off = (i * 4 + t).to_string();
                    assert_eq!(c.str(&["SETBIT", "shared", &off, "1"]), Value::Integer(0));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut c = RespConn::connect(addr);
    assert_eq!(c.str(&["BITCOUNT", "shared"]), Value::Integer(1024));
    assert_eq!(c.str(&["STRLEN", "shared"]), Value::Integer(128));
    assert_eq!(c.str(&["BITPOS", "shared", "0"]), Value::Integer(1024));
}

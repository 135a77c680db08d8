//! Reads through an engine with workers of its own (the GPU engine's path: submit, park the
//! waiter, resume on completion; exercised here with `--engine cpu-threads`) answer exactly
//! what reads on the loop's own thread (`--engine cpu`) answer: the same script of binary
//! frames, RESP pipelines (GET, MGET, EXISTS, STRLEN, RANGE, FLOOR mixed with writes) and
//! UDP datagrams is run against both and the answers compared byte for byte; and under
//! concurrent clients each connection still reads its own writes, in order.

mod common;

use accelkv_client::{Answer, Client, UdpClient};
use accelkv_proto::Request;
use common::Server;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn arr(args: &[&[u8]]) -> Vec<u8> {
    let mut s = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        s.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        s.extend_from_slice(a);
        s.extend_from_slice(b"\r\n");
    }
    s
}

/// Sends `cmds` and reads until the connection has been quiet for a moment after `n`
/// replies' worth of bytes stopped growing (the script ends with a PING whose +PONG marks
/// the end).
fn resp_script(srv: &Server, cmds: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(srv.resp).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(cmds).unwrap();
    s.write_all(&arr(&[b"PING", b"end-of-script"])).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 65536];
    while !got.ends_with(b"$13\r\nend-of-script\r\n") {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed early");
        got.extend_from_slice(&b[..n]);
    }
    got
}

/// The whole script against one server: every answer, in order, as text.
fn script(srv: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut c = Client::connect(srv.bin, None).unwrap();
    let keys: Vec<Vec<u8>> = (0..300u32)
        .map(|i| format!("k{:04}", i * 7 % 300).into_bytes())
        .collect();
    // Frames mixing writes and every kind of read.
    for round in 0..6u16 {
        let mut ops = Vec::new();
        for (i, k) in keys.iter().enumerate().skip(round as usize * 50).take(50) {
            let id = i as u16;
            ops.push(match i % 5 {
                0 | 1 => Request::Put {
                    id,
                    key: k,
                    value: k,
                },
                2 => Request::Get { id, key: k },
                3 => Request::Scan {
                    id,
                    lo: k,
                    hi: b"k9",
                    limit: 5,
                },
                _ => Request::ScanFloor {
                    id,
                    kl: k,
                    ku: b"k9",
                    limit: 3,
                },
            });
        }
        let answers: Vec<Answer> = c.execute(&ops).unwrap();
        out.extend(answers.iter().map(|a| format!("{a:?}")));
    }
    // A frame of reads only, with absent keys.
    let ops: Vec<Request> = (0..64u16)
        .map(|i| Request::Get {
            id: i,
            key: if i % 3 == 0 {
                b"absent"
            } else {
                &keys[i as usize]
            },
        })
        .collect();
    out.extend(c.execute(&ops).unwrap().iter().map(|a| format!("{a:?}")));
    // A RESP pipeline of every read command between writes.
    let mut cmds = Vec::new();
    for i in 0..40u32 {
        let k = format!("r{i:03}");
        let v = format!("value-{i}");
        cmds.extend(arr(&[b"SET", k.as_bytes(), v.as_bytes()]));
        cmds.extend(arr(&[b"GET", k.as_bytes()]));
        cmds.extend(arr(&[b"MGET", k.as_bytes(), b"nosuch", b"r000"]));
        cmds.extend(arr(&[b"EXISTS", k.as_bytes(), b"nosuch", b"r001"]));
        cmds.extend(arr(&[b"STRLEN", k.as_bytes()]));
        cmds.extend(arr(&[b"RANGE", b"r000", k.as_bytes(), b"LIMIT", b"4"]));
        cmds.extend(arr(&[b"FLOOR", k.as_bytes(), b"r999", b"LIMIT", b"2"]));
        cmds.extend(arr(&[b"INCR", b"counter"]));
        if i % 7 == 0 {
            cmds.extend(arr(&[b"DEL", k.as_bytes()]));
            cmds.extend(arr(&[b"GET", k.as_bytes()]));
        }
    }
    out.push(String::from_utf8_lossy(&resp_script(srv, &cmds)).into_owned());
    // UDP.
    let mut u = UdpClient::connect(srv.bin, None).unwrap();
    for k in keys.iter().take(20) {
        out.push(format!("{:?}", u.get(k).unwrap()));
    }
    out.push(format!("{:?}", u.get(b"absent").unwrap()));
    out
}

#[test]
fn reads_through_engine_workers_answer_as_inline_reads() {
    for threads in ["1", "2"] {
        let inline = script(&Server::start(&["--engine", "cpu", "--threads", threads]));
        let ring = script(&Server::start(&[
            "--engine",
            "cpu-threads",
            "--threads",
            threads,
        ]));
        assert_eq!(inline.len(), ring.len());
        for (i, (a, b)) in inline.iter().zip(&ring).enumerate() {
            assert_eq!(a, b, "answer {i}, --threads {threads}");
        }
    }
    // With a data directory and `--sync sync` (the default) a frame waits for its reads and
    // then for durability; the answers are the same again.
    let dir = std::env::temp_dir().join(format!("accelkv-offload-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    let inline = script(&Server::start(&["--engine", "cpu"]));
    let durable = script(&Server::start(&[
        "--engine",
        "cpu-threads",
        "--data-dir",
        d,
        "--sync",
        "sync",
    ]));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(inline, durable);
}

/// Clients that each write their own keys and read them back in one pipeline see their own
/// writes, in order, while their reads wait on the engine's workers.
#[test]
fn each_connection_reads_its_own_writes_through_engine_workers() {
    let srv = Server::start(&["--engine", "cpu-threads"]);
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let addr = srv.resp;
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                for round in 0..60 {
                    let (k, v) = (format!("c{c}"), format!("v{round}"));
                    let mut cmds = arr(&[b"SET", k.as_bytes(), v.as_bytes()]);
                    cmds.extend(arr(&[b"GET", k.as_bytes()]));
                    cmds.extend(arr(&[b"MGET", k.as_bytes(), k.as_bytes()]));
                    cmds.extend(arr(&[b"EXISTS", k.as_bytes()]));
                    s.write_all(&cmds).unwrap();
                    let bulk = format!("${}\r\n{v}\r\n", v.len());
                    let want = format!("+OK\r\n{bulk}*2\r\n{bulk}{bulk}:1\r\n");
                    let mut got = vec![0u8; want.len()];
                    s.read_exact(&mut got).unwrap();
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        want,
                        "client {c} round {round}"
                    );
                }
            })
        })
        .collect();
    for t in clients {
        t.join().unwrap();
    }
}

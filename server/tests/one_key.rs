//! A collection command outside MULTI runs as one station operation on its key
//! (`core/station_one.rs`): it owns the key's slot, not the global transaction. These tests
//! try to break that from several event loops at once: commands on one key from several
//! connections, MULTI/EXEC transactions and plain key commands (EXPIRE, PERSIST) on the same
//! key meanwhile, and readers checking that every command is seen whole. Nothing may be
//! lost, torn or reordered.

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(i) => i,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Pushes from two connections (one station operation each), pushes inside MULTI/EXEC from
/// a third (the general transaction), and EXPIRE/PERSIST on the list from a fourth, while a
/// reader watches LLEN never go down: at the end every push is there exactly once, each
/// writer's own pushes in its order.
#[test]
fn pushes_from_operations_and_transactions_on_one_list_are_all_kept_in_order() {
    let srv = Server::start(&["--threads", "3"]);
    let addr = srv.resp;
    const N: usize = 300;
    let pushers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for i in 0..N {
                    let r = c.str(&["RPUSH", "l", &format!("p{w}-{i:04}")]);
                    assert!(matches!(r, Value::Integer(_)), "{r:?}");
                }
            })
        })
        .collect();
    let tx = std::thread::spawn(move || {
        let mut c = RespConn::connect(addr);
        for i in 0..N / 3 {
            c.str(&["MULTI"]);
            c.str(&["RPUSH", "l", &format!("t-{i:04}a")]);
            c.str(&["RPUSH", "l", &format!("t-{i:04}b")]);
            let r = c.str(&["EXEC"]);
            assert!(matches!(r, Value::Array(Some(_))), "{r:?}");
        }
    });
    let keyer = std::thread::spawn(move || {
        let mut c = RespConn::connect(addr);
        for i in 0..N {
            match i % 2 {
                0 => c.str(&["EXPIRE", "l", "1000"]),
                _ => c.str(&["PERSIST", "l"]),
            };
        }
    });
    let mut r = RespConn::connect(addr);
    let mut last = 0;
    while !pushers.iter().all(|p| p.is_finished()) || !tx.is_finished() {
        let n = int(r.str(&["LLEN", "l"]));
        assert!(n >= last, "LLEN went from {last} to {n}");
        last = n;
    }
    for h in pushers.into_iter().chain([tx, keyer]) {
        h.join().expect("writer");
    }
    let all = strings(r.str(&["LRANGE", "l", "0", "-1"]));
    assert_eq!(all.len(), 2 * N + 2 * (N / 3), "every push kept once");
    for w in 0..2 {
        let mine: Vec<&String> = all
            .iter()
            .filter(|e| e.starts_with(&format!("p{w}-")))
            .collect();
        let want: Vec<String> = (0..N).map(|i| format!("p{w}-{i:04}")).collect();
        assert_eq!(mine, want.iter().collect::<Vec<_>>(), "writer {w}'s order");
    }
    // A transaction's two pushes are next to each other.
    for (i, e) in all.iter().enumerate() {
        if e.starts_with("t-") && e.ends_with('a') {
            assert_eq!(all[i + 1], format!("{}b", &e[..e.len() - 1]), "a torn EXEC");
        }
    }
}

/// ZADDs from two connections on one sorted set (each command writes a member and its
/// score index) and ZINCRBY inside MULTI, with a reader checking at every read that ZCARD,
/// ZRANGE and ZRANGEBYSCORE agree: the member and score subkeys of a command land together.
#[test]
fn a_sorted_sets_member_and_score_index_never_disagree() {
    let srv = Server::start(&["--threads", "3"]);
    let addr = srv.resp;
    const N: usize = 200;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for i in 0..N {
                    // Members shared by both writers move between scores.
                    let m = format!("m{}", i % 50);
                    c.str(&["ZADD", "z", &format!("{}", i * 2 + w), &m]);
                    if i % 10 == 0 {
                        c.str(&["ZREM", "z", &format!("m{}", (i + 25) % 50)]);
                    }
                }
            })
        })
        .collect();
    let tx = std::thread::spawn(move || {
        let mut c = RespConn::connect(addr);
        for i in 0..N / 2 {
            c.str(&["MULTI"]);
            c.str(&["ZINCRBY", "z", "1", &format!("m{}", i % 50)]);
            c.str(&["ZADD", "z", "5", "tx"]);
            c.str(&["EXEC"]);
        }
    });
    let mut r = RespConn::connect(addr);
    let mut checks = 0;
    while writers.iter().any(|w| !w.is_finished()) || !tx.is_finished() {
        r.str(&["MULTI"]);
        r.str(&["ZCARD", "z"]);
        r.str(&["ZRANGE", "z", "0", "-1"]);
        r.str(&["ZRANGEBYSCORE", "z", "-inf", "+inf"]);
        let Value::Array(Some(v)) = r.str(&["EXEC"]) else {
            panic!("EXEC")
        };
        let card = int(v[0].clone()) as usize;
        let by_rank = strings(v[1].clone());
        let by_score = strings(v[2].clone());
        assert_eq!(by_rank.len(), card, "ZCARD and ZRANGE disagree");
        assert_eq!(
            by_rank, by_score,
            "the score index disagrees with the members"
        );
        checks += 1;
    }
    for h in writers.into_iter().chain([tx]) {
        h.join().expect("writer");
    }
    assert!(checks > 0);
    let all = strings(r.str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));
    for pair in all.chunks(2) {
        let score = r.str(&["ZSCORE", "z", &pair[0]]);
        let want = Value::Bulk(Some(pair[1].clone().into_bytes()));
        assert_eq!(score, want, "ZSCORE of {}", pair[0]);
    }
}

/// Commands on many keys from several connections at once (no global order between them
/// any more): HINCRBY on 8 hashes from 3 connections, each counter exact at the end.
#[test]
fn commands_on_different_keys_run_side_by_side_and_lose_nothing() {
    let srv = Server::start(&["--threads", "3"]);
    let addr = srv.resp;
    const N: usize = 400;
    let writers: Vec<_> = (0..3)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for i in 0..N {
                    let key = format!("h{}", (i + w) % 8);
                    c.str(&["HINCRBY", &key, "n", "1"]);
                    c.str(&["HINCRBY", &key, &format!("w{w}"), "1"]);
                }
            })
        })
        .collect();
    for h in writers {
        h.join().expect("writer");
    }
    let mut c = RespConn::connect(addr);
    let mut total = 0;
    for k in 0..8 {
        let key = format!("h{k}");
        let n = int(c.str(&["HINCRBY", &key, "n", "0"]));
        let parts: i64 = (0..3)
            .map(|w| int(c.str(&["HINCRBY", &key, &format!("w{w}"), "0"])))
            .sum();
        assert_eq!(n, parts, "{key}: the total and its parts");
        total += n;
    }
    assert_eq!(total, 3 * N as i64);
}

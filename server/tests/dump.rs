//! DUMP and RESTORE against a real redis-server: every type Redis dumps (small values in
//! its compact encodings, intsets and listpacks, big ones in plain ones, integer and
//! LZF-compressed strings) restores into accelkv with the same contents, and accelkv's
//! dumps restore into Redis; TTLs travel; RESTORE's errors are Redis's.

mod common;

use accelkv_proto::resp::Value;
use common::{beside_redis, RespConn};

/// A sorted, comparable form of a reply (sets and hashes come back in any order).
fn sorted(v: Value) -> Vec<Vec<u8>> {
    let Value::Array(Some(items)) = v else {
        panic!("not an array: {v:?}");
    };
    let mut out: Vec<Vec<u8>> = items
        .into_iter()
        .map(|i| match i {
            Value::Bulk(Some(b)) => b,
            other => format!("{other:?}").into_bytes(),
        })
        .collect();
    out.sort();
    out
}

/// Fills `c` with one key of each type and encoding; the keys.
fn fill(c: &mut RespConn) -> Vec<&'static str> {
    let many: Vec<String> = (0..300).map(|i| format!("member-{i}")).collect();
    let mut cmd = |args: Vec<String>| {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        c.call(&a);
    };
    let s = |x: &str| x.to_string();
    cmd(vec![s("SET"), s("str"), s("hello")]);
    cmd(vec![s("SET"), s("int"), s("-12345")]);
    cmd(vec![s("SET"), s("long"), "abc".repeat(400)]);
    cmd(vec![
        s("RPUSH"),
        s("list"),
        s("a"),
        s("b"),
        s("7"),
        s("-300"),
    ]);
    let mut big = vec![s("RPUSH"), s("biglist")];
    big.extend(many.iter().cloned());
    cmd(big);
    cmd(vec![s("SADD"), s("intset"), s("1"), s("-2"), s("70000")]);
    cmd(vec![s("SADD"), s("set"), s("x"), s("y")]);
    let mut big = vec![s("SADD"), s("bigset")];
    big.extend(many.iter().cloned());
    cmd(big);
    cmd(vec![
        s("ZADD"),
        s("zset"),
        s("1.5"),
        s("a"),
        s("-2"),
        s("b"),
        s("inf"),
        s("c"),
    ]);
    let mut big = vec![s("ZADD"), s("bigzset")];
    for (i, m) in many.iter().enumerate() {
        big.push(format!("{}", i as f64 / 3.0));
        big.push(m.clone());
    }
    cmd(big);
    cmd(vec![s("HSET"), s("hash"), s("f"), s("v"), s("n"), s("42")]);
    let mut big = vec![s("HSET"), s("bighash")];
    for m in &many {
        big.push(m.clone());
        big.push(format!("value of {m}"));
    }
    cmd(big);
    cmd(vec![s("PEXPIRE"), s("hash"), s("100000")]);
    vec![
        "str", "int", "long", "list", "biglist", "intset", "set", "bigset", "zset", "bigzset",
        "hash", "bighash",
    ]
}

/// The contents of `key` on `c`, read by type.
fn contents(c: &mut RespConn, key: &str) -> Vec<Vec<u8>> {
    let Value::Simple(t) = c.str(&["TYPE", key]) else {
        panic!("TYPE");
    };
    let read = match t.as_str() {
        "string" => {
            return vec![
                t.into_bytes(),
                format!("{:?}", c.str(&["GET", key])).into_bytes(),
            ]
        }
        "list" => c.str(&["LRANGE", key, "0", "-1"]),
        "set" => return sorted(c.str(&["SMEMBERS", key])),
        "zset" => c.str(&["ZRANGE", key, "0", "-1", "WITHSCORES"]),
        "hash" => return sorted(c.str(&["HGETALL", key])),
        other => panic!("type {other}"),
    };
    vec![t.into_bytes(), format!("{read:?}").into_bytes()]
}

/// Dumps every key from `from` and restores it into `to` (with the PTTL it had).
fn copy(from: &mut RespConn, to: &mut RespConn, keys: &[&str]) {
    for k in keys {
        let Value::Bulk(Some(payload)) = from.str(&["DUMP", k]) else {
            panic!("DUMP {k}");
        };
        let Value::Integer(pttl) = from.str(&["PTTL", k]) else {
            panic!("PTTL");
        };
        let ttl = pttl.max(0).to_string();
        let r = to.call(&[
            b"RESTORE",
            k.as_bytes(),
            ttl.as_bytes(),
            &payload,
            b"REPLACE",
        ]);
        assert_eq!(r, Value::Simple("OK".into()), "RESTORE {k}");
        assert_eq!(contents(from, k), contents(to, k), "{k}");
    }
    let Value::Integer(t) = to.str(&["TTL", "hash"]) else {
        panic!("TTL");
    };
    assert!((90..=100).contains(&t), "the TTL travels: {t}");
}

#[test]
fn dumps_move_between_redis_and_accelkv_both_ways() {
    // Bound whole: its servers live as long as it does.
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    let keys = fill(theirs);
    copy(theirs, ours, &keys);
    theirs.str(&["FLUSHALL"]);
    copy(ours, theirs, &keys);
}

#[test]
fn restore_answers_as_redis_does() {
    // Bound whole: its servers live as long as it does.
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    theirs.str(&["SET", "k", "v"]);
    let Value::Bulk(Some(p)) = theirs.str(&["DUMP", "k"]) else {
        panic!("DUMP");
    };
    let mut broken = p.clone();
    let n = broken.len();
    broken[n - 1] ^= 0xff;
    let cases: Vec<Vec<&[u8]>> = vec![
        vec![b"RESTORE", b"k", b"0", &p],
        vec![b"RESTORE", b"new", b"0", &broken],
        vec![b"RESTORE", b"new", b"-1", &p],
        vec![b"RESTORE", b"new", b"x", &p],
        vec![b"RESTORE", b"new", b"0", &p, b"BOGUS"],
        vec![b"RESTORE", b"new", b"0", &p, b"FREQ", b"300"],
        vec![b"RESTORE", b"new", b"0", &p, b"IDLETIME", b"-1"],
        vec![b"RESTORE", b"past", b"1000", &p, b"ABSTTL"],
        vec![b"EXISTS", b"past"],
        vec![b"RESTORE", b"new", b"0", &p, b"IDLETIME", b"10"],
        vec![b"GET", b"new"],
        vec![b"DUMP", b"missing"],
    ];
    ours.str(&["SET", "k", "v"]);
    for c in cases {
        assert_eq!(
            ours.call(&c),
            theirs.call(&c),
            "{:?}",
            String::from_utf8_lossy(c[0])
        );
    }
}

/// A flat RESP2 map (`XINFO`'s replies) without the pairs `drop` names, recursively, so
/// fields that differ by design or by the clock compare equal.
fn without(v: Value, drop: &[&str]) -> Value {
    let Value::Array(Some(items)) = v else {
        return v;
    };
    let is_map = items.len() % 2 == 0
        && items
            .chunks(2)
            .all(|p| matches!(&p[0], Value::Bulk(Some(k)) if k.iter().all(|b| b.is_ascii_lowercase() || *b == b'-')));
    if !is_map || items.is_empty() {
        return Value::Array(Some(items.into_iter().map(|i| without(i, drop)).collect()));
    }
    let mut kept = Vec::new();
    for pair in items.chunks(2) {
        let Value::Bulk(Some(k)) = &pair[0] else {
            unreachable!()
        };
        if !drop.iter().any(|d| d.as_bytes() == k.as_slice()) {
            kept.push(pair[0].clone());
            kept.push(without(pair[1].clone(), drop));
        }
    }
    Value::Array(Some(kept))
}

/// A stream with deletions, a trimmed head, two groups, pending entries spread over two
/// consumers (one acknowledged, one delivered twice) and a consumer with none.
const STREAM: &[&str] = &[
    "XGROUP CREATE s g $ MKSTREAM",
    "XGROUP CREATE s empty 0",
    "XGROUP CREATECONSUMER s empty carol",
];

fn fill_stream(c: &mut RespConn) {
    for l in STREAM {
        let a: Vec<&str> = l.split(' ').collect();
        c.str(&a);
    }
    for i in 1..=250 {
        let (id, v) = (format!("{i}-1"), "x".repeat(i % 9));
        c.str(&["XADD", "s", &id, "f", &i.to_string(), "name", &v]);
    }
    c.str(&["XADD", "s", "300-0", "other", "field"]);
    for l in [
        "XDEL s 5-1 250-1",
        "XTRIM s MINID 3-0",
        "XREADGROUP GROUP g alice COUNT 10 STREAMS s >",
        "XREADGROUP GROUP g bob COUNT 3 STREAMS s >",
        "XACK s g 4-1",
        "XCLAIM s g bob 0 6-1",
    ] {
        let a: Vec<&str> = l.split(' ').collect();
        c.str(&a);
    }
}

/// Fields of XINFO STREAM FULL that are the clock's (idle times are now minus them) or
/// Redis's radix tree's, or Redis 7.2's alone (Redis 7.0 has no active time).
const VOLATILE: &[&str] = &[
    "radix-tree-keys",
    "radix-tree-nodes",
    "seen-time",
    "active-time",
    "delivery-time",
];

#[test]
fn streams_with_groups_move_from_redis_and_back_into_accelkv() {
    // Bound whole: its servers live as long as it does.
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    fill_stream(theirs);
    let Value::Bulk(Some(p)) = theirs.str(&["DUMP", "s"]) else {
        panic!("DUMP");
    };
    assert_eq!(
        ours.call(&[b"RESTORE", b"s", b"0", &p]),
        Value::Simple("OK".into())
    );
    let full = ["XINFO", "STREAM", "s", "FULL"];
    assert_eq!(
        without(ours.str(&full), VOLATILE),
        without(theirs.str(&full), VOLATILE)
    );
    for read in [
        &["XRANGE", "s", "-", "+"][..],
        &["XPENDING", "s", "g"],
        &["XLEN", "s"],
    ] {
        assert_eq!(ours.str(read), theirs.str(read), "{read:?}");
    }
    // accelkv writes Redis 7.2's form (version 11), which Redis 7.0 refuses as it refuses
    // Redis 7.2's; accelkv restores its own with every time as it was.
    let Value::Bulk(Some(mine)) = ours.str(&["DUMP", "s"]) else {
        panic!("DUMP");
    };
    assert_eq!(mine[0], 21);
    match theirs.call(&[b"RESTORE", b"t", b"0", &mine]) {
        Value::Error(e) => assert_eq!(e, "ERR DUMP payload version or checksum are wrong"),
        // A Redis of 7.2 or later loads it.
        ok => {
            assert_eq!(ok, Value::Simple("OK".into()));
            let range = |k| ["XRANGE", k, "-", "+"];
            assert_eq!(theirs.str(&range("t")), ours.str(&range("s")));
            theirs.str(&["DEL", "t"]);
        }
    }
    ours.str(&["SET", "t", "a string first"]);
    let r = ours.call(&[b"RESTORE", b"t", b"5000", &mine, b"REPLACE"]);
    assert_eq!(r, Value::Simple("OK".into()));
    let radix = &VOLATILE[..2];
    assert_eq!(
        without(ours.str(&["XINFO", "STREAM", "t", "FULL"]), radix),
        without(ours.str(&full), radix)
    );
    let Value::Integer(ttl) = ours.str(&["PTTL", "t"]) else {
        panic!("PTTL");
    };
    assert!((1..=5000).contains(&ttl), "{ttl}");
    // A restored stream serves its group as the original does.
    let next = [
        "XREADGROUP",
        "GROUP",
        "g",
        "dave",
        "COUNT",
        "2",
        "STREAMS",
        "s",
        ">",
    ];
    let theirs_next = theirs.str(&next);
    assert_eq!(ours.str(&next), theirs_next);
    let next_t = [
        "XREADGROUP",
        "GROUP",
        "g",
        "dave",
        "COUNT",
        "2",
        "STREAMS",
        "t",
        ">",
    ];
    assert_eq!(entries_read(ours.str(&next_t)), entries_read(theirs_next));
}

/// The entries of a one-stream XREADGROUP reply, without the stream's name.
fn entries_read(v: Value) -> Value {
    let Value::Array(Some(mut streams)) = v else {
        panic!("not an array: {v:?}");
    };
    let Some(Value::Array(Some(mut pair))) = streams.pop() else {
        panic!("no stream");
    };
    pair.pop().expect("entries")
}

//! Small collections packed in one item (docs/FORMAT.md, "Packed collections"): OBJECT
//! ENCODING answers Redis 7.2's names at each threshold of each type (the local Redis 7.0
//! differs for sets of strings and small lists, so these are checked here, not against
//! it), a collection past a threshold is converted to subkeys and stays so (a list that
//! shrinks to half a node is packed again, as in Redis 7.2), its contents unchanged, and
//! readers running while one is converted never see it half converted.

mod common;

use accelkv_proto::resp::Value;
use common::{bulk, strings, RespConn, Server};

fn encoding(c: &mut RespConn, key: &str) -> String {
    strings(Value::Array(Some(
        vec![c.str(&["OBJECT", "ENCODING", key])],
    )))[0]
        .clone()
}

fn int(v: Value) -> i64 {
    match v {
        Value::Integer(n) => n,
        other => panic!("not an integer: {other:?}"),
    }
}

/// `cmd key` followed by `items`.
fn call(c: &mut RespConn, cmd: &str, key: &str, items: &[String]) -> Value {
    let mut args = vec![cmd, key];
    args.extend(items.iter().map(String::as_str));
    c.str(&args)
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

#[test]
fn hashes_are_listpacks_up_to_their_thresholds_then_hashtables_for_good() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let pairs: Vec<String> = names("f", 512)
        .into_iter()
        .flat_map(|f| [f, "v".into()])
        .collect();
    assert_eq!(int(call(&mut c, "HSET", "h", &pairs)), 512);
    assert_eq!(encoding(&mut c, "h"), "listpack");
    assert_eq!(int(c.str(&["HSET", "h", "one-more", "v"])), 1);
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    assert_eq!(int(c.str(&["HLEN", "h"])), 513);
    assert_eq!(c.str(&["HGET", "h", "f511"]), bulk("v"));
    // Never back, as in Redis.
    let all: Vec<String> = names("f", 512);
    assert_eq!(int(call(&mut c, "HDEL", "h", &all)), 512);
    assert_eq!(encoding(&mut c, "h"), "hashtable");
    // A value longer than hash-max-listpack-value converts a small hash.
    c.str(&["HSET", "w", "a", "1"]);
    assert_eq!(encoding(&mut c, "w"), "listpack");
    c.str(&["HSET", "w", "b", &"x".repeat(65)]);
    assert_eq!(encoding(&mut c, "w"), "hashtable");
    assert_eq!(strings(c.str(&["HKEYS", "w"])), ["a", "b"]);
}

#[test]
fn sets_are_intsets_listpacks_or_hashtables_as_in_redis_7_2() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let ints: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    call(&mut c, "SADD", "i", &ints);
    assert_eq!(encoding(&mut c, "i"), "intset");
    c.str(&["SADD", "i", "512"]);
    assert_eq!(encoding(&mut c, "i"), "hashtable");
    c.str(&["SADD", "s", "1", "2"]);
    assert_eq!(encoding(&mut c, "s"), "intset");
    c.str(&["SADD", "s", "a"]);
    assert_eq!(encoding(&mut c, "s"), "listpack");
    call(&mut c, "SADD", "s", &names("m", 125));
    assert_eq!(int(c.str(&["SCARD", "s"])), 128);
    assert_eq!(encoding(&mut c, "s"), "listpack");
    c.str(&["SADD", "s", "over"]);
    assert_eq!(encoding(&mut c, "s"), "hashtable");
    assert_eq!(int(c.str(&["SISMEMBER", "s", "m124"])), 1);
    c.str(&["SADD", "wide", &"x".repeat(65)]);
    assert_eq!(encoding(&mut c, "wide"), "hashtable");
}

#[test]
fn sorted_sets_are_listpacks_then_skiplists() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let items: Vec<String> = (0..128)
        .flat_map(|i| [(127 - i).to_string(), format!("m{i:03}")])
        .collect();
    call(&mut c, "ZADD", "z", &items);
    assert_eq!(encoding(&mut c, "z"), "listpack");
    assert_eq!(strings(c.str(&["ZRANGE", "z", "0", "1"])), ["m127", "m126"]);
    c.str(&["ZADD", "z", "-1", "first"]);
    assert_eq!(encoding(&mut c, "z"), "skiplist");
    assert_eq!(
        strings(c.str(&["ZRANGE", "z", "0", "1"])),
        ["first", "m127"]
    );
    assert_eq!(int(c.str(&["ZRANK", "z", "m000"])), 128);
    assert_eq!(int(c.str(&["ZCARD", "z"])), 129);
}

#[test]
fn lists_are_listpacks_up_to_one_node_then_quicklists() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    // list-max-listpack-size -2: 8 KiB of elements.
    let elems: Vec<String> = (0..80).map(|i| format!("{i:0100}")).collect();
    call(&mut c, "RPUSH", "l", &elems);
    assert_eq!(encoding(&mut c, "l"), "listpack");
    call(&mut c, "RPUSH", "l", &elems);
    assert_eq!(encoding(&mut c, "l"), "quicklist");
    assert_eq!(int(c.str(&["LLEN", "l"])), 160);
    assert_eq!(c.str(&["LINDEX", "l", "80"]), bulk(&elems[0]));
    // As Redis 7.2, a list that shrinks to half a node is packed again.
    c.str(&["LTRIM", "l", "0", "49"]);
    assert_eq!(
        encoding(&mut c, "l"),
        "quicklist",
        "5 KB: more than half of 8 KB"
    );
    assert_eq!(
        c.str(&["RPOP", "l", "20"]),
        Value::Array(Some((30..50).rev().map(|i| bulk(&elems[i])).collect()))
    );
    assert_eq!(encoding(&mut c, "l"), "listpack");
    assert_eq!(
        strings(c.str(&["LRANGE", "l", "0", "-1"])),
        elems[..30].to_vec()
    );
    c.str(&["CONFIG", "SET", "list-max-listpack-size", "2"]);
    c.str(&["RPUSH", "n", "a", "b"]);
    assert_eq!(encoding(&mut c, "n"), "listpack");
    c.str(&["LPUSH", "n", "c"]);
    assert_eq!(encoding(&mut c, "n"), "quicklist");
    assert_eq!(strings(c.str(&["LRANGE", "n", "0", "-1"])), ["c", "a", "b"]);
}

/// A small collection takes no more memory than Redis's listpack of it (Redis 7.0 answers
/// MEMORY USAGE 2,168 bytes for this hash).
#[test]
fn a_packed_hash_is_as_small_as_a_listpack() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let pairs: Vec<String> = (0..100)
        .flat_map(|i| [format!("field:{i}"), format!("value:{i}")])
        .collect();
    call(&mut c, "HSET", "h", &pairs);
    let used = int(c.str(&["MEMORY", "USAGE", "h"]));
    assert!(used <= 2168, "MEMORY USAGE {used}");
}

/// Readers of a hash being converted (a writer adds fields one at a time past 512) always
/// see a whole prefix of the fields: never a packed item without the fields the last
/// write added, never subkeys without their metadata.
#[test]
fn readers_never_see_a_collection_half_converted() {
    let srv = Server::start(&[]);
    let mut w = RespConn::new(&srv);
    let mut readers: Vec<RespConn> = (0..2).map(|_| RespConn::new(&srv)).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let handles: Vec<_> = readers
        .drain(..)
        .map(|mut r| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut seen = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let keys = strings(r.str(&["HKEYS", "h"]));
                    let mut want: Vec<String> = names("f", keys.len());
                    want.sort();
                    assert_eq!(keys, want, "a whole prefix of the fields");
                    assert!(keys.len() >= seen, "fields never disappear");
                    seen = keys.len();
                }
                seen
            })
        })
        .collect();
    for i in 0..600 {
        w.str(&["HSET", "h", &format!("f{i}"), "v"]);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        h.join().expect("reader");
    }
    assert_eq!(encoding(&mut w, "h"), "hashtable");
    assert_eq!(int(w.str(&["HLEN", "h"])), 600);
}

/// Random commands over every packed type, under thresholds that convert collections in
/// the middle of the sequence, answer as a real redis-server does, command by command
/// (only replies whose order Redis fixes: no HGETALL or SMEMBERS, whose order in a small
/// Redis collection is insertion order).
#[test]
fn random_commands_across_thresholds_answer_as_redis_does() {
    let x = std::cell::Cell::new(0x9e37_79b9_7f4a_7c15u64);
    let next = |n: u64| {
        let mut v = x.get();
        v ^= v << 13;
        v ^= v >> 7;
        v ^= v << 17;
        x.set(v);
        v % n
    };
    let mut script: Vec<String> = Vec::new();
    for round in 0..6 {
        let limit = ["3", "0", "512", "5", "1", "128"][round];
        for p in [
            "hash-max-listpack-entries",
            "set-max-intset-entries",
            "zset-max-listpack-entries",
        ] {
            script.push(format!("CONFIG SET {p} {limit}"));
        }
        script.push(format!(
            "CONFIG SET list-max-listpack-size {}",
            ["2", "-2", "4"][round % 3]
        ));
        for _ in 0..120 {
            let k = format!("k{}", next(4));
            let m = || match next(2) {
                0 => next(6).to_string(),
                _ => format!("x{}", next(6)),
            };
            let line = match next(22) {
                0 => format!("HSET {k} {} {} {} v", m(), next(3), m()),
                1 => format!("HDEL {k} {} {}", m(), m()),
                2 => format!("HINCRBY {k} {} {}", m(), next(7) as i64 - 3),
                3 => format!("HGET {k} {}", m()),
                4 => format!("HLEN {k}"),
                5 => format!("SADD {k} {} {}", m(), m()),
                6 => format!("SREM {k} {}", m()),
                7 => format!("SISMEMBER {k} {}", m()),
                8 => format!("SCARD {k}"),
                9 => format!("ZADD {k} {} {} {} {}", next(5), m(), next(5), m()),
                10 => format!("ZREM {k} {}", m()),
                11 => format!("ZRANGE {k} 0 -1 WITHSCORES"),
                12 => format!("ZPOPMIN {k}"),
                13 => format!("ZRANK {k} {}", m()),
                14 => format!("LPUSH {k} {} {}", m(), m()),
                15 => format!("RPOP {k}"),
                16 => format!("LRANGE {k} 0 -1"),
                17 => format!("LINSERT {k} BEFORE {} {}", m(), m()),
                18 => format!("LREM {k} 0 {}", m()),
                19 => format!("SMOVE {k} k{} {}", next(4), m()),
                20 => format!("DEL {k}"),
                _ => format!("TYPE {k}"),
            };
            script.push(line);
        }
    }
    let script: Vec<&str> = script.iter().map(String::as_str).collect();
    common::answers_as_redis_does(&script);
}

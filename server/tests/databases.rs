//! Redis's numbered databases over RESP: one script of SELECT, MOVE, COPY … DB, FLUSHDB,
//! DBSIZE and the keyspace commands across databases, with strings and collections, run on
//! accelkv and on a real `redis-server`, every reply compared; then a blocking pop and a
//! script in a database other than 0, and a restart keeping every database's keys.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};

const SCRIPT: &[&str] = &[
    "FLUSHALL",
    "SET a zero",
    "SELECT 1",
    "GET a",
    "SET a one",
    "RPUSH l x y",
    "ZADD z 1 m",
    "HSET h f v",
    "DBSIZE",
    "KEYS a",
    "KEYS l*",
    "EXISTS a l z h",
    "TYPE l",
    "GET a",
    "SELECT 0",
    "GET a",
    "DBSIZE",
    "KEYS *",
    "EXISTS l",
    "SELECT 1",
    "MOVE a 0",
    "MOVE a 2",
    "GET a",
    "SELECT 2",
    "GET a",
    "RANDOMKEY",
    "SCAN 0",
    "SELECT 1",
    "MOVE l 2",
    "MOVE nothing 2",
    "MOVE l 1",
    "MOVE l 99",
    "COPY z z DB 3",
    "COPY z z DB 3",
    "COPY h h2 DB 3 REPLACE",
    "COPY h h3 DB notanumber",
    "COPY h h3 DB 99",
    "MOVE h notanumber",
    "SELECT 3",
    "ZRANGE z 0 -1 WITHSCORES",
    "HGETALL h2",
    "EXPIRE z 100",
    "TTL z",
    "RENAME z z9",
    "EXISTS z z9",
    "LMPOP 2 nothing l LEFT",
    "SELECT 2",
    "LMPOP 2 nothing l LEFT",
    "BLPOP nothing l 1",
    "DBSIZE",
    "FLUSHDB",
    "DBSIZE",
    "SELECT 0",
    "DBSIZE",
    "GET a",
    "SELECT 3",
    "DBSIZE",
    "SELECT 16",
    "SELECT -1",
    "SELECT abc",
];

#[test]
fn databases_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

#[test]
fn blocking_pops_and_scripts_stay_in_their_database() {
    let srv = Server::start(&[]);
    let mut waiter = RespConn::new(&srv);
    let mut other = RespConn::new(&srv);
    waiter.str(&["SELECT", "5"]);
    waiter.send(&["BLPOP", "jobs", "5"]);
    // A push to `jobs` in database 0 is not the waiter's.
    other.str(&["RPUSH", "jobs", "db0"]);
    other.str(&["SELECT", "5"]);
    let t0 = std::time::Instant::now();
    while !matches!(other.str(&["INFO", "clients"]), Value::Bulk(Some(b)) if String::from_utf8_lossy(&b).contains("blocked_clients:1"))
    {
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    other.str(&["RPUSH", "jobs", "db5"]);
    assert_eq!(
        waiter.read(),
        Value::Array(Some(vec![
            Value::Bulk(Some(b"jobs".to_vec())),
            Value::Bulk(Some(b"db5".to_vec()))
        ]))
    );
    // A script's keys are its database's.
    let r = waiter.str(&[
        "EVAL",
        "redis.call('set', KEYS[1], 'v5') return redis.call('get', KEYS[1])",
        "1",
        "k",
    ]);
    assert_eq!(r, Value::Bulk(Some(b"v5".to_vec())));
    other.str(&["SELECT", "0"]);
    assert_eq!(other.str(&["GET", "k"]), Value::Bulk(None));
    assert_eq!(other.str(&["LLEN", "jobs"]), Value::Integer(1));
}

#[test]
fn every_databases_keys_survive_a_restart() {
    let dir = std::env::temp_dir().join(format!("accelkv-dbs-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap().to_string();
    let args = ["--data-dir", d.as_str(), "--sync", "sync"];
    {
        let srv = Server::start(&args);
        let mut c = RespConn::new(&srv);
        for db in 0..4 {
            c.str(&["SELECT", &db.to_string()]);
            c.str(&["SET", "k", &format!("v{db}")]);
            c.str(&["RPUSH", "l", &format!("e{db}")]);
        }
    }
    let srv = Server::start(&args);
    let mut c = RespConn::new(&srv);
    for db in 0..4 {
        c.str(&["SELECT", &db.to_string()]);
        assert_eq!(
            c.str(&["GET", "k"]),
            Value::Bulk(Some(format!("v{db}").into_bytes()))
        );
        assert_eq!(
            c.str(&["LRANGE", "l", "0", "-1"]),
            Value::Array(Some(vec![Value::Bulk(Some(format!("e{db}").into_bytes()))]))
        );
        assert_eq!(c.str(&["DBSIZE"]), Value::Integer(2));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

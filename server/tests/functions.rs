//! Redis 7's functions (FUNCTION LOAD, LIST, DELETE, FLUSH, STATS, DUMP, RESTORE, FCALL,
//! FCALL_RO) against a real `redis-server`: a script of loads, calls and errors compared
//! reply for reply; a library dumped by Redis restored here and the reverse; functions
//! called from every event loop (each loads the library into its own Lua state) and a
//! library replaced while they run; a function's commands shown by MONITOR; libraries
//! back after a kill -9 of a durable server, and after FLUSHALL.

mod common;

use accelkv_proto::resp::Value;
use common::{beside_redis, commands_answer_as_redis_does, RespConn, Server};

const LIB: &str = "#!lua name=mylib
local function set(keys, args)
  return redis.call('set', keys[1], args[1])
end
redis.register_function('myset', set)
redis.register_function{
  function_name = 'myget',
  callback = function(keys) return redis.call('get', keys[1]) end,
  flags = {'no-writes'},
  description = 'reads a key',
}
redis.register_function('fails', function(keys, args)
  return redis.call('nosuchcommand')
end)
redis.register_function('raises', function() error('my error') end)
redis.register_function('both', function(keys, args) return {keys[1], args[1], #keys, #args} end)";

const LIB2: &str = "#!lua name=mylib
redis.register_function('myset', function(keys, args) return 'replaced' end)";

#[test]
fn functions_answer_as_redis_does() {
    let script: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "FLUSH"],
        vec!["FUNCTION", "LOAD", LIB],
        vec!["FUNCTION", "LOAD", LIB],
        vec!["FCALL", "myset", "1", "k", "v"],
        vec!["FCALL", "myget", "1", "k"],
        vec!["FCALL_RO", "myget", "1", "k"],
        vec!["FCALL_RO", "myset", "1", "k", "v"],
        vec!["FCALL", "both", "2", "a", "b", "x"],
        vec!["FCALL", "both", "3", "a"],
        vec!["FCALL", "both", "-1"],
        vec!["FCALL", "nosuch", "0"],
        vec!["FCALL", "fails", "0"],
        vec!["FCALL", "raises", "0"],
        vec!["FUNCTION", "LIST", "LIBRARYNAME", "other*"],
        vec!["FUNCTION", "LIST", "BOGUS"],
        vec!["FUNCTION", "STATS"],
        vec!["FUNCTION", "LOAD", "REPLACE", LIB2],
        vec!["FCALL", "myset", "1", "k", "v"],
        vec!["FCALL", "myget", "1", "k"],
        vec!["FUNCTION", "LOAD", "return 1"],
        vec!["FUNCTION", "LOAD", "#!lua\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!nosuch name=x\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!lua name=bad-name\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!lua name=empty\nreturn 1"],
        vec!["FUNCTION", "LOAD", "#!lua name=boom\nnosuch()"],
        vec!["FUNCTION", "LOAD", "#!lua name=dup\nredis.register_function('myset', function() return 1 end)"],
        vec!["FUNCTION", "LOAD", "#!lua name=twice\nredis.register_function('a', function() end)\nredis.register_function('a', function() end)"],
        vec!["FUNCTION", "LOAD", "#!lua name=flags\nredis.register_function{function_name='a', callback=function() end, flags={'bogus'}}"],
        vec!["FUNCTION", "LOAD", "#!lua name=args\nredis.register_function('a')"],
        vec!["FUNCTION", "DELETE", "nosuch"],
        vec!["FUNCTION", "DELETE", "mylib"],
        vec!["FCALL", "myset", "1", "k", "v"],
        vec!["FUNCTION", "LIST"],
        vec!["FUNCTION", "LOAD", "#!lua name=one\nredis.register_function('only', function() return 1 end)"],
        vec!["FUNCTION", "LIST"],
        vec!["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "o*"],
        vec!["FUNCTION", "NOSUCH"],
        vec!["FUNCTION", "KILL"],
        vec!["FUNCTION", "RESTORE", "not a payload"],
    ];
    commands_answer_as_redis_does(&script);
}

/// The libraries as FUNCTION LIST WITHCODE shows them, each library's functions in name
/// order (Redis keeps them in a hash table, so its order is its table's).
fn listed(c: &mut RespConn) -> Value {
    let Value::Array(Some(mut libs)) = c.str(&["FUNCTION", "LIST", "WITHCODE"]) else {
        panic!("not a list")
    };
    for lib in &mut libs {
        if let Value::Array(Some(fields)) = lib {
            if let Some(Value::Array(Some(fns))) = fields.get_mut(5) {
                fns.sort_by_key(|f| format!("{f:?}"));
            }
        }
    }
    Value::Array(Some(libs))
}

#[test]
fn function_lists_hold_what_redis_lists() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    for c in [&mut both.ours, &mut both.theirs] {
        c.str(&["FUNCTION", "FLUSH"]);
        c.str(&["FUNCTION", "LOAD", LIB]);
    }
    assert_eq!(listed(&mut both.ours), listed(&mut both.theirs));
}

#[test]
fn dumps_move_between_redis_and_accelkv() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    theirs.str(&["FUNCTION", "FLUSH"]);
    theirs.str(&["FUNCTION", "LOAD", LIB]);
    let Value::Bulk(Some(payload)) = theirs.str(&["FUNCTION", "DUMP"]) else {
        panic!("no dump")
    };
    assert_eq!(
        ours.call(&[b"FUNCTION", b"RESTORE", &payload]),
        Value::Simple("OK".into())
    );
    assert_eq!(listed(ours), listed(theirs));
    assert_eq!(
        ours.str(&["FCALL", "myset", "1", "k", "v"]),
        Value::Simple("OK".into())
    );
    // Again: APPEND (the default) refuses a library that exists, REPLACE takes it.
    let again = ours.call(&[b"FUNCTION", b"RESTORE", &payload]);
    assert!(
        matches!(&again, Value::Error(e) if e.contains("already exists")),
        "{again:?}"
    );
    let again = ours.call(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]);
    assert_eq!(again, Value::Simple("OK".into()));
    // Ours back into Redis.
    ours.str(&["FUNCTION", "LOAD", "REPLACE", LIB2]);
    let Value::Bulk(Some(back)) = ours.str(&["FUNCTION", "DUMP"]) else {
        panic!("no dump")
    };
    let r = theirs.call(&[b"FUNCTION", b"RESTORE", &back, b"FLUSH"]);
    assert_eq!(r, Value::Simple("OK".into()));
    assert_eq!(listed(ours), listed(theirs));
    let mut bad = back.clone();
    bad[3] ^= 1;
    let r = ours.call(&[b"FUNCTION", b"RESTORE", &bad]);
    assert_eq!(r, theirs.call(&[b"FUNCTION", b"RESTORE", &bad]));
}

#[test]
fn every_loop_loads_the_library_and_sees_it_replaced() {
    let srv = Server::start(&["--threads", "2"]);
    let mut c = RespConn::new(&srv);
    let lib = |v: &str| {
        format!("#!lua name=counter\nredis.register_function('bump', function(keys) redis.call('incr', keys[1]) return '{v}' end)")
    };
    assert_eq!(
        c.str(&["FUNCTION", "LOAD", &lib("one")]),
        common::bulk("counter")
    );
    // Connections spread over the loops: each calls the function, loading it there.
    let mut conns: Vec<RespConn> = (0..8).map(|_| RespConn::new(&srv)).collect();
    for conn in &mut conns {
        assert_eq!(conn.str(&["FCALL", "bump", "1", "n"]), common::bulk("one"));
    }
    assert_eq!(
        c.str(&["FUNCTION", "LOAD", "REPLACE", &lib("two")]),
        common::bulk("counter")
    );
    for conn in &mut conns {
        assert_eq!(conn.str(&["FCALL", "bump", "1", "n"]), common::bulk("two"));
    }
    assert_eq!(c.str(&["GET", "n"]), common::bulk("16"));
    c.str(&["FUNCTION", "DELETE", "counter"]);
    for conn in &mut conns {
        let r = conn.str(&["FCALL", "bump", "1", "n"]);
        assert!(
            matches!(&r, Value::Error(e) if e == "ERR Function not found"),
            "{r:?}"
        );
    }
    // A function's commands in MONITOR, after the FCALL.
    c.str(&["FUNCTION", "LOAD", &lib("three")]);
    let mut mon = RespConn::new(&srv);
    mon.str(&["MONITOR"]);
    c.str(&["FCALL", "bump", "1", "m"]);
    let lines: Vec<String> = (0..2)
        .map(|_| match mon.read() {
            Value::Simple(l) => l,
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        lines[0].ends_with("\"FCALL\" \"bump\" \"1\" \"m\""),
        "{lines:?}"
    );
    assert!(lines[1].contains(" lua] \"incr\" \"m\""), "{lines:?}");
}

/// Libraries are durable as keys are: a server killed with SIGKILL has them back (FCALL
/// works before any other function command), FLUSHALL leaves them (as in Redis), and
/// DELETE and FLUSH are durable too.
#[test]
fn libraries_survive_a_kill_and_flushall() {
    let dir = std::env::temp_dir().join(format!("accelkv-functions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    {
        let srv = Server::start(&["--data-dir", d]);
        let mut c = RespConn::new(&srv);
        assert_eq!(c.str(&["FUNCTION", "LOAD", LIB]), common::bulk("mylib"));
        c.str(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=gone\nredis.register_function('g', function() return 1 end)",
        ]);
        c.str(&["FUNCTION", "DELETE", "gone"]);
        c.str(&["FCALL", "myset", "1", "k", "v"]);
    } // dropped: killed with SIGKILL
    {
        let srv = Server::start(&["--data-dir", d]);
        let mut c = RespConn::new(&srv);
        assert_eq!(c.str(&["FCALL", "myget", "1", "k"]), common::bulk("v"));
        let r = c.str(&["FCALL", "g", "0"]);
        assert!(
            matches!(&r, Value::Error(e) if e == "ERR Function not found"),
            "{r:?}"
        );
        assert_eq!(c.str(&["FLUSHALL"]), Value::Simple("OK".into()));
        assert_eq!(c.str(&["GET", "k"]), Value::Bulk(None));
        assert_eq!(
            c.str(&["DBSIZE"]),
            Value::Integer(0),
            "the libraries' record is no key"
        );
    }
    {
        // FLUSHALL as the first command after a start keeps them too.
        let srv = Server::start(&["--data-dir", d]);
        let mut c = RespConn::new(&srv);
        assert_eq!(c.str(&["FLUSHALL"]), Value::Simple("OK".into()));
        assert_eq!(
            c.str(&["FCALL", "myset", "1", "k", "w"]),
            Value::Simple("OK".into())
        );
        assert_eq!(c.str(&["FUNCTION", "FLUSH"]), Value::Simple("OK".into()));
    }
    let srv = Server::start(&["--data-dir", d]);
    let mut c = RespConn::new(&srv);
    assert_eq!(c.str(&["FUNCTION", "LIST"]), Value::Array(Some(vec![])));
    assert_eq!(c.str(&["GET", "k"]), common::bulk("w"));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

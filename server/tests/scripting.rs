//! Lua scripting over RESP: one script of EVAL, EVALSHA and SCRIPT commands (the `redis`
//! library, value conversions both ways, errors with Redis 7.0's texts) run on accelkv and
//! on a real `redis-server`, every reply compared; then what a script cannot show: a
//! script's writes are one atomic version to concurrent readers, and a script stopped by
//! SCRIPT KILL (from another connection) or its time limit leaves none of its writes.

mod common;

use accelkv_proto::resp::Value;
use common::{RespConn, Server};
use std::time::{Duration, Instant};

fn script() -> Vec<Vec<&'static str>> {
    let lines: &[&[&str]] = &[
        &["EVAL", "return 1", "0"],
        &["EVAL", "return {1, 2, {3, 'x'}, false, nil, 5}", "0"],
        &["EVAL", "return 3.99", "0"],
        &["EVAL", "return true", "0"],
        &["EVAL", "return false", "0"],
        &["EVAL", "return nil", "0"],
        &["EVAL", "return KEYS[1] .. ARGV[2]", "1", "a", "b", "c"],
        &["EVAL", "return #KEYS + #ARGV * 10", "2", "a", "b", "c"],
        &["EVAL", "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])", "1", "k", "v1"],
        &["EVAL", "return redis.call('incr', 'k')", "0"],
        &["EVAL", "\nreturn redis.call('incr', 'k')", "0"],
        &["EVAL", "return redis.pcall('incr', 'k')", "0"],
        &["EVAL", "local ok, e = pcall(function() redis.call('incr','k') end) return e", "0"],
        &["EVAL", "return redis.status_reply('FINE')", "0"],
        &["EVAL", "return redis.error_reply('MY err')", "0"],
        &["EVAL", "return {err = 'plain'}", "0"],
        &["EVAL", "return {ok = 'fine'}", "0"],
        &["EVAL", "error({err = 'custom'})", "0"],
        &["EVAL", "error('boom')", "0"],
        &["EVAL", "return redis.call('nosuch')", "0"],
        &["EVAL", "return redis.call()", "0"],
        &["EVAL", "return redis.call({})", "0"],
        &["EVAL", "x = 5 return 1", "0"],
        &["EVAL", "return os", "0"],
        &["EVAL", "syntax error here", "0"],
        &["EVAL", "return redis.call('multi')", "0"],
        &["EVAL", "return redis.sha1hex('')", "0"],
        &["EVAL", "return 1", "-1"],
        &["EVAL", "return 1", "3", "a"],
        &["EVAL", "return 1", "x"],
        &["EVAL_RO", "return redis.call('set', 'x', 'y')", "0"],
        &["EVAL_RO", "return redis.call('get', 'k')", "0"],
        &["SCRIPT", "LOAD", "return 'hi'"],
        &["EVALSHA", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "0"],
        &["EVALSHA", "2F31BA2BB6D6A0F42CC159D2E2DAD55440778DE3", "0"],
        &["EVALSHA", "0000000000000000000000000000000000000000", "0"],
        &["SCRIPT", "EXISTS", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3", "abc"],
        &["SCRIPT", "FLUSH"],
        &["SCRIPT", "EXISTS", "2f31ba2bb6d6a0f42cc159d2e2dad55440778de3"],
        &["SCRIPT", "FLUSH", "foo"],
        &["SCRIPT", "KILL"],
        &["EVAL", "redis.call('rpush', 'L', 'a', 'b'); redis.call('zadd', 'Z', 1.5, 'm'); redis.call('hset', 'H', 'f', 'v'); return {redis.call('lrange', 'L', 0, -1), redis.call('zscore', 'Z', 'm'), redis.call('hgetall', 'H'), redis.call('type', 'Z')}", "0"],
        &["EVAL", "return redis.call('lpop', 'nothing')", "0"],
        &["EVAL", "return redis.call('blpop', 'nothing', 0)", "0"],
        &["EVAL", "return redis.call('get', 'L')", "0"],
        &["EVAL", "local n = 0 for i = 1, 100 do n = n + redis.call('incr', 'counter') end return n", "0"],
        &["GET", "counter"],
        &["EVAL", "return string.format('%d-%s', 7, 'x') .. string.rep('a', 3) .. math.floor(2.7) .. table.concat({1, 2}, ',')", "0"],
        &["EVAL", "return tonumber('12') + #'abc'", "0"],
        &["EVAL", "return cjson.encode({1, 2, 'x', {a = {b = 1}}})", "0"],
        &["EVAL", "return cjson.encode({})", "0"],
        &["EVAL", r#"return cjson.encode(cjson.decode('{"a":[1,2.5,null,"s/"]}'))"#, "0"],
        &["EVAL", "return cjson.decode('[10,20,30]')[2]", "0"],
        &["EVAL", "return cjson.encode(1 / 3) .. ' ' .. cjson.encode(1e20) .. ' ' .. cjson.encode(-0.5)", "0"],
        &["EVAL", r#"return cjson.decode('{"k":null}').k == cjson.null"#, "0"],
        &["EVAL", "return cmsgpack.pack(1, -1, 200, -200, 70000, -70000, 1.5, 0.1, 'hi', true, false)", "0"],
        &["EVAL", "return cmsgpack.pack({1, 2, {a = 'b'}}, {}, string.rep('x', 40), string.rep('y', 300))", "0"],
        &["EVAL", "return cmsgpack.pack(4294967296, -4294967296, 1e300)", "0"],
        &["EVAL", "local a, b = cmsgpack.unpack(cmsgpack.pack({k = {1, 2, 3}}, 'z')) return {a.k[3], b}", "0"],
        &["EVAL", "return {cmsgpack.unpack_one(cmsgpack.pack(7, 8, 9), 0)}", "0"],
        &["EVAL", "return {cmsgpack.unpack_limit(cmsgpack.pack(7, 8, 9), 2, 1)}", "0"],
        &["EVAL", "return cmsgpack.unpack('\\222\\0\\1\\168attempts\\3').attempts", "0"],
        &["EVAL", "local ok, e = pcall(cmsgpack.unpack, '\\205') return e", "0"],
        &["EVAL", "return struct.pack('>i2<I4bx!4i', 258, 1, -1, 7)", "0"],
        &["EVAL", "return {struct.unpack('>i2<I4b', struct.pack('>i2<I4b', -2, 70000, -5))}", "0"],
        &["EVAL", "return {struct.unpack('sc3Bc0', struct.pack('sc3Bc0', 'hello', 'abcdef', 3, 'xyz'))}", "0"],
        &["EVAL", "return {struct.size('!4bi'), struct.size('bi'), struct.size('>hHlLTfd')}", "0"],
        &["EVAL", "return tostring(struct.unpack('<d', struct.pack('<d', 1.25)))", "0"],
        &["EVAL", "return struct.pack('q', 1)", "0"],
        &["EVAL", "return struct.unpack('i', 'ab')", "0"],
        &["EVAL", "return cmsgpack.unpack('\\205')", "0"],
        &["EVAL", "return {bit.band(255, 15), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-16, 2)}", "0"],
        &["EVAL", "return bit.tohex(65535) .. bit.tohex(255, -4) .. bit.tohex(-1, 2)", "0"],
        // Redis 7's shebang: flags, and its errors.
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "1", "x"],
        &["EVAL", "#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'v')", "1", "x"],
        &["EVAL", "#!lua\nreturn redis.call('set', KEYS[1], 'v')", "1", "x"],
        &["EVAL", "#!lua flags=bogus\nreturn 1", "0"],
        &["EVAL", "#!python\nreturn 1", "0"],
        &["EVAL", "#!lua", "0"],
        &["EVAL", "#!lua name=x\nreturn 1", "0"],
        &["EVAL", "#!lua\nerror('on line two')", "0"],
    ];
    lines.iter().map(|l| l.to_vec()).collect()
}

#[test]
fn scripts_answer_as_redis_does() {
    common::commands_answer_as_redis_does(&script());
}

/// A script's writes (ten keys set to one value) are seen whole or not at all.
#[test]
fn a_scripts_writes_are_one_version() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let writer = std::thread::spawn(move || {
        let mut c = RespConn::connect(addr);
        for round in 0..200 {
            let r = round.to_string();
            c.str(&[
                "EVAL",
                "for i = 1, 10 do redis.call('set', 'k' .. i, ARGV[1]) end return 1",
                "0",
                &r,
            ]);
        }
    });
    let mut c = RespConn::connect(addr);
    let keys: Vec<String> = (1..=10).map(|i| format!("k{i}")).collect();
    while !writer.is_finished() {
        let mut args = vec!["MGET"];
        args.extend(keys.iter().map(String::as_str));
        let Value::Array(Some(vals)) = c.str(&args) else {
            panic!()
        };
        assert!(
            vals.iter().all(|v| *v == vals[0]),
            "a torn script: {vals:?}"
        );
    }
    writer.join().unwrap();
}

/// Sends SCRIPT KILL on fresh connections until one on another loop than the script's
/// answers OK (one on the script's loop waits for it, so it is given up after a moment).
fn kill_script() {
    use std::io::{Read, Write};
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(4) {
        let mut s = std::net::TcpStream::connect(ADDR.get().copied().unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        s.write_all(b"SCRIPT KILL\r\n").unwrap();
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(n) if b[..n].starts_with(b"+OK") => return,
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    panic!("SCRIPT KILL never reached the running script");
}

static ADDR: std::sync::OnceLock<std::net::SocketAddr> = std::sync::OnceLock::new();

#[test]
fn a_killed_script_leaves_none_of_its_writes() {
    let srv = Server::start(&["--threads", "2"]);
    ADDR.set(srv.resp).unwrap();
    let mut runner = RespConn::new(&srv);
    let mut other = RespConn::new(&srv);
    assert_eq!(
        other.str(&["SCRIPT", "KILL"]),
        Value::Error("NOTBUSY No scripts in execution right now.".into())
    );
    let t0 = Instant::now();
    runner.send(&[
        "EVAL",
        "redis.call('set', 'written', '1') while true do end",
        "0",
    ]);
    kill_script();
    let Value::Error(e) = runner.read() else {
        panic!("a killed script answered without an error")
    };
    assert!(e.contains("killed"), "{e}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "killed, not timed out"
    );
    assert_eq!(other.str(&["GET", "written"]), Value::Bulk(None));
    // The connection and the thread's Lua state go on.
    assert_eq!(runner.str(&["EVAL", "return 7", "0"]), Value::Integer(7));
}

#[test]
fn a_script_past_its_time_limit_is_stopped_and_its_writes_discarded() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let t0 = Instant::now();
    let r = c.str(&["EVAL", "redis.call('set', 'w', '1') local ok = pcall(function() while true do end end) while true do end", "0"]);
    let Value::Error(e) = r else { panic!("{r:?}") };
    assert!(e.contains("time limit"), "{e}");
    assert!(t0.elapsed() >= Duration::from_secs(5));
    assert_eq!(c.str(&["GET", "w"]), Value::Bulk(None));
    // CONFIG SET lua-time-limit (or busy-reply-threshold), Redis's threshold for answering
    // BUSY, is kept and reported; the limit stays.
    let ok = Value::Simple("OK".into());
    assert_eq!(c.str(&["CONFIG", "SET", "busy-reply-threshold", "200"]), ok);
    let limit = c.str(&["CONFIG", "GET", "lua-time-limit"]);
    assert_eq!(
        limit,
        Value::Array(Some(vec![
            Value::Bulk(Some(b"lua-time-limit".to_vec())),
            Value::Bulk(Some(b"200".to_vec()))
        ]))
    );
    let busy = "local i = 0 while i < 3e5 do i = i + 1 end return 1";
    assert_eq!(c.str(&["EVAL", busy, "0"]), Value::Integer(1));
    assert!(matches!(
        c.str(&["CONFIG", "SET", "lua-time-limit", "x"]),
        Value::Error(_)
    ));
}

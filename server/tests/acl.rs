//! ACL users (ACL SETUSER … LOAD, AUTH as a user, the gate's permission checks) against a
//! real `redis-server` where its answers are version-independent (7.0 and 7.2 word some
//! replies differently; CI installs 7.0): rule errors, which commands, keys and channels a
//! user's rules allow (ACL DRYRUN over a corpus of commands), and every command's
//! categories. Then accelkv alone, in Redis 7.2's exact words: ACL LIST and GETUSER, the
//! refusals and their ACL LOG entries, MULTI, scripts, subscribers losing a channel, a
//! removed user's connections, the ACL file at start and by ACL LOAD and SAVE, and
//! `requirepass`; and a stress test of permissions changed while connections run.

mod common;

use accelkv_proto::resp::Value;
use common::{beside_redis, closed_by_server, err_starts, info_field, strings, RespConn, Server};
use std::collections::{BTreeMap, BTreeSet};

/// A reply with the parts 7.0 and 7.2 word differently made equal: "This user" and
/// "User <name>" both become "User".
fn normalized(v: Value) -> String {
    let text = match v {
        Value::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    };
    let text = text.replace("This user", "User");
    match text.strip_prefix("User ") {
        Some(rest) if rest.contains(" has no permissions") => {
            format!("User{}", &rest[rest.find(" has no").unwrap_or(0)..])
        }
        _ => text,
    }
}

#[test]
fn rules_and_their_errors_answer_as_redis_does() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let script: &[&[&str]] = &[
        &["ACL", "SETUSER", "alice", "on", ">pw", "~k*", "&ch", "+get"],
        &["ACL", "SETUSER", "alice", "~*", "~more"],
        &["ACL", "SETUSER", "alice", "&*", "&more"],
        &["ACL", "SETUSER", "alice", "<nosuch"],
        &["ACL", "SETUSER", "alice", "#abc"],
        &[
            "ACL",
            "SETUSER",
            "alice",
            "!0000000000000000000000000000000000000000000000000000000000000000",
        ],
        &["ACL", "SETUSER", "alice", "+nosuch"],
        &["ACL", "SETUSER", "alice", "+@nosuch"],
        &["ACL", "SETUSER", "alice", "-select|0"],
        &["ACL", "SETUSER", "alice", "+config|nosuch"],
        &["ACL", "SETUSER", "alice", "%X~a"],
        &["ACL", "SETUSER", "alice", "bogus"],
        &["ACL", "SETUSER", "alice", "(+get", "~x"],
        &[
            "ACL",
            "SETUSER",
            "alice",
            "(+get",
            "~x)",
            "clearselectors",
            "reset",
        ],
        &["ACL", "SETUSER", "bad name"],
        &[
            "ACL",
            "SETUSER",
            "bob",
            "on",
            "nopass",
            "+@all",
            "-@dangerous",
            "~*",
            "+select|0",
        ],
        &["ACL", "USERS"],
        &["ACL", "WHOAMI"],
        &["ACL", "DELUSER", "default"],
        &["ACL", "DELUSER", "bob", "nosuch"],
        &["ACL", "USERS"],
        &["ACL", "GETUSER", "nosuch"],
        &["ACL", "CAT"],
        &["ACL", "CAT", "nosuch"],
        &["ACL", "GENPASS", "0"],
        &["ACL", "GENPASS", "4097"],
        &["ACL", "DRYRUN", "nosuch", "get", "a"],
        &["ACL", "DRYRUN", "alice", "nosuch"],
        &["ACL", "DRYRUN", "alice", "get"],
        &["ACL", "NOSUCH"],
        &["ACL", "GETUSER"],
        &["AUTH", "alice", "wrong"],
        &["AUTH", "nosuch", "pw"],
        &["AUTH", "pw"],
    ];
    let mut differ = Vec::new();
    for args in script {
        let (a, b) = (both.ours.str(args), both.theirs.str(args));
        if a != b {
            differ.push(format!("{args:?}: accelkv {a:?}, redis {b:?}"));
        }
    }
    assert!(differ.is_empty(), "replies differ:\n{}", differ.join("\n"));
}

/// Commands with keys, tried by ACL DRYRUN as users who may read every key, write every
/// key, or read one and write another: what a key needs (its value read, written, both,
/// or neither) is Redis's, command by command.
const KEYED: &str = "get k|set k v|set k v GET|incr k|append k v|setrange k 0 v|getrange k 0 1|strlen k|exists k|type k|ttl k|expire k 10|del k|unlink k|rename k k2|renamenx k k2|copy k k2|lpush k v|rpush k v|lpop k|rpop k|lrange k 0 1|llen k|lmove k k2 LEFT RIGHT|rpoplpush k k2|blpop k 0|lset k 0 v|linsert k BEFORE a b|lrem k 0 v|ltrim k 0 1|lindex k 0|lpos k v|hset k f v|hget k f|hgetall k|hdel k f|hincrby k f 1|hlen k|hexists k f|hstrlen k f|sadd k m|srem k m|smembers k|sismember k m|scard k|spop k|srandmember k|smove k k2 m|sinterstore d k k2|sunion k k2|sdiff k k2|zadd k 1 m|zincrby k 1 m|zrange k 0 1|zscore k m|zcard k|zpopmin k|zrem k m|zunionstore d 2 k k2|zrangestore d k 0 1|zrank k m|pfadd k a|pfcount k|pfmerge d k|geoadd k 1 1 m|geopos k m|geosearchstore d k FROMLONLAT 1 1 BYRADIUS 1 km|xadd k * f v|xrange k - +|xlen k|xdel k 1-1|xtrim k MAXLEN 1|xack k g 1-1|xclaim k g c 0 1-1|xautoclaim k g c 0 0|xreadgroup GROUP g c STREAMS k >|xread STREAMS k 0|setbit k 1 1|getbit k 1|bitcount k|bitop AND d k k2|bitfield k GET u8 0|bitfield k SET u8 0 1|getdel k|getex k|getset k v|mget k k2|mset k v k2 v|msetnx k v|psetex k 100 v|persist k|touch k|object encoding k|dump k|restore k 0 x|sort k|sort k STORE d|watch k|lmpop 1 k LEFT|zmpop 1 k MIN|sintercard 1 k|eval x 1 k|incrbyfloat k 1|decr k|setnx k v|setex k 10 v|hsetnx k f v|hmget k f|hkeys k|hvals k|hrandfield k|zcount k 0 1|zlexcount k a b|zrevrange k 0 1|zremrangebyrank k 0 1|zdiffstore d 1 k|zinter 1 k|pttl k|move k 1|lcs k k2|migrate h 1 k 0 10|migrate h 1 k 0 10 COPY AUTH2 u p|publish ch m|subscribe ch other|psubscribe ch* c?|ssubscribe ch|spublish ch m";

#[test]
fn what_keys_and_channels_need_is_what_redis_says() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let users: &[&[&str]] = &[
        &["rd", "on", "nopass", "+@all", "&*", "%R~*"],
        &["wr", "on", "nopass", "+@all", "&*", "%W~*"],
        &[
            "mixed", "on", "nopass", "+@all", "&ch", "&ch*", "%R~k2", "%W~d",
        ],
        &[
            "sel",
            "on",
            "nopass",
            "+get",
            "~k",
            "(+set ~k2)",
            "(+@all ~d &ch*)",
        ],
    ];
    for u in users {
        let args: Vec<&str> = ["ACL", "SETUSER"].iter().chain(u.iter()).copied().collect();
        assert_eq!(both.ours.str(&args), both.theirs.str(&args));
    }
    let mut differ = Vec::new();
    for cmd in KEYED.split('|') {
        for u in users {
            let mut args = vec!["ACL", "DRYRUN", u[0]];
            args.extend(cmd.split(' '));
            let (a, b) = (
                normalized(both.ours.str(&args)),
                normalized(both.theirs.str(&args)),
            );
            if a != b {
                differ.push(format!("{} {cmd}: accelkv {a}, redis {b}", u[0]));
            }
        }
    }
    assert!(
        differ.is_empty(),
        "{} differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

/// Every category's commands, by ACL CAT, as name → categories.
fn categories(c: &mut RespConn) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for cat in strings(c.str(&["ACL", "CAT"])) {
        for name in strings(c.str(&["ACL", "CAT", &cat])) {
            out.entry(name).or_default().insert(cat.clone());
        }
    }
    out
}

#[test]
fn every_command_is_in_redis_categories() {
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (categories(&mut both.ours), categories(&mut both.theirs));
    let differ: Vec<String> = ours
        .iter()
        .filter_map(|(name, cats)| {
            let t = theirs.get(name)?;
            (t != cats).then(|| format!("{name}: accelkv {cats:?}, redis {t:?}"))
        })
        .collect();
    let shared = ours.keys().filter(|n| theirs.contains_key(*n)).count();
    assert!(shared > 300, "only {shared} commands compared");
    assert!(
        differ.is_empty(),
        "categories differ:\n{}",
        differ.join("\n")
    );
    // COMMAND INFO's seventh field names them too.
    let Value::Array(Some(info)) = both.ours.str(&["COMMAND", "INFO", "get"]) else {
        panic!("COMMAND INFO")
    };
    let Value::Array(Some(get)) = &info[0] else {
        panic!("{info:?}")
    };
    let cats = format!("{:?}", get[6]);
    assert!(
        matches!(&get[6], Value::Array(Some(c)) if c.len() == 3),
        "{cats}"
    );
    for c in ["@read", "@string", "@fast"] {
        assert!(cats.contains(c), "{cats}");
    }
}

/// A reply as text, nested values flattened (bulk strings as their text).
fn text(v: &Value) -> String {
    match v {
        Value::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
        Value::Array(Some(items)) => items.iter().map(text).collect::<Vec<_>>().join(" | "),
        other => format!("{other:?}"),
    }
}

fn simple(s: &str) -> Value {
    Value::Simple(s.into())
}

fn logged_in(srv: &Server, user: &str, pass: &str) -> RespConn {
    let mut c = RespConn::new(srv);
    assert_eq!(c.str(&["AUTH", user, pass]), simple("OK"));
    c
}

#[test]
fn users_are_described_as_redis_7_2_describes_them() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    let rules = [
        "ACL",
        "SETUSER",
        "bob",
        "on",
        ">pw",
        "~foo*",
        "%R~bar",
        "&ch*",
        "+get",
        "+@hash",
        "-hdel",
        "+config|get",
        "(+set ~x*)",
    ];
    assert_eq!(c.str(&rules), simple("OK"));
    let hash = "30c952fab122c3f9759f02a6d95c3758b246b4fee239957b2d4fee46e26170c4";
    assert_eq!(
        strings(c.str(&["ACL", "LIST"])),
        [
            format!("user bob on sanitize-payload #{hash} ~foo* %R~bar resetchannels &ch* -@all +get +@hash -hdel +config|get (~x* resetchannels -@all +set)"),
            "user default on nopass sanitize-payload ~* &* +@all".to_string(),
        ]
    );
    let Value::Array(Some(u)) = c.str(&["ACL", "GETUSER", "bob"]) else {
        panic!("GETUSER")
    };
    let text = text(&Value::Array(Some(u)));
    for part in [
        "-@all +get +@hash -hdel +config|get",
        "~foo* %R~bar",
        "&ch*",
        "-@all +set",
        hash,
    ] {
        assert!(text.contains(part), "{part} not in {text}");
    }
    // Later rules for the same command or category replace earlier ones, as in 7.2.
    let cases: &[(&[&str], &str)] = &[
        (&["+@all", "-get", "+get"], "+@all +get"),
        (&["-config|get", "+config"], "-@all +config"),
        (&["+config|get", "+config|set", "-config"], "-@all -config"),
        (&["+@hash", "-@hash"], "-@all -@hash"),
        (&["+select|0", "+select|1"], "-@all +select|0 +select|1"),
        (&["+@all", "-@all"], "-@all"),
    ];
    for (i, (rules, want)) in cases.iter().enumerate() {
        let name = format!("u{i}");
        let mut args = vec!["ACL", "SETUSER", &name];
        args.extend(rules.iter());
        assert_eq!(c.str(&args), simple("OK"));
        let line = strings(c.str(&["ACL", "LIST"]))
            .into_iter()
            .find(|l| l.starts_with(&format!("user {name} ")))
            .unwrap();
        assert!(line.ends_with(want), "{rules:?}: {line}");
    }
}

#[test]
fn the_gate_refuses_what_the_rules_do_not_allow() {
    let srv = Server::start(&[]);
    let mut admin = RespConn::new(&srv);
    let setup = [
        "ACL",
        "SETUSER",
        "app",
        "on",
        ">pw",
        "~app:*",
        "&news",
        "+@read",
        "+@write",
        "-flushall",
        "+multi",
        "+exec",
        "+eval",
        "+subscribe",
    ];
    assert_eq!(admin.str(&setup), simple("OK"));
    let mut c = logged_in(&srv, "app", "pw");
    assert_eq!(
        c.str(&["ACL", "WHOAMI"]),
        Value::Error("NOPERM User app has no permissions to run the 'acl|whoami' command".into())
    );
    assert_eq!(c.str(&["SET", "app:1", "v"]), simple("OK"));
    assert_eq!(c.str(&["GET", "app:1"]), Value::Bulk(Some(b"v".to_vec())));
    assert_eq!(
        c.str(&["GET", "other"]),
        Value::Error("NOPERM No permissions to access a key".into())
    );
    assert_eq!(
        c.str(&["MSET", "app:2", "x", "other", "y"]),
        Value::Error("NOPERM No permissions to access a key".into())
    );
    assert_eq!(
        c.str(&["GET", "app:2"]),
        Value::Bulk(None),
        "a refused MSET wrote nothing"
    );
    assert!(err_starts(
        &c.str(&["FLUSHALL"]),
        "NOPERM User app has no permissions to run the 'flushall' command"
    ));
    assert!(err_starts(&c.str(&["PUBLISH", "sports", "x"]), "NOPERM"));
    // Inside MULTI a refusal aborts the transaction; inside a script it is the script's error.
    assert_eq!(c.str(&["MULTI"]), simple("OK"));
    assert!(err_starts(&c.str(&["GET", "other"]), "NOPERM"));
    assert!(err_starts(&c.str(&["EXEC"]), "EXECABORT"));
    let script = c.str(&["EVAL", "return redis.call('get', 'other')", "0"]);
    assert!(
        format!("{script:?}").contains("No permissions to access a key"),
        "{script:?}"
    );
    // A pipeline of GETs (the batched path) is checked key by key too.
    let many: Vec<String> = (0..20)
        .map(|i| {
            if i == 13 {
                "other".into()
            } else {
                format!("app:{i}")
            }
        })
        .collect();
    for k in &many {
        c.send(&["GET", k]);
    }
    for (i, _) in many.iter().enumerate() {
        let r = c.read();
        assert_eq!(err_starts(&r, "NOPERM"), i == 13, "{i}: {r:?}");
    }
    // Permissions changed take effect at the connection's next command, even queued ones:
    // EXEC checks each again.
    assert_eq!(c.str(&["MULTI"]), simple("OK"));
    assert_eq!(c.str(&["GET", "app:1"]), simple("QUEUED"));
    assert_eq!(
        admin.str(&["ACL", "SETUSER", "app", "resetkeys", "~nothing"]),
        simple("OK")
    );
    let Value::Array(Some(exec)) = c.str(&["EXEC"]) else {
        panic!("EXEC")
    };
    assert!(err_starts(&exec[0], "NOPERM"), "{exec:?}");
    // The log names what was refused, where, and who.
    let log = text(&admin.str(&["ACL", "LOG", "20"]));
    for part in [
        "flushall", "other", "lua", "multi", "toplevel", "username", "app",
    ] {
        assert!(log.contains(part), "{part} not in {log}");
    }
    assert!(
        info_field(&mut admin, "stats", "acl_access_denied_key")
            .parse::<u64>()
            .unwrap()
            >= 4
    );
    assert_eq!(admin.str(&["ACL", "LOG", "RESET"]), simple("OK"));
    assert_eq!(admin.str(&["ACL", "LOG"]), Value::Array(Some(vec![])));
}

#[test]
fn logins_follow_users() {
    let srv = Server::start(&["--password", "sekret"]);
    let mut c = RespConn::new(&srv);
    assert!(err_starts(&c.str(&["GET", "k"]), "NOAUTH"));
    assert_eq!(c.str(&["AUTH", "sekret"]), simple("OK"));
    assert_eq!(
        c.str(&["ACL", "SETUSER", "ro", "on", ">r", "~*", "+@read"]),
        simple("OK")
    );
    // HELLO logs in, and a failure is logged.
    let mut h = RespConn::new(&srv);
    assert!(err_starts(
        &h.str(&["HELLO", "3", "AUTH", "ro", "wrong"]),
        "WRONGPASS"
    ));
    assert!(matches!(
        h.str(&["HELLO", "2", "AUTH", "ro", "r"]),
        Value::Array(Some(_))
    ));
    let list = text(&c.str(&["CLIENT", "LIST"]));
    assert!(list.contains("user=ro"), "{list}");
    assert!(err_starts(&h.str(&["SET", "k", "v"]), "NOPERM"));
    let log = text(&c.str(&["ACL", "LOG", "2"]));
    assert!(log.contains("auth") && log.contains("AUTH"), "{log}");
    // RESET goes back to the default user, which needs its password again.
    assert_eq!(h.str(&["RESET"]), simple("RESET"));
    assert!(err_starts(&h.str(&["GET", "k"]), "NOAUTH"));
    // A disabled user cannot log in; CONFIG SET requirepass is the default user's password.
    assert_eq!(c.str(&["ACL", "SETUSER", "ro", "off"]), simple("OK"));
    assert!(err_starts(
        &RespConn::new(&srv).str(&["AUTH", "ro", "r"]),
        "WRONGPASS"
    ));
    assert_eq!(
        c.str(&["CONFIG", "SET", "requirepass", "other"]),
        simple("OK")
    );
    assert_eq!(
        c.str(&["CONFIG", "GET", "requirepass"]),
        Value::Array(Some(vec![
            common::bulk("requirepass"),
            common::bulk("other")
        ]))
    );
    let mut n = RespConn::new(&srv);
    assert!(err_starts(&n.str(&["AUTH", "sekret"]), "WRONGPASS"));
    assert_eq!(n.str(&["AUTH", "other"]), simple("OK"));
    // With no password, connections start logged in again.
    assert_eq!(c.str(&["CONFIG", "SET", "requirepass", ""]), simple("OK"));
    assert_eq!(RespConn::new(&srv).str(&["GET", "k"]), Value::Bulk(None));
}

#[test]
fn removed_users_and_revoked_channels_close_connections() {
    let srv = Server::start(&[]);
    let mut admin = RespConn::new(&srv);
    assert_eq!(
        admin.str(&["ACL", "SETUSER", "gone", "on", "nopass", "+@all", "~*", "&news"]),
        simple("OK")
    );
    let mut idle = logged_in(&srv, "gone", "x");
    let mut sub = logged_in(&srv, "gone", "x");
    sub.send(&["SUBSCRIBE", "news"]);
    let _ = sub.read();
    // Losing the channel closes the subscriber, not the other connection.
    assert_eq!(
        admin.str(&["ACL", "SETUSER", "gone", "resetchannels"]),
        simple("OK")
    );
    let mut s = sub.into_stream();
    assert!(closed_by_server(&mut s));
    assert_eq!(idle.str(&["PING"]), simple("PONG"));
    assert!(!text(&admin.str(&["CLIENT", "LIST"])).contains("sub=1"));
    // CLIENT KILL USER closes a user's connections; DELUSER closes them too.
    let other = logged_in(&srv, "gone", "x");
    assert_eq!(
        admin.str(&["CLIENT", "KILL", "USER", "gone"]),
        Value::Integer(2)
    );
    let mut s = other.into_stream();
    assert!(closed_by_server(&mut s));
    let last = logged_in(&srv, "gone", "x");
    assert_eq!(admin.str(&["ACL", "DELUSER", "gone"]), Value::Integer(1));
    let mut s = last.into_stream();
    assert!(closed_by_server(&mut s));
    assert!(err_starts(
        &admin.str(&["CLIENT", "KILL", "USER", "gone"]),
        "ERR No such user"
    ));
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-acl-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_acl_file_is_read_at_start_and_by_load_and_written_by_save() {
    let dir = temp("file");
    let path = dir.join("users.acl");
    std::fs::write(&path, "# the team\nuser default on nopass ~* &* +@all\nuser ann on >a1 ~ann:* +@all -@dangerous\n\nuser ro on >r ~* resetchannels +@read\n").unwrap();
    let p = path.to_str().unwrap();
    let srv = Server::start(&["--aclfile", p]);
    let mut c = RespConn::new(&srv);
    assert_eq!(strings(c.str(&["ACL", "USERS"])), ["ann", "default", "ro"]);
    let mut ann = logged_in(&srv, "ann", "a1");
    assert!(err_starts(&ann.str(&["GET", "bob:1"]), "NOPERM"));
    // SAVE writes every user as ACL LIST shows them; LOAD reads the file back.
    assert_eq!(
        c.str(&["ACL", "SETUSER", "new", "on", ">n", "+ping"]),
        simple("OK")
    );
    assert_eq!(c.str(&["ACL", "SAVE"]), simple("OK"));
    let saved = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        saved.lines().collect::<Vec<_>>(),
        strings(c.str(&["ACL", "LIST"]))
    );
    assert_eq!(c.str(&["ACL", "DELUSER", "new"]), Value::Integer(1));
    assert_eq!(c.str(&["ACL", "LOAD"]), simple("OK"));
    assert!(strings(c.str(&["ACL", "USERS"])).contains(&"new".to_string()));
    // A bad line: LOAD changes nothing and says where.
    std::fs::write(&path, "user ok on nopass +@all\nuser broken on +nosuch\n").unwrap();
    let e = c.str(&["ACL", "LOAD"]);
    assert!(format!("{e:?}").contains("users.acl:2"), "{e:?}");
    assert_eq!(
        strings(c.str(&["ACL", "USERS"])),
        ["ann", "default", "new", "ro"]
    );
    // ... and stops a start.
    let out = common::start_refused(&["--aclfile", p]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("users.acl:2"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without a file, SAVE and LOAD say so.
    let plain = Server::start(&[]);
    assert!(err_starts(
        &RespConn::new(&plain).str(&["ACL", "SAVE"]),
        "ERR This Redis instance is not configured to use an ACL file"
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connections run commands on every loop while another connection flips their user's
/// permissions: every reply is one the rules of the moment allow (a value or NOPERM),
/// none is lost, nothing panics, and once the last change is made every connection obeys
/// it.
#[test]
fn permissions_changed_under_load_are_obeyed() {
    let srv = Server::start(&["--threads", "2"]);
    let mut admin = RespConn::new(&srv);
    assert_eq!(
        admin.str(&["ACL", "SETUSER", "w", "on", "nopass", "~*", "+@all"]),
        simple("OK")
    );
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // Rounds each worker has run: the changes go on until every one has run some.
    let done: std::sync::Arc<Vec<AtomicUsize>> =
        std::sync::Arc::new((0..4).map(|_| AtomicUsize::new(0)).collect());
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let (addr, stop, done) = (srv.resp, stop.clone(), done.clone());
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                assert_eq!(c.str(&["AUTH", "w", "x"]), simple("OK"));
                while !stop.load(Ordering::Relaxed) {
                    let k = format!("k{i}");
                    for _ in 0..8 {
                        c.send(&["SET", &k, "v"]);
                    }
                    for _ in 0..8 {
                        let r = c.read();
                        assert!(r == simple("OK") || err_starts(&r, "NOPERM"), "{r:?}");
                    }
                    done[i].fetch_add(1, Ordering::Relaxed);
                }
                (c, done[i].load(Ordering::Relaxed))
            })
        })
        .collect();
    let t0 = std::time::Instant::now();
    let mut round = 0;
    while round < 200 || done.iter().any(|d| d.load(Ordering::Relaxed) < 20) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "workers stalled"
        );
        let rule = if round % 2 == 0 { "-set" } else { "+set" };
        assert_eq!(admin.str(&["ACL", "SETUSER", "w", rule]), simple("OK"));
        round += 1;
    }
    assert_eq!(admin.str(&["ACL", "SETUSER", "w", "-set"]), simple("OK"));
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let (mut c, n) = w.join().unwrap();
        assert!(n >= 20);
        assert!(err_starts(&c.str(&["SET", "k", "v"]), "NOPERM"));
    }
}

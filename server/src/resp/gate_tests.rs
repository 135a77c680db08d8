//! The gate's checks in each state a server or connection can be in (authentication, past
//! `maxmemory`, MULTI, a script, cluster mode, the reserved keys, loading), each command
//! sent twice: pipelined, through the batch (`batch.rs`, whose runs of GETs and SETs are
//! the handlers' cheap case), and one at a time through the dispatcher. Both must answer
//! the same, and what the state says.

use super::*;
use crate::config::{Args, Settings};
use crate::core::reads::Reads;
use crate::core::route::{ClusterSession, Forward, GroupSample, Located, Router, Settled};
use crate::resp::batch::{self, Scratch};
use crate::resp::cluster::{classify, Class};
use crate::resp::session::RespGlobal;
use accelkv_proto::resp::Version;
use accelkv_proto::Status;
use clap::Parser;
use std::sync::Arc;

/// A server in memory, with `flags` (`accelkv-server` flags).
fn server(flags: &[&str]) -> Arc<Shared> {
    let args = Args::parse_from(std::iter::once("accelkv-server").chain(flags.iter().copied()));
    let settings = Settings::resolve(args).unwrap();
    Shared::with_registry(settings, Default::default(), Arc::default()).unwrap()
}

/// A connection to `sh`, with the loop's read door.
struct Conn {
    sh: Arc<Shared>,
    s: Session,
    reads: Reads,
}

impl Conn {
    fn new(sh: &Arc<Shared>) -> Conn {
        let mut s = Session::new(1, None, Arc::new(RespGlobal::default()));
        s.refresh_db(sh);
        Conn {
            sh: sh.clone(),
            s,
            reads: sh.loop_reads(|| {}),
        }
    }

    /// Sends every command of `cmds` in one input, as a pipelining client does.
    fn pipelined(&mut self, cmds: &[&[&str]]) -> Vec<u8> {
        let mut input = Vec::new();
        for c in cmds {
            encode(&mut input, c);
        }
        let (mut out, mut sc, mut at) = (Vec::new(), Scratch::default(), 0);
        while at < input.len() {
            let ran = batch::run(
                &self.sh,
                &mut self.s,
                &input[at..],
                &mut self.reads,
                &mut sc,
                &mut out,
                usize::MAX / 2,
            );
            assert!(ran.bad.is_none());
            assert!(ran.used > 0, "a command waits: {:?}", &input[at..]);
            at += ran.used;
        }
        out
    }

    /// Sends each command of `cmds` on its own, straight to the dispatcher.
    fn one_by_one(&mut self, cmds: &[&[&str]]) -> Vec<u8> {
        let mut out = Vec::new();
        for c in cmds {
            let args: Vec<&[u8]> = c.iter().map(|a| a.as_bytes()).collect();
            crate::resp::dispatch::command(
                &self.sh,
                &mut self.s,
                &args,
                From::Client,
                &mut self.reads,
                &mut out,
            );
        }
        out
    }
}

fn encode(out: &mut Vec<u8>, c: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", c.len()).as_bytes());
    for a in c {
        out.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
}

/// The replies in `out`, each as its first line.
fn lines(out: &[u8]) -> Vec<String> {
    let limits = accelkv_proto::Limits::default();
    let mut at = 0;
    let mut v = Vec::new();
    while at < out.len() {
        let (r, used) = resp::parse_reply(&out[at..], &limits).unwrap().unwrap();
        v.push(match r {
            resp::Value::Bulk(Some(b)) => format!("Bulk({})", String::from_utf8_lossy(&b)),
            r => format!("{r:?}"),
        });
        at += used;
    }
    v
}

/// Runs `cmds` pipelined on one server and one by one on another, each first set up by
/// `setup`: both answer the same; returns the answers.
fn both(flags: &[&str], setup: impl Fn(&Arc<Shared>, &mut Conn), cmds: &[&[&str]]) -> Vec<String> {
    let (a, b) = (server(flags), server(flags));
    let (mut ca, mut cb) = (Conn::new(&a), Conn::new(&b));
    setup(&a, &mut ca);
    setup(&b, &mut cb);
    let piped = lines(&ca.pipelined(cmds));
    let single = lines(&cb.one_by_one(cmds));
    assert_eq!(piped, single, "{cmds:?}");
    assert_eq!(piped.len(), cmds.len());
    piped
}

fn is_err(r: &str, text: &str) -> bool {
    r.starts_with("Error(") && r.contains(text)
}

/// Commands of each kind the batch treats on its own: GETs and an MGET (a read run), SETs
/// (a SET run), and commands that take the general path.
const MIX: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["SET", "b", "2"],
    &["GET", "a"],
    &["GET", "b"],
    &["MGET", "a", "b"],
    &["INCR", "n"],
    &["DEL", "b"],
    &["PING"],
];

#[test]
fn a_plain_connection_runs_everything() {
    let r = both(&[], |_, _| {}, MIX);
    assert!(r.iter().all(|r| !r.starts_with("Error")), "{r:?}");
}

#[test]
fn before_auth_only_no_auth_commands_run() {
    let r = both(&["--password", "pw"], |_, _| {}, MIX);
    assert!(r.iter().all(|r| is_err(r, "NOAUTH")), "{r:?}");
    let mut cmds: Vec<&[&str]> = vec![&["AUTH", "nope"], &["AUTH", "pw"]];
    cmds.extend_from_slice(MIX);
    let r = both(&["--password", "pw"], |_, _| {}, &cmds);
    assert!(
        is_err(&r[0], "WRONGPASS") || is_err(&r[0], "invalid"),
        "{r:?}"
    );
    assert!(r[1..].iter().all(|r| !r.starts_with("Error")), "{r:?}");
}

#[test]
fn past_maxmemory_denyoom_writes_are_refused_and_the_rest_runs() {
    let full = |sh: &Arc<Shared>, c: &mut Conn| {
        c.one_by_one(&[&["SET", "b", "2"]]);
        sh.set_maxmemory(1);
    };
    let r = both(&[], full, MIX);
    for (cmd, r) in MIX.iter().zip(&r) {
        let denyoom = matches!(cmd[0], "SET" | "INCR");
        assert_eq!(is_err(r, "OOM"), denyoom, "{cmd:?}: {r}");
        assert!(denyoom || !r.starts_with("Error"), "{cmd:?}: {r}");
    }
}

#[test]
fn inside_multi_commands_are_queued_and_refusals_abort() {
    let mut cmds: Vec<&[&str]> = vec![&["MULTI"]];
    cmds.extend_from_slice(MIX);
    cmds.push(&["EXEC"]);
    let r = both(&[], |_, _| {}, &cmds);
    assert!(
        r[1..=MIX.len()].iter().all(|r| r.contains("QUEUED")),
        "{r:?}"
    );
    assert!(r[MIX.len() + 1].starts_with("Array"), "{r:?}");

    // Unknown, wrong arity, no_multi, nested MULTI, WATCH: each answered; all but MULTI and
    // WATCH abort the transaction.
    for (bad, aborts) in [
        (&["NOPE", "x"][..], true),
        (&["GET"][..], true),
        (&["SCAN", "0"][..], true),
        (&["MULTI"][..], false),
        (&["WATCH", "a"][..], false),
    ] {
        let cmds: Vec<&[&str]> = vec![
            &["MULTI"],
            &["SET", "a", "1"],
            bad,
            &["GET", "a"],
            &["EXEC"],
        ];
        let r = both(&[], |_, _| {}, &cmds);
        assert!(r[2].starts_with("Error"), "{bad:?}: {r:?}");
        assert_eq!(is_err(&r[4], "EXECABORT"), aborts, "{bad:?}: {r:?}");
    }

    // Past maxmemory a denyoom command is refused while queued; a delete is queued.
    let full = |sh: &Arc<Shared>, c: &mut Conn| {
        c.one_by_one(&[&["SET", "a", "1"]]);
        sh.set_maxmemory(1);
    };
    let cmds: &[&[&str]] = &[&["MULTI"], &["DEL", "a"], &["SET", "a", "2"], &["EXEC"]];
    let r = both(&[], full, cmds);
    assert!(r[1].contains("QUEUED") && is_err(&r[2], "OOM"), "{r:?}");
    assert!(is_err(&r[3], "EXECABORT"), "{r:?}");
}

#[test]
fn scripts_run_what_scripts_may() {
    let script = |body: &'static str| -> [&'static str; 3] { ["EVAL", body, "0"] };
    let cases: [([&str; 3], Option<&str>); 5] = [
        (script("return redis.pcall('SET','a','1')"), None),
        (script("return redis.pcall('GET','a')"), None),
        (
            script("return redis.pcall('SCAN','0')"),
            Some("not allowed from script"),
        ),
        (
            script("return redis.pcall('MULTI')"),
            Some("not allowed from script"),
        ),
        (
            script("return redis.pcall('NOPE')"),
            Some("Unknown Redis command"),
        ),
    ];
    for (c, refused) in cases {
        let cmds: Vec<&[&str]> = vec![&c, &c];
        let r = both(&[], |_, _| {}, &cmds);
        match refused {
            Some(e) => assert!(is_err(&r[0], e), "{c:?}: {r:?}"),
            None => assert!(!r[0].starts_with("Error"), "{c:?}: {r:?}"),
        }
    }
    let ro: &[&str] = &["EVAL_RO", "return redis.pcall('SET','a','1')", "0"];
    let r = both(&[], |_, _| {}, &[ro]);
    assert!(is_err(&r[0], "read-only scripts"), "{r:?}");
    // Past maxmemory, a script's denyoom command is refused as a client's is.
    let full = |sh: &Arc<Shared>, _: &mut Conn| sh.set_maxmemory(1);
    let set = script("return redis.pcall('SET','a','1')");
    let r = both(&[], full, &[&set]);
    assert!(is_err(&r[0], "OOM"), "{r:?}");
}

#[test]
fn reserved_keys_are_refused_on_every_path() {
    // The reserved part starts with bytes FF FF, which a &str cannot hold: checked on bytes.
    let sh = server(&[]);
    let mut c = Conn::new(&sh);
    let mut input = Vec::new();
    for _ in 0..3 {
        input.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$3\r\n\xff\xffk\r\n$1\r\nv\r\n");
    }
    let (mut out, mut sc) = (Vec::new(), Scratch::default());
    batch::run(
        &sh,
        &mut c.s,
        &input,
        &mut c.reads,
        &mut sc,
        &mut out,
        usize::MAX / 2,
    );
    let piped = lines(&out);
    let mut out = Vec::new();
    let args: [&[u8]; 3] = [b"SET", b"\xff\xffk", b"v"];
    crate::resp::dispatch::command(&sh, &mut c.s, &args, From::Client, &mut c.reads, &mut out);
    let single = lines(&out);
    assert_eq!(piped.len(), 3);
    assert!(
        piped.iter().chain(&single).all(|r| is_err(r, "reserved")),
        "{piped:?} {single:?}"
    );
    // In the middle of a run of SETs (each after the first joins the batch only if the gate
    // lets it run).
    let mut input = Vec::new();
    input.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nv\r\n");
    input.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$3\r\n\xff\xffk\r\n$1\r\nv\r\n");
    input.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$1\r\nv\r\n");
    let mut out = Vec::new();
    batch::run(
        &sh,
        &mut c.s,
        &input,
        &mut c.reads,
        &mut sc,
        &mut out,
        usize::MAX / 2,
    );
    let r = lines(&out);
    assert!(
        r[0].contains("OK") && is_err(&r[1], "reserved") && r[2].contains("OK"),
        "{r:?}"
    );
}

/// Cluster mode as the router decides it: connection commands here, keyed ones sent away
/// (a redirect, as a range another node leads answers), refused ones refused.
struct Redirects;

impl Router for Redirects {
    fn route(&self, _: &mut ClusterSession, args: &[&[u8]], _: Version) -> Route {
        match classify(args) {
            Class::Local => Route::Here,
            Class::Refused(why) => Route::Refuse(format!("ERR {why}")),
            Class::Keyed { .. } => Route::Refuse("MOVED 7 127.0.0.1:7001".into()),
        }
    }
    fn locate(&self, _: &[u8], _: Option<Option<&[u8]>>, _: bool, _: bool) -> Located {
        unreachable!("RESP commands are routed by route()")
    }
    fn binary_error(&self, _: &[u8]) -> (Status, String) {
        unreachable!("RESP commands are routed by route()")
    }
    fn submit(&self, _: Forward, _: Box<dyn FnOnce(Settled) + Send>) {
        unreachable!("this router answers at once")
    }
    fn describe(&self) -> String {
        "redirects".into()
    }
    fn command(&self, _: &[&[u8]], _: Version, out: &mut Vec<u8>) {
        resp::simple(out, "OK")
    }
    fn groups(&self) -> Vec<GroupSample> {
        Vec::new()
    }
    fn stop(&self) {}
}

#[test]
fn cluster_mode_routes_by_the_table_flags() {
    let cluster = |sh: &Arc<Shared>, _: &mut Conn| sh.set_router(Arc::new(Redirects));
    let r = both(&[], cluster, MIX);
    for (cmd, r) in MIX.iter().zip(&r) {
        let local = cmd[0] == "PING";
        assert_eq!(is_err(r, "MOVED"), !local, "{cmd:?}: {r}");
    }
    // (MULTI is the cluster router's own: cluster/node/tx.rs.)
    let cmds: &[&[&str]] = &[
        &["WATCH", "k"],
        &["SCAN", "0"],
        &["NOPE"],
        &["CLIENT", "ID"],
    ];
    let r = both(&[], cluster, cmds);
    assert!(
        is_err(&r[0], "WATCH is not served") && is_err(&r[1], "whole-keyspace"),
        "{r:?}"
    );
    assert!(is_err(&r[2], "unknown command"), "{r:?}");
    assert!(!r[3].starts_with("Error"), "{r:?}");
    // Before AUTH nothing is routed: refused here.
    let r = both(&["--password", "pw"], cluster, MIX);
    assert!(r.iter().all(|r| is_err(r, "NOAUTH")), "{r:?}");
}

#[test]
fn while_loading_only_loading_commands_pass() {
    use crate::core::loading::Progress;
    let p = Progress {
        load: Arc::default(),
        since: std::time::Instant::now(),
    };
    let mut input = Vec::new();
    for c in [
        &["GET", "a"][..],
        &["SET", "a", "1"],
        &["PING"],
        &["INFO"],
        &["QUIT"],
    ] {
        encode(&mut input, c);
    }
    let mut out = Vec::new();
    assert_eq!(crate::resp::loading::answer(&input, &p, &mut out), None);
    let r = lines(&out);
    assert!(r[..3].iter().all(|r| is_err(r, "LOADING")), "{r:?}");
    assert!(r[3].contains("loading:1") && r[4].contains("OK"), "{r:?}");
    // What the loading door serves, the table lets through while loading.
    for name in ["INFO", "QUIT"] {
        assert!(
            while_loading(crate::resp::table::find(name.as_bytes())),
            "{name}"
        );
    }
    assert!(!while_loading(crate::resp::table::find(b"GET")));
}

#[test]
fn the_checks_refuse_in_redis_order() {
    let sh = server(&["--password", "pw"]);
    let s = Session::new(1, None, Arc::new(RespGlobal::default()));
    // Unknown and unauthenticated: NOAUTH first (the name is not told to a stranger).
    let find = crate::resp::table::find;
    let v = |spec, args: &[&[u8]], from| {
        let v = before_route(&sh, &s, spec, from);
        v.unwrap_or_else(|| after_route(&sh, &s, spec, args, from))
    };
    assert_eq!(
        v(None, &[b"NOPE"], From::Client),
        Verdict::Refuse(Refusal::NoAuth)
    );
    assert_eq!(
        v(find(b"AUTH"), &[b"AUTH"], From::Client),
        Verdict::Refuse(Refusal::Arity)
    );
    assert_eq!(
        v(find(b"AUTH"), &[b"AUTH", b"pw"], From::Client),
        Verdict::Run
    );
    let sh = server(&[]);
    let v = |spec, args: &[&[u8]], from| after_route(&sh, &s, spec, args, from);
    // In a script, what scripts may not run is refused before its arity is looked at.
    assert_eq!(
        v(find(b"SCAN"), &[b"SCAN"], From::Script { ro: false }),
        Verdict::Refuse(Refusal::NotInScript)
    );
    assert_eq!(
        v(None, &[b"NOPE"], From::Script { ro: true }),
        Verdict::Refuse(Refusal::ScriptUnknown)
    );
    assert_eq!(
        v(
            find(b"XREAD"),
            &[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"],
            From::Script { ro: false }
        ),
        Verdict::Refuse(Refusal::ScriptBlock)
    );
    // A command EXEC runs is checked again but never queued.
    assert_eq!(v(find(b"GET"), &[b"GET", b"a"], From::Inner), Verdict::Run);
}

/// A command not marked `movablekeys` (COMMAND INFO) has its keys where the table's
/// positions put them, whatever its arguments: the gate, ACL and COMMAND GETKEYS agree
/// with what COMMAND INFO tells clients.
#[test]
fn keys_not_marked_movable_are_at_the_tables_positions() {
    use crate::resp::db::{key_positions, movable_keys};
    let args: Vec<&[u8]> = vec![b"x", b"1", b"STORE", b"k", b"2", b"STREAMS", b"a", b"b"];
    for spec in crate::resp::table::table() {
        if movable_keys(spec) || matches!(spec.name, "MEMORY" | "DEBUG") {
            continue;
        }
        for n in 1..=args.len() {
            let found: Vec<usize> = key_positions(spec, &args[..n]).into_iter().collect();
            let table: Vec<usize> = spec.key_positions(n).collect();
            assert_eq!(found, table, "{} with {n} arguments", spec.name);
        }
    }
}

/// The gather's key check for GET (`acl::check::reads_key`) answers as the gate's whole
/// ACL step does, for users of every shape: key patterns (read, write, both), the command
/// allowed or not, `+get|first-arg` rules, selectors.
#[test]
fn the_gathers_key_check_agrees_with_the_gate() {
    use crate::core::acl::{edit, User};
    use crate::resp::acl::check::{check, reads_key};
    let table = crate::resp::table::table();
    let cmds = crate::resp::acl::TableCommands::new(table, crate::resp::table::find);
    let get = crate::resp::table::find(b"GET").unwrap();
    let pos = crate::resp::table::position(get);
    let users: &[&[&str]] = &[
        &["on", "nopass", "~key:*", "+@all"],
        &["on", "nopass", "%W~key:*", "+@all"],
        &["on", "nopass", "%R~key:*", "%W~other:*", "+@all"],
        &["on", "nopass", "~*", "+@all", "-get"],
        &["on", "nopass", "~*", "-@all", "+get|key:1"],
        &["on", "nopass", "~a*", "+@read", "(~key:* +get)"],
        &["on", "nopass", "resetkeys", "+@all"],
    ];
    for rules in users {
        let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
        let u = edit(User::new(b"u", false), &rules, &cmds, false).expect("rules apply");
        for key in ["key:1", "key:2", "other:1", "abc", ""] {
            let whole = check(&u, table, get, pos, &[b"GET", key.as_bytes()]).is_ok();
            assert_eq!(reads_key(&u, pos, key.as_bytes()), whole, "{rules:?} {key}");
        }
    }
}

//! Stream consumer groups (XGROUP, XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO,
//! XSETID) against a real `redis-server`: a script of commands, errors and the lag
//! bookkeeping after deletions and trims, reply for reply; random sequences of group
//! commands compared after every step; XREADGROUP BLOCK woken by an XADD; a consumer that
//! dies with entries pending, taken over by XAUTOCLAIM; groups surviving a restart of a
//! durable server. Replies holding times (idle, seen and delivery times) are checked by
//! their bounds, not compared.

mod common;

use accelkv_proto::resp::Value;
use common::{commands_answer_as_redis_does, strings, wait_blocked, Redis, RespConn, Server};
use proptest::prelude::*;
use std::time::Duration;

/// Every string and integer of a nested reply, in order (nil as "").
fn flat(v: Value) -> Vec<String> {
    match v {
        Value::Array(Some(items)) => items.into_iter().flat_map(flat).collect(),
        Value::Bulk(Some(b)) => vec![String::from_utf8(b).expect("utf-8")],
        Value::Integer(n) => vec![n.to_string()],
        Value::Simple(s) => vec![s],
        _ => vec![String::new()],
    }
}

fn split(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

#[test]
fn consumer_groups_answer_as_redis_does() {
    let script = [
        "XADD s 1-0 a 1",
        "XADD s 2-0 b 2",
        "XADD s 3-0 c 3",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE s g 0",
        "XGROUP CREATE nokey g 0",
        "XGROUP CREATE nokey g $ MKSTREAM",
        "XGROUP CREATE s g2 $",
        "XGROUP CREATE s g3 -",
        "XGROUP CREATE s g3 bad",
        "XGROUP FOO s g",
        "XGROUP CREATE s",
        "XGROUP SETID s nog 0",
        "XREADGROUP GROUP g alice COUNT 1 STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s >",
        "XREADGROUP GROUP g alice STREAMS s 0",
        "XREADGROUP GROUP g bob STREAMS s 0",
        "XREADGROUP GROUP g bob STREAMS s $",
        "XREADGROUP GROUP nog bob STREAMS s >",
        "XREADGROUP GROUP g bob STREAMS s",
        "XREADGROUP STREAMS s >",
        "XPENDING s g",
        "XPENDING s g - + 10 nobody",
        "XPENDING s nog",
        "XACK s g 2-0 9-9",
        "XACK s g 2-0",
        "XACK s nog 2-0",
        "XACK nokey2 g 2-0",
        "XACK s g bad",
        "XPENDING s g",
        "XINFO GROUPS s",
        "XCLAIM s g carol 0 1-0 JUSTID",
        "XPENDING s g",
        "XCLAIM s g carol 0 3-0",
        "XCLAIM s g carol 0 3-0 FORCE RETRYCOUNT 5",
        "XCLAIM s g carol 0 3-0 BADOPT",
        "XDEL s 1-0",
        "XCLAIM s g carol 0 1-0",
        "XPENDING s g",
        "XAUTOCLAIM s g dave 0 0-0 COUNT 1",
        "XAUTOCLAIM s g dave 0 0-0",
        "XAUTOCLAIM s g dave 0 0-0 COUNT 0",
        "XAUTOCLAIM s g dave 0 0-0 JUSTID",
        "XGROUP CREATECONSUMER s g erin",
        "XGROUP CREATECONSUMER s g erin",
        "XGROUP DELCONSUMER s g dave",
        "XGROUP DELCONSUMER s g zed",
        "XPENDING s g",
        "XINFO GROUPS s",
        "XSETID s 10-0 ENTRIESADDED 1",
        "XSETID s 10-0 ENTRIESADDED 5 MAXDELETEDID 2-0",
        "XGROUP SETID s g 0 ENTRIESREAD 0",
        "XINFO GROUPS s",
        "XGROUP SETID s g $",
        "XGROUP DESTROY s g",
        "XGROUP DESTROY s g",
        "XINFO GROUPS s",
        "XINFO STREAM nokey3",
        "SET str x",
        "XGROUP CREATE str g 0",
        "XREADGROUP GROUP g a STREAMS str >",
        "XINFO CONSUMERS s nog",
        // The lag and read counter through deletions, trims and NOACK reads.
        "XADD x 1-0 f v",
        "XADD x 2-0 f v",
        "XADD x 3-0 f v",
        "XADD x 4-0 f v",
        "XADD x 5-0 f v",
        "XGROUP CREATE x g1 0",
        "XINFO GROUPS x",
        "XREADGROUP GROUP g1 c COUNT 2 STREAMS x >",
        "XINFO GROUPS x",
        "XDEL x 3-0",
        "XINFO GROUPS x",
        "XREADGROUP GROUP g1 c COUNT 1 STREAMS x >",
        "XINFO GROUPS x",
        "XREADGROUP GROUP g1 c STREAMS x >",
        "XTRIM x MAXLEN 1",
        "XINFO GROUPS x",
        "XADD x 6-0 f v",
        "XGROUP CREATE x g2 0",
        "XREADGROUP GROUP g2 c NOACK STREAMS x >",
        "XINFO GROUPS x",
        "XPENDING x g2",
        "XGROUP CREATE x g3 0 ENTRIESREAD 3",
        "XINFO GROUPS x",
        "XGROUP CREATE x g4 0 ENTRIESREAD -2",
        "XGROUP CREATE x g4 0 ENTRIESREAD x",
        // Several streams in one read, history with a deleted entry.
        "XADD y 1-0 a b",
        "XADD y 2-0 a b",
        "XGROUP CREATE y g 0",
        "XREADGROUP GROUP g c COUNT 1 STREAMS x y > >",
        "XREADGROUP GROUP g1 c COUNT 1 STREAMS x y > >",
        "XREADGROUP GROUP g c COUNT 1 STREAMS y y > 0",
        "XDEL y 1-0",
        "XREADGROUP GROUP g c STREAMS y 0",
        "XPENDING y g IDLE 0 - +",
        "XPENDING y g - + -1",
        "XPENDING y g ( + 10",
        "XINFO STREAM y FULL COUNT x",
        "XINFO STREAM y FULLX",
        "XINFO STREAM y FULL COUNT",
        "XSETID nokey 5-0",
        "XSETID y 5-0 ENTRIESADDED -1",
        "XSETID y 5-0 MAXDELETEDID 6-0",
        "XSETID y 5-0 FOO 1",
        // Claims: LASTID moves the group, the option errors.
        "XADD z 1-0 a b",
        "XGROUP CREATE z g 0",
        "XREADGROUP GROUP g c STREAMS z >",
        "XCLAIM z g d 0 1-0 LASTID 9-0 JUSTID",
        "XINFO GROUPS z",
        "XAUTOCLAIM z g d 0 (1-0",
        "XAUTOCLAIM z g d x 0",
        "XAUTOCLAIM z g d 0 x",
        "XAUTOCLAIM z g d 0 0 COUNT 0",
        "XAUTOCLAIM z g d 0 0 FOO",
        "XCLAIM z g d x 1-0",
        "XCLAIM z g d 0 1-0 IDLE x",
        "XCLAIM z g d 0 1-0 TIME x",
        "XCLAIM z g d 0 1-0 RETRYCOUNT x",
        "XCLAIM z g d 0 1-0 LASTID x",
        "XCLAIM nokey g d 0 1-0",
        "XCLAIM z g d 0 1-0 RETRYCOUNT 7 JUSTID",
        "XREADGROUP GROUP g d COUNT 0 STREAMS z 0",
        "XREADGROUP GROUP g d NOACK STREAMS z 0",
        "XGROUP CREATE z g5 0 MKSTREAM ENTRIESREAD 1 MKSTREAM",
        "XGROUP DESTROY z g EXTRA",
        "XGROUP CREATECONSUMER z nog c",
        "XGROUP DELCONSUMER nokey g c",
        // A stream's groups follow it through RENAME and go with DEL.
        "RENAME z z2",
        "XPENDING z2 g",
        "XINFO GROUPS z2",
        "DEL z2",
        "XGROUP CREATE z2 g 0 MKSTREAM",
        "XINFO GROUPS z2",
    ];
    let script: Vec<Vec<&str>> = script.iter().map(|l| split(l)).collect();
    commands_answer_as_redis_does(&script);
}

/// XINFO STREAM's fields but Redis's radix tree's, which accelkv has no counterpart of
/// (it answers its one subkey per entry).
#[test]
fn xinfo_stream_answers_as_redis_does_but_for_the_radix_tree() {
    let Some(mut both) = common::beside_redis() else {
        return;
    };
    let setup = [
        "XADD y 1-0 a b",
        "XADD y 2-0 c d",
        "XADD y 3-0 e f",
        "XDEL y 2-0",
        "XGROUP CREATE y g 0",
        "XGROUP CREATE y h $",
    ];
    for l in setup {
        assert_eq!(both.ours.str(&split(l)), both.theirs.str(&split(l)), "{l}");
    }
    let drop_tree = |v: Value| -> Vec<Value> {
        let Value::Array(Some(items)) = v else {
            panic!("not an array: {v:?}")
        };
        let mut kept = Vec::new();
        for pair in items.chunks(2) {
            if !matches!(&pair[0], Value::Bulk(Some(b)) if b.starts_with(b"radix-tree")) {
                kept.extend(pair.iter().cloned());
            }
        }
        kept
    };
    let info = ["XINFO", "STREAM", "y"];
    let (ours, theirs) = (both.ours.str(&info), both.theirs.str(&info));
    assert_eq!(drop_tree(ours), drop_tree(theirs));
}

/// A stream of group commands on two streams and one group each.
#[derive(Clone, Debug)]
enum Cmd {
    Add(u8),
    Read(u8, u8, u8),
    History(u8, u8),
    Ack(u8, u8),
    Claim(u8, u8, u8),
    AutoClaim(u8, u8, u8),
    Del(u8, u8),
    Trim(u8, u8),
    DelConsumer(u8, u8),
    SetId(u8, u8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    prop_oneof![
        3 => any::<u8>().prop_map(Cmd::Add),
        3 => (any::<u8>(), any::<u8>(), 0..4u8).prop_map(|(k, c, n)| Cmd::Read(k, c, n)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(k, c)| Cmd::History(k, c)),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(k, i)| Cmd::Ack(k, i)),
        1 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(k, c, i)| Cmd::Claim(k, c, i)),
        1 => (any::<u8>(), any::<u8>(), 1..4u8).prop_map(|(k, c, n)| Cmd::AutoClaim(k, c, n)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(k, i)| Cmd::Del(k, i)),
        1 => (any::<u8>(), 0..4u8).prop_map(|(k, n)| Cmd::Trim(k, n)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(k, c)| Cmd::DelConsumer(k, c)),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(k, i)| Cmd::SetId(k, i)),
    ]
}

/// The commands of `c` (one, or two for a consumer deleted and made again).
fn args(c: &Cmd, next: &mut [u64; 2]) -> Vec<Vec<String>> {
    let key = |k: &u8| format!("x{}", k % 2);
    let who = |c: &u8| format!("c{}", c % 3);
    let id = |k: &u8, i: &u8| format!("{}-0", u64::from(*i) % (next[(k % 2) as usize] + 1));
    let line = match c {
        Cmd::Add(k) => {
            let ms = &mut next[(k % 2) as usize];
            *ms += 1;
            format!("XADD {} {}-0 f {ms}", key(k), *ms - 1)
        }
        Cmd::Read(k, c, n) => format!(
            "XREADGROUP GROUP g {} COUNT {n} STREAMS {} >",
            who(c),
            key(k)
        ),
        Cmd::History(k, c) => format!("XREADGROUP GROUP g {} STREAMS {} 0", who(c), key(k)),
        Cmd::Ack(k, i) => format!("XACK {} g {}", key(k), id(k, i)),
        Cmd::Claim(k, c, i) => format!("XCLAIM {} g {} 0 {}", key(k), who(c), id(k, i)),
        Cmd::AutoClaim(k, c, n) => format!("XAUTOCLAIM {} g {} 0 0 COUNT {n}", key(k), who(c)),
        Cmd::Del(k, i) => format!("XDEL {} {}", key(k), id(k, i)),
        Cmd::Trim(k, n) => format!("XTRIM {} MAXLEN {n}", key(k)),
        // Deleted, then made again, so no read creates it (see above).
        Cmd::DelConsumer(k, c) => format!(
            "XGROUP DELCONSUMER {k} g {c}\nXGROUP CREATECONSUMER {k} g {c}",
            k = key(k),
            c = who(c)
        ),
        Cmd::SetId(k, i) => format!("XGROUP SETID {} g {}", key(k), id(k, i)),
    };
    line.lines()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random group commands on two streams, every reply and each group's pending summary,
    /// pending list (owners and delivery counts) and XINFO GROUPS compared with Redis's
    /// after each command.
    #[test]
    fn random_group_commands_answer_as_redis_does(cmds in proptest::collection::vec(cmd(), 1..40)) {
        let Some(redis) = Redis::start() else {
            accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
            return Ok(());
        };
        let srv = Server::start(&[]);
        let mut ours = RespConn::new(&srv);
        let mut theirs = RespConn::connect(([127, 0, 0, 1], redis.port).into());
        for k in ["x0", "x1"] {
            let create = ["XGROUP", "CREATE", k, "g", "0", "MKSTREAM"];
            prop_assert_eq!(ours.str(&create), theirs.str(&create));
            // Redis 7.0 creates a consumer only when a read serves it something, 7.2 (whose
            // behaviour accelkv has) on every read: consumers made first agree on both.
            for c in ["c0", "c1", "c2"] {
                let make = ["XGROUP", "CREATECONSUMER", k, "g", c];
                prop_assert_eq!(ours.str(&make), theirs.str(&make));
            }
        }
        let mut next = [1u64, 1u64];
        for a in cmds.iter().flat_map(|c| args(c, &mut next)) {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            prop_assert_eq!(ours.str(&a), theirs.str(&a), "{:?}", a);
            for key in ["x0", "x1"] {
                for check in [
                    vec!["XPENDING", key, "g"],
                    vec!["XINFO", "GROUPS", key],
                ] {
                    prop_assert_eq!(ours.str(&check), theirs.str(&check), "after {:?}", a);
                }
                let range = ["XPENDING", key, "g", "-", "+", "100"];
                prop_assert_eq!(pending_owners(ours.str(&range)), pending_owners(theirs.str(&range)), "after {:?}", a);
            }
        }
    }
}

/// XPENDING's extended rows without their idle times: id, owner, delivery count.
fn pending_owners(v: Value) -> Vec<(String, String, Value)> {
    let Value::Array(Some(rows)) = v else {
        return Vec::new();
    };
    rows.into_iter()
        .map(|r| {
            let Value::Array(Some(f)) = r else {
                panic!("a row that is not an array")
            };
            let s = strings(Value::Array(Some(f[..2].to_vec())));
            (s[0].clone(), s[1].clone(), f[3].clone())
        })
        .collect()
}

#[test]
fn xreadgroup_block_waits_for_an_xadd_and_records_the_delivery() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        c.str(&["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]),
        Value::Simple("OK".into())
    );
    let mut waiter = RespConn::new(&srv);
    waiter.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "w",
        "BLOCK",
        "0",
        "STREAMS",
        "q",
        ">",
    ]);
    wait_blocked(&mut c, 1);
    c.str(&["XADD", "q", "5-0", "job", "1"]);
    let got = flat(waiter.read());
    assert_eq!(got, ["q", "5-0", "job", "1"]);
    let pending = flat(c.str(&["XPENDING", "q", "g"]));
    assert_eq!(pending, ["1", "5-0", "5-0", "w", "1"]);
    // A timed wait with nothing new answers nil after its timeout.
    let t = std::time::Instant::now();
    let none = c.str(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "w",
        "BLOCK",
        "150",
        "STREAMS",
        "q",
        ">",
    ]);
    assert_eq!(none, Value::Array(None));
    assert!(t.elapsed() >= Duration::from_millis(140));
    // Redis 7.2's texts for an odd list of keys and ids (7.0 said "XREAD" for both).
    let odd = c.str(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "w",
        "COUNT",
        "1",
        "STREAMS",
        "q",
    ]);
    assert_eq!(odd, Value::Error("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.".into()));
    let odd = c.str(&["XREAD", "COUNT", "1", "STREAMS", "q"]);
    assert_eq!(odd, Value::Error("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.".into()));
    // A parked read whose stream is deleted answers NOGROUP; one whose key becomes a
    // string answers WRONGTYPE.
    for (change, want) in [
        (vec!["DEL", "q"], "NOGROUP"),
        (vec!["SET", "q", "v"], "WRONGTYPE"),
    ] {
        c.str(&["DEL", "q"]);
        c.str(&["XGROUP", "CREATE", "q", "g", "$", "MKSTREAM"]);
        waiter.send(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "w",
            "BLOCK",
            "0",
            "STREAMS",
            "q",
            ">",
        ]);
        wait_blocked(&mut c, 1);
        c.str(&change);
        let e = waiter.read();
        assert!(common::err_starts(&e, want), "{change:?}: {e:?}");
    }
    // Blocking is refused inside scripts, as XREAD's is.
    let script = "return redis.call('XREADGROUP','GROUP','g','w','BLOCK','0','STREAMS','q','>')";
    let e = c.str(&["EVAL", script, "0"]);
    assert!(
        common::err_starts(&e, "ERR XREADGROUP command is not allowed with BLOCK"),
        "{e:?}"
    );
}

/// INFO's field of `name` in `section`.
fn info_field(c: &mut RespConn, section: &str, name: &str) -> Option<String> {
    let Value::Bulk(Some(text)) = c.str(&["INFO", section]) else {
        panic!("INFO {section}");
    };
    let text = String::from_utf8(text).expect("utf-8");
    let line = text.lines().find(|l| l.starts_with(&format!("{name}:")))?;
    Some(line[name.len() + 1..].to_string())
}

/// INFO counts the keys connections are parked on, those a deletion answers (XREADGROUP's),
/// and every error reply under its prefix, as Redis 7.2 does.
#[test]
fn info_counts_blocking_keys_and_errors() {
    let srv = Server::start(&[]);
    let (mut c, mut list, mut group) = (
        RespConn::new(&srv),
        RespConn::new(&srv),
        RespConn::new(&srv),
    );
    let keys = |c: &mut RespConn| {
        let f = |c: &mut RespConn, n| info_field(c, "clients", n).expect(n);
        (
            f(c, "total_blocking_keys"),
            f(c, "total_blocking_keys_on_nokey"),
        )
    };
    list.send(&["BLPOP", "s", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(keys(&mut c), ("1".into(), "0".into()));
    // The key becomes a stream: the list's waiter stays parked on it.
    c.str(&["XADD", "s", "666", "k", "v"]);
    c.str(&["XGROUP", "CREATE", "s", "g", "$"]);
    group.send(&[
        "XREADGROUP",
        "GROUP",
        "g",
        "c",
        "BLOCK",
        "0",
        "STREAMS",
        "s",
        ">",
    ]);
    wait_blocked(&mut c, 2);
    assert_eq!(keys(&mut c), ("1".into(), "1".into()));
    c.str(&["CONFIG", "RESETSTAT"]);
    c.str(&["DEL", "s"]);
    assert!(common::err_starts(&group.read(), "NOGROUP"));
    assert_eq!(keys(&mut c), ("1".into(), "0".into()));
    drop(list);
    wait_blocked(&mut c, 0);
    assert_eq!(keys(&mut c), ("0".into(), "0".into()));
    assert_eq!(
        info_field(&mut c, "errorstats", "errorstat_NOGROUP").as_deref(),
        Some("count=1")
    );
    c.str(&["NOSUCHCOMMAND"]);
    c.str(&["GET"]);
    c.str(&["XACK", "s"]);
    assert_eq!(
        info_field(&mut c, "errorstats", "errorstat_ERR").as_deref(),
        Some("count=3")
    );
    assert_eq!(
        info_field(&mut c, "stats", "total_error_replies").as_deref(),
        Some("4")
    );
    c.str(&["CONFIG", "RESETSTAT"]);
    assert_eq!(info_field(&mut c, "errorstats", "errorstat_ERR"), None);
}

/// Idle times grow with the clock, and XAUTOCLAIM with a minimum idle time takes over what a
/// dead consumer left only once it has been idle that long.
#[test]
fn a_dead_consumers_entries_are_claimed_once_idle() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["XGROUP", "CREATE", "jobs", "workers", "0", "MKSTREAM"]);
    for i in 1..=3 {
        c.str(&["XADD", "jobs", &format!("{i}-0"), "n", &i.to_string()]);
    }
    let got = flat(c.str(&[
        "XREADGROUP",
        "GROUP",
        "workers",
        "dead",
        "STREAMS",
        "jobs",
        ">",
    ]));
    assert_eq!(got.len(), 1 + 3 * 3);
    let early = c.str(&[
        "XAUTOCLAIM",
        "jobs",
        "workers",
        "live",
        "200",
        "0",
        "JUSTID",
    ]);
    assert_eq!(flat(early), ["0-0"], "nothing idle 200 ms yet");
    std::thread::sleep(Duration::from_millis(250));
    let rows = c.str(&["XPENDING", "jobs", "workers", "IDLE", "200", "-", "+", "10"]);
    let Value::Array(Some(rows)) = rows else {
        panic!("{rows:?}")
    };
    assert_eq!(rows.len(), 3);
    for r in &rows {
        let Value::Array(Some(f)) = r else { panic!() };
        let Value::Integer(idle) = f[2] else { panic!() };
        assert!((200..60_000).contains(&idle), "idle {idle}");
    }
    let taken = c.str(&[
        "XAUTOCLAIM",
        "jobs",
        "workers",
        "live",
        "200",
        "0",
        "COUNT",
        "2",
        "JUSTID",
    ]);
    assert_eq!(flat(taken), ["3-0", "1-0", "2-0"]);
    let summary = flat(c.str(&["XPENDING", "jobs", "workers"]));
    assert_eq!(summary, ["3", "1-0", "3-0", "dead", "1", "live", "2"]);
    let consumers = c.str(&["XINFO", "CONSUMERS", "jobs", "workers"]);
    let Value::Array(Some(cs)) = consumers else {
        panic!()
    };
    assert_eq!(cs.len(), 2);
}

/// Groups, consumers, pending entries and the stream's counters are items like any other:
/// a durable server killed with SIGKILL has them all back.
#[test]
fn groups_survive_a_kill_of_a_durable_server() {
    let dir = std::env::temp_dir().join(format!("accelkv-groups-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().unwrap();
    {
        let srv = Server::start(&["--data-dir", d]);
        let mut c = RespConn::new(&srv);
        c.str(&["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"]);
        c.str(&["XADD", "s", "1-0", "a", "1"]);
        c.str(&["XADD", "s", "2-0", "b", "2"]);
        c.str(&[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "1",
            "STREAMS",
            "s",
            ">",
        ]);
        c.str(&["XDEL", "s", "2-0"]);
    } // dropped: killed with SIGKILL
    let srv = Server::start(&["--data-dir", d]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        flat(c.str(&["XPENDING", "s", "g"])),
        ["1", "1-0", "1-0", "alice", "1"]
    );
    let Value::Array(Some(groups)) = c.str(&["XINFO", "GROUPS", "s"]) else {
        panic!()
    };
    let Value::Array(Some(g)) = &groups[0] else {
        panic!()
    };
    // The deleted 2-0 lies after the group's last id: the lag cannot be known (null).
    assert_eq!(g[7], Value::Bulk(Some(b"1-0".to_vec())));
    assert_eq!(g[9], Value::Integer(1));
    assert_eq!(g[11], Value::Bulk(None));
    let info = c.str(&["XINFO", "STREAM", "s"]);
    let Value::Array(Some(info)) = info else {
        panic!()
    };
    let at = info
        .iter()
        .position(|f| *f == Value::Bulk(Some(b"entries-added".to_vec())))
        .unwrap();
    assert_eq!(info[at + 1], Value::Integer(2));
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

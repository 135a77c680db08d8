//! Redis's sorted sets over RESP: one script of sorted-set commands (and the key-level
//! commands that meet them) run on accelkv and on a real `redis-server`, every reply
//! compared; a model test (a map of member to score, random commands, every reply and the
//! whole set in order compared); a ZADD of many members is atomic to concurrent readers;
//! and BZPOPMIN parks until another connection's ZADD.

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};
use proptest::prelude::*;
use std::collections::BTreeMap;

const SCRIPT: &[&str] = &[
    "ZADD z 1 a 2 b 3 c 1.5 d -1 e",
    "ZADD z 10 a",
    "ZADD z NX 20 a 4 f",
    "ZADD z XX 30 a 5 g",
    "ZADD z XX CH 31 a 5 g",
    "ZADD z GT 1 a",
    "ZADD z LT CH 1 a",
    "ZADD z INCR 2 a",
    "ZADD z NX INCR 2 a",
    "ZADD z NX XX 1 a",
    "ZADD z GT LT 1 a",
    "ZADD z INCR 1 a 2 b",
    "ZADD z 1",
    "ZADD z nan a",
    "ZADD z abc a",
    "ZSCORE z a",
    "ZSCORE z zz",
    "ZSCORE nothing a",
    "ZMSCORE z a zz b",
    "ZINCRBY z 0.1 b",
    "ZINCRBY z 1 new",
    "ZCARD z",
    "ZCARD nothing",
    "ZRANGE z 0 -1",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZRANGE z 1 2 REV WITHSCORES",
    "ZRANGE z -2 -1",
    "ZRANGE z 5 1",
    "ZRANGE z (1 3 BYSCORE WITHSCORES",
    "ZRANGE z 3 (1 BYSCORE REV",
    "ZRANGE z -inf +inf BYSCORE LIMIT 1 2",
    "ZRANGE z -inf +inf BYSCORE LIMIT 1 -1",
    "ZRANGE z 0 -1 LIMIT 1 2",
    "ZRANGE z a b BYSCORE",
    "ZREVRANGE z 0 2 WITHSCORES",
    "ZRANGEBYSCORE z 1 2",
    "ZRANGEBYSCORE z -inf (2 WITHSCORES LIMIT 0 2",
    "ZREVRANGEBYSCORE z +inf 2",
    "ZRANK z b",
    "ZREVRANK z b",
    "ZRANK z zz",
    "ZCOUNT z 1 2",
    "ZCOUNT z (1 +inf",
    "ZADD lex 0 a 0 b 0 c 0 d 0 e",
    "ZRANGEBYLEX lex - +",
    "ZRANGEBYLEX lex [b (d",
    "ZREVRANGEBYLEX lex + (c",
    "ZRANGE lex [a [c BYLEX REV",
    "ZRANGEBYLEX lex b c",
    "ZLEXCOUNT lex (a +",
    "ZREMRANGEBYLEX lex [d +",
    "ZRANGE lex 0 -1",
    "ZPOPMIN z",
    "ZPOPMAX z 2",
    "ZPOPMIN z -1",
    "ZPOPMIN nothing",
    "ZPOPMIN nothing 2",
    "ZRANGE z 0 -1 WITHSCORES",
    "ZREM z b zz",
    "ZREMRANGEBYRANK z 0 0",
    "ZREMRANGEBYSCORE z -inf 1.5",
    "ZRANGE z 0 -1 WITHSCORES",
    "DEL z1 z2 s",
    "ZADD z1 1 a 2 b 3 c",
    "ZADD z2 10 b 20 c 30 d",
    "SADD s c d e",
    "ZUNIONSTORE u 2 z1 z2",
    "ZRANGE u 0 -1 WITHSCORES",
    "ZUNIONSTORE u 3 z1 z2 s WEIGHTS 1 2 3 AGGREGATE MAX",
    "ZRANGE u 0 -1 WITHSCORES",
    "ZINTERSTORE i 2 z1 z2 AGGREGATE MIN",
    "ZRANGE i 0 -1 WITHSCORES",
    "ZDIFFSTORE d 2 z1 z2",
    "ZRANGE d 0 -1 WITHSCORES",
    "ZUNION 2 z1 z2 WITHSCORES",
    "ZINTER 2 z1 s",
    "ZDIFF 2 z2 z1 WITHSCORES",
    "ZINTERCARD 2 z1 z2",
    "ZINTERCARD 2 z1 z2 LIMIT 1",
    "ZINTERCARD 0 z1",
    "ZRANGE z1 0 -1 BYLEX WITHSCORES",
    "ZRANGE z1 0 -1 LIMIT 1 2",
    "ZREVRANGE z1 0 -1 BYSCORE",
    "ZRANGEBYSCORE z1 0 -1 REV",
    "ZINTERCARD x z1",
    "ZINTERCARD 3 z1 z2",
    "ZUNION 0 z1",
    "ZUNIONSTORE u 0 z1",
    "ZRANGESTORE rs z1 0 1",
    "ZRANGE rs 0 -1 WITHSCORES",
    "ZRANGESTORE rs z1 (1 +inf BYSCORE",
    "ZRANGE rs 0 -1",
    "ZMPOP 2 nothing z1 MIN COUNT 2",
    "ZMPOP 1 nothing MAX",
    "ZMPOP 1 z2 MAX",
    "SET str v",
    "ZADD str 1 a",
    "ZRANGE str 0 -1",
    "ZUNIONSTORE u 2 z1 str",
    "TYPE z2",
    "OBJECT ENCODING z2",
    "RENAME z2 z3",
    "ZRANGE z3 0 -1 WITHSCORES",
    "COPY z3 z4",
    "ZADD z4 99 extra",
    "ZRANGE z4 0 -1 WITHSCORES",
    "ZCARD z3",
    "ZSCAN z4 0",
    "ZADD inf +inf a -inf b 0 c",
    "ZRANGE inf 0 -1 WITHSCORES",
    "ZINCRBY inf -inf a",
    "BZPOPMIN nothing 0.01",
    "BZPOPMIN nothing z4 1",
    "BZPOPMAX z4 1",
    "BZMPOP 0.01 1 nothing MIN",
    "EXISTS z z1 z3 z4 u i d rs inf lex str",
];

#[test]
fn sorted_sets_answer_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

/// A sorted set of thousands of members, over many leaves: the ranges read from the top
/// (ZREVRANGE, ZPOPMAX, REV with LIMIT, the last ranks) answer as Redis's do, from a
/// snapshot and inside MULTI (where the range is read forward).
#[test]
fn the_top_of_a_large_sorted_set_answers_as_redis_does() {
    let members: Vec<String> = (0..3000)
        .map(|i| format!("{} m{i:05}-{}", (i * 7919) % 1000, "x".repeat(i % 40)))
        .collect();
    let mut script: Vec<Vec<&str>> = Vec::new();
    for chunk in members.chunks(500) {
        let mut zadd = vec!["ZADD", "big"];
        for m in chunk {
            let (score, member) = m.split_once(' ').unwrap();
            zadd.extend([score, member]);
        }
        script.push(zadd);
    }
    for line in [
        "ZREVRANGE big 0 9 WITHSCORES",
        "ZRANGE big -5 -1 WITHSCORES",
        "ZRANGE big 2990 -1",
        "ZREVRANGE big 1490 1510",
        "ZRANGE big 0 4 REV",
        "ZREVRANGEBYSCORE big +inf 990 LIMIT 3 7 WITHSCORES",
        "ZREVRANGEBYSCORE big (500 -inf LIMIT 0 -1",
        "ZRANGE big (999 0 BYSCORE REV LIMIT 10 5",
        "ZRANGEBYSCORE big 50 (900 LIMIT 10 5",
        "ZPOPMAX big 3",
        "ZPOPMAX big",
        "ZPOPMIN big 2",
        "ZREVRANK big m00001-x",
        "ZCARD big",
        "MULTI",
        "ZREVRANGE big 0 4 WITHSCORES",
        "ZPOPMAX big 2",
        "ZREVRANGEBYSCORE big +inf 0 LIMIT 0 3",
        "EXEC",
        "ZREVRANGE big 0 2",
    ] {
        script.push(line.split(' ').collect());
    }
    // A script's own writes, merged into what it reads from the top.
    script.push(vec![
        "EVAL",
        "redis.call('ZADD', KEYS[1], 5000, 'zz-new') redis.call('ZPOPMAX', KEYS[1]) \
         redis.call('ZADD', KEYS[1], 4000, 'yy-new', 3000, 'xx-new') \
         redis.call('ZREM', KEYS[1], 'xx-new') \
         return redis.call('ZREVRANGE', KEYS[1], 0, 3, 'WITHSCORES')",
        "1",
        "big",
    ]);
    script.push(vec!["ZREVRANGE", "big", "0", "3"]);
    common::commands_answer_as_redis_does(&script);
}

#[derive(Clone, Debug)]
enum Cmd {
    Add(Vec<(i8, u8)>),
    Incr(i8, u8),
    Rem(Vec<u8>),
    PopMin(u8),
    PopMax(u8),
    RemByScore(i8, i8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let member = 0u8..8;
    let score = -4i8..4;
    prop_oneof![
        3 => proptest::collection::vec((score.clone(), member.clone()), 1..4).prop_map(Cmd::Add),
        1 => (score.clone(), member.clone()).prop_map(|(s, m)| Cmd::Incr(s, m)),
        1 => proptest::collection::vec(member, 1..3).prop_map(Cmd::Rem),
        1 => (0u8..3).prop_map(Cmd::PopMin),
        1 => (0u8..3).prop_map(Cmd::PopMax),
        1 => (score.clone(), score).prop_map(|(a, b)| Cmd::RemByScore(a, b)),
    ]
}

/// The model's members in sorted-set order.
fn ordered(m: &BTreeMap<String, i64>) -> Vec<(String, i64)> {
    let mut v: Vec<(String, i64)> = m.iter().map(|(k, s)| (k.clone(), *s)).collect();
    v.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    v
}

fn flat(items: &[(String, i64)]) -> Vec<String> {
    items
        .iter()
        .flat_map(|(m, s)| [m.clone(), s.to_string()])
        .collect()
}

/// Runs `c` on the model: the command's arguments and the reply's strings (or integer).
fn model_run(m: &mut BTreeMap<String, i64>, c: &Cmd) -> (Vec<String>, Result<Vec<String>, i64>) {
    let name = |x: &u8| format!("m{x}");
    match c {
        Cmd::Add(pairs) => {
            let mut args = vec!["ZADD".to_string(), "z".into()];
            let mut added = 0;
            for (s, x) in pairs {
                args.extend([s.to_string(), name(x)]);
                if m.insert(name(x), i64::from(*s)).is_none() {
                    added += 1;
                }
            }
            (args, Err(added))
        }
        Cmd::Incr(s, x) => {
            let v = m.entry(name(x)).or_insert(0);
            *v += i64::from(*s);
            let args = vec!["ZINCRBY".into(), "z".into(), s.to_string(), name(x)];
            (args, Ok(vec![v.to_string()]))
        }
        Cmd::Rem(xs) => {
            let mut args = vec!["ZREM".to_string(), "z".into()];
            let mut n = 0;
            for x in xs {
                args.push(name(x));
                n += i64::from(m.remove(&name(x)).is_some());
            }
            (args, Err(n))
        }
        Cmd::PopMin(n) | Cmd::PopMax(n) => {
            let max = matches!(c, Cmd::PopMax(_));
            let mut o = ordered(m);
            if max {
                o.reverse();
            }
            let taken: Vec<(String, i64)> = o.into_iter().take(usize::from(*n)).collect();
            for (k, _) in &taken {
                m.remove(k);
            }
            let name = if max { "ZPOPMAX" } else { "ZPOPMIN" };
            (
                vec![name.into(), "z".into(), n.to_string()],
                Ok(flat(&taken)),
            )
        }
        Cmd::RemByScore(a, b) => {
            let before = m.len();
            m.retain(|_, s| !(i64::from(*a)..=i64::from(*b)).contains(s));
            let args = vec![
                "ZREMRANGEBYSCORE".into(),
                "z".into(),
                a.to_string(),
                b.to_string(),
            ];
            (args, Err((before - m.len()) as i64))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn sorted_sets_behave_like_the_model(cmds in proptest::collection::vec(cmd(), 1..50)) {
        let srv = Server::start(&[]);
        let mut c = RespConn::new(&srv);
        let mut model = BTreeMap::new();
        for cmd in &cmds {
            let (args, want) = model_run(&mut model, cmd);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let got = c.str(&args);
            match want {
                Err(n) => prop_assert_eq!(got, Value::Integer(n), "{:?}", cmd),
                Ok(items) if args[0] == "ZINCRBY" => {
                    prop_assert_eq!(got, Value::Bulk(Some(items[0].clone().into_bytes())), "{:?}", cmd)
                }
                Ok(items) => prop_assert_eq!(strings(got), items, "{:?}", cmd),
            }
            let all = strings(c.str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));
            prop_assert_eq!(&all, &flat(&ordered(&model)), "after {:?}", cmd);
            prop_assert_eq!(c.str(&["ZCARD", "z"]), Value::Integer(model.len() as i64));
        }
    }
}

/// Two writers ZADD 20 members at a time (every member of one command the same score)
/// while a reader takes ZRANGE WITHSCORES: it always sees whole ZADDs.
#[test]
fn a_zadd_of_many_members_is_seen_whole_or_not_at_all() {
    let srv = Server::start(&[]);
    let addr = srv.resp;
    let writers: Vec<_> = (0..2)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = RespConn::connect(addr);
                for round in 0..100 {
                    let score = (w * 1000 + round).to_string();
                    let members: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
                    let mut args = vec!["ZADD", "z"];
                    for m in &members {
                        args.extend([score.as_str(), m.as_str()]);
                    }
                    c.str(&args);
                }
            })
        })
        .collect();
    let mut c = RespConn::connect(addr);
    while writers.iter().any(|w| !w.is_finished()) {
        let all = strings(c.str(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]));
        if all.is_empty() {
            continue;
        }
        assert_eq!(all.len(), 40);
        let scores: Vec<&String> = all.iter().skip(1).step_by(2).collect();
        assert!(
            scores.iter().all(|s| *s == scores[0]),
            "a torn ZADD: {all:?}"
        );
    }
    for w in writers {
        w.join().unwrap();
    }
}

#[test]
fn bzpopmin_is_woken_by_a_zadd_from_another_connection() {
    let srv = Server::start(&[]);
    let mut waiter = RespConn::new(&srv);
    let mut other = RespConn::new(&srv);
    waiter.send(&["BZPOPMIN", "jobs", "5"]);
    let t0 = std::time::Instant::now();
    loop {
        let info = strings(Value::Array(Some(vec![other.str(&["INFO", "clients"])])));
        if info[0].contains("blocked_clients:1") {
            break;
        }
        assert!(t0.elapsed().as_secs() < 10);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    other.str(&["ZADD", "jobs", "2", "b", "1", "a"]);
    let got = strings(waiter.read());
    assert_eq!(got, ["jobs", "a", "1"]);
    assert_eq!(strings(other.str(&["ZRANGE", "jobs", "0", "-1"])), ["b"]);
}

/// Redis 7.2's `ZRANK key member WITHSCORE` (the local Redis 7.0 has no such form, so
/// this is checked here): the rank and the score, a null array for a missing member.
#[test]
fn zrank_withscore_answers_the_rank_and_the_score() {
    let srv = Server::start(&[]);
    let mut c = RespConn::new(&srv);
    c.str(&["ZADD", "z", "1.5", "a", "2", "b", "3", "c"]);
    let pair =
        |r: i64, s: &str| Value::Array(Some(vec![Value::Integer(r), Value::Bulk(Some(s.into()))]));
    assert_eq!(c.str(&["ZRANK", "z", "b", "WITHSCORE"]), pair(1, "2"));
    assert_eq!(c.str(&["ZREVRANK", "z", "a", "withscore"]), pair(2, "1.5"));
    assert_eq!(c.str(&["ZRANK", "z", "x", "WITHSCORE"]), Value::Array(None));
    assert_eq!(
        c.str(&["ZRANK", "nope", "x", "WITHSCORE"]),
        Value::Array(None)
    );
    assert_eq!(c.str(&["ZRANK", "z", "a"]), Value::Integer(0));
    assert!(
        matches!(c.str(&["ZRANK", "z", "a", "WITHSCORES"]), Value::Error(e) if e.contains("syntax"))
    );
    assert!(
        matches!(c.str(&["ZRANK", "z", "a", "WITHSCORE", "x"]), Value::Error(e) if e.contains("wrong number"))
    );
}

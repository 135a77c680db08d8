//! Lists against a model: random sequences of list commands on a few keys run on the real
//! server and on a `VecDeque` per key, every reply and every list's full contents (LRANGE
//! 0 -1, LLEN) compared after each command; under the default list-max-listpack-size (each
//! list here packed in one item), or 1 or 3 elements (kept as subkeys past those).

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

#[derive(Clone, Debug)]
enum Cmd {
    Push(u8, bool, Vec<u8>),
    Pop(u8, bool, Option<u8>),
    Insert(u8, bool, u8, u8),
    Rem(u8, i8, u8),
    Trim(u8, i8, i8),
    Set(u8, i8, u8),
    Move(u8, u8, bool, bool),
    Del(u8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let key = 0u8..3;
    let elem = 0u8..4;
    prop_oneof![
        3 => (key.clone(), any::<bool>(), proptest::collection::vec(elem.clone(), 1..5))
            .prop_map(|(k, l, e)| Cmd::Push(k, l, e)),
        2 => (key.clone(), any::<bool>(), proptest::option::of(0u8..4))
            .prop_map(|(k, l, c)| Cmd::Pop(k, l, c)),
        1 => (key.clone(), any::<bool>(), elem.clone(), elem.clone())
            .prop_map(|(k, a, p, e)| Cmd::Insert(k, a, p, e)),
        1 => (key.clone(), -3i8..3, elem.clone()).prop_map(|(k, c, e)| Cmd::Rem(k, c, e)),
        1 => (key.clone(), -6i8..6, -6i8..6).prop_map(|(k, a, b)| Cmd::Trim(k, a, b)),
        1 => (key.clone(), -6i8..6, elem).prop_map(|(k, i, e)| Cmd::Set(k, i, e)),
        1 => (key.clone(), key.clone(), any::<bool>(), any::<bool>())
            .prop_map(|(a, b, l, r)| Cmd::Move(a, b, l, r)),
        1 => key.prop_map(Cmd::Del),
    ]
}

fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}

fn arr(items: impl IntoIterator<Item = String>) -> Value {
    Value::Array(Some(items.into_iter().map(|s| bulk(&s)).collect()))
}

fn side(left: bool) -> &'static str {
    if left {
        "LEFT"
    } else {
        "RIGHT"
    }
}

/// Redis's `start stop` over a list of `len`: indices `[from, to)`.
fn span(start: i64, stop: i64, len: usize) -> (usize, usize) {
    let len = len as i64;
    let start = if start < 0 {
        (start + len).max(0)
    } else {
        start
    };
    let stop = if stop < 0 {
        stop + len
    } else {
        stop.min(len - 1)
    };
    if start > stop || start >= len {
        (0, 0)
    } else {
        (start as usize, stop as usize + 1)
    }
}

struct Model(BTreeMap<u8, VecDeque<String>>);

impl Model {
    /// The reply the model gives, and the command's arguments.
    fn run(&mut self, c: &Cmd) -> (Vec<String>, Value) {
        let k = |k: &u8| format!("l{k}");
        let e = |e: &u8| format!("e{e}");
        let m = &mut self.0;
        match c {
            Cmd::Push(key, left, es) => {
                let l = m.entry(*key).or_default();
                for x in es {
                    if *left {
                        l.push_front(e(x));
                    } else {
                        l.push_back(e(x));
                    }
                }
                let mut a = vec![if *left { "LPUSH" } else { "RPUSH" }.into(), k(key)];
                a.extend(es.iter().map(e));
                (a, Value::Integer(l.len() as i64))
            }
            Cmd::Pop(key, left, count) => {
                let mut a = vec![if *left { "LPOP" } else { "RPOP" }.into(), k(key)];
                if let Some(c) = count {
                    a.push(c.to_string());
                }
                let Some(l) = m.get_mut(key) else {
                    return (
                        a,
                        if count.is_some() {
                            Value::Array(None)
                        } else {
                            Value::Bulk(None)
                        },
                    );
                };
                let n = count.map_or(1, usize::from).min(l.len());
                let taken: Vec<String> = (0..n)
                    .map(|_| if *left { l.pop_front() } else { l.pop_back() }.unwrap())
                    .collect();
                if l.is_empty() {
                    m.remove(key);
                }
                let r = match count {
                    None => bulk(&taken[0]),
                    Some(_) => arr(taken),
                };
                (a, r)
            }
            Cmd::Insert(key, after, pivot, x) => {
                let a = vec![
                    "LINSERT".into(),
                    k(key),
                    if *after { "AFTER" } else { "BEFORE" }.into(),
                    e(pivot),
                    e(x),
                ];
                let Some(l) = m.get_mut(key) else {
                    return (a, Value::Integer(0));
                };
                let r = match l.iter().position(|y| *y == e(pivot)) {
                    None => -1,
                    Some(i) => {
                        l.insert(i + usize::from(*after), e(x));
                        l.len() as i64
                    }
                };
                (a, Value::Integer(r))
            }
            Cmd::Rem(key, count, x) => {
                let a = vec!["LREM".into(), k(key), count.to_string(), e(x)];
                let Some(l) = m.get_mut(key) else {
                    return (a, Value::Integer(0));
                };
                let limit = if *count == 0 {
                    usize::MAX
                } else {
                    count.unsigned_abs() as usize
                };
                let idx: Vec<usize> = if *count < 0 {
                    (0..l.len())
                        .rev()
                        .filter(|&i| l[i] == e(x))
                        .take(limit)
                        .collect()
                } else {
                    (0..l.len()).filter(|&i| l[i] == e(x)).take(limit).collect()
                };
                let mut sorted = idx.clone();
                sorted.sort_unstable();
                for i in sorted.into_iter().rev() {
                    l.remove(i);
                }
                if l.is_empty() {
                    m.remove(key);
                }
                (a, Value::Integer(idx.len() as i64))
            }
            Cmd::Trim(key, start, stop) => {
                let a = vec!["LTRIM".into(), k(key), start.to_string(), stop.to_string()];
                if let Some(l) = m.get_mut(key) {
                    let (from, to) = span(i64::from(*start), i64::from(*stop), l.len());
                    *l = l.iter().skip(from).take(to - from).cloned().collect();
                    if l.is_empty() {
                        m.remove(key);
                    }
                }
                (a, Value::Simple("OK".into()))
            }
            Cmd::Set(key, i, x) => {
                let a = vec!["LSET".into(), k(key), i.to_string(), e(x)];
                let Some(l) = m.get_mut(key) else {
                    return (a, Value::Error("ERR no such key".into()));
                };
                let at = if *i < 0 {
                    i64::from(*i) + l.len() as i64
                } else {
                    i64::from(*i)
                };
                if at < 0 || at >= l.len() as i64 {
                    return (a, Value::Error("ERR index out of range".into()));
                }
                l[at as usize] = e(x);
                (a, Value::Simple("OK".into()))
            }
            Cmd::Move(from, to, fl, tl) => {
                let a = vec![
                    "LMOVE".into(),
                    k(from),
                    k(to),
                    side(*fl).into(),
                    side(*tl).into(),
                ];
                let Some(l) = m.get_mut(from) else {
                    return (a, Value::Bulk(None));
                };
                let x = if *fl { l.pop_front() } else { l.pop_back() }.unwrap();
                if l.is_empty() {
                    m.remove(from);
                }
                let d = m.entry(*to).or_default();
                if *tl {
                    d.push_front(x.clone());
                } else {
                    d.push_back(x.clone());
                }
                (a, bulk(&x))
            }
            Cmd::Del(key) => {
                let gone = m.remove(key).is_some();
                (vec!["DEL".into(), k(key)], Value::Integer(i64::from(gone)))
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn lists_behave_like_the_model(cmds in proptest::collection::vec(cmd(), 1..60), size in prop_oneof![Just("-2"), Just("1"), Just("3")]) {
        let srv = Server::start(&[]);
        let mut c = RespConn::new(&srv);
        c.str(&["CONFIG", "SET", "list-max-listpack-size", size]);
        let mut model = Model(BTreeMap::new());
        for cmd in &cmds {
            let (args, want) = model.run(cmd);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            prop_assert_eq!(c.str(&args), want, "{:?}", cmd);
            for key in 0u8..3 {
                let name = format!("l{key}");
                let got = strings(c.str(&["LRANGE", &name, "0", "-1"]));
                let want: Vec<String> = model.0.get(&key).map(|l| l.iter().cloned().collect()).unwrap_or_default();
                prop_assert_eq!(&got, &want, "{:?} then l{}", cmd, key);
                prop_assert_eq!(c.str(&["LLEN", &name]), Value::Integer(want.len() as i64));
            }
        }
    }
}

//! Hashes and sets against a model: random sequences of commands on a few keys run on the
//! real server and on a `BTreeMap` of `BTreeMap`s and `BTreeSet`s, every reply and every
//! collection's full contents compared (HGETALL and SMEMBERS come back in byte order).
//! Each case runs under one of three sets of encoding thresholds: Redis's defaults (every
//! collection here stays packed in one item), zero (every one kept as subkeys from its
//! first write), or three (converted in the middle of the sequence).

mod common;

use accelkv_proto::resp::Value;
use common::{strings, RespConn, Server};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
enum Cmd {
    HSet(u8, Vec<(u8, u8)>),
    HDel(u8, Vec<u8>),
    HIncrBy(u8, u8, i8),
    SAdd(u8, Vec<u8>),
    SRem(u8, Vec<u8>),
    SMove(u8, u8, u8),
    SInterStore(u8, u8, u8),
    Del(u8),
    Rename(u8, u8),
}

fn cmd() -> impl Strategy<Value = Cmd> {
    let key = 0u8..4;
    let field = 0u8..6;
    let fields = proptest::collection::vec(field.clone(), 1..4);
    prop_oneof![
        (
            key.clone(),
            proptest::collection::vec((field.clone(), 0u8..3), 1..4)
        )
            .prop_map(|(k, p)| Cmd::HSet(k, p)),
        (key.clone(), fields.clone()).prop_map(|(k, f)| Cmd::HDel(k, f)),
        (key.clone(), field.clone(), any::<i8>()).prop_map(|(k, f, d)| Cmd::HIncrBy(k, f, d)),
        (key.clone(), fields.clone()).prop_map(|(k, f)| Cmd::SAdd(k, f)),
        (key.clone(), fields).prop_map(|(k, f)| Cmd::SRem(k, f)),
        (key.clone(), key.clone(), field).prop_map(|(a, b, m)| Cmd::SMove(a, b, m)),
        (key.clone(), key.clone(), key.clone()).prop_map(|(d, a, b)| Cmd::SInterStore(d, a, b)),
        key.clone().prop_map(Cmd::Del),
        (key.clone(), key).prop_map(|(a, b)| Cmd::Rename(a, b)),
    ]
}

/// One key's value in the model.
#[derive(Clone, Debug, PartialEq)]
enum Val {
    Hash(BTreeMap<String, String>),
    Set(BTreeSet<String>),
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

struct Model(BTreeMap<u8, Val>);

impl Model {
    fn hash(&mut self, k: u8) -> Result<&mut BTreeMap<String, String>, Value> {
        match self
            .0
            .entry(k)
            .or_insert_with(|| Val::Hash(BTreeMap::new()))
        {
            Val::Hash(h) => Ok(h),
            Val::Set(_) => Err(Value::Error(WRONGTYPE.into())),
        }
    }

    fn set(&mut self, k: u8) -> Result<&mut BTreeSet<String>, Value> {
        match self.0.entry(k).or_insert_with(|| Val::Set(BTreeSet::new())) {
            Val::Set(s) => Ok(s),
            Val::Hash(_) => Err(Value::Error(WRONGTYPE.into())),
        }
    }

    /// Drops empty collections (Redis removes the key).
    fn tidy(&mut self) {
        self.0.retain(|_, v| match v {
            Val::Hash(h) => !h.is_empty(),
            Val::Set(s) => !s.is_empty(),
        });
    }

    fn members(&self, k: u8) -> Result<BTreeSet<String>, Value> {
        match self.0.get(&k) {
            None => Ok(BTreeSet::new()),
            Some(Val::Set(s)) => Ok(s.clone()),
            Some(Val::Hash(_)) => Err(Value::Error(WRONGTYPE.into())),
        }
    }

    /// The reply the model gives to `c`, applying it.
    fn apply(&mut self, c: &Cmd) -> Value {
        let r = self.run(c).unwrap_or_else(|e| e);
        self.tidy();
        r
    }

    fn run(&mut self, c: &Cmd) -> Result<Value, Value> {
        Ok(match c {
            Cmd::HSet(k, pairs) => {
                let h = self.hash(*k)?;
                let mut added = 0;
                for (f, v) in pairs {
                    added += i64::from(h.insert(f.to_string(), v.to_string()).is_none());
                }
                Value::Integer(added)
            }
            Cmd::HDel(k, fs) => {
                if !self.0.contains_key(k) {
                    return Ok(Value::Integer(0));
                }
                let h = self.hash(*k)?;
                Value::Integer(
                    fs.iter()
                        .filter(|f| h.remove(&f.to_string()).is_some())
                        .count() as i64,
                )
            }
            Cmd::HIncrBy(k, f, d) => {
                let h = self.hash(*k)?;
                let n = h
                    .get(&f.to_string())
                    .map_or(0, |v| v.parse::<i64>().unwrap())
                    + i64::from(*d);
                h.insert(f.to_string(), n.to_string());
                Value::Integer(n)
            }
            Cmd::SAdd(k, ms) => {
                let s = self.set(*k)?;
                Value::Integer(ms.iter().filter(|m| s.insert(m.to_string())).count() as i64)
            }
            Cmd::SRem(k, ms) => {
                if !self.0.contains_key(k) {
                    return Ok(Value::Integer(0));
                }
                let s = self.set(*k)?;
                Value::Integer(ms.iter().filter(|m| s.remove(&m.to_string())).count() as i64)
            }
            Cmd::SMove(a, b, m) => {
                let from = self.members(*a)?;
                self.members(*b)?;
                if !from.contains(&m.to_string()) {
                    return Ok(Value::Integer(0));
                }
                self.set(*a)?.remove(&m.to_string());
                self.set(*b)?.insert(m.to_string());
                Value::Integer(1)
            }
            Cmd::SInterStore(d, a, b) => {
                let both: BTreeSet<String> = self
                    .members(*a)?
                    .intersection(&self.members(*b)?)
                    .cloned()
                    .collect();
                let n = both.len() as i64;
                self.0.insert(*d, Val::Set(both));
                Value::Integer(n)
            }
            Cmd::Del(k) => Value::Integer(i64::from(self.0.remove(k).is_some())),
            Cmd::Rename(a, b) => match self.0.remove(a) {
                None => Value::Error("ERR no such key".into()),
                Some(v) => {
                    self.0.insert(*b, v);
                    Value::Simple("OK".into())
                }
            },
        })
    }
}

fn args(c: &Cmd, key: &dyn Fn(u8) -> String) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &str| a.push(s.to_string());
    match c {
        Cmd::HSet(k, pairs) => {
            push("HSET");
            push(&key(*k));
            for (f, v) in pairs {
                push(&f.to_string());
                push(&v.to_string());
            }
        }
        Cmd::HDel(k, fs) | Cmd::SAdd(k, fs) | Cmd::SRem(k, fs) => {
            push(match c {
                Cmd::HDel(..) => "HDEL",
                Cmd::SAdd(..) => "SADD",
                _ => "SREM",
            });
            push(&key(*k));
            fs.iter().for_each(|f| push(&f.to_string()));
        }
        Cmd::HIncrBy(k, f, d) => {
            for s in ["HINCRBY".to_string(), key(*k), f.to_string(), d.to_string()] {
                push(&s)
            }
        }
        Cmd::SMove(x, y, m) => {
            for s in ["SMOVE".to_string(), key(*x), key(*y), m.to_string()] {
                push(&s)
            }
        }
        Cmd::SInterStore(d, x, y) => {
            for s in ["SINTERSTORE".to_string(), key(*d), key(*x), key(*y)] {
                push(&s)
            }
        }
        Cmd::Del(k) => {
            push("DEL");
            push(&key(*k));
        }
        Cmd::Rename(x, y) => {
            for s in ["RENAME".to_string(), key(*x), key(*y)] {
                push(&s)
            }
        }
    }
    a
}

fn contents(c: &mut RespConn, key: &str) -> Option<Val> {
    let ty = c.str(&["TYPE", key]);
    match ty {
        Value::Simple(t) if t == "hash" => {
            let all = strings(c.str(&["HGETALL", key]));
            let h: BTreeMap<String, String> = all
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            assert_eq!(c.str(&["HLEN", key]), Value::Integer(h.len() as i64));
            Some(Val::Hash(h))
        }
        Value::Simple(t) if t == "set" => {
            let s: BTreeSet<String> = strings(c.str(&["SMEMBERS", key])).into_iter().collect();
            assert_eq!(c.str(&["SCARD", key]), Value::Integer(s.len() as i64));
            Some(Val::Set(s))
        }
        Value::Simple(t) if t == "none" => None,
        other => panic!("TYPE {key}: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn hashes_and_sets_match_a_model(cmds in proptest::collection::vec(cmd(), 1..60), case in any::<u64>(), limits in 0usize..3) {
        thread_local!(static SERVER: Server = Server::start(&[]));
        SERVER.with(|srv| {
            let mut c = RespConn::new(srv);
            let limit = |default: &'static str| ["3", "0", default][limits];
            for (name, default) in [("hash-max-listpack-entries", "512"), ("set-max-intset-entries", "512"), ("set-max-listpack-entries", "128")] {
                c.str(&["CONFIG", "SET", name, limit(default)]);
            }
            let key = |k: u8| format!("m{case}-{k}");
            let mut model = Model(BTreeMap::new());
            for cmd in &cmds {
                let a = args(cmd, &key);
                let a: Vec<&str> = a.iter().map(String::as_str).collect();
                let got = c.str(&a);
                let want = model.apply(cmd);
                assert_eq!(got, want, "{a:?}");
            }
            for k in 0..4u8 {
                assert_eq!(contents(&mut c, &key(k)), model.0.get(&k).cloned(), "key {k}");
            }
        });
    }
}

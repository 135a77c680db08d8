//! Sorted sets combined and sampled: ZUNION, ZINTER, ZDIFF and their STORE forms (with
//! WEIGHTS and AGGREGATE; a plain set counts as members of score 1, as in Redis),
//! ZINTERCARD, ZRANDMEMBER and ZSCAN.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, store_announced, Fail, Src};
use crate::resp::commands::types::encoding::{decode_score, Kind};
use crate::resp::commands::types::members;
use crate::resp::commands::types::run::{
    float_arg, int_arg, intercard_args, read, scan_opts, write,
};
use crate::resp::commands::types::zset::{entries_reply, store, Entry, Z};
use crate::resp::notify::ZSET;
use crate::resp::session::Session;
use accelkv_proto::resp;
use std::collections::BTreeMap;

/// The members of the set or sorted set at `key` with their scores (a set's are 1).
fn weighted(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
) -> Result<BTreeMap<Vec<u8>, f64>, Fail> {
    let Some((v, flags)) = src.item(sh, s, key)? else {
        return Ok(BTreeMap::new());
    };
    let m = crate::resp::commands::types::access::opened(s, key, &v, flags)?;
    let fields = match m.kind {
        Kind::Set | Kind::ZSet => src.fields(sh, s, key, &m)?,
        _ => return Err(Fail::WrongType),
    };
    Ok(fields
        .into_iter()
        .map(|(f, v)| {
            let sc = match m.kind {
                Kind::ZSet => decode_score(&v).unwrap_or(0.0),
                _ => 1.0,
            };
            (f, sc)
        })
        .collect())
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy)]
enum Agg {
    Sum,
    Min,
    Max,
}

/// A combination's keys and options.
struct Combo<'a> {
    keys: Vec<&'a [u8]>,
    weights: Vec<f64>,
    agg: Agg,
    scores: bool,
}

fn combo_args<'a>(args: &[&'a [u8]], op: Op, store: bool) -> Result<Combo<'a>, Fail> {
    let syntax = || Fail::Reply("ERR syntax error".into());
    let n = int_arg(args[0])?;
    if n <= 0 {
        let name = match op {
            Op::Union => "zunion",
            Op::Inter => "zinter",
            Op::Diff => "zdiff",
        };
        let name = if store {
            format!("{name}store")
        } else {
            name.to_string()
        };
        return Err(Fail::Reply(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        )));
    }
    let n = n as usize;
    let keys = args.get(1..1 + n).ok_or_else(syntax)?.to_vec();
    let mut c = Combo {
        weights: vec![1.0; n],
        keys,
        agg: Agg::Sum,
        scores: false,
    };
    let mut i = 1 + n;
    while let Some(a) = args.get(i) {
        match a.to_ascii_uppercase().as_slice() {
            b"WEIGHTS" if op != Op::Diff => {
                for w in 0..n {
                    let a = args.get(i + 1 + w).ok_or_else(syntax)?;
                    c.weights[w] = float_arg(a)
                        .map_err(|_| Fail::Reply("ERR weight value is not a float".into()))?;
                }
                i += n;
            }
            b"AGGREGATE" if op != Op::Diff => {
                c.agg = match args.get(i + 1).map(|a| a.to_ascii_uppercase()) {
                    Some(a) if a == b"SUM" => Agg::Sum,
                    Some(a) if a == b"MIN" => Agg::Min,
                    Some(a) if a == b"MAX" => Agg::Max,
                    _ => return Err(syntax()),
                };
                i += 1;
            }
            b"WITHSCORES" if !store => c.scores = true,
            _ => return Err(syntax()),
        }
        i += 1;
    }
    Ok(c)
}

fn aggregate(a: f64, b: f64, agg: Agg) -> f64 {
    match agg {
        // inf + -inf is NaN in IEEE arithmetic; Redis makes it 0.
        Agg::Sum => Some(a + b).filter(|s| !s.is_nan()).unwrap_or(0.0),
        Agg::Min => a.min(b),
        Agg::Max => a.max(b),
    }
}

/// The combination's entries in sorted-set order (score, then member).
fn combine(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    c: &Combo<'_>,
    op: Op,
) -> Result<Vec<Entry>, Fail> {
    let mut acc: Option<BTreeMap<Vec<u8>, f64>> = None;
    for (k, w) in c.keys.iter().zip(&c.weights) {
        let next: BTreeMap<Vec<u8>, f64> = weighted(sh, s, src, k)?
            .into_iter()
            .map(|(m, sc)| (m, Some(sc * w).filter(|v| !v.is_nan()).unwrap_or(0.0)))
            .collect();
        acc = Some(match acc {
            None => next,
            Some(mut a) => match op {
                Op::Union => {
                    for (m, sc) in next {
                        a.entry(m)
                            .and_modify(|x| *x = aggregate(*x, sc, c.agg))
                            .or_insert(sc);
                    }
                    a
                }
                Op::Inter => a
                    .into_iter()
                    .filter_map(|(m, x)| next.get(&m).map(|&y| (m, aggregate(x, y, c.agg))))
                    .collect(),
                Op::Diff => a
                    .into_iter()
                    .filter(|(m, _)| !next.contains_key(m))
                    .collect(),
            },
        });
    }
    let mut items: Vec<Entry> = acc.unwrap_or_default().into_iter().collect();
    items.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    Ok(items)
}

fn combined(x: &mut Call<'_, '_>, op: Op) {
    let c = match combo_args(&x.args[1..], op, false) {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    let scores = c.scores;
    read(
        x,
        |sh, s, src| combine(sh, s, src, &c, op),
        move |out, items, v| entries_reply(out, &items, scores, v),
    )
}

fn combined_store(x: &mut Call<'_, '_>, op: Op) {
    let dst = x.args[1];
    let c = match combo_args(&x.args[2..], op, true) {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Put);
    write(
        x,
        |sh, s, src| {
            let items = combine(sh, s, src, &c, op)?;
            let name = match op {
                Op::Union => "zunionstore",
                Op::Inter => "zinterstore",
                Op::Diff => "zdiffstore",
            };
            store_announced((sh, s, src), (ZSET, name, dst), |sh, s| {
                store(sh, s, dst, &items)
            })
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zunion(x: &mut Call<'_, '_>) {
    combined(x, Op::Union)
}

/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
pub fn zinter(x: &mut Call<'_, '_>) {
    combined(x, Op::Inter)
}

/// `ZDIFF numkeys key [key ...] [WITHSCORES]`.
pub fn zdiff(x: &mut Call<'_, '_>) {
    combined(x, Op::Diff)
}

/// `ZUNIONSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub fn zunionstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Union)
}

/// `ZINTERSTORE destination numkeys key [key ...] [WEIGHTS ...] [AGGREGATE ...]`.
pub fn zinterstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Inter)
}

/// `ZDIFFSTORE destination numkeys key [key ...]`.
pub fn zdiffstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Diff)
}

/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub fn zintercard(x: &mut Call<'_, '_>) {
    // As Redis 7.2's ZINTERCARD (SINTERCARD words its errors otherwise).
    match int_arg(x.args[1]) {
        Err(e) => return fail(x.out, &e),
        Ok(n) if n < 1 => {
            return resp::error(
                x.out,
                "ERR at least 1 input key is needed for 'zintercard' command",
            )
        }
        Ok(n) if n as u64 > x.args.len() as u64 - 2 => {
            return resp::error(x.out, "ERR syntax error")
        }
        Ok(_) => {}
    }
    let (keys, limit) = match intercard_args(&x.args[1..]) {
        Ok(v) => v,
        Err(e) => return fail(x.out, &e),
    };
    let c = Combo {
        weights: vec![1.0; keys.len()],
        keys,
        agg: Agg::Sum,
        scores: false,
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| combine(sh, s, src, &c, Op::Inter),
        move |out, items, _| {
            let n = if limit == 0 {
                items.len()
            } else {
                items.len().min(limit)
            };
            resp::integer(out, n as i64)
        },
    )
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`.
pub fn zrandmember(x: &mut Call<'_, '_>) {
    members::random(x, Z)
}

/// `ZSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn zscan(x: &mut Call<'_, '_>) {
    match scan_opts(&x.args[3..], false) {
        Ok(o) => members::scan(x, Z, o),
        Err(e) => fail(x.out, &e),
    }
}

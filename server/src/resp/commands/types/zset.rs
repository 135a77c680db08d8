//! Redis's sorted sets over the collection encoding (`encoding.rs`): each member has two
//! subkeys written together, the member's (`f` part, holding its score as 8 sortable bytes:
//! ZSCORE is one point read) and its score index entry (`s` part: score then member, no
//! value), so the index's key order is the sorted set's order and ranges by score or rank
//! are one scan. This file: the primitives every sorted-set command shares and the point
//! commands (ZADD, ZINCRBY, ZREM, ZSCORE, ZMSCORE, ZCARD, ZRANK, ZREVRANK), the pops
//! (ZPOPMIN, ZPOPMAX, ZMPOP, and the blocking BZPOPMIN, BZPOPMAX, BZMPOP). Ranges are in
//! `zset_range.rs`, the combinations (ZUNION, ZINTER, ZDIFF…) in `zset_ops.rs`.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, put, remove, set_meta, Fail, Src};
use crate::resp::commands::types::blocking::{mpop, pop_any};
use crate::resp::commands::types::encoding::{
    decode_score, encode_score, field_key, score_key, scores_range, Kind, Meta,
};
use crate::resp::commands::types::members;
use crate::resp::commands::types::packed::create;
use crate::resp::commands::types::run::{check, first_popped, float_arg, read, write_key};
use crate::resp::notify::{changed, event, ZSET};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

pub(crate) const Z: Kind = Kind::ZSet;

/// A member and its score.
pub(crate) type Entry = (Vec<u8>, f64);

/// A score as Redis 7.0 writes it (`%.17g`; `inf`, `-inf`).
pub(crate) fn fmt_score(d: f64) -> String {
    crate::resp::commands::types::run::fmt_g(d, 17)
}

/// Appends a score: a bulk string in RESP2, a double in RESP3.
pub(crate) fn score_reply(out: &mut Vec<u8>, d: f64, v: Version) {
    double_reply(out, &fmt_score(d), v)
}

/// Appends a number already written as text: a bulk string in RESP2, a double in RESP3
/// (scores, and GEOPOS's coordinates).
pub(crate) fn double_reply(out: &mut Vec<u8>, t: &str, v: Version) {
    match v {
        Version::Resp2 => resp::bulk(out, Some(t.as_bytes())),
        Version::Resp3 => {
            out.push(b',');
            out.extend_from_slice(t.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Appends entries: member, score (flat in RESP2; pairs in RESP3) when `scores`.
pub(crate) fn entries_reply(out: &mut Vec<u8>, items: &[Entry], scores: bool, v: Version) {
    let nested = scores && v == Version::Resp3;
    resp::array(
        out,
        if scores && !nested {
            items.len() * 2
        } else {
            items.len()
        },
    );
    for (m, sc) in items {
        if nested {
            resp::array(out, 2);
        }
        resp::bulk(out, Some(m));
        if scores {
            score_reply(out, *sc, v);
        }
    }
}

/// A score argument, Redis's error when it is not one (NaN included).
pub(crate) fn score_arg(a: &[u8]) -> Result<f64, Fail> {
    float_arg(a)
}

/// The score of `member` in the sorted set `m` at `key`.
pub(crate) fn score_of(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    member: &[u8],
) -> Result<Option<f64>, Fail> {
    let v = src.get(sh, s, &field_key(&m.prefix(key), member))?;
    Ok(v.and_then(|v| decode_score(&v)))
}

/// Sets `member`'s score (inside the transaction), given its old score: both subkeys.
pub(crate) fn set_score(
    sh: &Shared,
    s: &mut Session,
    p: &[u8],
    member: &[u8],
    (old, new): (Option<f64>, f64),
) -> Result<(), Fail> {
    if let Some(o) = old {
        if encode_score(o) == encode_score(new) {
            return Ok(());
        }
        remove(sh, s, score_key(p, o, member))?;
    }
    put(sh, s, field_key(p, member), &encode_score(new))?;
    put(sh, s, score_key(p, new, member), b"")
}

/// Removes `member` (with score `score`) from the sorted set with prefix `p`.
pub(crate) fn remove_member(
    sh: &Shared,
    s: &mut Session,
    p: &[u8],
    (member, score): (&[u8], f64),
) -> Result<(), Fail> {
    remove(sh, s, field_key(p, member))?;
    remove(sh, s, score_key(p, score, member))
}

/// The entries at indices `[from, to)` of the score index of `m` at `key`, in order.
pub(crate) fn by_rank(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    from: u64,
    to: u64,
) -> Result<Vec<Entry>, Fail> {
    // Nearer the top than the bottom: read from the top down.
    if to > from && m.len - to < from {
        let mut top = ranks(sh, s, src, (key, m), (m.len - to, m.len - from), true)?;
        top.reverse();
        return Ok(top);
    }
    ranks(sh, s, src, (key, m), (from, to), false)
}

/// The entries of reverse ranks `[from, to)` (0: the highest score), highest first: the
/// score index read from its end, so the top of a large set costs what its bottom does.
pub(crate) fn by_rank_rev(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    from: u64,
    to: u64,
) -> Result<Vec<Entry>, Fail> {
    ranks(sh, s, src, (key, m), (from, to), true)
}

/// The entries `[from, to)` of the score index counted from its start, or from its end
/// (`rev`, highest first).
fn ranks(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    (from, to): (u64, u64),
    rev: bool,
) -> Result<Vec<Entry>, Fail> {
    let mut all = Vec::new();
    if from >= to {
        return Ok(all);
    }
    let (lo, hi) = scores_range(&m.prefix(key));
    let mut i = 0u64;
    let take = |k: &[u8], _: &[u8]| {
        if i >= from {
            all.extend(index_entry(&k[lo.len()..]));
        }
        i += 1;
    };
    if rev {
        src.scan_rev(sh, s, (&lo, &hi), to as usize, take)?;
    } else {
        src.scan(sh, s, (&lo, &hi), to as usize, take)?;
    }
    Ok(all)
}

/// The member and score an index subkey's rest (after the `s` part) names.
pub(crate) fn index_entry(rest: &[u8]) -> Option<Entry> {
    let score = decode_score(rest.get(..8)?)?;
    Some((rest[8..].to_vec(), score))
}

/// Replaces whatever `key` holds with a new sorted set of `items` (none: removes the key).
pub(crate) fn store(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    items: &[Entry],
) -> Result<u64, Fail> {
    let mut m = create(&mut s.packs, key, Z);
    let p = m.prefix(key);
    for (member, score) in items {
        crate::resp::commands::types::access::check_field(sh, key, member)?;
        set_score(sh, s, &p, member, (None, *score))?;
    }
    m.len = items.len() as u64;
    set_meta(sh, s, key, &m)?;
    if m.len > 0 {
        s.block.wake.push(key);
    }
    Ok(m.len)
}

/// ZADD's options.
#[derive(Default, Clone, Copy)]
struct AddOpts {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

fn add_opts(args: &[&[u8]]) -> Result<(AddOpts, usize), Fail> {
    let mut o = AddOpts::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.to_ascii_uppercase().as_slice() {
            b"NX" => o.nx = true,
            b"XX" => o.xx = true,
            b"GT" => o.gt = true,
            b"LT" => o.lt = true,
            b"CH" => o.ch = true,
            b"INCR" => o.incr = true,
            _ => break,
        }
        i += 1;
    }
    let pairs = args.len() - i;
    if pairs == 0 || pairs % 2 == 1 {
        return Err(Fail::Reply("ERR syntax error".into()));
    }
    if o.nx && o.xx {
        return Err(Fail::Reply(
            "ERR XX and NX options at the same time are not compatible".into(),
        ));
    }
    if (o.gt && o.lt) || (o.nx && (o.gt || o.lt)) {
        return Err(Fail::Reply(
            "ERR GT, LT, and/or NX options at the same time are not compatible".into(),
        ));
    }
    if o.incr && pairs > 2 {
        return Err(Fail::Reply(
            "ERR INCR option supports a single increment-element pair".into(),
        ));
    }
    Ok((o, i))
}

/// What ZADD did: members added, changed, and (INCR) the new score if it was set.
struct Added {
    added: i64,
    changed: i64,
    score: Option<f64>,
}

fn zadd_in(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    pairs: &[(f64, &[u8])],
    o: AddOpts,
) -> Result<Added, Fail> {
    let mut m = src
        .meta(sh, s, key, Z)?
        .unwrap_or_else(|| create(&mut s.packs, key, Z));
    let p = m.prefix(key);
    let mut r = Added {
        added: 0,
        changed: 0,
        score: None,
    };
    for &(score, member) in pairs {
        let old = score_of(sh, s, src, (key, &m), member)?;
        let new = match (o.incr, old) {
            (true, Some(o)) => o + score,
            _ => score,
        };
        if new.is_nan() {
            return Err(Fail::Reply(
                "ERR resulting score is not a number (NaN)".into(),
            ));
        }
        let skip = match old {
            None => o.xx,
            Some(old) => o.nx || (o.gt && new <= old) || (o.lt && new >= old),
        };
        if skip {
            continue;
        }
        set_score(sh, s, &p, member, (old, new))?;
        r.score = Some(new);
        match old {
            None => r.added += 1,
            Some(old) if encode_score(old) != encode_score(new) => r.changed += 1,
            _ => {}
        }
    }
    if r.added > 0 {
        m.len += r.added as u64;
        set_meta(sh, s, key, &m)?;
        s.block.wake.push(key);
    }
    if r.added + r.changed > 0 {
        event(s, ZSET, if o.incr { "zincr" } else { "zadd" }, key);
    }
    Ok(r)
}

/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]`.
pub fn zadd(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let (o, at) = match add_opts(&x.args[2..]) {
        Ok(v) => v,
        Err(e) => return fail(x.out, &e),
    };
    let rest = &x.args[2 + at..];
    let mut pairs = Vec::with_capacity(rest.len() / 2);
    for c in rest.chunks(2) {
        match score_arg(c[0]) {
            Ok(sc) => pairs.push((sc, c[1])),
            Err(e) => return fail(x.out, &e),
        }
    }
    let members: Vec<&[u8]> = pairs.iter().map(|p| p.1).collect();
    if let Err(e) = check(x.sh, key, &members, &[]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| zadd_in(sh, s, src, key, &pairs, o),
        move |out, r, v| match (o.incr, r.score) {
            (true, Some(sc)) => score_reply(out, sc, v),
            (true, None) => resp::bulk_in(out, None, v),
            (false, _) => resp::integer(out, r.added + if o.ch { r.changed } else { 0 }),
        },
    )
}

/// `ZINCRBY key increment member`: the new score.
pub fn zincrby(x: &mut Call<'_, '_>) {
    let (key, member) = (x.args[1], x.args[3]);
    let by = match score_arg(x.args[2]) {
        Ok(b) => b,
        Err(e) => return fail(x.out, &e),
    };
    if let Err(e) = check(x.sh, key, &[member], &[]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    let o = AddOpts {
        incr: true,
        ..AddOpts::default()
    };
    write_key(
        x,
        key,
        |sh, s, src| zadd_in(sh, s, src, key, &[(by, member)], o),
        |out, r, v| match r.score {
            Some(sc) => score_reply(out, sc, v),
            None => resp::bulk_in(out, None, v),
        },
    )
}

/// `ZREM key member [member ...]`.
pub fn zrem(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, Z)? else {
                return Ok(0);
            };
            let p = m.prefix(key);
            let mut gone = 0;
            for member in members {
                if let Some(sc) = score_of(sh, s, src, (key, &m), member)? {
                    remove_member(sh, s, &p, (member, sc))?;
                    m.len -= 1;
                    gone += 1;
                }
            }
            if gone > 0 {
                set_meta(sh, s, key, &m)?;
                changed(s, ZSET, "zrem", key, m.len == 0);
            }
            Ok(gone)
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// The scores of `members` in the sorted set at `key` (`None` each: absent; the key
/// absent: all `None`).
pub(crate) fn scores(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    members: &[&[u8]],
) -> Result<Vec<Option<f64>>, Fail> {
    let Some(m) = src.meta(sh, s, key, Z)? else {
        return Ok(vec![None; members.len()]);
    };
    members
        .iter()
        .map(|mb| score_of(sh, s, src, (key, &m), mb))
        .collect()
}

/// `ZSCORE key member`.
pub fn zscore(x: &mut Call<'_, '_>) {
    let (key, member) = (x.args[1], x.args[2]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| scores(sh, s, src, key, &[member]),
        |out, sc, v| match sc[0] {
            Some(d) => score_reply(out, d, v),
            None => resp::bulk_in(out, None, v),
        },
    )
}

/// `ZMSCORE key member [member ...]`.
pub fn zmscore(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| scores(sh, s, src, key, members),
        |out, scs, v| {
            resp::array(out, scs.len());
            for sc in scs {
                match sc {
                    Some(d) => score_reply(out, d, v),
                    None => resp::bulk_in(out, None, v),
                }
            }
        },
    )
}

/// `ZCARD key`.
pub fn zcard(x: &mut Call<'_, '_>) {
    members::len(x, Z)
}

fn rank(x: &mut Call<'_, '_>, rev: bool) {
    let (key, member) = (x.args[1], x.args[2]);
    // Redis 7.2's WITHSCORE: the rank and the score, a null array when absent.
    let with_score = match x.args.get(3) {
        None => false,
        Some(a) if x.args.len() == 4 && a.eq_ignore_ascii_case(b"WITHSCORE") => true,
        Some(_) if x.args.len() > 4 => return crate::resp::reply::wrong_args(x.out, x.args[0]),
        Some(_) => return resp::error(x.out, "ERR syntax error"),
    };
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, Z)? else {
                return Ok(None);
            };
            let Some(sc) = score_of(sh, s, src, (key, &m), member)? else {
                return Ok(None);
            };
            let (lo, _) = scores_range(&m.prefix(key));
            let mut below = 0u64;
            src.scan(
                sh,
                s,
                (&lo, &score_key(&m.prefix(key), sc, member)),
                usize::MAX,
                |_, _| below += 1,
            )?;
            Ok(Some((if rev { m.len - 1 - below } else { below }, sc)))
        },
        move |out, r, v| match (r, with_score) {
            (Some((r, _)), false) => resp::integer(out, r as i64),
            (Some((r, sc)), true) => {
                resp::array(out, 2);
                resp::integer(out, r as i64);
                score_reply(out, sc, v);
            }
            (None, false) => resp::bulk_in(out, None, v),
            (None, true) => resp::null_array(out, v),
        },
    )
}

/// `ZRANK key member`.
pub fn zrank(x: &mut Call<'_, '_>) {
    rank(x, false)
}

/// `ZREVRANK key member`.
pub fn zrevrank(x: &mut Call<'_, '_>) {
    rank(x, true)
}

/// Removes and answers up to `n` of the lowest (or highest) entries of the sorted set at
/// `key` (inside the transaction); `None` when absent.
pub(crate) fn pop(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    n: u64,
    max: bool,
) -> Result<Option<Vec<Entry>>, Fail> {
    let Some(mut m) = src.meta(sh, s, key, Z)? else {
        return Ok(None);
    };
    let n = n.min(m.len);
    // ZPOPMAX reads the top from the end, highest first.
    let items = if max {
        by_rank_rev(sh, s, src, (key, &m), 0, n)?
    } else {
        by_rank(sh, s, src, (key, &m), 0, n)?
    };
    let p = m.prefix(key);
    for (member, sc) in &items {
        remove_member(sh, s, &p, (member, *sc))?;
    }
    m.len -= items.len() as u64;
    set_meta(sh, s, key, &m)?;
    if !items.is_empty() {
        changed(
            s,
            ZSET,
            if max { "zpopmax" } else { "zpopmin" },
            key,
            m.len == 0,
        );
    }
    Ok(Some(items))
}

fn pops(x: &mut Call<'_, '_>, max: bool) {
    let key = x.args[1];
    if x.args.len() > 3 {
        return resp::error(x.out, "ERR syntax error");
    }
    let count = match crate::resp::commands::types::run::count_arg(x.args.get(2)) {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| Ok(pop(sh, s, src, key, count.unwrap_or(1), max)?.unwrap_or_default()),
        move |out, items, v| match (count, items.first()) {
            // Without a count: one flat pair (an empty array when nothing was there).
            (None, Some((m, sc))) => {
                resp::array(out, 2);
                resp::bulk(out, Some(m));
                score_reply(out, *sc, v);
            }
            _ => entries_reply(out, &items, true, v),
        },
    )
}

/// `ZPOPMIN key [count]`.
pub fn zpopmin(x: &mut Call<'_, '_>) {
    pops(x, false)
}

/// `ZPOPMAX key [count]`.
pub fn zpopmax(x: &mut Call<'_, '_>) {
    pops(x, true)
}

/// A key and the entries that left its sorted set.
type Popped = (Vec<u8>, Vec<Entry>);

/// Pops up to `n` from the first of `keys` that holds a sorted set (inside the transaction).
fn pop_first(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    keys: &[&[u8]],
    n: u64,
    max: bool,
) -> Result<Option<Popped>, Fail> {
    first_popped(keys, |k| pop(sh, s, src, k, n, max))
}

fn bpop(x: &mut Call<'_, '_>, max: bool) {
    pop_any(
        x,
        Z,
        |sh, s, src, keys, n| pop_first(sh, s, src, keys, n, max),
        |out, (k, items), v| {
            resp::array(out, 3);
            resp::bulk(out, Some(crate::resp::db::shown(&k)));
            resp::bulk(out, Some(&items[0].0));
            score_reply(out, items[0].1, v);
        },
    )
}

/// `BZPOPMIN key [key ...] timeout`.
pub fn bzpopmin(x: &mut Call<'_, '_>) {
    bpop(x, false)
}

/// `BZPOPMAX key [key ...] timeout`.
pub fn bzpopmax(x: &mut Call<'_, '_>) {
    bpop(x, true)
}

/// `MIN` or `MAX` (whether MAX).
fn min_max(a: &[u8]) -> Result<bool, Fail> {
    match a.to_ascii_uppercase().as_slice() {
        b"MIN" => Ok(false),
        b"MAX" => Ok(true),
        _ => Err(Fail::Reply("ERR syntax error".into())),
    }
}

fn mpop_reply(out: &mut Vec<u8>, r: Option<Popped>, v: Version) {
    match r {
        None => resp::null_array(out, v),
        Some((k, items)) => {
            resp::array(out, 2);
            resp::bulk(out, Some(crate::resp::db::shown(&k)));
            resp::array(out, items.len());
            for (m, sc) in &items {
                resp::array(out, 2);
                resp::bulk(out, Some(m));
                score_reply(out, *sc, v);
            }
        }
    }
}

/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]`.
pub fn zmpop(x: &mut Call<'_, '_>) {
    mpop(x, (false, Z), min_max, pop_first, mpop_reply)
}

/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]`.
pub fn bzmpop(x: &mut Call<'_, '_>) {
    mpop(x, (true, Z), min_max, pop_first, mpop_reply)
}

#[cfg(test)]
mod tests {
    use super::fmt_score;

    #[test]
    fn scores_print_as_redis_7_0_prints_them() {
        assert_eq!(fmt_score(3.0), "3");
        assert_eq!(fmt_score(-2.5), "-2.5");
        assert_eq!(fmt_score(1.1), "1.1000000000000001");
        assert_eq!(fmt_score(0.1), "0.10000000000000001");
        assert_eq!(fmt_score(1e20), "1e+20");
        assert_eq!(fmt_score(1.5e-7), "1.4999999999999999e-07");
        assert_eq!(fmt_score(0.0001), "0.0001");
        assert_eq!(fmt_score(123456789012345680.0), "1.2345678901234568e+17");
        assert_eq!(fmt_score(f64::INFINITY), "inf");
        assert_eq!(fmt_score(f64::NEG_INFINITY), "-inf");
        assert_eq!(fmt_score(0.0), "0");
    }
}

//! Ranges of a sorted set: ZRANGE (by rank, BYSCORE, BYLEX, REV, LIMIT, WITHSCORES) and its
//! older spellings (ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
//! ZREVRANGEBYLEX), ZRANGESTORE, ZCOUNT, ZLEXCOUNT and ZREMRANGEBYRANK/SCORE/LEX. A rank
//! range reads the score index up to its last index; a score range is one scan between
//! the encoded bounds; a lex range filters the index by member (Redis defines it for
//! members of one score, where index order is member order).

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, set_meta, store_announced, Fail, Src};
use crate::resp::commands::types::encoding::{encode_score, scores_range, Meta};
use crate::resp::commands::types::run::{int_arg, rank_span, read, write, write_key};
use crate::resp::commands::types::zset::{
    by_rank, by_rank_rev, entries_reply, index_entry, remove_member, store, Entry, Z,
};
use crate::resp::notify::{changed, ZSET};
use crate::resp::session::Session;
use accelkv_proto::resp;

/// One end of a score range.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScoreBound {
    pub value: f64,
    pub open: bool,
}

/// One end of a lex range.
#[derive(Clone, Debug)]
pub(crate) enum LexBound {
    Min,
    Max,
    At(Vec<u8>, bool),
}

/// What a range selects.
#[derive(Clone, Debug)]
pub(crate) enum By {
    Rank(i64, i64),
    Score(ScoreBound, ScoreBound),
    Lex(LexBound, LexBound),
}

/// A parsed range request.
#[derive(Clone, Debug)]
pub(crate) struct Range {
    pub by: By,
    pub rev: bool,
    /// LIMIT offset count (count < 0: all).
    pub limit: Option<(i64, i64)>,
    pub scores: bool,
}

fn score_bound(a: &[u8]) -> Result<ScoreBound, Fail> {
    let bad = || Fail::Reply("ERR min or max is not a float".into());
    let (open, t) = match a.strip_prefix(b"(") {
        Some(t) => (true, t),
        None => (false, a),
    };
    let value = crate::resp::commands::types::run::float_arg(t).map_err(|_| bad())?;
    Ok(ScoreBound { value, open })
}

fn lex_bound(a: &[u8]) -> Result<LexBound, Fail> {
    match a {
        b"-" => Ok(LexBound::Min),
        b"+" => Ok(LexBound::Max),
        [b'[', rest @ ..] => Ok(LexBound::At(rest.to_vec(), false)),
        [b'(', rest @ ..] => Ok(LexBound::At(rest.to_vec(), true)),
        _ => Err(Fail::Reply(
            "ERR min or max not valid string range item".into(),
        )),
    }
}

/// Parses `min max` (already in ascending order) for `by`, the options after them.
fn parse(kind: &[u8], (lo, hi): (&[u8], &[u8]), rev: bool, opts: &[&[u8]]) -> Result<Range, Fail> {
    let syntax = || Fail::Reply("ERR syntax error".into());
    let mut r = Range {
        by: By::Rank(0, 0),
        rev,
        limit: None,
        scores: false,
    };
    let zrange = kind == b"ZRANGE";
    let mut kind = kind.to_vec();
    let mut i = 0;
    while let Some(o) = opts.get(i) {
        match o.to_ascii_uppercase().as_slice() {
            b"WITHSCORES" => r.scores = true,
            b"REV" if zrange => r.rev = true,
            b"BYSCORE" if zrange => kind = b"BYSCORE".to_vec(),
            b"BYLEX" if zrange => kind = b"BYLEX".to_vec(),
            b"LIMIT" => {
                let (o, c) = (
                    opts.get(i + 1).ok_or_else(syntax)?,
                    opts.get(i + 2).ok_or_else(syntax)?,
                );
                r.limit = Some((int_arg(o)?, int_arg(c)?));
                i += 2;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    // ZRANGE ... REV BYSCORE takes max then min.
    let (lo, hi) = if r.rev && kind != b"ZRANGE" && kind != b"RANK" {
        (hi, lo)
    } else {
        (lo, hi)
    };
    // The options are checked before the bounds are read, as Redis does.
    match (kind.as_slice(), r.limit.is_some(), r.scores) {
        (b"BYSCORE" | b"BYLEX", _, _) | (_, false, _) => {}
        _ => return Err(Fail::Reply(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
                .into(),
        )),
    }
    if kind == b"BYLEX" && r.scores {
        return Err(Fail::Reply(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX".into(),
        ));
    }
    r.by = match kind.as_slice() {
        b"BYSCORE" => By::Score(score_bound(lo)?, score_bound(hi)?),
        b"BYLEX" => By::Lex(lex_bound(lo)?, lex_bound(hi)?),
        _ => By::Rank(int_arg(lo)?, int_arg(hi)?),
    };
    Ok(r)
}

/// The index subkey range `[lo, hi)` of scores between two bounds.
pub(crate) fn score_keys(p: &[u8], lo: ScoreBound, hi: ScoreBound) -> (Vec<u8>, Vec<u8>) {
    let (base, _) = scores_range(p);
    let at = |b: ScoreBound, past: bool| {
        let e = u64::from_be_bytes(encode_score(b.value));
        let mut k = base.clone();
        k.extend_from_slice(&(e + u64::from(past)).to_be_bytes());
        k
    };
    (at(lo, lo.open), at(hi, !hi.open))
}

fn lex_ok(m: &[u8], lo: &LexBound, hi: &LexBound) -> bool {
    let above = match lo {
        LexBound::Min => true,
        LexBound::Max => false,
        LexBound::At(v, open) => m > v.as_slice() || (!open && m == v.as_slice()),
    };
    let below = match hi {
        LexBound::Max => true,
        LexBound::Min => false,
        LexBound::At(v, open) => m < v.as_slice() || (!open && m == v.as_slice()),
    };
    above && below
}

/// The entries `r` selects from the sorted set `m` at `key`, in the order it answers them.
pub(crate) fn select(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    r: &Range,
) -> Result<Vec<Entry>, Fail> {
    let p = m.prefix(key);
    let mut items = match &r.by {
        By::Rank(a, b) => {
            let (from, to) = rank_span(*a, *b, m.len);
            if r.rev {
                // Reverse ranks, read from the end: already highest first.
                return by_rank_rev(sh, s, src, (key, m), from, to);
            }
            by_rank(sh, s, src, (key, m), from, to)?
        }
        By::Score(lo, hi) => {
            let (klo, khi) = score_keys(&p, *lo, *hi);
            let base = scores_range(&p).0.len();
            let mut v = Vec::new();
            // With a LIMIT only its end is read, from the end for REV.
            let want = match r.limit {
                Some((o, c)) if o >= 0 && c >= 0 => (o as usize).saturating_add(c as usize),
                _ => usize::MAX,
            };
            let mut take = |k: &[u8], _: &[u8]| v.extend(index_entry(&k[base..]));
            if klo < khi && r.rev {
                src.scan_rev(sh, s, (&klo, &khi), want, &mut take)?;
            } else if klo < khi {
                src.scan(sh, s, (&klo, &khi), want, &mut take)?;
            }
            if r.rev {
                v.reverse(); // back to ascending: reversed once more below
            }
            v
        }
        By::Lex(lo, hi) => {
            let (klo, khi) = scores_range(&p);
            let mut v = Vec::new();
            src.scan(sh, s, (&klo, &khi), usize::MAX, |k, _| {
                v.extend(index_entry(&k[klo.len()..]).filter(|e| lex_ok(&e.0, lo, hi)))
            })?;
            v
        }
    };
    if r.rev {
        items.reverse();
    }
    if let Some((offset, count)) = r.limit {
        if offset < 0 {
            return Ok(Vec::new());
        }
        let take = if count < 0 {
            usize::MAX
        } else {
            count as usize
        };
        items = items.into_iter().skip(offset as usize).take(take).collect();
    }
    Ok(items)
}

fn range_cmd(x: &mut Call<'_, '_>, kind: &'static [u8], rev: bool) {
    let key = x.args[1];
    let (a, b) = (x.args[2], x.args[3]);
    let r = match parse(kind, (a, b), rev, &x.args[4..]) {
        Ok(r) => r,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    let scores = r.scores;
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, Z)? {
            None => Ok(Vec::new()),
            Some(m) => select(sh, s, src, (key, &m), &r),
        },
        move |out, items, v| entries_reply(out, &items, scores, v),
    )
}

/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
pub fn zrange(x: &mut Call<'_, '_>) {
    range_cmd(x, b"ZRANGE", false)
}

/// `ZREVRANGE key start stop [WITHSCORES]`.
pub fn zrevrange(x: &mut Call<'_, '_>) {
    range_cmd(x, b"RANK", true)
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub fn zrangebyscore(x: &mut Call<'_, '_>) {
    range_cmd(x, b"BYSCORE", false)
}

/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
pub fn zrevrangebyscore(x: &mut Call<'_, '_>) {
    range_cmd(x, b"BYSCORE", true)
}

/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
pub fn zrangebylex(x: &mut Call<'_, '_>) {
    range_cmd(x, b"BYLEX", false)
}

/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
pub fn zrevrangebylex(x: &mut Call<'_, '_>) {
    range_cmd(x, b"BYLEX", true)
}

/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]`.
pub fn zrangestore(x: &mut Call<'_, '_>) {
    let (dst, key) = (x.args[1], x.args[2]);
    let r = match parse(b"ZRANGE", (x.args[3], x.args[4]), false, &x.args[5..]) {
        Ok(r) if !r.scores => r,
        Ok(_) => return resp::error(x.out, "ERR syntax error"),
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Put);
    write(
        x,
        |sh, s, src| {
            let items = match src.meta(sh, s, key, Z)? {
                None => Vec::new(),
                Some(m) => select(sh, s, src, (key, &m), &r)?,
            };
            store_announced((sh, s, src), (ZSET, "zrangestore", dst), |sh, s| {
                store(sh, s, dst, &items)
            })
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

fn count_cmd(x: &mut Call<'_, '_>, kind: &'static [u8]) {
    let key = x.args[1];
    let r = match parse(kind, (x.args[2], x.args[3]), false, &[]) {
        Ok(r) => r,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, Z)? {
            None => Ok(0),
            Some(m) => Ok(select(sh, s, src, (key, &m), &r)?.len()),
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `ZCOUNT key min max`.
pub fn zcount(x: &mut Call<'_, '_>) {
    count_cmd(x, b"BYSCORE")
}

/// `ZLEXCOUNT key min max`.
pub fn zlexcount(x: &mut Call<'_, '_>) {
    count_cmd(x, b"BYLEX")
}

fn remrange(x: &mut Call<'_, '_>, kind: &'static [u8]) {
    let key = x.args[1];
    let r = match parse(kind, (x.args[2], x.args[3]), false, &[]) {
        Ok(r) => r,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, Z)? else {
                return Ok(0);
            };
            let items = select(sh, s, src, (key, &m), &r)?;
            let p = m.prefix(key);
            for (member, sc) in &items {
                remove_member(sh, s, &p, (member, *sc))?;
            }
            m.len -= items.len() as u64;
            set_meta(sh, s, key, &m)?;
            if !items.is_empty() {
                let name = match kind {
                    b"RANK" => "zremrangebyrank",
                    b"SCORE" => "zremrangebyscore",
                    _ => "zremrangebylex",
                };
                changed(s, ZSET, name, key, m.len == 0);
            }
            Ok(items.len())
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `ZREMRANGEBYRANK key start stop`.
pub fn zremrangebyrank(x: &mut Call<'_, '_>) {
    remrange(x, b"RANK")
}

/// `ZREMRANGEBYSCORE key min max`.
pub fn zremrangebyscore(x: &mut Call<'_, '_>) {
    remrange(x, b"BYSCORE")
}

/// `ZREMRANGEBYLEX key min max`.
pub fn zremrangebylex(x: &mut Call<'_, '_>) {
    remrange(x, b"BYLEX")
}

//! How a collection command runs: a write inside a transaction (`tx::atomically`: its own,
//! or the EXEC running), a read at one snapshot (or through the transaction inside MULTI);
//! the result written by the command's reply function, a failure as its RESP error.
//! Also the argument checks the families share.

use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::tx::atomically;
use crate::resp::commands::types::access::{check_field, close_packs, fail, Fail, Src};
use crate::resp::notify;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// Runs a writing command: `f` inside the transaction, then `ok` with its result.
pub(crate) fn write<R>(
    x: &mut Call<'_, '_>,
    f: impl FnOnce(&Shared, &mut Session, &Src<'_>) -> Result<R, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
) {
    x.s.packs.clear();
    let events = notify::mark(x.s);
    atomically(x.sh, x.s, x.out, |sh, s, out| {
        let proto = s.proto;
        match f(sh, s, &Src::Tx).and_then(|r| close_packs(sh, s).map(|()| r)) {
            Ok(r) => ok(out, r, proto),
            Err(e) => {
                // What a failed command opened is not written back, nor announced.
                s.packs.clear();
                notify::drop_since(s, events);
                fail(out, &e)
            }
        }
    })
}

/// Runs a writing command on the one collection at `key`, which is all `f` touches:
/// outside MULTI and scripts as one station operation (`core/station_one.rs`: the key's
/// slot owned, the changes written as one batch), inside them as [`write`] does.
pub(crate) fn write_key<R>(
    x: &mut Call<'_, '_>,
    key: &[u8],
    f: impl FnOnce(&Shared, &mut Session, &Src<'_>) -> Result<R, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
) {
    if x.s.tx.running.is_some() {
        return write(x, f, ok);
    }
    let (sh, s) = (x.sh, &mut *x.s);
    s.packs.clear();
    let events = notify::mark(s);
    let slot = sh.writes().own_one(key);
    s.one.start(key);
    let r = f(sh, s, &Src::One).and_then(|r| close_packs(sh, s).map(|()| r));
    if r.is_err() {
        s.packs.clear(); // what a failed command opened is not written back
    }
    let done = sh.writes().one_finish(&mut s.one, r.is_ok());
    if r.is_err() || done.failed.is_some() {
        notify::drop_since(s, events);
    }
    drop(slot);
    s.unreleased = s.unreleased.max(done.version.max(done.seen));
    match (r, done.failed) {
        (_, Some(e)) => crate::resp::reply::err_store(x.out, &e),
        (Ok(r), None) => ok(x.out, r, s.proto),
        (Err(e), None) => fail(x.out, &e),
    }
}

/// Runs a reading command: `f` at a snapshot (or in the running transaction), then `ok`.
pub(crate) fn read<R>(
    x: &mut Call<'_, '_>,
    f: impl FnOnce(&Shared, &mut Session, &Src<'_>) -> Result<R, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
) {
    x.s.packs.clear();
    let src = Src::open(x.sh, x.s);
    let proto = x.s.proto;
    match f(x.sh, x.s, &src) {
        Ok(r) => ok(x.out, r, proto),
        Err(e) => fail(x.out, &e),
    }
}

/// Checks every field (or member) of a command against the store's key limit, and every
/// value against its value limit, before anything is written.
pub(crate) fn check(
    sh: &Shared,
    key: &[u8],
    fields: &[&[u8]],
    values: &[&[u8]],
) -> Result<(), Fail> {
    for f in fields {
        check_field(sh, key, f)?;
    }
    let max = sh.view().config().max_value;
    if values.iter().any(|v| v.len() > max) {
        return Err(Fail::Reply(
            "ERR string exceeds maximum allowed size".into(),
        ));
    }
    Ok(())
}

/// Appends an array of bulk strings.
pub(crate) fn bulks<T: AsRef<[u8]>>(out: &mut Vec<u8>, items: &[T]) {
    resp::array(out, items.len());
    for i in items {
        resp::bulk(out, Some(i.as_ref()));
    }
}

/// An integer argument, or Redis's error.
pub(crate) fn int_arg(a: &[u8]) -> Result<i64, Fail> {
    crate::resp::reply::parse_i64(a)
        .ok_or_else(|| Fail::Reply("ERR value is not an integer or out of range".into()))
}

/// A float argument (Redis's syntax: `inf`, `-inf`, decimal), or Redis's error.
pub(crate) fn float_arg(a: &[u8]) -> Result<f64, Fail> {
    let t = std::str::from_utf8(a).map_err(|_| not_float())?;
    let n = match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => t.parse::<f64>().map_err(|_| not_float())?,
    };
    if n.is_nan() || t.trim() != t || t.is_empty() {
        return Err(not_float());
    }
    Ok(n)
}

fn not_float() -> Fail {
    Fail::Reply("ERR value is not a valid float".into())
}

/// The `[MATCH pattern] [COUNT n]` (and NOVALUES where `novalues` is allowed) options of
/// HSCAN, SSCAN and ZSCAN.
pub(crate) struct ScanOpts<'a> {
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
    pub novalues: bool,
}

pub(crate) fn scan_opts<'a>(args: &[&'a [u8]], novalues_ok: bool) -> Result<ScanOpts<'a>, Fail> {
    let mut o = ScanOpts {
        pattern: None,
        count: 10,
        novalues: false,
    };
    let mut i = 0;
    let syntax = || Fail::Reply("ERR syntax error".into());
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"NOVALUES" if novalues_ok => {
                o.novalues = true;
                i += 1;
                continue;
            }
            b"MATCH" => o.pattern = Some(*args.get(i + 1).ok_or_else(syntax)?),
            b"COUNT" => {
                let n = int_arg(args.get(i + 1).ok_or_else(syntax)?)?;
                if n < 1 {
                    return Err(syntax());
                }
                o.count = n as usize;
            }
            _ => return Err(syntax()),
        }
        i += 2;
    }
    Ok(o)
}

/// Redis's reading of a `start stop` pair of indices over `len` items (negative from the
/// end, clamped): the indices `[from, to)` (LRANGE, LTRIM, ZRANGE by rank).
pub(crate) fn rank_span(start: i64, stop: i64, len: u64) -> (u64, u64) {
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
        return (0, 0);
    }
    (start as u64, stop as u64 + 1)
}

/// The pops from several keys (LMPOP, ZMPOP and their blocking forms): `numkeys key ...
/// WHERE [COUNT count]` read as the keys, what `side` makes of WHERE, and the count.
pub(crate) fn mpop_args<'a, T>(
    args: &[&'a [u8]],
    side: impl Fn(&[u8]) -> Result<T, Fail>,
) -> Result<(Vec<&'a [u8]>, T, u64), Fail> {
    let n = int_arg(args[0])
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| Fail::Reply("ERR numkeys should be greater than 0".into()))?
        as usize;
    let syntax = || Fail::Reply("ERR syntax error".into());
    let keys = args.get(1..1 + n).ok_or_else(syntax)?.to_vec();
    let which = side(args.get(1 + n).ok_or_else(syntax)?)?;
    let count = match &args[2 + n..] {
        [] => 1,
        [c, v] if c.eq_ignore_ascii_case(b"COUNT") => match int_arg(v) {
            Ok(c) if c > 0 => c as u64,
            _ => return Err(Fail::Reply("ERR count should be greater than 0".into())),
        },
        _ => return Err(syntax()),
    };
    Ok((keys, which, count))
}

/// SINTERCARD and ZINTERCARD: `numkeys key ... [LIMIT limit]` read as the keys and the
/// limit (0: none).
pub(crate) fn intercard_args<'a>(args: &[&'a [u8]]) -> Result<(Vec<&'a [u8]>, usize), Fail> {
    let n = match int_arg(args[0]) {
        Ok(n) if n > 0 => n as usize,
        _ => return Err(Fail::Reply("ERR numkeys should be greater than 0".into())),
    };
    if args.len() < 1 + n {
        return Err(Fail::Reply(
            "ERR Number of keys can't be greater than number of args".into(),
        ));
    }
    let limit = match &args[1 + n..] {
        [] => 0,
        [l, v] if l.eq_ignore_ascii_case(b"LIMIT") => match int_arg(v) {
            Ok(v) if v >= 0 => v as usize,
            _ => return Err(Fail::Reply("ERR LIMIT can't be negative".into())),
        },
        _ => return Err(Fail::Reply("ERR syntax error".into())),
    };
    Ok((args[1..1 + n].to_vec(), limit))
}

/// `d` as C's `%.<precision>g` writes it (`inf` and `-inf` for the infinities), as Redis
/// writes scores (17) and cjson numbers (14).
pub(crate) fn fmt_g(d: f64, precision: usize) -> String {
    let p = precision.clamp(1, 17);
    // A whole number of at most `p` digits is written as that integer, exactly: printed
    // as an integer here, without the exponent form's formatting and parsing (the common
    // score, an order of magnitude cheaper).
    if d.fract() == 0.0 && d != 0.0 && d.abs() < 10f64.powi(p as i32) {
        return (d as i64).to_string();
    }
    fmt_g_general(d, precision)
}

/// [`fmt_g`] for any value.
fn fmt_g_general(d: f64, precision: usize) -> String {
    if d.is_infinite() {
        return if d > 0.0 { "inf" } else { "-inf" }.into();
    }
    if d == 0.0 {
        return "0".into();
    }
    let p = precision.max(1);
    let e = format!("{d:.*e}", p - 1);
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |t: &str| -> String {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t.to_string()
        }
    };
    if exp >= -4 && exp < p as i32 {
        trim(&format!("{:.*}", (p as i32 - 1 - exp) as usize, d))
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim(mant), exp.unsigned_abs())
    }
}

/// A pop's optional count (`None`: absent), Redis's error when negative.
pub(crate) fn count_arg(a: Option<&&[u8]>) -> Result<Option<u64>, Fail> {
    match a.map(|a| int_arg(a)).transpose()? {
        Some(c) if c < 0 => Err(Fail::Reply(
            "ERR value is out of range, must be positive".into(),
        )),
        c => Ok(c.map(|c| c as u64)),
    }
}

/// The null that a pop from several keys answers when there is nothing (RESP2 `*-1`).
pub(crate) fn none(out: &mut Vec<u8>, v: Version) {
    resp::null_array(out, v)
}

/// The first of `keys` whose `pop` takes something (LMPOP, ZMPOP, BLPOP, BZPOPMIN…): that
/// key, and what left it.
pub(crate) fn first_popped<T>(
    keys: &[&[u8]],
    mut pop: impl FnMut(&[u8]) -> Result<Option<T>, Fail>,
) -> Result<Option<(Vec<u8>, T)>, Fail> {
    for k in keys {
        if let Some(items) = pop(k)? {
            return Ok(Some((k.to_vec(), items)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::{fmt_g, fmt_g_general};

    /// The integer shortcut writes what the general path (`%.<p>g`) writes, up to the
    /// largest whole numbers of `p` digits and past them.
    #[test]
    fn whole_scores_print_as_the_general_path_prints_them() {
        let mut values = vec![
            1.0,
            -1.0,
            7.0,
            100.0,
            123_456.0,
            1e15,
            9_007_199_254_740_993.0,
        ];
        for p in 1..=17 {
            let top = 10f64.powi(p);
            values.extend([top - 1.0, top, top + 1.0, -(top - 1.0), -top, top * 10.0]);
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(((x >> 11) as f64).trunc() / (1u64 << (x % 40)) as f64);
            values.push(-((x % 1_000_000_007) as f64));
        }
        for &d in &values {
            for p in [1, 6, 14, 17] {
                assert_eq!(fmt_g(d, p), fmt_g_general(d, p), "{d} at precision {p}");
            }
        }
        assert_eq!(fmt_g(1e17, 17), "1e+17");
        assert_eq!(fmt_g(12_345.0, 17), "12345");
        assert_eq!(fmt_g(1.5, 17), "1.5");
        assert_eq!(fmt_g(f64::INFINITY, 17), "inf");
        assert_eq!(fmt_g(-0.0, 17), "0");
    }
}

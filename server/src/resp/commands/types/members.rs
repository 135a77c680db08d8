//! What hashes, sets, sorted sets and lists answer the same way: their size, random
//! members (HRANDFIELD, SRANDMEMBER, ZRANDMEMBER) and the incremental scan (HSCAN, SSCAN,
//! ZSCAN).

use crate::core::counters::OpClass;
use crate::core::glob;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, remove, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{field_key, fields_range, Kind};
use crate::resp::commands::types::run::{int_arg, read, ScanOpts};
use crate::resp::commands::types::sample::sample;
use crate::resp::notify;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// HLEN, SCARD: the number of fields or members (0: absent).
pub fn len(x: &mut Call<'_, '_>, kind: Kind) {
    let key = x.args[1];
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| Ok(src.meta(sh, s, key, kind)?.map_or(0, |m| m.len)),
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// Removes `fields` from the collection of `kind` at `key` (inside the transaction),
/// removing the key with the last one (HDEL, SREM): how many were there.
pub(crate) fn remove_fields(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, kind): (&[u8], Kind),
    fields: &[&[u8]],
) -> Result<u64, Fail> {
    let Some(mut m) = src.meta(sh, s, key, kind)? else {
        return Ok(0);
    };
    let p = m.prefix(key);
    let mut gone = 0;
    for f in fields {
        let sk = field_key(&p, f);
        if src.get(sh, s, &sk)?.is_some() {
            remove(sh, s, sk.as_slice())?;
            gone += 1;
        }
    }
    if gone > 0 {
        m.len -= gone;
        set_meta(sh, s, key, &m)?;
        let (class, name) = match kind {
            Kind::Hash => (notify::HASH, "hdel"),
            _ => (notify::SET, "srem"),
        };
        notify::changed(s, class, name, key, m.len == 0);
    }
    Ok(gone)
}

/// Fields with their values as a client sees them: a sorted set's score as text.
fn shown(kind: Kind, mut fields: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    if kind == Kind::ZSet {
        for f in &mut fields {
            let sc = crate::resp::commands::types::encoding::decode_score(&f.1).unwrap_or(0.0);
            f.1 = crate::resp::commands::types::run::fmt_g(sc, 17).into_bytes();
        }
    }
    fields
}

/// Writes one field (with its value for a hash asked WITHVALUES).
fn member(out: &mut Vec<u8>, (f, v): &(Vec<u8>, Vec<u8>), values: bool, proto: Version) {
    if values {
        if proto == Version::Resp3 {
            resp::array(out, 2);
        }
        resp::bulk(out, Some(f));
        resp::bulk(out, Some(v));
    } else {
        resp::bulk(out, Some(f));
    }
}

/// HRANDFIELD and SRANDMEMBER: one random member (nil when absent), or with a count,
/// that many distinct ones (all when fewer), or when negative that many with repeats.
pub fn random(x: &mut Call<'_, '_>, kind: Kind) {
    let key = x.args[1];
    let count = match x.args.get(2).map(|a| int_arg(a)).transpose() {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    let values = match x.args.get(3) {
        None => false,
        Some(a) if kind == Kind::Hash && a.eq_ignore_ascii_case(b"WITHVALUES") => true,
        Some(a) if kind == Kind::ZSet && a.eq_ignore_ascii_case(b"WITHSCORES") => true,
        Some(_) => return resp::error(x.out, "ERR syntax error"),
    };
    if x.args.len() > 4 || (kind == Kind::Set && x.args.len() > 3) {
        return resp::error(x.out, "ERR syntax error");
    }
    if count.is_some_and(|c| c.unsigned_abs() > i64::MAX as u64 / 2) {
        return resp::error(x.out, "ERR value is out of range");
    }
    x.sh.count(OpClass::Get);
    let (n, repeat) = match count {
        None => (1, false),
        Some(c) => (c.unsigned_abs() as usize, c < 0),
    };
    read(
        x,
        move |sh, s, src| match src.meta(sh, s, key, kind)? {
            None => Ok(Vec::new()),
            Some(m) => Ok(shown(kind, sample(sh, s, src, (key, &m), n, repeat)?)),
        },
        move |out, picked, proto| match count {
            None => resp::bulk_in(out, picked.first().map(|f| f.0.as_slice()), proto),
            Some(_) => {
                let flat = values && proto == Version::Resp2;
                resp::array(out, if flat { picked.len() * 2 } else { picked.len() });
                for f in &picked {
                    member(out, f, values, proto);
                }
            }
        },
    )
}

/// HSCAN, SSCAN: the fields after the cursor's, in field order, `COUNT` at a time; the
/// cursor is a number naming where the next call starts (as SCAN's are).
pub fn scan(x: &mut Call<'_, '_>, kind: Kind, o: ScanOpts<'_>) {
    let key = x.args[1];
    let Some(id) = std::str::from_utf8(x.args[2])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
    else {
        return resp::error(x.out, "ERR invalid cursor");
    };
    let Some(from) = x.s.global.cursors.resume(id) else {
        return resp::error(x.out, "ERR invalid cursor (unknown or forgotten)");
    };
    x.sh.count(OpClass::Scan);
    let global = x.s.global.clone();
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, kind)? else {
                return Ok((0, Vec::new()));
            };
            let p = m.prefix(key);
            let (lo, hi) = fields_range(&p);
            let start = field_key(&p, &from);
            let mut page = Vec::new();
            src.scan(sh, s, (&start, &hi), o.count + 1, |k, v| {
                page.push((k[lo.len()..].to_vec(), v.to_vec()))
            })?;
            let next = match page.len() > o.count {
                true => {
                    page.truncate(o.count);
                    let mut after = page.last().map(|f| f.0.clone()).unwrap_or_default();
                    after.push(0);
                    global.cursors.save(after)
                }
                false => 0,
            };
            page.retain(|f| o.pattern.is_none_or(|p| glob::matches(p, &f.0)));
            Ok::<_, Fail>((next, shown(kind, page)))
        },
        move |out, (next, page), _| {
            let values = kind != Kind::Set && !o.novalues;
            resp::array(out, 2);
            resp::bulk(out, Some(next.to_string().as_bytes()));
            resp::array(out, if values { page.len() * 2 } else { page.len() });
            for f in &page {
                member(out, f, values, Version::Resp2);
            }
        },
    )
}

//! SORT and SORT_RO over a list, set or sorted set: numeric (the default) or ALPHA order,
//! ASC or DESC, LIMIT, BY a pattern (`*` replaced by the element; `key->field` reads a hash
//! field; `nosort` keeps the collection's order) and GET patterns (`#` is the element),
//! and STORE into a list. As in Redis: equal weights are ordered by the element's bytes,
//! a missing BY key weighs 0 (numeric) or sorts first (ALPHA), and a missing GET key
//! answers nil. Patterns are read in the connection's database.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, store_announced, Fail, Src};
use crate::resp::commands::types::encoding::{field_key, Kind};
use crate::resp::commands::types::run::{int_arg, read, write};
use crate::resp::notify;
use crate::resp::session::Session;
use accelkv_proto::resp;
use std::cmp::Ordering;

/// SORT's options.
#[derive(Default)]
struct Opts<'a> {
    by: Option<&'a [u8]>,
    nosort: bool,
    limit: Option<(i64, i64)>,
    gets: Vec<&'a [u8]>,
    desc: bool,
    alpha: bool,
    store: Option<&'a [u8]>,
}

fn opts<'a>(args: &[&'a [u8]], ro: bool) -> Result<Opts<'a>, Fail> {
    let syntax = || Fail::Reply("ERR syntax error".into());
    let mut o = Opts::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let next = || args.get(i + 1).copied().ok_or_else(syntax);
        match a.to_ascii_uppercase().as_slice() {
            b"ASC" => o.desc = false,
            b"DESC" => o.desc = true,
            b"ALPHA" => o.alpha = true,
            b"BY" => {
                let p = next()?;
                o.nosort = !p.contains(&b'*');
                o.by = Some(p);
                i += 1;
            }
            b"GET" => {
                o.gets.push(next()?);
                i += 1;
            }
            b"STORE" if !ro => {
                o.store = Some(next()?);
                i += 1;
            }
            b"LIMIT" => {
                let (a, b) = (next()?, args.get(i + 2).copied().ok_or_else(syntax)?);
                o.limit = Some((int_arg(a)?, int_arg(b)?));
                i += 2;
            }
            _ => return Err(syntax()),
        }
        i += 1;
    }
    Ok(o)
}

/// The elements of the list, set or sorted set at `key`, in its own order.
fn elements(sh: &Shared, s: &mut Session, src: &Src<'_>, key: &[u8]) -> Result<Vec<Vec<u8>>, Fail> {
    let Some((v, flags)) = src.item(sh, s, key)? else {
        return Ok(Vec::new());
    };
    let m = crate::resp::commands::types::access::opened(s, key, &v, flags)?;
    match m.kind {
        Kind::List | Kind::Set => Ok(src
            .fields(sh, s, key, &m)?
            .into_iter()
            .map(|(f, v)| if m.kind == Kind::List { v } else { f })
            .collect()),
        Kind::Stream => Err(Fail::WrongType),
        Kind::ZSet => {
            let all = crate::resp::commands::types::zset::by_rank(sh, s, src, (key, &m), 0, m.len)?;
            Ok(all.into_iter().map(|e| e.0).collect())
        }
        Kind::Hash => Err(Fail::WrongType),
    }
}

/// What `pattern` names for `elem`: `#` the element itself; otherwise the string at the key
/// (the first `*` replaced by the element), or the hash field after `->`.
fn lookup(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    pattern: &[u8],
    elem: &[u8],
) -> Result<Option<Vec<u8>>, Fail> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&b| b == b'*') else {
        return Ok(None);
    };
    let (key_pat, field) = match pattern.windows(2).rposition(|w| w == b"->") {
        Some(at) if at > star && at + 2 < pattern.len() => {
            (&pattern[..at], Some(&pattern[at + 2..]))
        }
        _ => (pattern, None),
    };
    let mut key = key_pat[..star].to_vec();
    key.extend_from_slice(elem);
    key.extend_from_slice(&key_pat[star + 1..]);
    let key = crate::resp::db::to_store(s.db, &key).into_owned();
    let Some((v, flags)) = src.item(sh, s, &key)? else {
        return Ok(None);
    };
    match (
        crate::resp::commands::types::access::opened(s, &key, &v, flags),
        field,
    ) {
        (Err(_), None) => Ok(Some(v)),
        (Ok(m), Some(f)) if m.kind == Kind::Hash => src.get(sh, s, &field_key(&m.prefix(&key), f)),
        _ => Ok(None),
    }
}

/// The sorted (and limited) elements, each with its GET values (or itself).
fn sorted(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    o: &Opts<'_>,
) -> Result<Vec<Option<Vec<u8>>>, Fail> {
    let mut elems = elements(sh, s, src, key)?;
    if !o.nosort {
        let mut keyed = Vec::with_capacity(elems.len());
        for e in elems {
            let w = match o.by {
                Some(p) => lookup(sh, s, src, p, &e)?,
                None => Some(e.clone()),
            };
            keyed.push((e, w));
        }
        let mut weights = Vec::with_capacity(keyed.len());
        if !o.alpha {
            for (_, w) in &keyed {
                weights.push(match w {
                    None => 0.0,
                    Some(w) => std::str::from_utf8(w)
                        .ok()
                        .and_then(|t| t.trim().parse::<f64>().ok())
                        .filter(|f| !f.is_nan())
                        .ok_or_else(|| {
                            Fail::Reply(
                                "ERR One or more scores can't be converted into double".into(),
                            )
                        })?,
                });
            }
        }
        let mut order: Vec<usize> = (0..keyed.len()).collect();
        order.sort_by(|&a, &b| {
            let cmp = if o.alpha {
                match (&keyed[a].1, &keyed[b].1) {
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                    (Some(x), Some(y)) => x.cmp(y),
                }
            } else {
                weights[a]
                    .partial_cmp(&weights[b])
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| keyed[a].0.cmp(&keyed[b].0))
            };
            if o.desc {
                cmp.reverse()
            } else {
                cmp
            }
        });
        elems = order
            .into_iter()
            .map(|i| std::mem::take(&mut keyed[i].0))
            .collect();
    } else if o.desc {
        elems.reverse();
    }
    if let Some((offset, count)) = o.limit {
        let start = (offset.max(0) as usize).min(elems.len());
        let take = if count < 0 {
            usize::MAX
        } else {
            count as usize
        };
        elems = elems.into_iter().skip(start).take(take).collect();
    }
    let mut out = Vec::new();
    for e in elems {
        if o.gets.is_empty() {
            out.push(Some(e));
        } else {
            for g in &o.gets {
                out.push(lookup(sh, s, src, g, &e)?);
            }
        }
    }
    Ok(out)
}

fn reply(out: &mut Vec<u8>, items: &[Option<Vec<u8>>]) {
    resp::array(out, items.len());
    for i in items {
        resp::bulk(out, i.as_deref());
    }
}

fn run(x: &mut Call<'_, '_>, ro: bool) {
    let key = x.args[1];
    let o = match opts(&x.args[2..], ro) {
        Ok(o) => o,
        Err(e) => return fail(x.out, &e),
    };
    // A BY or GET pattern reads keys the command does not name: only a user who may read
    // every key may use one, as in Redis.
    let by = o.by.is_some_and(|_| !o.nosort);
    let get = o.gets.iter().any(|g| *g != b"#");
    if (by || get) && !x.s.acl_open {
        let spec = (x.dispatch.find)(x.args[0]);
        let table = (x.dispatch.table)();
        if !spec.is_some_and(|sp| crate::resp::acl::check::reads_every_key(x.s, table, sp)) {
            let what = if by { "BY" } else { "GET" };
            return resp::error(
                x.out,
                &format!("ERR {what} option of SORT denied due to insufficient ACL permissions."),
            );
        }
    }
    x.sh.count(OpClass::Scan);
    match o.store {
        None => read(
            x,
            |sh, s, src| sorted(sh, s, src, key, &o),
            |out, items, _| reply(out, &items),
        ),
        Some(dst) => write(
            x,
            |sh, s, src| {
                let items: Vec<Vec<u8>> = sorted(sh, s, src, key, &o)?
                    .into_iter()
                    .map(Option::unwrap_or_default)
                    .collect();
                let store = crate::resp::commands::types::list::store;
                store_announced((sh, s, src), (notify::LIST, "sortstore", dst), |sh, s| {
                    store(sh, s, dst, &items)
                })
            },
            |out, n, _| resp::integer(out, n as i64),
        ),
    }
}

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]`.
pub fn sort(x: &mut Call<'_, '_>) {
    run(x, false)
}

/// `SORT_RO key ...`: SORT without STORE.
pub fn sort_ro(x: &mut Call<'_, '_>) {
    run(x, true)
}

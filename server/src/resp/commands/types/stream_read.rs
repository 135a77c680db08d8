//! Reading streams (the encoding and the writes are in `stream.rs`): XRANGE is one range
//! scan of the entries' subkeys; XREVRANGE scans the range forward and answers its tail
//! reversed (the store has no reverse scan, so it costs the whole range, as ZREVRANGE
//! does); XREAD reads after an id in each stream and, with BLOCK, parks the connection
//! until an XADD to one of its streams (`blocking.rs`), `$` meaning the last id when the
//! command first ran.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::encoding::{decode_entry, Meta, StreamId};
use crate::resp::commands::types::run::{int_arg, read};
use crate::resp::commands::types::stream::{entry_key, parse_id, X};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// One entry: its id and its field-value pairs.
pub(crate) type Entry = (StreamId, Vec<Vec<u8>>);

/// XREAD's answer: each stream that had entries after its id, and them.
type Found = Vec<(Vec<u8>, Vec<Entry>)>;

/// Up to `count` entries of stream `m` with ids in `[from, to]`, ascending.
pub(crate) fn entries(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    (from, to): (StreamId, StreamId),
    count: usize,
) -> Result<Vec<Entry>, Fail> {
    if from > to {
        return Ok(Vec::new());
    }
    let p = m.prefix(key);
    let lo = entry_key(&p, from);
    let mut hi = entry_key(&p, to);
    hi.push(0);
    let mut all = Vec::new();
    let mut bad = false;
    src.scan(sh, s, (&lo, &hi), count, |k, v| {
        match (StreamId::from_bytes(&k[p.len() + 1..]), decode_entry(v)) {
            (Some(id), Some(items)) => all.push((id, items.iter().map(|i| i.to_vec()).collect())),
            _ => bad = true,
        }
    })?;
    if bad {
        return Err(Fail::Reply("ERR corrupt stream entry".into()));
    }
    Ok(all)
}

/// Appends entries as Redis answers them: `[id, [field, value, …]]` each.
pub(crate) fn reply_entries(out: &mut Vec<u8>, es: &[Entry]) {
    resp::array(out, es.len());
    for e in es {
        reply_entry(out, e);
    }
}

/// Appends one entry as Redis answers it: `[id, [field, value, …]]`.
pub(crate) fn reply_entry(out: &mut Vec<u8>, (id, items): &Entry) {
    resp::array(out, 2);
    resp::bulk(out, Some(id.text().as_bytes()));
    crate::resp::commands::types::run::bulks(out, items);
}

/// A range bound: `-`, `+`, an id (`ms` alone: its first or last sequence number) or,
/// exclusive, `(` and an id.
pub(crate) fn bound(a: &[u8], start: bool) -> Result<StreamId, Fail> {
    match a {
        b"-" => return Ok(StreamId::MIN),
        b"+" => return Ok(StreamId::MAX),
        _ => {}
    }
    let missing = if start { 0 } else { u64::MAX };
    let Some(id) = a.strip_prefix(b"(") else {
        return parse_id(a, missing);
    };
    let id = parse_id(id, missing)?;
    let moved = if start { id.next() } else { id.prev() };
    moved.ok_or_else(|| {
        let which = if start { "start" } else { "end" };
        Fail::Reply(format!("ERR invalid {which} ID for the interval"))
    })
}

/// XRANGE and XREVRANGE.
fn range(x: &mut Call<'_, '_>, rev: bool) {
    let key = x.args[1];
    let parsed = (|| -> Result<(StreamId, StreamId, Option<usize>), Fail> {
        let (a, b) = if rev {
            (x.args[3], x.args[2])
        } else {
            (x.args[2], x.args[3])
        };
        let (from, to) = (bound(a, true)?, bound(b, false)?);
        let count = match &x.args[4..] {
            [] => None,
            [c, n] if c.eq_ignore_ascii_case(b"COUNT") => Some(int_arg(n)?.max(0) as usize),
            _ => return Err(Fail::Reply("ERR syntax error".into())),
        };
        Ok((from, to, count))
    })();
    let (from, to, count) = match parsed {
        Ok(p) => p,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, X)? else {
                return Ok(Some(Vec::new()));
            };
            if count == Some(0) {
                // Redis answers a null array for COUNT 0 on a stream that is there.
                return Ok(None);
            }
            let limit = if rev {
                usize::MAX
            } else {
                count.unwrap_or(usize::MAX)
            };
            let mut es = entries(sh, s, src, (key, &m), (from, to), limit)?;
            if rev {
                es.reverse();
                es.truncate(count.unwrap_or(usize::MAX));
            }
            Ok(Some(es))
        },
        |out, es, v| match es {
            Some(es) => reply_entries(out, &es),
            None => resp::null_array(out, v),
        },
    )
}

/// `XRANGE key start end [COUNT n]`.
pub fn xrange(x: &mut Call<'_, '_>) {
    range(x, false)
}

/// `XREVRANGE key end start [COUNT n]`.
pub fn xrevrange(x: &mut Call<'_, '_>) {
    range(x, true)
}

/// XREAD's arguments: how many per stream (0: all), how long to block (`None`: it does
/// not), the keys and, per key, the id to read after (`None`: `$`).
struct ReadArgs<'a> {
    count: usize,
    block: Option<Option<std::time::Duration>>,
    keys: Vec<&'a [u8]>,
    after: Vec<Option<StreamId>>,
}

fn read_args<'a>(args: &[&'a [u8]]) -> Result<ReadArgs<'a>, Fail> {
    let syntax = || Fail::Reply("ERR syntax error".into());
    let (mut count, mut block, mut i) = (0usize, None, 1);
    loop {
        let opt = args.get(i).ok_or_else(syntax)?.to_ascii_uppercase();
        let val = args.get(i + 1).ok_or_else(syntax)?;
        match opt.as_slice() {
            b"COUNT" => count = int_arg(val)?.max(0) as usize,
            b"BLOCK" => block = Some(block_ms(val)?),
            b"STREAMS" => break,
            _ => return Err(syntax()),
        }
        i += 2;
    }
    let rest = &args[i + 1..];
    if rest.is_empty() || rest.len() % 2 == 1 {
        return Err(Fail::Reply("ERR Unbalanced 'xread' list of streams: for each stream key an ID or '$' must be specified.".into()));
    }
    let (keys, ids) = rest.split_at(rest.len() / 2);
    let after = ids
        .iter()
        .map(|a| match *a {
            b"$" => Ok(None),
            b">" => Err(Fail::Reply("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.".into())),
            a => parse_id(a, 0).map(Some),
        })
        .collect::<Result<_, _>>()?;
    Ok(ReadArgs {
        count,
        block,
        keys: keys.to_vec(),
        after,
    })
}

/// BLOCK's milliseconds (`None`: 0, forever).
pub(crate) fn block_ms(a: &[u8]) -> Result<Option<std::time::Duration>, Fail> {
    let ms = crate::resp::reply::parse_i64(a)
        .ok_or_else(|| Fail::Reply("ERR timeout is not an integer or out of range".into()))?;
    if ms < 0 {
        return Err(Fail::Reply("ERR timeout is negative".into()));
    }
    Ok((ms > 0).then(|| std::time::Duration::from_millis(ms as u64)))
}

/// The entries after each stream's id, for the streams that have some.
fn read_after(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    a: &ReadArgs<'_>,
    after: &[StreamId],
) -> Result<Option<Found>, Fail> {
    let mut found = Vec::new();
    for (key, id) in a.keys.iter().zip(after) {
        let Some(m) = src.meta(sh, s, key, X)? else {
            continue;
        };
        let Some(from) = id.next() else { continue };
        let limit = if a.count == 0 { usize::MAX } else { a.count };
        let es = entries(sh, s, src, (key, &m), (from, StreamId::MAX), limit)?;
        if !es.is_empty() {
            found.push((key.to_vec(), es));
        }
    }
    Ok((!found.is_empty()).then_some(found))
}

/// Each `$` as the stream's last id now (0-0 for a stream that is not there).
fn resolve(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    a: &ReadArgs<'_>,
) -> Result<Vec<StreamId>, Fail> {
    let mut ids = Vec::with_capacity(a.keys.len());
    for (key, id) in a.keys.iter().zip(&a.after) {
        ids.push(match id {
            Some(id) => *id,
            None => src
                .meta(sh, s, key, X)?
                .map_or(StreamId::MIN, |m: Meta| m.last_id()),
        });
    }
    Ok(ids)
}

fn reply_read(out: &mut Vec<u8>, found: Found, v: Version) {
    // RESP3: a map of key to entries; RESP2: an array of [key, entries] pairs.
    match v {
        Version::Resp3 => resp::map(out, found.len(), v),
        Version::Resp2 => resp::array(out, found.len()),
    }
    for (key, es) in found {
        if v == Version::Resp2 {
            resp::array(out, 2);
        }
        resp::bulk(out, Some(crate::resp::db::shown(&key)));
        reply_entries(out, &es);
    }
}

/// `XREAD [COUNT n] [BLOCK ms] STREAMS key … id …`.
pub fn xread(x: &mut Call<'_, '_>) {
    let a = match read_args(x.args) {
        Ok(a) => a,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    let Some(timeout) = a.block else {
        return read(
            x,
            |sh, s, src| {
                let after = resolve(sh, s, src, &a)?;
                read_after(sh, s, src, &a, &after)
            },
            |out, found, v| match found {
                Some(f) => reply_read(out, f, v),
                None => resp::null_array(out, v),
            },
        );
    };
    let keys = a.keys.clone();
    crate::resp::commands::types::blocking::blocking(
        x,
        (&keys, X, false),
        timeout,
        |sh, s, src| {
            // `$` is the last id when the command first ran, kept while it is parked.
            let after = match s.block.after.take() {
                Some(ids) => ids,
                None => resolve(sh, s, src, &a)?,
            };
            // Kept unless something was found: also when the key now holds another type
            // (the command stays parked, and `$` must not move to what is added later).
            let found = read_after(sh, s, src, &a, &after);
            if !matches!(found, Ok(Some(_))) {
                s.block.after = Some(after);
            }
            found
        },
        reply_read,
        resp::null_array,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_parse_as_redis_reads_them() {
        let id = |ms, seq| StreamId { ms, seq };
        assert_eq!(bound(b"-", true).unwrap(), StreamId::MIN);
        assert_eq!(bound(b"+", false).unwrap(), StreamId::MAX);
        assert_eq!(bound(b"5", true).unwrap(), id(5, 0));
        assert_eq!(bound(b"5", false).unwrap(), id(5, u64::MAX));
        assert_eq!(bound(b"(5-1", true).unwrap(), id(5, 2));
        assert_eq!(bound(b"(5-0", false).unwrap(), id(4, u64::MAX));
        assert!(bound(b"(0-0", false).is_err());
        assert!(bound(b"x", true).is_err());
    }

    #[test]
    fn xread_arguments() {
        let args: Vec<&[u8]> = vec![b"XREAD", b"COUNT", b"2", b"STREAMS", b"a", b"b", b"0", b"$"];
        let a = read_args(&args).unwrap();
        assert_eq!((a.count, a.keys.len()), (2, 2));
        assert_eq!(a.after, vec![Some(StreamId::MIN), None]);
        let unbalanced: Vec<&[u8]> = vec![b"XREAD", b"STREAMS", b"a", b"b", b"0"];
        assert!(read_args(&unbalanced).is_err());
        let blocked: Vec<&[u8]> = vec![b"XREAD", b"BLOCK", b"0", b"STREAMS", b"a", b"$"];
        assert_eq!(read_args(&blocked).unwrap().block, Some(None));
    }
}

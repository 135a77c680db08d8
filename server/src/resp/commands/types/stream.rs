//! Redis's streams over the collection encoding (`encoding.rs`): entry `id` is the subkey
//! whose field is the id's 16 bytes (milliseconds, sequence; key order is id order),
//! holding the entry's field-value pairs; the metadata keeps the length and the last id
//! given out, so ids only grow even after the newest entries are deleted. An empty stream
//! stays a key (XDEL or XTRIM to nothing), as in Redis. This file holds the writes (XADD,
//! XTRIM, XDEL) and XLEN, and the id syntax; the reads (XRANGE, XREVRANGE, XREAD) are in
//! `stream_read.rs`; consumer groups in `stream_groups.rs` and the files it names. XDEL and
//! trimming count what they remove (so XINFO's entries-added is the length plus that).
//!
//! Trimming with `~` trims exactly (to the threshold, up to LIMIT entries, 10,000 when not
//! given): Redis may keep more, and exact is one of the answers it allows.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, put, remove, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{
    encode_entry, field_key, new_meta, Kind, Meta, StreamId,
};
use crate::resp::commands::types::run::{check, write_key};
use crate::resp::commands::types::stream_groups::Info;
use crate::resp::notify::{event, STREAM};
use crate::resp::session::Session;
use accelkv_proto::resp;

pub(crate) const X: Kind = Kind::Stream;

/// What XADD and XTRIM remove when LIMIT is not given with `~` (Redis's 100 × its node size).
const DEFAULT_LIMIT: u64 = 10_000;

/// The subkey of the entry `id`.
pub(crate) fn entry_key(prefix: &[u8], id: StreamId) -> Vec<u8> {
    field_key(prefix, &id.to_bytes())
}

pub(crate) fn invalid_id() -> Fail {
    Fail::Reply("ERR Invalid stream ID specified as stream command argument".into())
}

/// An id argument, `ms-seq` or `ms` (then the sequence is `missing_seq`).
pub(crate) fn parse_id(a: &[u8], missing_seq: u64) -> Result<StreamId, Fail> {
    let t = std::str::from_utf8(a).map_err(|_| invalid_id())?;
    let num = |p: &str| -> Result<u64, Fail> {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid_id());
        }
        p.parse().map_err(|_| invalid_id())
    };
    Ok(match t.split_once('-') {
        Some((ms, seq)) => StreamId {
            ms: num(ms)?,
            seq: num(seq)?,
        },
        None => StreamId {
            ms: num(t)?,
            seq: missing_seq,
        },
    })
}

/// XADD's id argument.
enum NewId {
    /// `*`: the clock's milliseconds, or after the last id.
    Auto,
    /// `ms-*`: the next sequence number within `ms`.
    Seq(u64),
    Exact(StreamId),
}

fn parse_new_id(a: &[u8]) -> Result<NewId, Fail> {
    if a == b"*" {
        return Ok(NewId::Auto);
    }
    if let Some(ms) = a.strip_suffix(b"-*") {
        // `ms-*` needs a plain number before the `-*`.
        if ms.contains(&b'-') {
            return Err(invalid_id());
        }
        return Ok(NewId::Seq(parse_id(ms, 0)?.ms));
    }
    Ok(NewId::Exact(parse_id(a, 0)?))
}

fn zero_id() -> Fail {
    Fail::Reply("ERR The ID specified in XADD must be greater than 0-0".into())
}

/// The id XADD gives a new entry after `last`, Redis's errors when it cannot.
fn next_id(want: NewId, last: StreamId) -> Result<StreamId, Fail> {
    if last == StreamId::MAX {
        return Err(Fail::Reply(
            "ERR The stream has exhausted the last possible ID, unable to add more items".into(),
        ));
    }
    let top = || {
        Fail::Reply(
            "ERR The ID specified in XADD is equal or smaller than the target stream top item"
                .into(),
        )
    };
    let id = match want {
        NewId::Auto => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            match last.next() {
                _ if now > last.ms => StreamId { ms: now, seq: 0 },
                Some(id) => id,
                None => return Err(top()),
            }
        }
        NewId::Seq(ms) if ms > last.ms => StreamId { ms, seq: 0 },
        NewId::Seq(ms) if ms == last.ms => StreamId {
            ms,
            seq: last.seq.checked_add(1).ok_or_else(top)?,
        },
        NewId::Seq(_) => return Err(top()),
        NewId::Exact(id) => id,
    };
    if id == StreamId::MIN {
        return Err(zero_id());
    }
    if id <= last {
        return Err(top());
    }
    Ok(id)
}

/// A trimming strategy: MAXLEN or MINID, its threshold, and how many entries at most go.
#[derive(Clone, Copy)]
pub(crate) enum Threshold {
    MaxLen(u64),
    MinId(StreamId),
}

#[derive(Clone, Copy)]
pub(crate) struct Trim {
    pub threshold: Threshold,
    pub limit: u64,
}

/// XADD's and XTRIM's options before the id (XADD) or alone (XTRIM): `(trim, nomkstream,
/// where the id is)`.
fn parse_opts(args: &[&[u8]], xadd: bool) -> Result<(Option<Trim>, bool, usize), Fail> {
    let syntax = |t: &str| Fail::Reply(format!("ERR syntax error{t}"));
    let (mut threshold, mut approx, mut limit, mut nomk) = (None, false, None, false);
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = args[i].to_ascii_uppercase();
        match opt.as_slice() {
            b"*" if xadd => break,
            b"MAXLEN" | b"MINID" if more >= 1 => {
                if threshold.is_some() {
                    return Err(syntax(
                        ", MAXLEN and MINID options at the same time are not compatible",
                    ));
                }
                let mut at = i + 1;
                if more >= 2 && (args[at] == b"~" || args[at] == b"=") {
                    approx = args[at] == b"~";
                    at += 1;
                }
                threshold = Some(if opt.as_slice() == b"MAXLEN" {
                    let n = crate::resp::commands::types::run::int_arg(args[at])?;
                    if n < 0 {
                        return Err(Fail::Reply("ERR The MAXLEN argument must be >= 0.".into()));
                    }
                    Threshold::MaxLen(n as u64)
                } else {
                    Threshold::MinId(parse_id(args[at], 0)?)
                });
                i = at;
            }
            b"LIMIT" if more >= 1 => {
                let n = crate::resp::commands::types::run::int_arg(args[i + 1])?;
                if n < 0 {
                    return Err(Fail::Reply("ERR The LIMIT argument must be >= 0.".into()));
                }
                limit = Some(n as u64);
                i += 1;
            }
            b"NOMKSTREAM" if xadd => nomk = true,
            _ if xadd => break,
            _ => return Err(syntax("")),
        }
        i += 1;
    }
    if limit.is_some() && threshold.is_none() {
        return Err(syntax(
            ", LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if limit.is_some() && !approx {
        return Err(syntax(
            ", LIMIT cannot be used without the special ~ option",
        ));
    }
    let limit = match (approx, limit) {
        (true, Some(0)) | (false, _) => u64::MAX,
        (true, Some(n)) => n,
        (true, None) => DEFAULT_LIMIT,
    };
    let trim = threshold.map(|threshold| Trim { threshold, limit });
    Ok((trim, nomk, i))
}

/// Removes the oldest entries as `t` says (inside the transaction): how many went.
pub(crate) fn trim(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &mut Meta),
    t: Trim,
) -> Result<u64, Fail> {
    let p = m.prefix(key);
    let (lo, hi) = (entry_key(&p, StreamId::MIN), entry_key(&p, StreamId::MAX));
    let most = match t.threshold {
        Threshold::MaxLen(n) => m.len.saturating_sub(n),
        Threshold::MinId(_) => m.len,
    }
    .min(t.limit);
    if most == 0 {
        return Ok(0);
    }
    let hi = match t.threshold {
        Threshold::MinId(id) => entry_key(&p, id),
        Threshold::MaxLen(_) => hi,
    };
    let mut gone = Vec::new();
    src.scan(sh, s, (&lo, &hi), most as usize, |k, _| {
        gone.push(k.to_vec())
    })?;
    for k in &gone {
        remove(sh, s, k)?;
    }
    if !gone.is_empty() {
        let mut info = Info::load(sh, s, src, &p)?;
        info.removed += gone.len() as u64;
        info.save(sh, s, &p)?;
    }
    m.len -= gone.len() as u64;
    Ok(gone.len() as u64)
}

/// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value …`.
pub fn xadd(x: &mut Call<'_, '_>) {
    let (t, nomk, at) = match parse_opts(x.args, true) {
        Ok(o) => o,
        Err(e) => return fail(x.out, &e),
    };
    let key = x.args[1];
    let pairs = &x.args[(at + 1).min(x.args.len())..];
    if at >= x.args.len() || pairs.len() < 2 || pairs.len() % 2 == 1 {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    let want = match parse_new_id(x.args[at]) {
        Ok(NewId::Exact(StreamId::MIN)) => return fail(x.out, &zero_id()),
        Ok(w) => w,
        Err(e) => return fail(x.out, &e),
    };
    let entry = encode_entry(pairs);
    if let Err(e) = check(x.sh, key, &[&[0u8; 16]], &[&entry]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let m = src.meta(sh, s, key, X)?;
            if m.is_none() && nomk {
                return Ok(None);
            }
            let mut m = m.unwrap_or_else(|| new_meta(X));
            let id = next_id(want, m.last_id())?;
            put(sh, s, entry_key(&m.prefix(key), id), &entry)?;
            m.len += 1;
            m.set_last_id(id);
            let trimmed = match t {
                Some(t) => trim(sh, s, src, (key, &mut m), t)?,
                None => 0,
            };
            set_meta(sh, s, key, &m)?;
            s.block.wake.push(key);
            event(s, STREAM, "xadd", key);
            if trimmed > 0 {
                event(s, STREAM, "xtrim", key);
            }
            Ok(Some(id))
        },
        |out, id, v| resp::bulk_in(out, id.map(|i| i.text()).as_ref().map(|t| t.as_bytes()), v),
    )
}

/// `XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]`: how many entries went.
pub fn xtrim(x: &mut Call<'_, '_>) {
    let t = match parse_opts(x.args, false) {
        Ok((Some(t), _, _)) => t,
        Ok((None, _, _)) => return fail(x.out, &Fail::Reply("ERR syntax error".into())),
        Err(e) => return fail(x.out, &e),
    };
    let key = x.args[1];
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, X)? else {
                return Ok(0);
            };
            let n = trim(sh, s, src, (key, &mut m), t)?;
            if n > 0 {
                set_meta(sh, s, key, &m)?;
                event(s, STREAM, "xtrim", key);
            }
            Ok(n)
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `XDEL key id [id …]`: how many of the entries were there.
pub fn xdel(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let ids: Result<Vec<StreamId>, Fail> = x.args[2..].iter().map(|a| parse_id(a, 0)).collect();
    let ids = match ids {
        Ok(i) => i,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, X)? else {
                return Ok(0);
            };
            let p = m.prefix(key);
            let (mut n, mut top) = (0, StreamId::MIN);
            for id in &ids {
                let k = entry_key(&p, *id);
                if src.get(sh, s, &k)?.is_some() {
                    remove(sh, s, k.as_slice())?;
                    n += 1;
                    top = top.max(*id);
                }
            }
            if n > 0 {
                m.len -= n;
                let mut info = Info::load(sh, s, src, &p)?;
                info.max_deleted = info.max_deleted.max(top);
                info.removed += n;
                info.save(sh, s, &p)?;
                set_meta(sh, s, key, &m)?;
                event(s, STREAM, "xdel", key);
            }
            Ok(n)
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `XLEN key`.
pub fn xlen(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    x.sh.count(OpClass::Get);
    crate::resp::commands::types::run::read(
        x,
        |sh, s, src| Ok(src.meta(sh, s, key, X)?.map_or(0, |m| m.len)),
        |out, n, _| resp::integer(out, n as i64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn ids_parse_as_redis_reads_them() {
        assert_eq!(parse_id(b"5", 0).unwrap(), id(5, 0));
        assert_eq!(parse_id(b"5", u64::MAX).unwrap(), id(5, u64::MAX));
        assert_eq!(parse_id(b"5-7", 0).unwrap(), id(5, 7));
        for bad in [
            &b""[..],
            b"-",
            b"5-",
            b"-5",
            b"a-1",
            b"1-2-3",
            b"+5",
            b"18446744073709551616",
        ] {
            assert!(parse_id(bad, 0).is_err(), "{bad:?}");
        }
        assert!(matches!(parse_new_id(b"*"), Ok(NewId::Auto)));
        assert!(matches!(parse_new_id(b"9-*"), Ok(NewId::Seq(9))));
        assert!(parse_new_id(b"1-2-*").is_err());
    }

    #[test]
    fn new_ids_only_grow() {
        let last = id(10, 3);
        assert_eq!(next_id(NewId::Seq(10), last).unwrap(), id(10, 4));
        assert_eq!(next_id(NewId::Seq(11), last).unwrap(), id(11, 0));
        assert!(next_id(NewId::Seq(9), last).is_err());
        assert!(next_id(NewId::Exact(id(10, 3)), last).is_err());
        assert!(next_id(NewId::Exact(StreamId::MIN), StreamId::MIN).is_err());
        assert_eq!(next_id(NewId::Seq(0), StreamId::MIN).unwrap(), id(0, 1));
        let far = id(u64::MAX - 1, u64::MAX);
        assert_eq!(next_id(NewId::Auto, far).unwrap(), id(u64::MAX, 0));
        assert!(next_id(NewId::Auto, StreamId::MAX).is_err());
    }
}

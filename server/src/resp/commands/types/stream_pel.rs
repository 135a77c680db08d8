//! Reading through a consumer group and settling what was read: XREADGROUP (new entries,
//! or a consumer's own pending history; BLOCK parks the connection as XREAD does), XACK,
//! XPENDING, XCLAIM and XAUTOCLAIM, with Redis 7's replies, errors and bookkeeping (delivery
//! times and counts, the group's last id and read counter, consumers' seen and active
//! times). The records are `stream_groups.rs`'s.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::encoding::{decode_entry, Meta, StreamId};
use crate::resp::commands::types::run::{int_arg, read, write, write_key};
use crate::resp::commands::types::stream::{entry_key, parse_id, X};
use crate::resp::commands::types::stream_groups::{consumers, now_ms, walk, Open, Shape};
use crate::resp::commands::types::stream_read::{block_ms, bound, entries};
use crate::resp::db::shown;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};
use std::time::Duration;

/// An entry as a group read answers it: its fields, or `None` for a pending entry whose
/// entry was deleted.
type Got = (StreamId, Option<Vec<Vec<u8>>>);

/// XREADGROUP's answer: each stream served, and what it gave.
type Served = Vec<(Vec<u8>, Vec<Got>)>;

pub(crate) fn no_key_or_group(key: &[u8], group: &[u8], tail: &str) -> Fail {
    Fail::Reply(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{tail}",
        String::from_utf8_lossy(shown(key)),
        String::from_utf8_lossy(group)
    ))
}

/// The stream at `key` and its group `name` (`None`: either is missing).
pub(crate) fn open_group(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    name: &[u8],
) -> Result<Option<(Meta, Open)>, Fail> {
    let Some(m) = src.meta(sh, s, key, X)? else {
        return Ok(None);
    };
    Ok(Open::load(sh, s, src, (key, &m), name)?.map(|o| (m, o)))
}

/// The fields of entry `id`, if it is there.
pub(crate) fn entry_at(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    p: &[u8],
    id: StreamId,
) -> Result<Option<Vec<Vec<u8>>>, Fail> {
    let Some(v) = src.get(sh, s, &entry_key(p, id))? else {
        return Ok(None);
    };
    let items = decode_entry(&v).ok_or_else(|| Fail::Reply("ERR corrupt stream entry".into()))?;
    Ok(Some(items.iter().map(|i| i.to_vec()).collect()))
}

fn reply_got(out: &mut Vec<u8>, (id, fields): &Got, v: Version) {
    resp::array(out, 2);
    resp::bulk(out, Some(id.text().as_bytes()));
    match fields {
        Some(f) => crate::resp::commands::types::run::bulks(out, f),
        None => resp::null_array(out, v),
    }
}

/// XREADGROUP's arguments.
struct GroupRead<'a> {
    group: &'a [u8],
    consumer: &'a [u8],
    /// Entries per stream (0: all).
    count: usize,
    noack: bool,
    block: Option<Option<Duration>>,
    keys: Vec<&'a [u8]>,
    ids: Vec<&'a [u8]>,
}

fn group_read_args<'a>(args: &[&'a [u8]]) -> Result<GroupRead<'a>, Fail> {
    let syntax = || Fail::Reply("ERR syntax error".into());
    let (mut count, mut block, mut noack, mut names, mut i) = (0, None, false, None, 1);
    let streams = loop {
        let Some(opt) = args.get(i) else {
            return Err(syntax());
        };
        let more = args.len() - i - 1;
        match opt.to_ascii_uppercase().as_slice() {
            b"BLOCK" if more > 0 => block = Some(block_ms(args[i + 1])?),
            b"COUNT" if more > 0 => count = int_arg(args[i + 1])?.max(0) as usize,
            b"STREAMS" if more > 0 => break i + 1,
            b"GROUP" if more >= 2 => {
                names = Some((args[i + 1], args[i + 2]));
                i += 1;
            }
            b"NOACK" => {
                noack = true;
                i += 1;
                continue;
            }
            _ => return Err(syntax()),
        }
        i += 2;
    };
    let rest = &args[streams..];
    if rest.len() % 2 == 1 {
        return Err(Fail::Reply("ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified.".into()));
    }
    let (group, consumer) =
        names.ok_or_else(|| Fail::Reply("ERR Missing GROUP option for XREADGROUP".into()))?;
    let (keys, ids) = rest.split_at(rest.len() / 2);
    Ok(GroupRead {
        group,
        consumer,
        count,
        noack,
        block,
        keys: keys.to_vec(),
        ids: ids.to_vec(),
    })
}

/// An XREADGROUP id: `>` (`None`: entries never delivered) or the consumer's history after
/// an id.
fn after_arg(a: &[u8]) -> Result<Option<StreamId>, Fail> {
    match a {
        b">" => Ok(None),
        b"$" => Err(Fail::Reply("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.".into())),
        a => parse_id(a, 0).map(Some),
    }
}

/// Gives consumer `a.consumer` the entries its group has not delivered yet.
fn deliver_new(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    (key, m, o): (&[u8], &Meta, &mut Open),
    a: &GroupRead<'_>,
    now: u64,
) -> Result<Vec<Got>, Fail> {
    let Some(from) = o.g.last.next() else {
        return Ok(Vec::new());
    };
    let limit = if a.count == 0 { usize::MAX } else { a.count };
    let es = entries(sh, s, src, (key, m), (from, StreamId::MAX), limit)?;
    if es.is_empty() {
        return Ok(Vec::new());
    }
    let shape = Shape::load_for(sh, s, src, (key, m), Some(&o.g))?;
    for (id, _) in &es {
        shape.advance(&mut o.g, *id);
        if !a.noack {
            let old = o.nack(sh, s, src, *id)?;
            o.assign((sh, s, src), (*id, old.as_ref()), a.consumer, (now, 1))?;
            o.consumer_or_create(sh, s, src, a.consumer, now)?.0.active = now as i64;
        }
    }
    Ok(es.into_iter().map(|(id, f)| (id, Some(f))).collect())
}

/// The consumer's own pending entries after `after`, delivered again.
fn history(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    o: &Open,
    a: &GroupRead<'_>,
    after: StreamId,
    now: u64,
) -> Result<Vec<Got>, Fail> {
    let Some(from) = after.next() else {
        return Ok(Vec::new());
    };
    let mut mine = Vec::new();
    walk(
        sh,
        s,
        src,
        (&o.p, &o.name),
        (from, StreamId::MAX),
        |_, id, n| {
            if n.consumer == a.consumer {
                mine.push((id, n));
            }
            Ok(a.count == 0 || mine.len() < a.count)
        },
    )?;
    let mut got = Vec::with_capacity(mine.len());
    for (id, mut n) in mine {
        let fields = entry_at(sh, s, src, &o.p, id)?;
        if fields.is_some() {
            (n.time, n.count) = (now, n.count + 1);
            o.set_nack(sh, s, id, &n)?;
        }
        got.push((id, fields));
    }
    Ok(got)
}

/// One XREADGROUP attempt over every stream (`None`: nothing to serve).
fn read_group(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    a: &GroupRead<'_>,
) -> Result<Option<Served>, Fail> {
    let mut opened = Vec::with_capacity(a.keys.len());
    for (key, id) in a.keys.iter().zip(&a.ids) {
        let Some((m, o)) = open_group(sh, s, src, key, a.group)? else {
            return Err(no_key_or_group(
                key,
                a.group,
                " in XREADGROUP with GROUP option",
            ));
        };
        opened.push((*key, m, o, after_arg(id)?));
    }
    let now = now_ms();
    let mut served = Vec::new();
    for (key, m, mut o, after) in opened {
        o.consumer_or_create(sh, s, src, a.consumer, now)?.0.seen = now;
        let got = match after {
            Some(id) => Some(history((sh, s, src), &o, a, id, now)?),
            None => Some(deliver_new((sh, s, src), (key, &m, &mut o), a, now)?)
                .filter(|g| !g.is_empty()),
        };
        o.save(sh, s)?;
        if let Some(g) = got {
            served.push((key.to_vec(), g));
        }
    }
    Ok((!served.is_empty()).then_some(served))
}

fn reply_served(out: &mut Vec<u8>, served: Served, v: Version) {
    match v {
        Version::Resp3 => resp::map(out, served.len(), v),
        Version::Resp2 => resp::array(out, served.len()),
    }
    for (key, got) in served {
        if v == Version::Resp2 {
            resp::array(out, 2);
        }
        resp::bulk(out, Some(shown(&key)));
        resp::array(out, got.len());
        for g in &got {
            reply_got(out, g, v);
        }
    }
}

/// `XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key … id …`.
pub fn xreadgroup(x: &mut Call<'_, '_>) {
    let a = match group_read_args(x.args) {
        Ok(a) => a,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    let Some(timeout) = a.block else {
        return write(
            x,
            |sh, s, src| read_group(sh, s, src, &a),
            |out, served, v| match served {
                Some(f) => reply_served(out, f, v),
                None => resp::null_array(out, v),
            },
        );
    };
    let keys = a.keys.clone();
    // A key that turned into another type while parked answers WRONGTYPE (as a reply, which
    // `blocking` passes on, where BLPOP's stays parked), as in Redis 7.
    let wrong = |f| match f {
        Fail::WrongType => Fail::Reply(crate::resp::reply::WRONGTYPE.into()),
        f => f,
    };
    crate::resp::commands::types::blocking::blocking(
        x,
        (&keys, X, true),
        timeout,
        |sh, s, src| read_group(sh, s, src, &a).map_err(wrong),
        reply_served,
        resp::null_array,
    );
    if let Some(r) = &mut x.s.block.req {
        r.on_nokey = true;
    }
}

/// `XACK key group id [id …]`: how many were pending.
pub fn xack(x: &mut Call<'_, '_>) {
    let (key, group) = (x.args[1], x.args[2]);
    let ids = &x.args[3..];
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some((_, mut o)) = open_group(sh, s, src, key, group)? else {
                return Ok(0);
            };
            let ids: Vec<StreamId> = ids
                .iter()
                .map(|a| parse_id(a, 0))
                .collect::<Result<_, _>>()?;
            let mut n = 0;
            for id in ids {
                if let Some(nack) = o.nack(sh, s, src, id)? {
                    o.ack((sh, s, src), id, &nack)?;
                    n += 1;
                }
            }
            if n > 0 {
                o.save(sh, s)?;
            }
            Ok(n)
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// XPENDING's extended form: minimum idle time, range, count and consumer.
struct PendingRange<'a> {
    idle: i64,
    from: StreamId,
    to: StreamId,
    count: i64,
    consumer: Option<&'a [u8]>,
}

fn pending_args<'a>(args: &[&'a [u8]]) -> Result<Option<PendingRange<'a>>, Fail> {
    let n = args.len();
    if n == 3 {
        return Ok(None);
    }
    let syntax = || Fail::Reply("ERR syntax error".into());
    if !(6..=9).contains(&n) {
        return Err(syntax());
    }
    let (mut at, mut idle) = (3, 0);
    if args[3].eq_ignore_ascii_case(b"IDLE") {
        idle = int_arg(args[4])?;
        if n < 8 {
            return Err(syntax());
        }
        at += 2;
    }
    let count = int_arg(args[at + 2])?.max(0);
    Ok(Some(PendingRange {
        idle,
        from: bound(args[at], true)?,
        to: bound(args[at + 1], false)?,
        count,
        consumer: args.get(at + 3).copied(),
    }))
}

/// `XPENDING key group [[IDLE ms] start end count [consumer]]`.
pub fn xpending(x: &mut Call<'_, '_>) {
    let range = match pending_args(x.args) {
        Ok(r) => r,
        Err(e) => return fail(x.out, &e),
    };
    let (key, group) = (x.args[1], x.args[2]);
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| {
            let Some((_, o)) = open_group(sh, s, src, key, group)? else {
                return Err(no_key_or_group(key, group, ""));
            };
            let mut out = Vec::new();
            match range {
                None => pending_summary((sh, s, src), &o, &mut out)?,
                Some(r) => pending_range((sh, s, src), &o, &r, &mut out)?,
            }
            Ok(out)
        },
        |out, body, _| out.extend_from_slice(&body),
    )
}

fn pending_summary(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    o: &Open,
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let v = s.proto;
    resp::array(out, 4);
    resp::integer(out, o.g.pending as i64);
    let Some((first, last)) = o.pel_edges(sh, s, src)? else {
        resp::bulk_in(out, None, v);
        resp::bulk_in(out, None, v);
        resp::null_array(out, v);
        return Ok(());
    };
    resp::bulk(out, Some(first.to_string().as_bytes()));
    resp::bulk(out, Some(last.to_string().as_bytes()));
    let busy: Vec<_> = consumers(sh, s, src, (&o.p, &o.name))?
        .into_iter()
        .filter(|(_, c)| c.pending > 0)
        .collect();
    resp::array(out, busy.len());
    for (name, c) in busy {
        resp::array(out, 2);
        resp::bulk(out, Some(&name));
        resp::bulk(out, Some(c.pending.to_string().as_bytes()));
    }
    Ok(())
}

fn pending_range(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    o: &Open,
    r: &PendingRange<'_>,
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    if let Some(c) = r.consumer {
        if o.find_consumer(sh, s, src, c)?.is_none() {
            resp::array(out, 0);
            return Ok(());
        }
    }
    let now = now_ms() as i64;
    let mut rows = Vec::new();
    if r.count > 0 {
        walk(sh, s, src, (&o.p, &o.name), (r.from, r.to), |_, id, n| {
            let idle = now - n.time as i64;
            let mine = r.consumer.is_none_or(|c| c == n.consumer);
            if mine && (r.idle == 0 || idle >= r.idle) {
                rows.push((id, n, idle.max(0)));
            }
            Ok((rows.len() as i64) < r.count)
        })?;
    }
    resp::array(out, rows.len());
    for (id, n, idle) in rows {
        resp::array(out, 4);
        resp::bulk(out, Some(id.text().as_bytes()));
        resp::bulk(out, Some(&n.consumer));
        resp::integer(out, idle);
        resp::integer(out, n.count as i64);
    }
    Ok(())
}

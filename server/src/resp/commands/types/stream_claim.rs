//! Taking over another consumer's pending entries: XCLAIM (named ids, with IDLE, TIME,
//! RETRYCOUNT, FORCE, JUSTID and LASTID) and XAUTOCLAIM (a scan of the group's pending
//! list from a cursor), as Redis 7 runs them: a pending entry whose stream entry was
//! deleted leaves the pending list instead of being claimed.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::encoding::StreamId;
use crate::resp::commands::types::run::write_key;
use crate::resp::commands::types::stream::{entry_key, parse_id};
use crate::resp::commands::types::stream_groups::{now_ms, walk, Nack, Open};
use crate::resp::commands::types::stream_pel::{entry_at, no_key_or_group, open_group};
use crate::resp::commands::types::stream_read::{bound, reply_entry};
use crate::resp::session::Session;
use accelkv_proto::resp;

/// A claimed entry: its id, and its fields unless JUSTID.
type Claimed = (StreamId, Option<Vec<Vec<u8>>>);

fn long_arg(a: &[u8], err: &str) -> Result<i64, Fail> {
    crate::resp::reply::parse_i64(a).ok_or_else(|| Fail::Reply(format!("ERR {err}")))
}

fn reply_claimed(out: &mut Vec<u8>, c: &[Claimed]) {
    resp::array(out, c.len());
    for (id, f) in c {
        match f {
            Some(f) => reply_entry(out, &(*id, f.clone())),
            None => resp::bulk(out, Some(id.text().as_bytes())),
        }
    }
}

/// XCLAIM's options after its ids.
struct ClaimOpts {
    force: bool,
    justid: bool,
    /// The delivery time to set (`None`: now).
    time: Option<i64>,
    retry: Option<i64>,
    last_id: StreamId,
}

fn claim_opts(args: &[&[u8]], now: i64) -> Result<ClaimOpts, Fail> {
    let mut o = ClaimOpts {
        force: false,
        justid: false,
        time: None,
        retry: None,
        last_id: StreamId::MIN,
    };
    let mut i = 0;
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let val = args.get(i + 1);
        match (opt.as_slice(), val) {
            (b"FORCE", _) => o.force = true,
            (b"JUSTID", _) => o.justid = true,
            (b"IDLE", Some(v)) => {
                let idle = long_arg(v, "Invalid IDLE option argument for XCLAIM")?;
                o.time = Some(now - idle);
                i += 1;
            }
            (b"TIME", Some(v)) => {
                o.time = Some(long_arg(v, "Invalid TIME option argument for XCLAIM")?);
                i += 1;
            }
            (b"RETRYCOUNT", Some(v)) => {
                o.retry = Some(long_arg(
                    v,
                    "Invalid RETRYCOUNT option argument for XCLAIM",
                )?);
                i += 1;
            }
            (b"LASTID", Some(v)) => {
                o.last_id = parse_id(v, 0)?;
                i += 1;
            }
            _ => {
                return Err(Fail::Reply(format!(
                    "ERR Unrecognized XCLAIM option '{}'",
                    String::from_utf8_lossy(args[i])
                )))
            }
        }
        i += 1;
    }
    Ok(o)
}

/// `XCLAIM key group consumer min-idle-time id [id …] [options]`.
pub fn xclaim(x: &mut Call<'_, '_>) {
    let args = x.args;
    let (key, group, me) = (args[1], args[2], args[3]);
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some((_, mut o)) = open_group(sh, s, src, key, group)? else {
                return Err(no_key_or_group(key, group, ""));
            };
            let min_idle = long_arg(args[4], "Invalid min-idle-time argument for XCLAIM")?.max(0);
            let n_ids = args[5..]
                .iter()
                .take_while(|a| parse_id(a, 0).is_ok())
                .count();
            let ids: Vec<StreamId> = args[5..5 + n_ids]
                .iter()
                .filter_map(|a| parse_id(a, 0).ok())
                .collect();
            let now = now_ms() as i64;
            let opts = claim_opts(&args[5 + n_ids..], now)?;
            let claimed = claim((sh, s, src), &mut o, me, (&ids, min_idle, now), &opts)?;
            o.save(sh, s)?;
            Ok(claimed)
        },
        |out, c, _| reply_claimed(out, &c),
    )
}

/// XCLAIM's work once its arguments are read.
fn claim(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    o: &mut Open,
    me: &[u8],
    (ids, min_idle, now): (&[StreamId], i64, i64),
    opts: &ClaimOpts,
) -> Result<Vec<Claimed>, Fail> {
    if opts.last_id > o.g.last {
        o.g.last = opts.last_id;
    }
    let time = opts.time.filter(|t| (0..=now).contains(t)).unwrap_or(now) as u64;
    o.consumer_or_create(sh, s, src, me, now as u64)?.0.seen = now as u64;
    let mut claimed = Vec::new();
    for &id in ids {
        let nack = o.nack(sh, s, src, id)?;
        let Some(f) = entry_at(sh, s, src, &o.p, id)? else {
            if let Some(n) = nack {
                o.ack((sh, s, src), id, &n)?;
            }
            continue;
        };
        let (old, count) = match nack {
            Some(n) if min_idle > 0 && now - (n.time as i64) < min_idle => continue,
            Some(n) => (Some(n.clone()), n.count),
            None if opts.force => (None, 1),
            None => continue,
        };
        let count = match opts.retry {
            Some(r) if r >= 0 => r as u64,
            _ if !opts.justid => count + 1,
            _ => count,
        };
        o.assign((sh, s, src), (id, old.as_ref()), me, (time, count))?;
        o.consumer_or_create(sh, s, src, me, now as u64)?.0.active = now;
        claimed.push((id, (!opts.justid).then_some(f)));
    }
    Ok(claimed)
}

/// XAUTOCLAIM's answer: the cursor, what was claimed, and the ids that left the pending
/// list because their entries were deleted.
type AutoClaimed = (StreamId, Vec<Claimed>, Vec<StreamId>);

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]`.
pub fn xautoclaim(x: &mut Call<'_, '_>) {
    let args = x.args;
    let parsed = (|| -> Result<(i64, StreamId, i64, bool), Fail> {
        let min_idle = long_arg(args[4], "Invalid min-idle-time argument for XAUTOCLAIM")?.max(0);
        let start = bound(args[5], true)?;
        let (mut count, mut justid, mut i) = (100, false, 6);
        while i < args.len() {
            let opt = args[i].to_ascii_uppercase();
            if opt == b"COUNT" && i + 1 < args.len() {
                let most = i64::MAX / 16;
                count = crate::resp::reply::parse_i64(args[i + 1])
                    .filter(|n| (1..=most).contains(n))
                    .ok_or_else(|| Fail::Reply("ERR COUNT must be > 0".into()))?;
                i += 1;
            } else if opt == b"JUSTID" {
                justid = true;
            } else {
                return Err(Fail::Reply("ERR syntax error".into()));
            }
            i += 1;
        }
        Ok((min_idle, start, count, justid))
    })();
    let (min_idle, start, count, justid) = match parsed {
        Ok(p) => p,
        Err(e) => return fail(x.out, &e),
    };
    let (key, group, me) = (args[1], args[2], args[3]);
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some((_, mut o)) = open_group(sh, s, src, key, group)? else {
                return Err(no_key_or_group(key, group, ""));
            };
            let r = autoclaim((sh, s, src), &mut o, me, (min_idle, start, count), justid)?;
            o.save(sh, s)?;
            Ok(r)
        },
        |out, (next, claimed, deleted), _| {
            resp::array(out, 3);
            resp::bulk(out, Some(next.to_string().as_bytes()));
            reply_claimed(out, &claimed);
            resp::array(out, deleted.len());
            for id in deleted {
                resp::bulk(out, Some(id.text().as_bytes()));
            }
        },
    )
}

/// XAUTOCLAIM's walk: at most `count` answers, `count` × 10 pending entries looked at.
fn autoclaim(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    o: &mut Open,
    me: &[u8],
    (min_idle, start, count): (i64, StreamId, i64),
    justid: bool,
) -> Result<AutoClaimed, Fail> {
    let now = now_ms() as i64;
    o.consumer_or_create(sh, s, src, me, now as u64)?.0.seen = now as u64;
    let (mut left, mut attempts) = (count, count.saturating_mul(10));
    let (mut next, mut claimed, mut deleted) = (StreamId::MIN, Vec::new(), Vec::new());
    let mut seen: Vec<(StreamId, Nack, bool)> = Vec::new();
    let p = o.p.clone();
    walk(
        sh,
        s,
        src,
        (&o.p, &o.name),
        (start, StreamId::MAX),
        |s, id, n| {
            if attempts == 0 || left == 0 {
                next = id;
                return Ok(false);
            }
            attempts -= 1;
            // A deleted entry leaves the list whatever its idle time, and counts against COUNT.
            let there = src.get(sh, s, &entry_key(&p, id))?.is_some();
            if !there || min_idle == 0 || now - n.time as i64 >= min_idle {
                left -= 1;
                seen.push((id, n, there));
            }
            Ok(true)
        },
    )?;
    for (id, n, there) in seen {
        let f = match there {
            true => entry_at(sh, s, src, &o.p, id)?,
            false => None,
        };
        let Some(f) = f else {
            o.ack((sh, s, src), id, &n)?;
            deleted.push(id);
            continue;
        };
        let count = if justid { n.count } else { n.count + 1 };
        o.assign((sh, s, src), (id, Some(&n)), me, (now as u64, count))?;
        o.consumer_or_create(sh, s, src, me, now as u64)?.0.active = now;
        claimed.push((id, (!justid).then_some(f)));
    }
    Ok((next, claimed, deleted))
}

//! How a blocking command runs (resp/block.rs has the connection's state): its timeout
//! argument, and one attempt that takes what its keys hold, or parks, or times out.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::block::BlockReq;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::encoding::{Kind, Meta};
use crate::resp::commands::types::run::{mpop_args, none, write};
use crate::resp::session::Session;
use accelkv_proto::resp::Version;
use std::time::{Duration, Instant};

/// A blocking command's timeout argument in seconds (`None`: wait forever), Redis's errors.
pub(crate) fn timeout_arg(a: &[u8]) -> Result<Option<Duration>, Fail> {
    let bad = || Fail::Reply("ERR timeout is not a float or out of range".into());
    // Redis reads it with strtold, which takes hexadecimal too (`0x7FFF…`).
    let hex = |t: &str| {
        let digits = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
        u64::from_str_radix(digits, 16).ok().map(|n| n as f64)
    };
    let t: f64 = std::str::from_utf8(a)
        .ok()
        .and_then(|t| t.parse().ok().or_else(|| hex(t)))
        .filter(|t: &f64| t.is_finite())
        .ok_or_else(bad)?;
    if t < 0.0 {
        return Err(Fail::Reply("ERR timeout is negative".into()));
    }
    if t == 0.0 {
        return Ok(None);
    }
    // As Redis: the deadline in milliseconds must fit a 64-bit integer.
    if t * 1000.0 > i64::MAX as f64 {
        return Err(Fail::Reply("ERR timeout is out of range".into()));
    }
    Duration::try_from_secs_f64(t).map(Some).map_err(|_| bad())
}

/// Runs a blocking command: `attempt` takes what its keys hold (`None`: nothing there)
/// inside one transaction and `ok` answers it; when nothing was there the command parks,
/// or answers `none` inside MULTI or once its deadline has passed.
pub(crate) fn blocking<R>(
    x: &mut Call<'_, '_>,
    (keys, kind, takes): (&[&[u8]], Kind, bool),
    timeout: Option<Duration>,
    attempt: impl FnOnce(&Shared, &mut Session, &Src<'_>) -> Result<Option<R>, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
    none: impl FnOnce(&mut Vec<u8>, Version),
) {
    let seen = x.sh.blocked().epoch();
    let unblocked =
        x.s.block
            .unblocked
            .swap(0, std::sync::atomic::Ordering::SeqCst);
    if unblocked != 0 && x.s.block.until.is_some() {
        (x.s.block.until, x.s.block.after) = (None, None);
        return match unblocked {
            crate::core::blocked::UNBLOCK_ERROR => {
                accelkv_proto::resp::error(x.out, "UNBLOCKED client unblocked via CLIENT UNBLOCK")
            }
            _ => none(x.out, x.s.proto),
        };
    }
    let mut empty = false;
    // Run again after a wake, a key it waits on that now holds another type than the
    // command takes from has nothing to take: the client stays blocked, as in Redis (only
    // its first run answers WRONGTYPE; a wrong destination, BRPOPLPUSH's, still does).
    let rerun = x.s.block.until.is_some();
    let never = x.s.tx.running.is_some() || x.s.block.never;
    if takes && !rerun && !never && x.sh.blocked().busy(keys) {
        // An earlier client was woken for one of these keys and has not run yet: wait
        // behind it, as Redis serves it first.
        let until = timeout.map(|t| Instant::now() + t);
        x.s.block.until = Some(until);
        x.s.block.req = Some(park_on(keys, until, seen, (takes, true)));
        return;
    }
    let attempt = move |sh: &Shared, s: &mut Session, src: &Src<'_>| match attempt(sh, s, src) {
        Err(Fail::WrongType) if rerun && holds_other(sh, s, src, keys, kind)? => Ok(None),
        r => r,
    };
    crate::resp::commands::types::run::write(x, attempt, |out, r, v| match r {
        Some(r) => ok(out, r, v),
        None => empty = true,
    });
    if !empty {
        (x.s.block.until, x.s.block.after) = (None, None);
        return;
    }
    let now = Instant::now();
    let until = *x.s.block.until.get_or_insert(timeout.map(|t| now + t));
    if never || until.is_some_and(|d| now >= d) {
        (x.s.block.until, x.s.block.after) = (None, None);
        return none(x.out, x.s.proto);
    }
    x.s.block.req = Some(park_on(keys, until, seen, (takes, false)));
}

/// The request to park on `keys` until `deadline`; `seen`: the registry's epoch before the
/// command looked; `takes`: it takes what it finds; `behind`: it parks behind a turn
/// without having looked.
fn park_on(
    keys: &[&[u8]],
    deadline: Option<Instant>,
    seen: u64,
    (takes, behind): (bool, bool),
) -> BlockReq {
    BlockReq {
        keys: keys.iter().map(|k| k.to_vec()).collect(),
        deadline,
        seen,
        on_nokey: false,
        takes,
        behind,
    }
}

/// Whether one of the keys a blocking command waits on holds another type than `kind`,
/// the one the command takes from.
fn holds_other(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    keys: &[&[u8]],
    kind: Kind,
) -> Result<bool, Fail> {
    for k in keys {
        if let Some((v, flags)) = src.item(sh, s, k)? {
            match Meta::decode(&v, flags) {
                Ok(m) if m.kind == kind => {}
                _ => return Ok(true),
            }
        }
    }
    Ok(false)
}

/// BLPOP, BRPOP, BZPOPMIN and BZPOPMAX: `key [key ...] timeout`, one element from the first
/// key that holds one, or the connection parks until one does.
pub(crate) fn pop_any<R>(
    x: &mut Call<'_, '_>,
    kind: Kind,
    pop: impl FnOnce(&Shared, &mut Session, &Src<'_>, &[&[u8]], u64) -> Result<Option<R>, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
) {
    let args = x.args;
    let n = args.len();
    let keys = &args[1..n - 1];
    let t = match timeout_arg(args[n - 1]) {
        Ok(t) => t,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    let attempt = |sh: &Shared, s: &mut Session, src: &Src<'_>| pop(sh, s, src, keys, 1);
    blocking(x, (keys, kind, true), t, attempt, ok, none)
}

/// LMPOP and ZMPOP (`blocks`: BLMPOP and BZMPOP, whose timeout comes first):
/// `numkeys key [key ...] <side> [COUNT count]`, up to `count` from the first key that
/// holds something, `side` read by `side`; answered by `ok` (`None`: nothing anywhere, for
/// the forms that do not block).
pub(crate) fn mpop<T, R>(
    x: &mut Call<'_, '_>,
    (blocks, kind): (bool, Kind),
    side: impl Fn(&[u8]) -> Result<T, Fail>,
    pop: impl FnOnce(&Shared, &mut Session, &Src<'_>, &[&[u8]], u64, T) -> Result<Option<R>, Fail>,
    ok: impl FnOnce(&mut Vec<u8>, Option<R>, Version),
) {
    let args = x.args;
    let (timeout, rest) = match blocks {
        true => match timeout_arg(args[1]) {
            Ok(t) => (t, &args[2..]),
            Err(e) => return fail(x.out, &e),
        },
        false => (None, &args[1..]),
    };
    let (keys, which, count) = match mpop_args(rest, side) {
        Ok(a) => a,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    let attempt =
        |sh: &Shared, s: &mut Session, src: &Src<'_>| pop(sh, s, src, &keys, count, which);
    if blocks {
        blocking(
            x,
            (&keys, kind, true),
            timeout,
            attempt,
            |out, r, v| ok(out, Some(r), v),
            none,
        )
    } else {
        write(x, attempt, ok)
    }
}

#[cfg(test)]
mod tests {
    use super::timeout_arg;
    use std::time::Duration;

    #[test]
    fn timeouts_parse_as_redis_reads_them() {
        assert_eq!(timeout_arg(b"0").unwrap(), None);
        assert_eq!(
            timeout_arg(b"0.25").unwrap(),
            Some(Duration::from_millis(250))
        );
        assert_eq!(timeout_arg(b"2").unwrap(), Some(Duration::from_secs(2)));
        // Hexadecimal, as strtold reads it; past a 64-bit deadline in ms: out of range.
        assert_eq!(timeout_arg(b"0x10").unwrap(), Some(Duration::from_secs(16)));
        assert!(matches!(
            timeout_arg(b"0x7FFFFFFFFFFFFF"),
            Err(super::Fail::Reply(t)) if t == "ERR timeout is out of range"
        ));
        assert!(timeout_arg(b"-1").is_err());
        assert!(timeout_arg(b"abc").is_err());
        assert!(timeout_arg(b"inf").is_err());
    }
}

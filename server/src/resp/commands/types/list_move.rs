//! Moving elements out of lists: LMOVE and RPOPLPUSH (one pop and one push in one
//! transaction), LMPOP (the first non-empty of several lists), and their blocking forms
//! BLPOP, BRPOP, BLMOVE, BRPOPLPUSH and BLMPOP, which park the connection until a push
//! (resp/block.rs).

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::blocking::{blocking, mpop, pop_any, timeout_arg};
use crate::resp::commands::types::list::{key_and, pop, push, L};
use crate::resp::commands::types::run::none;
use crate::resp::commands::types::run::{first_popped, write};
use crate::resp::notify;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};
use std::time::Duration;

/// `LEFT` or `RIGHT`.
fn side(a: &[u8]) -> Result<bool, Fail> {
    match a.to_ascii_uppercase().as_slice() {
        b"LEFT" => Ok(true),
        b"RIGHT" => Ok(false),
        _ => Err(Fail::Reply("ERR syntax error".into())),
    }
}

/// Pops one element from `from` and pushes it onto `to` (inside the transaction); `None`
/// when `from` is absent. The destination's type is checked before anything moves.
fn move_one(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (from, to): (&[u8], &[u8]),
    (from_left, to_left): (bool, bool),
) -> Result<Option<Vec<u8>>, Fail> {
    if src.meta(sh, s, from, L)?.is_none() {
        return Ok(None);
    }
    src.meta(sh, s, to, L)?;
    let popped = notify::mark(s);
    let Some(mut items) = pop(sh, s, src, from, 1, from_left)? else {
        return Ok(None);
    };
    let Some(e) = items.pop() else {
        return Ok(None);
    };
    let pushed = notify::mark(s);
    push(sh, s, src, to, &[&e], (to_left, false))?;
    // Redis announces the push before the pop.
    notify::push_first(s, popped, pushed);
    Ok(Some(e))
}

fn moves(x: &mut Call<'_, '_>, sides: (bool, bool), timeout: Option<Option<Duration>>) {
    let (from, to) = (x.args[1], x.args[2]);
    x.sh.count(OpClass::Put);
    let attempt =
        move |sh: &Shared, s: &mut Session, src: &Src<'_>| move_one(sh, s, src, (from, to), sides);
    match timeout {
        None => write(x, attempt, |out, e, v| resp::bulk_in(out, e.as_deref(), v)),
        Some(t) => blocking(
            x,
            (&[from], L, true),
            t,
            attempt,
            |out, e, v| resp::bulk_in(out, Some(&e), v),
            none, // a timed-out blocking command answers a null array, as Redis 7.0 does
        ),
    }
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT`.
pub fn lmove(x: &mut Call<'_, '_>) {
    match (side(x.args[3]), side(x.args[4])) {
        (Ok(a), Ok(b)) => moves(x, (a, b), None),
        (Err(e), _) | (_, Err(e)) => fail(x.out, &e),
    }
}

/// `RPOPLPUSH source destination`.
pub fn rpoplpush(x: &mut Call<'_, '_>) {
    moves(x, (false, true), None)
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`.
pub fn blmove(x: &mut Call<'_, '_>) {
    match (side(x.args[3]), side(x.args[4]), timeout_arg(x.args[5])) {
        (Ok(a), Ok(b), Ok(t)) => moves(x, (a, b), Some(t)),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => fail(x.out, &e),
    }
}

/// `BRPOPLPUSH source destination timeout`.
pub fn brpoplpush(x: &mut Call<'_, '_>) {
    match timeout_arg(x.args[3]) {
        Ok(t) => moves(x, (false, true), Some(t)),
        Err(e) => fail(x.out, &e),
    }
}

/// A key and the elements that left its list.
type Popped = (Vec<u8>, Vec<Vec<u8>>);

/// Pops up to `n` from the first of `keys` that holds a list (inside the transaction).
fn pop_first(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    keys: &[&[u8]],
    n: u64,
    left: bool,
) -> Result<Option<Popped>, Fail> {
    first_popped(keys, |k| pop(sh, s, src, k, n, left))
}

/// `BLPOP key [key ...] timeout`.
pub fn blpop(x: &mut Call<'_, '_>) {
    bpop(x, true)
}

/// `BRPOP key [key ...] timeout`.
pub fn brpop(x: &mut Call<'_, '_>) {
    bpop(x, false)
}

fn bpop(x: &mut Call<'_, '_>, left: bool) {
    pop_any(
        x,
        L,
        |sh, s, src, keys, n| pop_first(sh, s, src, keys, n, left),
        |out, (k, items), _| key_and(out, &k, &items, false),
    )
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]`.
pub fn lmpop(x: &mut Call<'_, '_>) {
    mpop(x, (false, L), side, pop_first, mpop_reply)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]`.
pub fn blmpop(x: &mut Call<'_, '_>) {
    mpop(x, (true, L), side, pop_first, mpop_reply)
}

fn mpop_reply(out: &mut Vec<u8>, r: Option<Popped>, v: Version) {
    match r {
        Some((k, items)) => key_and(out, &k, &items, true),
        None => none(out, v),
    }
}

//! accelkv's atomics and vector operations over RESP, so a Redis client reaches what the
//! binary protocol offers (docs/PROTOCOL.md): `CAS key expected new`, `FETCHADD key delta
//! [U64|I64] [WRAP|CHECKED|SATURATE]` on an 8-byte little-endian integer value, and
//! `VECTOR key op elem function operand [WRAP|CHECKED|SATURATE]` (KV-Direct's vector
//! operations on a value of fixed-width little-endian elements). Each is one operation of
//! the reservation station, atomic with every other write.

use crate::core::counters::OpClass;
use crate::core::ops::vector::VectorCall;
use crate::core::ops::{Outcome, Write};
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use accelkv_proto::operand::{Elem, Overflow, VectorOp};
use accelkv_proto::resp;
use std::borrow::Cow;

fn run(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    w: Write<'_>,
    out: &mut Vec<u8>,
) -> Option<Outcome> {
    let d = sh.writes().run_one(Op::new(key, w));
    s.unreleased = s.unreleased.max(d.version);
    match d.outcome {
        Ok(Outcome::Failed(f)) => {
            resp::error(out, &format!("ERR {f}"));
            None
        }
        Ok(o) => Some(o),
        Err(e) => {
            err_store(out, &e);
            None
        }
    }
}

/// `CAS key expected new`: `:1` if the value was `expected` and is now `new`, else `:0`
/// (an absent key never matches; SETNX sets an absent one).
pub fn cas(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    sh.count(OpClass::Atomic);
    let w = Write::Cas {
        expected: Some(Cow::Borrowed(c[2])),
        new: Cow::Borrowed(c[3]),
    };
    match run(sh, s, c[1], w, out) {
        Some(Outcome::Done) => resp::integer(out, 1),
        Some(_) => resp::integer(out, 0),
        None => {}
    }
}

/// `FETCHADD key delta [U64|I64] [WRAP|CHECKED|SATURATE]`: adds to the 8-byte integer
/// (absent: 0); answers the original value as a decimal bulk string (a u64 may not fit a
/// RESP integer).
pub fn fetch_add(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let Some(delta) = std::str::from_utf8(c[2])
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
    else {
        return resp::error(out, "ERR value is not an integer or out of range");
    };
    let (mut elem, mut overflow) = (Elem::U64, Overflow::Wrap);
    for a in &c[3..] {
        if let Some(e) = Elem::from_name(a).filter(|e| matches!(e, Elem::U64 | Elem::I64)) {
            elem = e;
        } else if let Some(o) = Overflow::from_name(a) {
            overflow = o;
        } else {
            return resp::error(
                out,
                "ERR syntax error (FETCHADD key delta [U64|I64] [WRAP|CHECKED|SATURATE])",
            );
        }
    }
    sh.count(OpClass::Atomic);
    let w = Write::FetchAdd {
        elem,
        overflow,
        delta,
    };
    if let Some(Outcome::Fetched(b)) = run(sh, s, c[1], w, out) {
        let text = match elem {
            Elem::I64 => i64::from_le_bytes(b).to_string(),
            _ => u64::from_le_bytes(b).to_string(),
        };
        resp::bulk(out, Some(text.as_bytes()));
    }
}

/// `VECTOR key op elem function operand [WRAP|CHECKED|SATURATE]`: op is `s2s`, `s2v`,
/// `v2v`, `reduce` or `filter`; elem `u8`…`f64`; the operand is the little-endian bytes of
/// Δ, the Δ_i, the initial Σ or the filter parameter. Answers the operation's bytes (the
/// original value for updates), nil for an absent key.
pub fn vector(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let (Some(op), Some(elem)) = (VectorOp::from_name(c[2]), Elem::from_name(c[3])) else {
        return resp::error(
            out,
            "ERR syntax error (VECTOR key s2s|s2v|v2v|reduce|filter u8|u16|u32|u64|i32|i64|f32|f64 function operand [WRAP|CHECKED|SATURATE])",
        );
    };
    let overflow = match c.get(6) {
        None => Overflow::Wrap,
        Some(a) => match Overflow::from_name(a) {
            Some(o) if c.len() == 7 => o,
            _ => {
                return resp::error(
                    out,
                    "ERR syntax error (overflow is WRAP, CHECKED or SATURATE)",
                )
            }
        },
    };
    sh.count(OpClass::Vector);
    let w = Write::Vector(VectorCall {
        op,
        elem,
        overflow,
        function: String::from_utf8_lossy(c[4]),
        operand: Cow::Borrowed(c[5]),
    });
    match run(sh, s, c[1], w, out) {
        Some(Outcome::Bytes(b)) => resp::bulk(out, Some(&b)),
        Some(_) => resp::bulk_in(out, None, s.proto),
        None => {}
    }
}

/// `CAS key expected new`.
pub fn cas_cmd(x: &mut Call<'_, '_>) {
    cas(x.sh, x.s, x.args, x.out)
}

/// `FETCHADD key delta [...]`: at most five arguments.
pub fn fetchadd(x: &mut Call<'_, '_>) {
    if x.args.len() > 5 {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    fetch_add(x.sh, x.s, x.args, x.out)
}

/// `VECTOR ...`: at most seven arguments.
pub fn vector_cmd(x: &mut Call<'_, '_>) {
    if x.args.len() > 7 {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    vector(x.sh, x.s, x.args, x.out)
}

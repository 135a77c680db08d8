//! BITFIELD and BITFIELD_RO: signed and unsigned integers of 1 to 64 bits (unsigned to 63)
//! at any bit offset of a string (bit 0 the most significant of byte 0, as SETBIT has
//! them), read, set and incremented with Redis's WRAP, SAT and FAIL overflow, all of one
//! command in one transaction (the value read and written back once, keeping its TTL).

use crate::core::counters::OpClass;
use crate::core::ops::typed::is_typed;
use crate::core::ops::{Cond, Ttl, Write};
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail};
use crate::resp::commands::types::run::{read, write};
use crate::resp::write_door::run_op;
use accelkv_proto::resp;
use std::borrow::Cow;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Clone, Copy, Debug)]
struct Field {
    signed: bool,
    bits: u32,
    offset: u64,
    kind: Kind,
    overflow: Overflow,
}

fn err(t: &str) -> Fail {
    Fail::Reply(t.into())
}

fn field_type(a: &[u8]) -> Result<(bool, u32), Fail> {
    let bad = || {
        err("ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.")
    };
    let (signed, rest) = match a.first() {
        Some(b'i' | b'I') => (true, &a[1..]),
        Some(b'u' | b'U') => (false, &a[1..]),
        _ => return Err(bad()),
    };
    let bits: u32 = std::str::from_utf8(rest)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(bad)?;
    let max = if signed { 64 } else { 63 };
    if bits == 0 || bits > max {
        return Err(bad());
    }
    Ok((signed, bits))
}

fn offset(a: &[u8], bits: u32, max_bytes: usize) -> Result<u64, Fail> {
    let bad = || err("ERR bit offset is not an integer or out of range");
    let (mul, t) = match a.strip_prefix(b"#") {
        Some(t) => (u64::from(bits), t),
        None => (1, a),
    };
    let n: u64 = std::str::from_utf8(t)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(bad)?;
    let off = n.checked_mul(mul).ok_or_else(bad)?;
    if off + u64::from(bits) > max_bytes as u64 * 8 {
        return Err(bad());
    }
    Ok(off)
}

fn parse(args: &[&[u8]], ro: bool, max_bytes: usize) -> Result<Vec<Field>, Fail> {
    let syntax = || err("ERR syntax error");
    let int = |a: &[u8]| {
        crate::resp::reply::parse_i64(a)
            .ok_or_else(|| err("ERR value is not an integer or out of range"))
    };
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let sub = a.to_ascii_uppercase();
        if ro && sub.as_slice() != b"GET" {
            return Err(err("ERR BITFIELD_RO only supports the GET subcommand"));
        }
        let arg = |k: usize| args.get(i + k).copied().ok_or_else(syntax);
        match sub.as_slice() {
            b"OVERFLOW" => {
                overflow = match arg(1)?.to_ascii_uppercase().as_slice() {
                    b"WRAP" => Overflow::Wrap,
                    b"SAT" => Overflow::Sat,
                    b"FAIL" => Overflow::Fail,
                    _ => return Err(err("ERR Invalid OVERFLOW type specified")),
                };
                i += 2;
                continue;
            }
            b"GET" | b"SET" | b"INCRBY" => {
                let (signed, bits) = field_type(arg(1)?)?;
                let offset = offset(arg(2)?, bits, max_bytes)?;
                let kind = match sub.as_slice() {
                    b"GET" => Kind::Get,
                    b"SET" => Kind::Set(int(arg(3)?)?),
                    _ => Kind::IncrBy(int(arg(3)?)?),
                };
                fields.push(Field {
                    signed,
                    bits,
                    offset,
                    kind,
                    overflow,
                });
                i += if matches!(kind, Kind::Get) { 3 } else { 4 };
            }
            _ => return Err(syntax()),
        }
    }
    Ok(fields)
}

fn get_bits(v: &[u8], off: u64, bits: u32) -> u64 {
    let mut x = 0u64;
    for i in 0..u64::from(bits) {
        let at = off + i;
        let byte = v.get((at / 8) as usize).copied().unwrap_or(0);
        x = (x << 1) | u64::from((byte >> (7 - at % 8)) & 1);
    }
    x
}

fn set_bits(v: &mut Vec<u8>, off: u64, bits: u32, x: u64) {
    let end = ((off + u64::from(bits)).div_ceil(8)) as usize;
    if v.len() < end {
        v.resize(end, 0);
    }
    for i in 0..u64::from(bits) {
        let at = off + i;
        let bit = (x >> (u64::from(bits) - 1 - i)) & 1;
        let (byte, mask) = ((at / 8) as usize, 1u8 << (7 - at % 8));
        if bit == 1 {
            v[byte] |= mask;
        } else {
            v[byte] &= !mask;
        }
    }
}

/// Redis's unsigned overflow check of `value + incr`: `Some(result)` unless FAIL refuses.
fn unsigned(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<u64> {
    let max = (1u64 << bits) - 1;
    let over = value > max || (incr > 0 && incr as u64 > max - value.min(max));
    let under = incr < 0 && incr.unsigned_abs() > value;
    let sum = value.wrapping_add(incr as u64);
    match (over || under, ow) {
        (false, _) => Some(sum),
        (true, Overflow::Fail) => None,
        (true, Overflow::Wrap) => Some(sum & max),
        (true, Overflow::Sat) => Some(if over { max } else { 0 }),
    }
}

/// Redis's signed overflow check of `value + incr`.
fn signed(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<i64> {
    let max: i64 = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let sum = i128::from(value) + i128::from(incr);
    let over = sum > i128::from(max);
    let under = sum < i128::from(min);
    match (over || under, ow) {
        (false, _) => Some(sum as i64),
        (true, Overflow::Fail) => None,
        (true, Overflow::Sat) => Some(if over { max } else { min }),
        (true, Overflow::Wrap) => {
            let c = (value as u64).wrapping_add(incr as u64);
            if bits == 64 {
                return Some(c as i64);
            }
            let mask = u64::MAX << bits;
            let c = if c & (1 << (bits - 1)) != 0 {
                c | mask
            } else {
                c & !mask
            };
            Some(c as i64)
        }
    }
}

/// Runs `fields` over `v`: each one's answer (`None`: nil, a FAIL overflow), and whether
/// anything was written.
fn apply(v: &mut Vec<u8>, fields: &[Field]) -> (Vec<Option<i64>>, bool) {
    let mut answers = Vec::with_capacity(fields.len());
    let mut wrote = false;
    for f in fields {
        let raw = get_bits(v, f.offset, f.bits);
        let old: i64 = if f.signed && f.bits < 64 && raw & (1 << (f.bits - 1)) != 0 {
            (raw | (u64::MAX << f.bits)) as i64
        } else {
            raw as i64
        };
        let (new, answer) = match f.kind {
            Kind::Get => {
                answers.push(Some(old));
                continue;
            }
            Kind::Set(x) if f.signed => (signed(x, 0, f.bits, f.overflow), Some(old)),
            Kind::Set(x) => (
                unsigned(x as u64, 0, f.bits, f.overflow).map(|n| n as i64),
                Some(old),
            ),
            Kind::IncrBy(d) if f.signed => {
                let n = signed(old, d, f.bits, f.overflow);
                (n, n)
            }
            Kind::IncrBy(d) => {
                let n = unsigned(raw, d, f.bits, f.overflow).map(|n| n as i64);
                (n, n)
            }
        };
        match new {
            Some(n) => {
                let mask = if f.bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << f.bits) - 1
                };
                set_bits(v, f.offset, f.bits, n as u64 & mask);
                wrote = true;
                answers.push(answer);
            }
            None => answers.push(None),
        }
    }
    (answers, wrote)
}

fn answer(out: &mut Vec<u8>, answers: &[Option<i64>]) {
    resp::array(out, answers.len());
    for a in answers {
        match a {
            Some(n) => resp::integer(out, *n),
            None => resp::bulk(out, None),
        }
    }
}

fn run(x: &mut Call<'_, '_>, ro: bool) {
    let key = x.args[1];
    let fields = match parse(&x.args[2..], ro, x.sh.settings().limits.max_value) {
        Ok(f) => f,
        Err(e) => return fail(x.out, &e),
    };
    let writes = fields.iter().any(|f| !matches!(f.kind, Kind::Get));
    let value_of = |item: Option<(Vec<u8>, u32)>| match item {
        Some((_, flags)) if is_typed(flags) => Err(Fail::WrongType),
        Some((v, _)) => Ok(Some(v)),
        None => Ok(None),
    };
    if !writes {
        x.sh.count(OpClass::Get);
        return read(
            x,
            |sh, s, src| {
                let mut v = value_of(src.item(sh, s, key)?)?.unwrap_or_default();
                Ok(apply(&mut v, &fields).0)
            },
            |out, a, _| answer(out, &a),
        );
    }
    x.sh.count(OpClass::Put);
    write(
        x,
        |sh, s, src| {
            let mut v = value_of(src.item(sh, s, key)?)?.unwrap_or_default();
            let (answers, wrote) = apply(&mut v, &fields);
            if wrote {
                let w = Write::Set {
                    value: Cow::Owned(v),
                    cond: Cond::Always,
                    get: false,
                    ttl: Ttl::Keep,
                };
                run_op(sh, s, crate::core::station::Op::new(key, w)).outcome?;
                crate::resp::notify::event(s, crate::resp::notify::STRING, "setbit", key);
            }
            Ok(answers)
        },
        |out, a, _| answer(out, &a),
    )
}

/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ...`.
pub fn bitfield(x: &mut Call<'_, '_>) {
    run(x, false)
}

/// `BITFIELD_RO key [GET type offset ...]`.
pub fn bitfield_ro(x: &mut Call<'_, '_>) {
    run(x, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip_at_any_offset() {
        let mut v = Vec::new();
        set_bits(&mut v, 5, 13, 0x1abc);
        assert_eq!(get_bits(&v, 5, 13), 0x1abc);
        assert_eq!(v.len(), 3);
        assert_eq!(get_bits(&v, 100, 8), 0);
    }

    #[test]
    fn overflow_follows_redis() {
        assert_eq!(unsigned(250, 10, 8, Overflow::Wrap), Some(4));
        assert_eq!(unsigned(250, 10, 8, Overflow::Sat), Some(255));
        assert_eq!(unsigned(250, 10, 8, Overflow::Fail), None);
        assert_eq!(unsigned(5, -10, 8, Overflow::Sat), Some(0));
        assert_eq!(signed(127, 1, 8, Overflow::Wrap), Some(-128));
        assert_eq!(signed(-128, -1, 8, Overflow::Sat), Some(-128));
        assert_eq!(signed(100, 0, 8, Overflow::Fail), Some(100));
        assert_eq!(signed(i64::MAX, 1, 64, Overflow::Wrap), Some(i64::MIN));
    }
}

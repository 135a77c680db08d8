//! Redis's bit commands on string values: SETBIT (one station write), GETBIT, BITCOUNT and
//! BITPOS (reads, with Redis 7's BYTE and BIT ranges), and BITOP (its sources read and its
//! destination written in one transaction, so no reader sees the destination half-made and
//! no write to a source slips between the reads and the write).

use crate::core::counters::OpClass;
use crate::core::ops::{Outcome, Write};
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::commands::tx::{atomically, failed};
use crate::resp::commands::types::access::WRONGTYPE;
use crate::resp::door::{get_value, write_one, Got, Ran};
use crate::resp::notify::event;
use crate::resp::reply::{err_store, ok, parse_i64, upper};
use crate::resp::write_door::run_op;
use accelkv_proto::resp;
use std::borrow::Cow;

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_INT: &str = "ERR value is not an integer or out of range";

/// A bit offset: an integer below 2^32 whose byte fits under the largest value.
fn offset(a: &[u8], max_value: usize) -> Option<u64> {
    let n: u64 = std::str::from_utf8(a).ok()?.parse().ok()?;
    (n < 1 << 32 && ((n / 8) as usize) < max_value).then_some(n)
}

/// The bit at `offset` of `v` (bit 0 the most significant of byte 0); past the end, 0.
fn bit_at(v: &[u8], offset: u64) -> bool {
    v.get((offset / 8) as usize)
        .is_some_and(|b| b & (0x80 >> (offset % 8)) != 0)
}

/// A string's value for a bit command (`Some(None)`: absent), or `None` with the error
/// written.
fn value_of(x: &mut Call<'_, '_>, key: &[u8]) -> Option<Option<Vec<u8>>> {
    match get_value(x.sh, x.s, x.reads, key) {
        Got::Str(v) => Some(v),
        Got::Typed(..) => {
            resp::error(x.out, WRONGTYPE);
            None
        }
        Got::Err(e) => {
            err_store(x.out, &e);
            None
        }
    }
}

/// `SETBIT key offset 0|1`: the bit's old value.
pub fn setbit(x: &mut Call<'_, '_>) {
    let Some(offset) = offset(x.args[2], x.sh.settings().limits.max_value) else {
        return resp::error(x.out, BAD_OFFSET);
    };
    let bit = match x.args[3] {
        b"0" => false,
        b"1" => true,
        _ => return resp::error(x.out, "ERR bit is not an integer or out of range"),
    };
    x.sh.count(OpClass::Update);
    let op = Op::new(x.args[1], Write::SetBit { offset, bit });
    if write_one(x.sh, x.s, op, x.out, ok, ok) == Ran::Done {
        event(x.s, crate::resp::notify::STRING, "setbit", x.args[1]);
    }
}

/// `GETBIT key offset`.
pub fn getbit(x: &mut Call<'_, '_>) {
    let Some(offset) = offset(x.args[2], x.sh.settings().limits.max_value) else {
        return resp::error(x.out, BAD_OFFSET);
    };
    x.sh.count(OpClass::Get);
    if let Some(v) = value_of(x, x.args[1]) {
        resp::integer(x.out, i64::from(bit_at(&v.unwrap_or_default(), offset)));
    }
}

/// A `start end [BYTE|BIT]` range over a value of `len` bytes, as bit positions
/// `first..=last`, Redis's way: negative positions count from the end, both ends are
/// clamped into the value; `None` when it holds nothing.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let at = |i: i64| if i < 0 { (total + i).max(0) } else { i };
    let (start, end) = (at(start), at(end).min(total - 1));
    if total == 0 || start > end {
        return None;
    }
    let (s, e) = (start as u64, end as u64);
    Some(if bits { (s, e) } else { (s * 8, e * 8 + 7) })
}

/// A range as a command gave it: start, end (if given), and whether it counts bits.
type Range = (i64, Option<i64>, bool);

/// The optional `start end [BYTE|BIT]` of BITCOUNT and BITPOS from `args`; `Err` with the
/// reply's error.
fn range_args(args: &[&[u8]]) -> Result<Option<Range>, &'static str> {
    let Some(start) = args.first() else {
        return Ok(None);
    };
    let start = parse_i64(start).ok_or(BAD_INT)?;
    let end = match args.get(1) {
        Some(e) => Some(parse_i64(e).ok_or(BAD_INT)?),
        None => None,
    };
    let bits = match args.get(2).map(|u| upper(u)) {
        None => false,
        Some(u) if u.as_slice() == b"BYTE" => false,
        Some(u) if u.as_slice() == b"BIT" => true,
        Some(_) => return Err("ERR syntax error"),
    };
    Ok(Some((start, end, bits)))
}

/// `BITCOUNT key [start end [BYTE|BIT]]`: the set bits of the value (in the range).
pub fn bitcount(x: &mut Call<'_, '_>) {
    if x.args.len() == 3 || x.args.len() > 5 {
        return resp::error(x.out, "ERR syntax error");
    }
    let range = match range_args(&x.args[2..]) {
        Ok(r) => r,
        Err(e) => return resp::error(x.out, e),
    };
    x.sh.count(OpClass::Get);
    let Some(v) = value_of(x, x.args[1]) else {
        return;
    };
    let v = v.unwrap_or_default();
    let (first, last) = match range {
        None if v.is_empty() => return resp::integer(x.out, 0),
        None => (0, v.len() as u64 * 8 - 1),
        Some((start, end, bits)) => match bit_range(v.len(), start, end.unwrap_or(-1), bits) {
            Some(r) => r,
            None => return resp::integer(x.out, 0),
        },
    };
    let n = (first..=last).filter(|&i| bit_at(&v, i)).count();
    resp::integer(x.out, n as i64);
}

/// `BITPOS key 0|1 [start [end [BYTE|BIT]]]`: the first bit with that value in the range;
/// -1 when none. Looking for a 0 with no end given, the value counts as followed by zeros
/// (Redis's rule): the answer is then the first bit past it.
pub fn bitpos(x: &mut Call<'_, '_>) {
    if x.args.len() > 6 {
        return resp::error(x.out, "ERR syntax error");
    }
    let want = match x.args[2] {
        b"0" => false,
        b"1" => true,
        _ => return resp::error(x.out, "ERR The bit argument must be 1 or 0."),
    };
    let range = match range_args(&x.args[3..]) {
        Ok(r) => r,
        Err(e) => return resp::error(x.out, e),
    };
    x.sh.count(OpClass::Get);
    let Some(v) = value_of(x, x.args[1]) else {
        return;
    };
    let Some(v) = v else {
        // An absent key is all zeros: a 1 is nowhere, a 0 at the start.
        return resp::integer(x.out, if want { -1 } else { 0 });
    };
    let (start, end, bits) = range.unwrap_or((0, None, false));
    let Some((first, last)) = bit_range(v.len(), start, end.unwrap_or(-1), bits) else {
        return resp::integer(x.out, -1);
    };
    let found = (first..=last).find(|&i| bit_at(&v, i) == want);
    let pos = match found {
        Some(i) => i as i64,
        None if !want && end.is_none() => last as i64 + 1,
        None => -1,
    };
    resp::integer(x.out, pos);
}

/// `BITOP AND|OR|XOR|NOT dest key [key ...]`: the sources combined byte by byte (the
/// shorter ones zero-padded) into `dest`, which an empty result deletes; the result's
/// length.
pub fn bitop(x: &mut Call<'_, '_>) {
    let op = upper(x.args[1]);
    let op = match op.as_slice() {
        b"AND" | b"OR" | b"XOR" | b"NOT" => op,
        _ => return resp::error(x.out, "ERR syntax error"),
    };
    let (dest, sources) = (x.args[2], &x.args[3..]);
    if op.as_slice() == b"NOT" && sources.len() != 1 {
        return resp::error(
            x.out,
            "ERR BITOP NOT must be called with a single source key.",
        );
    }
    let max_value = x.sh.settings().limits.max_value;
    atomically(x.sh, x.s, x.out, |sh, s, out| {
        let mut values = Vec::with_capacity(sources.len());
        for k in sources {
            let d = run_op(sh, s, Op::new(k, Write::Read));
            if failed(out, &d) {
                return;
            }
            match d.outcome {
                Ok(Outcome::Old(v)) => values.push(v.unwrap_or_default()),
                _ => values.push(Vec::new()),
            }
        }
        let result = combine(&op, &values);
        if result.len() > max_value {
            return resp::error(out, "ERR string exceeds maximum allowed size");
        }
        sh.count(OpClass::Put);
        let len = result.len() as i64;
        let w = match result.is_empty() {
            true => Write::Delete,
            false => Write::Put(Cow::Owned(result)),
        };
        let d = run_op(sh, s, Op::new(dest, w));
        if !failed(out, &d) {
            match (len, &d.outcome) {
                (0, Ok(Outcome::Skipped)) => {}
                (0, _) => event(s, crate::resp::notify::GENERIC, "del", dest),
                _ => event(s, crate::resp::notify::STRING, "set", dest),
            }
            resp::integer(out, len);
        }
    })
}

/// BITOP's result over `values` (`op` is AND, OR, XOR or NOT, upper case).
fn combine(op: &[u8], values: &[Vec<u8>]) -> Vec<u8> {
    let len = values.iter().map(Vec::len).max().unwrap_or(0);
    let byte = |v: &Vec<u8>, i: usize| v.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| match op {
            b"NOT" => !byte(&values[0], i),
            b"AND" => values.iter().fold(0xff, |a, v| a & byte(v, i)),
            b"OR" => values.iter().fold(0, |a, v| a | byte(v, i)),
            _ => values.iter().fold(0, |a, v| a ^ byte(v, i)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{bit_range, combine};

    #[test]
    fn ranges_follow_redis() {
        // BYTE ranges become whole bytes of bits; negative positions count from the end.
        assert_eq!(bit_range(3, 0, -1, false), Some((0, 23)));
        assert_eq!(bit_range(3, 1, 1, false), Some((8, 15)));
        assert_eq!(bit_range(3, -2, -1, false), Some((8, 23)));
        assert_eq!(bit_range(3, 5, 10, false), None);
        assert_eq!(bit_range(3, 2, 1, false), None);
        assert_eq!(bit_range(3, -100, 100, false), Some((0, 23)));
        assert_eq!(bit_range(0, 0, -1, false), None);
        // BIT ranges are bit positions.
        assert_eq!(bit_range(2, 5, 10, true), Some((5, 10)));
        assert_eq!(bit_range(2, -3, -1, true), Some((13, 15)));
    }

    #[test]
    fn bitop_pads_shorter_sources_with_zeros() {
        let v = |b: &[u8]| b.to_vec();
        assert_eq!(
            combine(b"AND", &[v(&[0xff, 0x0f]), v(&[0xf0])]),
            vec![0xf0, 0]
        );
        assert_eq!(
            combine(b"OR", &[v(&[0x01]), v(&[0x10, 0x02])]),
            vec![0x11, 0x02]
        );
        assert_eq!(combine(b"XOR", &[v(&[0xff]), v(&[0x0f])]), vec![0xf0]);
        assert_eq!(combine(b"NOT", &[v(&[0x0f, 0])]), vec![0xf0, 0xff]);
        assert_eq!(combine(b"AND", &[v(&[]), v(&[])]), Vec::<u8>::new());
    }
}

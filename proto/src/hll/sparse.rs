//! The sparse HLL body: run-length opcodes over the 16,384 registers, as Redis writes them
//! (`hyperloglog.c`), so an HLL changed here has the bytes Redis would give it:
//!
//! * ZERO `00xxxxxx`: 1–64 registers at 0;
//! * XZERO `01xxxxxx yyyyyyyy`: 1–16,384 registers at 0;
//! * VAL `1vvvvvxx`: 1–4 registers at 1–32.
//!
//! A valid body's runs cover exactly [`REGISTERS`]; anything else is [`Invalid::Corrupt`].

use super::{to_dense, Invalid, DENSE_SIZE, HDR, REGISTERS};

const VAL_MAX_VALUE: u8 = 32;
const VAL_MAX_LEN: usize = 4;
const ZERO_MAX_LEN: usize = 64;

/// One opcode: its kind, the registers it covers, its value and its size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub zero: bool,
    pub len: usize,
    pub val: u8,
    pub size: usize,
}

/// The opcode at `p`'s start (`p` not empty). An XZERO cut off by the end reads its
/// second byte as 0, as Redis reads the string's terminator.
pub fn op_at(p: &[u8]) -> Op {
    let b = p[0];
    if b & 0x80 != 0 {
        Op {
            zero: false,
            len: usize::from(b & 3) + 1,
            val: ((b >> 2) & 0x1f) + 1,
            size: 1,
        }
    } else if b & 0x40 != 0 {
        let lo = usize::from(p.get(1).copied().unwrap_or(0));
        Op {
            zero: true,
            len: ((usize::from(b & 0x3f) << 8) | lo) + 1,
            val: 0,
            size: 2,
        }
    } else {
        Op {
            zero: true,
            len: usize::from(b & 0x3f) + 1,
            val: 0,
            size: 1,
        }
    }
}

fn val_op(val: u8, len: usize) -> u8 {
    0x80 | ((val - 1) << 2) | (len as u8 - 1)
}

/// Appends a zero run of `len` (1–16,384): ZERO up to 64, else XZERO.
fn push_zero(out: &mut Vec<u8>, len: usize) {
    if len > ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push(len as u8 - 1);
    }
}

/// Appends an XZERO run of `len` (1–16,384).
pub(super) fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push((l >> 8) as u8 | 0x40);
    out.push((l & 0xff) as u8);
}

/// Calls `f(first, len, value)` for every VAL run of a body, checking that the runs cover
/// the registers exactly (Redis's check: a VAL run past the end stops the walk).
pub fn for_each_run(body: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Invalid> {
    let (mut p, mut idx) = (0, 0);
    while p < body.len() {
        let op = op_at(&body[p..]);
        if !op.zero {
            if idx + op.len > REGISTERS {
                break;
            }
            f(idx, op.len, op.val);
        }
        idx += op.len;
        p += op.size;
    }
    match idx == REGISTERS {
        true => Ok(()),
        false => Err(Invalid::Corrupt),
    }
}

/// The registers' histogram of a body (`hllSparseRegHisto`): `Corrupt` unless the runs
/// cover the registers exactly.
pub fn histogram(body: &[u8], histo: &mut [u32; 64]) -> Result<(), Invalid> {
    let (mut p, mut idx) = (0, 0);
    while p < body.len() {
        let op = op_at(&body[p..]);
        idx += op.len;
        histo[usize::from(op.val)] += op.len as u32;
        p += op.size;
    }
    match idx == REGISTERS {
        true => Ok(()),
        false => Err(Invalid::Corrupt),
    }
}

/// Register `index` of a sparse body (`None`: the runs end before it).
pub fn get(body: &[u8], index: usize) -> Option<u8> {
    let (mut p, mut first) = (0, 0);
    while p < body.len() {
        let op = op_at(&body[p..]);
        if index < first + op.len {
            return Some(op.val);
        }
        first += op.len;
        p += op.size;
    }
    None
}

/// Raises register `index` of the sparse HLL `v` to `count` (`hllSparseSet`): whether it
/// changed. Splits the run holding it, merges equal VAL runs around it, and promotes the
/// HLL to dense when `count` passes 32 or the string would pass `sparse_max` bytes.
pub fn set(v: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Invalid> {
    if count > VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: the opcode covering `index`, and the one before it.
    let (mut p, mut first, mut prev) = (HDR, 0, None);
    let op = loop {
        if p >= v.len() {
            return Err(Invalid::Corrupt);
        }
        let op = op_at(&v[p..]);
        if index < first + op.len {
            break op;
        }
        prev = Some(p);
        p += op.size;
        first += op.len;
    };
    // Step 2: nothing to do, or a run of one replaced in place.
    if !op.zero && op.val >= count {
        return Ok(false);
    }
    if op.len == 1 && op.size == 1 {
        v[p] = val_op(count, 1);
        merge_around(v, prev.unwrap_or(HDR));
        return Ok(true);
    }
    // Step 3: the run split into at most three, spliced in.
    let last = first + op.len - 1;
    let mut seq = Vec::with_capacity(5);
    let before = index - first;
    let after = last - index;
    if op.zero {
        if before > 0 {
            push_zero(&mut seq, before);
        }
        seq.push(val_op(count, 1));
        if after > 0 {
            push_zero(&mut seq, after);
        }
    } else {
        if before > 0 {
            seq.push(val_op(op.val, before));
        }
        seq.push(val_op(count, 1));
        if after > 0 {
            seq.push(val_op(op.val, after));
        }
    }
    if seq.len() > op.size && v.len() + seq.len() - op.size > sparse_max {
        return promote(v, index, count);
    }
    let end = (p + op.size).min(v.len()); // a cut XZERO at the end is one byte
    v.splice(p..end, seq);
    // Step 4: equal VAL runs merged, from the opcode before, up to five opcodes.
    merge_around(v, prev.unwrap_or(HDR));
    Ok(true)
}

/// Merges adjacent VAL opcodes of one value whose lengths fit one opcode, scanning up to
/// five opcodes from `p` (Redis's step 4, so the bytes match Redis's).
fn merge_around(v: &mut Vec<u8>, mut p: usize) {
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let b = v[p];
        if b & 0x80 == 0 {
            p += if b & 0x40 != 0 { 2 } else { 1 };
            continue;
        }
        if let Some(&n) = v.get(p + 1) {
            if n & 0x80 != 0 {
                let (v1, v2) = (((b >> 2) & 0x1f) + 1, ((n >> 2) & 0x1f) + 1);
                let len = usize::from(b & 3) + usize::from(n & 3) + 2;
                if v1 == v2 && len <= VAL_MAX_LEN {
                    v[p + 1] = val_op(v1, len);
                    v.remove(p);
                    continue; // try the merged run with the next one
                }
            }
        }
        p += 1;
    }
}

/// Turns the HLL dense and sets the register there.
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Invalid> {
    to_dense(v)?;
    debug_assert_eq!(v.len(), DENSE_SIZE);
    Ok(super::dense_raise(&mut v[HDR..], index, count))
}

/// PFDEBUG DECODE's text of a body: `z:len`, `Z:len` and `v:value,len`, space-separated.
pub fn decode_text(body: &[u8]) -> String {
    let mut parts = Vec::new();
    let mut p = 0;
    while p < body.len() {
        let op = op_at(&body[p..]);
        parts.push(match (op.zero, op.size) {
            (true, 1) => format!("z:{}", op.len),
            (true, _) => format!("Z:{}", op.len),
            _ => format!("v:{},{}", op.val, op.len),
        });
        p += op.size;
    }
    parts.join(" ")
}

//! Redis's HyperLogLog string format (docs/FORMAT.md "HyperLogLog"), byte for byte, so a
//! value PFADD made here reads in Redis and the reverse (GET, DUMP, SETRANGE all see the
//! same string):
//!
//! * a 16-byte header: `HYLL`, the encoding (0 dense, 1 sparse), three unused bytes, and
//!   the cached cardinality, little-endian, whose top bit set means "stale";
//! * dense: 16,384 registers of 6 bits each, packed least significant bit first;
//! * sparse ([`sparse`]): run-length opcodes, ZERO, XZERO and VAL, promoted to dense when a
//!   register passes 32 or the string passes `hll-sparse-max-bytes`.
//!
//! An element's register and run length come from MurmurHash64A with Redis's seed; the
//! cardinality from Ertl's estimator over the registers' histogram ([`count`]). Every
//! function takes any bytes a user could have written with SETRANGE: a string that is not
//! an HLL is [`Invalid::NotHll`], a sparse body whose runs do not cover the registers
//! exactly is [`Invalid::Corrupt`]; nothing panics (fuzz target `hll`).

mod count;
mod selftest;
pub mod sparse;

pub use count::{count, count_registers, Registers};
pub use selftest::selftest;

/// Registers: 2^14.
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash that choose the register.
pub const P: u32 = 14;
/// Bits of the hash left for the run of zeros.
pub const Q: u32 = 64 - P;
/// The header's size.
pub const HDR: usize = 16;
/// A dense HLL's size: the header and 16,384 six-bit registers.
pub const DENSE_SIZE: usize = HDR + REGISTERS * 6 / 8;
/// The largest value a register holds.
pub const REGISTER_MAX: u8 = 63;
/// Redis's default `hll-sparse-max-bytes`.
pub const SPARSE_MAX_BYTES: usize = 3000;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const MAGIC: &[u8; 4] = b"HYLL";

/// Why a string cannot be used as an HLL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalid {
    /// Not an HLL at all (Redis's WRONGTYPE): wrong magic, encoding or dense length.
    NotHll,
    /// An HLL whose sparse body is corrupt (Redis's INVALIDOBJ).
    Corrupt,
}

/// Redis's error texts for each.
impl Invalid {
    pub fn text(self) -> &'static str {
        match self {
            Invalid::NotHll => "WRONGTYPE Key is not a valid HyperLogLog string value.",
            Invalid::Corrupt => "INVALIDOBJ Corrupted HLL object detected",
        }
    }
}

/// How an HLL's registers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Dense,
    Sparse,
}

/// What Redis checks before using a string as an HLL (`isHLLObjectOrReply`): its length,
/// magic and encoding, and a dense one's exact size.
pub fn check(v: &[u8]) -> Result<Encoding, Invalid> {
    if v.len() < HDR || &v[..4] != MAGIC {
        return Err(Invalid::NotHll);
    }
    match v[4] {
        DENSE if v.len() == DENSE_SIZE => Ok(Encoding::Dense),
        SPARSE => Ok(Encoding::Sparse),
        _ => Err(Invalid::NotHll),
    }
}

/// A new, empty HLL: sparse, one XZERO run over every register, cached cardinality 0.
pub fn new() -> Vec<u8> {
    let mut v = header(SPARSE);
    sparse::push_xzero(&mut v, REGISTERS);
    v
}

fn header(encoding: u8) -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&[encoding, 0, 0, 0]);
    v.extend_from_slice(&[0; 8]);
    v
}

/// The cached cardinality, if it is not stale.
pub fn cached(v: &[u8]) -> Option<u64> {
    let card: [u8; 8] = v.get(8..HDR)?.try_into().ok()?;
    (card[7] & 0x80 == 0).then(|| u64::from_le_bytes(card))
}

/// Caches `card` in the header.
pub fn set_cached(v: &mut [u8], card: u64) {
    v[8..HDR].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale.
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// Redis's MurmurHash64A (64-bit, little-endian words) with `seed`.
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, b) in tail.iter().enumerate() {
            h ^= u64::from(*b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// An element's register and the length of its hash's run of zeros plus one
/// (`hllPatLen`): at most `Q + 1`.
pub fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `i` of a dense body (the bytes after the header).
pub fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u16::from(REGISTER_MAX)) as u8
}

/// Sets register `i` of a dense body to `val` (at most 63).
pub fn dense_set(regs: &mut [u8], i: usize, val: u8) {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let val = u16::from(val);
    let mask = u16::from(REGISTER_MAX);
    regs[byte] &= !((mask << fb) as u8);
    regs[byte] |= (val << fb) as u8;
    if let Some(next) = regs.get_mut(byte + 1) {
        *next &= !((mask >> (8 - fb)) as u8);
        *next |= (val >> (8 - fb)) as u8;
    }
}

/// Raises register `index` of a dense body to `count` if it is lower (`hllDenseSet`):
/// whether it changed.
pub(crate) fn dense_raise(regs: &mut [u8], index: usize, count: u8) -> bool {
    let changed = dense_get(regs, index) < count;
    if changed {
        dense_set(regs, index, count);
    }
    changed
}

/// Raises register `index` to `count` if it is lower: whether it changed. A sparse HLL
/// stays sparse while it can (`sparse_max`: `hll-sparse-max-bytes`), else becomes dense.
pub fn set_register(
    v: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_max: usize,
) -> Result<bool, Invalid> {
    let changed = match check(v)? {
        Encoding::Dense => dense_raise(&mut v[HDR..], index, count),
        Encoding::Sparse => sparse::set(v, index, count, sparse_max)?,
    };
    if changed {
        invalidate(v);
    }
    Ok(changed)
}

/// Whether adding `ele` would change the HLL `v` (a register below the element's count),
/// read without changing it; a corrupt sparse body answers true (the add reports it).
pub fn would_change(v: &[u8], ele: &[u8]) -> Result<bool, Invalid> {
    let (index, count) = pattern(ele);
    Ok(match check(v)? {
        Encoding::Dense => dense_get(&v[HDR..], index) < count,
        Encoding::Sparse => sparse::get(&v[HDR..], index).is_none_or(|r| r < count),
    })
}

/// Adds an element (`hllAdd`): whether a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Invalid> {
    let (index, count) = pattern(ele);
    set_register(v, index, count, sparse_max)
}

/// Raises `max`'s registers to this HLL's (`hllMerge`); whether it was dense.
pub fn merge_into(max: &mut Registers, v: &[u8]) -> Result<Encoding, Invalid> {
    let enc = check(v)?;
    match enc {
        Encoding::Dense => {
            let regs = &v[HDR..];
            for (i, m) in max.iter_mut().enumerate() {
                *m = (*m).max(dense_get(regs, i));
            }
        }
        Encoding::Sparse => sparse::for_each_run(&v[HDR..], |first, len, val| {
            for m in &mut max[first..first + len] {
                *m = (*m).max(val);
            }
        })?,
    }
    Ok(enc)
}

/// Turns a sparse HLL dense (`hllSparseToDense`), keeping its header's cached cardinality:
/// whether it converted (false: it was dense already).
pub fn to_dense(v: &mut Vec<u8>) -> Result<bool, Invalid> {
    if check(v)? == Encoding::Dense {
        return Ok(false);
    }
    let mut dense = vec![0; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR..];
    sparse::for_each_run(&v[HDR..], |first, len, val| {
        for i in first..first + len {
            dense_set(regs, i, val);
        }
    })?;
    *v = dense;
    Ok(true)
}

/// Every register's value (PFDEBUG GETREG reads a dense HLL's).
pub fn registers(v: &[u8]) -> Result<Box<Registers>, Invalid> {
    let mut max = Box::new([0; REGISTERS]);
    merge_into(&mut max, v)?;
    Ok(max)
}

/// Writes `regs` into an HLL (PFMERGE's destination), promoting it to dense when `dense`
/// or when sparse cannot hold them; marks its cache stale.
pub fn write_registers(
    v: &mut Vec<u8>,
    regs: &Registers,
    dense: bool,
    sparse_max: usize,
) -> Result<(), Invalid> {
    if dense {
        to_dense(v)?;
    }
    for (i, &r) in regs.iter().enumerate() {
        if r != 0 {
            set_register(v, i, r, sparse_max)?;
        }
    }
    invalidate(v);
    Ok(())
}

#[cfg(test)]
mod tests;

//! Retina's fingerprints: a 1-byte hash of each key, kept in a node's tail beside the slot
//! of every sorted item and log entry, so a point lookup compares the bytes of only the keys
//! whose fingerprint matches (compared 16 at a time). The hash is part of the node format
//! (docs/FORMAT.md, "Tail"): every writer computes it the same way, and the validator
//! checks it.
//!
//! With the test-only feature `collide-fingerprints` a fingerprint keeps one bit of the
//! hash, so about half of all lookups compare keys that turn out different: every reader's
//! collision path is exercised (the README's second test command builds it).

/// Multiplier constants (wyhash's secrets: odd, half their bits set).
const K0: u64 = 0xa076_1d64_78bd_642f;
const K1: u64 = 0xe703_7ed1_a0b4_28db;

/// Folded 64×64→128-bit multiply: the low half xored with the high half.
#[inline(always)]
fn mix(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline(always)]
fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[inline(always)]
fn le32(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u64::from(u32::from_le_bytes(a))
}

/// 64-bit hash of a key (format-defined; see docs/FORMAT.md "Fingerprints"): keys of up to
/// 16 bytes cost two multiplies. `n` is the key's length, `le64(i)` / `le32(i)` the
/// little-endian word at byte `i`:
///
/// - `n ≤ 16`: `a, b` = `le64(0), le64(n − 8)` when `n ≥ 8`; `le32(0), le32(n − 4)` when
///   `n ≥ 4`; `key[0] << 16 | key[n/2] << 8 | key[n − 1], 0` when `n ≥ 1`; `0, 0` when empty.
///   `h = K1`.
/// - `n > 16`: `h = K1`, then for each 16 bytes at `i = 0, 16, …` while more than 16 bytes
///   remain past `i`: `h = mix(le64(i) ^ K0, le64(i + 8) ^ h)`; then `a, b` =
///   `le64(n − 16), le64(n − 8)`.
///
/// Result: `mix(mix(a ^ K0 ^ n, b ^ h), K0 ^ K1)` where `mix` is the folded 128-bit product.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    let n = key.len();
    let mut h = K1;
    let (a, b) = if n <= 16 {
        if n >= 8 {
            (le64(key, 0), le64(key, n - 8))
        } else if n >= 4 {
            (le32(key, 0), le32(key, n - 4))
        } else if n > 0 {
            (
                u64::from(key[0]) << 16 | u64::from(key[n / 2]) << 8 | u64::from(key[n - 1]),
                0,
            )
        } else {
            (0, 0)
        }
    } else {
        let mut i = 0;
        while n - i > 16 {
            h = mix(le64(key, i) ^ K0, le64(key, i + 8) ^ h);
            i += 16;
        }
        (le64(key, n - 16), le64(key, n - 8))
    };
    mix(mix(a ^ K0 ^ n as u64, b ^ h), K0 ^ K1)
}

/// The fingerprint of a key: the top byte of [`key_hash`].
#[inline]
pub fn fingerprint(key: &[u8]) -> u8 {
    fingerprint_of_hash(key_hash(key))
}

/// The fingerprint carried by a hash from [`key_hash`] (a caller that hashed the key
/// already need not hash it again).
#[inline]
pub fn fingerprint_of_hash(h: u64) -> u8 {
    let fp = (h >> 56) as u8;
    if cfg!(feature = "collide-fingerprints") {
        fp & 1
    } else {
        fp
    }
}

/// Bit `i` set where `window[i] == fp`, for the first 16 bytes of `window` (which must have
/// at least 16).
#[inline(always)]
pub fn match16(window: &[u8], fp: u8) -> u32 {
    let w: &[u8; 16] = match window.get(..16).and_then(|w| w.try_into().ok()) {
        Some(w) => w,
        None => return 0,
    };
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline; the load reads the 16 bytes of `w`
        // (unaligned load).
        unsafe {
            let v = _mm_loadu_si128(w.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(fp as i8))) as u32
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0;
        for (i, b) in w.iter().enumerate() {
            m |= u32::from(*b == fp) << i;
        }
        m
    }
}

/// Calls `f` with the index of every byte of `fps` equal to `fp`, in ascending order, until
/// `f` returns `true`; returns whether it did. 16 bytes per comparison.
#[inline]
pub fn find_fingerprint(fps: &[u8], fp: u8, f: impl FnMut(usize) -> bool) -> bool {
    find_in(fps, fp, 1, f)
}

/// Calls `f` with the index `j` (0 first) of every 4-byte log slot in `slots` whose
/// fingerprint byte (byte 2 of the slot) equals `fp`, in ascending order, until `f` returns
/// `true`; returns whether it did. Four slots per comparison.
#[inline]
pub fn find_log_fingerprint(slots: &[u8], fp: u8, f: impl FnMut(usize) -> bool) -> bool {
    find_in(slots, fp, 4, f)
}

/// Records of `width` bytes (1 or 4) whose fingerprint byte (the last byte but one of a
/// 4-byte record, the byte itself of a 1-byte one) equals `fp`, by record index.
#[inline(always)]
fn find_in(bytes: &[u8], fp: u8, width: usize, mut f: impl FnMut(usize) -> bool) -> bool {
    let (lanes, at_lane) = if width == 1 { (0xFFFF, 0) } else { (0x4444, 2) };
    let n = bytes.len();
    if n < 16 {
        for r in 0..n / width {
            if bytes[width * r + at_lane] == fp && f(r) {
                return true;
            }
        }
        return false;
    }
    // Whole windows, then the last one ending at `n`, overlapping the one before: its bits
    // below `skip` were seen already.
    let mut at = 0;
    while let Some(w) = bytes.get(at..at + 16) {
        let mut m = match16(w, fp) & lanes;
        while m != 0 {
            if f((at + m.trailing_zeros() as usize) / width) {
                return true;
            }
            m &= m - 1;
        }
        at += 16;
    }
    if at < n {
        let (start, skip) = (n - 16, at - (n - 16));
        let mut m = ((match16(&bytes[start..], fp) & lanes) >> skip) << skip;
        while m != 0 {
            if f((start + m.trailing_zeros() as usize) / width) {
                return true;
            }
            m &= m - 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hash_reads_every_byte_of_short_and_long_keys() {
        // Changing any one byte (or the length) changes the hash.
        for n in 0..80usize {
            let key: Vec<u8> = (0..n as u8).map(|i| i.wrapping_mul(37)).collect();
            let h = key_hash(&key);
            for i in 0..n {
                let mut k2 = key.clone();
                k2[i] ^= 0x40;
                assert_ne!(key_hash(&k2), h, "length {n}, byte {i}");
            }
            let mut longer = key.clone();
            longer.push(0);
            assert_ne!(key_hash(&longer), h, "length {n} and {}", n + 1);
        }
    }

    #[test]
    fn fingerprints_spread_over_every_byte_value() {
        let mut counts = [0u32; 256];
        for i in 0..256_000u32 {
            counts[usize::from(fingerprint(format!("user{i:012}").as_bytes()))] += 1;
        }
        if cfg!(feature = "collide-fingerprints") {
            assert!(counts[0] > 100_000 && counts[1] > 100_000);
        } else {
            // 1,000 expected per value; a fair hash stays well inside 800..1200.
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(*lo > 800 && *hi < 1200, "fingerprint counts {lo}..{hi}");
        }
    }

    proptest! {
        #[test]
        fn find_matches_every_equal_byte(fps in proptest::collection::vec(0u8..4, 0..80), fp in 0u8..4) {
            let mut seen = Vec::new();
            assert!(!find_fingerprint(&fps, fp, |i| { seen.push(i); false }));
            let want: Vec<usize> = (0..fps.len()).filter(|&i| fps[i] == fp).collect();
            prop_assert_eq!(&seen, &want);
            // Stops at the first `true`.
            let mut first = None;
            let found = find_fingerprint(&fps, fp, |i| { first = Some(i); true });
            prop_assert_eq!(found, !want.is_empty());
            prop_assert_eq!(first, want.first().copied());
        }

        #[test]
        fn find_log_matches_every_slot(fps in proptest::collection::vec(0u8..4, 0..40), fp in 0u8..4) {
            let slots: Vec<u8> = fps.iter().flat_map(|&f| [fp ^ 1, fp ^ 2, f, fp]).collect();
            let mut seen = Vec::new();
            find_log_fingerprint(&slots, fp, |j| { seen.push(j); false });
            let want: Vec<usize> = (0..fps.len()).filter(|&j| fps[j] == fp).collect();
            prop_assert_eq!(seen, want);
        }
    }
}

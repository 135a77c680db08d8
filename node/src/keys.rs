//! Key comparison in `memcmp` order, eight bytes at a time: keys are short (16 bytes is the
//! common case), where a call into libc's `memcmp` costs more than the comparison.

use std::cmp::Ordering;

/// Compares two keys byte-wise, shorter first on a common prefix (the order of `[u8]`):
/// eight bytes at a time as big-endian integers while both keys have eight more, then
/// byte by byte (at most seven), then by length.
#[inline]
pub fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    let (mut a, mut b) = (a, b);
    while let (Some((x, ra)), Some((y, rb))) =
        (a.split_first_chunk::<8>(), b.split_first_chunk::<8>())
    {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
        (a, b) = (ra, rb);
    }
    for (x, y) in a.iter().zip(b) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// Whether two keys are equal: a few word comparisons for keys up to 32 bytes (a call into
/// libc's `bcmp` costs more than comparing them).
#[inline(always)]
pub fn keys_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        u64::from_ne_bytes(w)
    };
    match n {
        8..=16 => w8(a, 0) == w8(b, 0) && w8(a, n - 8) == w8(b, n - 8),
        17..=32 => {
            w8(a, 0) == w8(b, 0)
                && w8(a, 8) == w8(b, 8)
                && w8(a, n - 16) == w8(b, n - 16)
                && w8(a, n - 8) == w8(b, n - 8)
        }
        4..=7 => {
            let w4 = |s: &[u8], i: usize| u32::from_ne_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
            w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
        }
        _ => a == b,
    }
}

/// [`cmp_keys`] of two keys of the same length: eight bytes at a time, the last eight
/// overlapping the ones before when the length is not a multiple of eight.
#[inline]
pub fn cmp_same_len(a: &[u8], b: &[u8]) -> Ordering {
    debug_assert_eq!(a.len(), b.len());
    let n = a.len().min(b.len());
    if n < 8 {
        return cmp_keys(a, b);
    }
    let word = |s: &[u8], i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[i..i + 8]);
        u64::from_be_bytes(w)
    };
    let mut i = 0;
    while i + 8 < n {
        let (x, y) = (word(a, i), word(b, i));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    word(a, n - 8).cmp(&word(b, n - 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_slice_order(a in proptest::collection::vec(any::<u8>(), 0..40),
                               b in proptest::collection::vec(any::<u8>(), 0..40),
                               shared in 0usize..30) {
            let mut b2 = a[..shared.min(a.len())].to_vec();
            b2.extend_from_slice(&b);
            prop_assert_eq!(cmp_keys(&a, &b), a.as_slice().cmp(b.as_slice()));
            prop_assert_eq!(cmp_keys(&a, &b2), a.as_slice().cmp(b2.as_slice()));
            prop_assert_eq!(cmp_keys(&a, &a), Ordering::Equal);
            prop_assert_eq!(keys_eq(&a, &b2), a == b2);
            prop_assert!(keys_eq(&a, &a.clone()));
            let n = a.len().min(b2.len());
            prop_assert_eq!(cmp_same_len(&a[..n], &b2[..n]), a[..n].cmp(&b2[..n]));
        }
    }
}

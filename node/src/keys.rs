//! Key comparison in `memcmp` order, eight bytes at a time: keys are short (16 bytes is the
//! common case), where a call into libc's `memcmp` costs more than the comparison.

use std::cmp::Ordering;

/// Compares two keys byte-wise, shorter first on a common prefix (the order of `[u8]`).
/// Keys of 8 bytes or more are first told apart by their first 8 bytes as one integer.
#[inline]
pub fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
        return cmp_rest(&a[8..], &b[8..]);
    }
    cmp_rest(a, b)
}

#[inline]
fn cmp_rest(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (mut ac, mut bc) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ac).zip(&mut bc) {
        let (x, y) = (
            u64::from_be_bytes(x.try_into().unwrap_or([0; 8])),
            u64::from_be_bytes(y.try_into().unwrap_or([0; 8])),
        );
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ac.remainder().iter().zip(bc.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
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
        }
    }
}

//! Key hashing for the hot-key cache: FNV-1a over the key, finished with a 64-bit mixer, so
//! the two bucket choices and the auxiliary hash are independent bits.

/// 64-bit hash of `key`.
#[inline]
pub(crate) fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // splitmix64 finaliser
    h ^= h >> 30;
    h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^ (h >> 31)
}

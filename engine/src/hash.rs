//! Key hashing for the hot-key cache and its sketch: the store's own key hash (the one
//! fingerprints are cut from: two multiplies for a key of up to 16 bytes, its bits well
//! mixed), so the two bucket choices and the auxiliary hash are independent bits.

/// 64-bit hash of `key`.
#[inline]
pub(crate) fn hash(key: &[u8]) -> u64 {
    accelkv_tree::key_hash(key)
}

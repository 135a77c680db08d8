//! Key and value generators shared by the examples: 16-byte keys spread uniformly over the
//! key space, values that encode their key.

#![allow(dead_code)]

/// splitmix64: spreads sequential indices uniformly.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The 16-byte key of item `i`.
pub fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

/// A value of `len` bytes (at least 8) starting with `i`.
pub fn value(i: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len.max(8)];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// Resident set size of this process in bytes.
pub fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

//! Records: key names built from YCSB key numbers, and values that encode their key and a
//! version so the driver can tell a right answer from a fast wrong one.
//!
//! Value layout (little endian): `[0..8)` FNV-1a 64 of the key bytes, `[8..16)` the write's
//! version (a run-wide counter), then filler bytes drawn from splitmix64 seeded with
//! `tag ^ version`. A value read back must have the expected length, its key's tag, a version
//! the driver has issued, and (when checked in full) the filler.

use crate::generator::fnvhash64;

/// Record shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordShape {
    /// Honeycomb's default: 16-byte keys (`user` + 12 characters) and 16-byte values.
    Small,
    /// 16-byte keys as `Small`, 100-byte values (the larger-than-memory benchmarks).
    Medium,
    /// YCSB's default: keys `user<N>` and ten 100-byte fields stored as one 1000-byte value.
    Ycsb,
}

impl RecordShape {
    /// Parses `small`, `medium` or `ycsb`.
    pub fn parse(s: &str) -> Option<RecordShape> {
        match s {
            "small" | "16" => Some(RecordShape::Small),
            "medium" | "100" => Some(RecordShape::Medium),
            "ycsb" | "1000" => Some(RecordShape::Ycsb),
            _ => None,
        }
    }

    /// Name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            RecordShape::Small => "16 B keys, 16 B values",
            RecordShape::Medium => "16 B keys, 100 B values",
            RecordShape::Ycsb => "user<N> keys, 10 x 100 B fields",
        }
    }

    /// Value length in bytes.
    pub fn value_len(self) -> usize {
        match self {
            RecordShape::Small => 16,
            RecordShape::Medium => 100,
            RecordShape::Ycsb => 1000,
        }
    }

    /// The key of YCSB key number `keynum` with hashed insert order (YCSB's default
    /// `insertorder=hashed`): `user` + `fnvhash64(keynum)` in decimal for [`RecordShape::Ycsb`];
    /// for [`RecordShape::Small`] the same hash in 12 base-62 digits (62^12 > 2^63, so no two
    /// hashes share a key) making the key exactly 16 bytes.
    pub fn key(self, keynum: u64, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(b"user");
        let h = fnvhash64(keynum as i64);
        match self {
            RecordShape::Ycsb => out.extend_from_slice(h.to_string().as_bytes()),
            RecordShape::Small | RecordShape::Medium => {
                const DIGITS: &[u8; 62] =
                    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
                let mut d = [b'0'; 12];
                let mut v = h.unsigned_abs();
                for slot in d.iter_mut().rev() {
                    *slot = DIGITS[(v % 62) as usize];
                    v /= 62;
                }
                out.extend_from_slice(&d);
            }
        }
    }
}

/// FNV-1a 64 of `bytes`: the tag a value carries for its key.
pub fn key_tag(bytes: &[u8]) -> u64 {
    let mut h = 0xCBF2_9CE4_8422_2325u64;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Writes the value of `key` at `version` into `out` (`len` ≥ 16 bytes).
pub fn make_value(key: &[u8], version: u64, len: usize, out: &mut Vec<u8>) {
    let tag = key_tag(key);
    out.clear();
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    let mut s = tag ^ version;
    while out.len() < len {
        let w = splitmix(&mut s).to_le_bytes();
        let n = (len - out.len()).min(8);
        out.extend_from_slice(&w[..n]);
    }
}

/// Why a value read back is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Length differs from the record shape's.
    Length(usize),
    /// Tagged with another key.
    Key,
    /// A version this run never wrote.
    Version(u64),
    /// Filler bytes differ.
    Body,
}

/// The versions a run can have written: above `after` (where its counter started, so values
/// left by an earlier run are caught) and at most `upto` (the last one issued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    /// Exclusive lower bound.
    pub after: u64,
    /// Inclusive upper bound.
    pub upto: u64,
}

/// Checks `value` read for `key`: length, tag, a version in `versions`, and the filler too
/// when `full`.
pub fn check_value(
    key: &[u8],
    value: &[u8],
    len: usize,
    versions: Versions,
    full: bool,
) -> Result<(), Invalid> {
    if value.len() != len {
        return Err(Invalid::Length(value.len()));
    }
    let tag = u64::from_le_bytes(value[..8].try_into().expect("8 bytes"));
    if tag != key_tag(key) {
        return Err(Invalid::Key);
    }
    let version = u64::from_le_bytes(value[8..16].try_into().expect("8 bytes"));
    if version <= versions.after || version > versions.upto {
        return Err(Invalid::Version(version));
    }
    if full {
        let mut want = Vec::with_capacity(len);
        make_value(key, version, len, &mut want);
        if want != value {
            return Err(Invalid::Body);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_their_shape() {
        let mut k = Vec::new();
        RecordShape::Ycsb.key(0, &mut k);
        assert_eq!(k, b"user6284781860667377211");
        for n in [0u64, 1, 99, 1 << 40] {
            RecordShape::Small.key(n, &mut k);
            assert_eq!(k.len(), 16);
            assert!(k.starts_with(b"user"));
            assert!(k.iter().all(u8::is_ascii_alphanumeric));
        }
        let mut seen = std::collections::HashSet::new();
        for n in 0..100_000u64 {
            RecordShape::Small.key(n, &mut k);
            assert!(seen.insert(k.clone()), "duplicate key for {n}");
        }
    }

    #[test]
    fn values_check_their_key_and_version() {
        for len in [16usize, 1000] {
            let mut v = Vec::new();
            make_value(b"user1", 7, len, &mut v);
            assert_eq!(v.len(), len);
            let ok = Versions { after: 0, upto: 7 };
            assert_eq!(check_value(b"user1", &v, len, ok, true), Ok(()));
            assert_eq!(check_value(b"user2", &v, len, ok, true), Err(Invalid::Key));
            let unwritten = Versions { after: 0, upto: 6 };
            assert_eq!(
                check_value(b"user1", &v, len, unwritten, true),
                Err(Invalid::Version(7))
            );
            let earlier_run = Versions { after: 7, upto: 9 };
            assert_eq!(
                check_value(b"user1", &v, len, earlier_run, true),
                Err(Invalid::Version(7))
            );
            assert_eq!(
                check_value(b"user1", &v[..len - 1], len, ok, true),
                Err(Invalid::Length(len - 1))
            );
            if len > 16 {
                let mut bad = v.clone();
                bad[len - 1] ^= 1;
                assert_eq!(
                    check_value(b"user1", &bad, len, ok, true),
                    Err(Invalid::Body)
                );
                assert_eq!(check_value(b"user1", &bad, len, ok, false), Ok(()));
            }
        }
    }
}

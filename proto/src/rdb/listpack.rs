//! Redis's listpack (`listpack.c`) and intset (`intset.c`), read-only: the compact
//! encodings Redis 7 dumps small hashes, sets, sorted sets and list nodes in. Each entry is
//! a string or an integer (given back as its decimal text); any malformed byte is an
//! error, never a panic.

use super::RdbError;

fn bad<T>() -> Result<T, RdbError> {
    Err(RdbError::BadFormat)
}

/// Every entry of a listpack, in order.
pub fn entries(lp: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    if lp.len() < 7 {
        return bad();
    }
    let total = u32::from_le_bytes([lp[0], lp[1], lp[2], lp[3]]) as usize;
    if total != lp.len() || lp[total - 1] != 0xff {
        return bad();
    }
    let mut out = Vec::new();
    let mut p = 6;
    loop {
        let Some(&b) = lp.get(p) else {
            return bad();
        };
        if b == 0xff {
            return if p == total - 1 { Ok(out) } else { bad() };
        }
        let (entry, size) = entry(&lp[p..])?;
        out.push(entry);
        // The entry, then its back-length (1 to 5 bytes, by the entry's size).
        let back = match size {
            0..=127 => 1,
            128..=16_382 => 2,
            16_383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        p += size + back;
        if p >= total {
            return bad();
        }
    }
}

/// The entry at the start of `e` and its size (encoding and data, without the back-length).
fn entry(e: &[u8]) -> Result<(Vec<u8>, usize), RdbError> {
    let b = e[0];
    let get = |from: usize, n: usize| e.get(from..from + n).ok_or(RdbError::BadFormat);
    let int = |n: i64| n.to_string().into_bytes();
    if b & 0x80 == 0 {
        return Ok((int(i64::from(b)), 1));
    }
    if b & 0xc0 == 0x80 {
        let n = usize::from(b & 0x3f);
        return Ok((get(1, n)?.to_vec(), 1 + n));
    }
    if b & 0xe0 == 0xc0 {
        let raw = (u16::from(b & 0x1f) << 8) | u16::from(*get(1, 1)?.first().unwrap_or(&0));
        // 13-bit two's complement.
        let v = if raw >= 1 << 12 {
            i64::from(raw) - (1 << 13)
        } else {
            i64::from(raw)
        };
        return Ok((int(v), 2));
    }
    if b & 0xf0 == 0xe0 {
        let n = (usize::from(b & 0x0f) << 8) | usize::from(get(1, 1)?[0]);
        return Ok((get(2, n)?.to_vec(), 2 + n));
    }
    let le = |n: usize| -> Result<i64, RdbError> {
        let d = get(1, n)?;
        let mut buf = [0u8; 8];
        buf[..n].copy_from_slice(d);
        let v = u64::from_le_bytes(buf);
        // Sign-extend from n bytes.
        let shift = 64 - 8 * n as u32;
        Ok(((v << shift) as i64) >> shift)
    };
    match b {
        0xf0 => {
            let n = u32::from_le_bytes(get(1, 4)?.try_into().map_err(|_| RdbError::BadFormat)?);
            let n = n as usize;
            Ok((get(5, n)?.to_vec(), 5 + n))
        }
        0xf1 => Ok((int(le(2)?), 3)),
        0xf2 => Ok((int(le(3)?), 4)),
        0xf3 => Ok((int(le(4)?), 5)),
        0xf4 => Ok((int(le(8)?), 9)),
        _ => bad(),
    }
}

/// Every member of an intset, as decimal text.
pub fn intset(is: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    if is.len() < 8 {
        return bad();
    }
    let width = u32::from_le_bytes([is[0], is[1], is[2], is[3]]) as usize;
    let n = u32::from_le_bytes([is[4], is[5], is[6], is[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) || is.len() != 8 + n.saturating_mul(width) {
        return bad();
    }
    Ok(is[8..]
        .chunks_exact(width)
        .map(|c| {
            let v = match width {
                2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
                4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                _ => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
            };
            v.to_string().into_bytes()
        })
        .collect())
}

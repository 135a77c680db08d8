//! Redis's listpack (`listpack.c`) and intset (`intset.c`): the compact encodings Redis 7
//! dumps small hashes, sets, sorted sets, list nodes and stream nodes in. Reading gives each
//! entry as a string (an integer as its decimal text); any malformed byte is an error,
//! never a panic. [`Writer`] builds a listpack as `lpAppend` does, for the stream nodes
//! DUMP writes.

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

/// A listpack being built: entries appended in order, then [`Writer::finish`].
pub struct Writer {
    buf: Vec<u8>,
    n: usize,
}

impl Default for Writer {
    fn default() -> Writer {
        Writer {
            buf: vec![0; 6],
            n: 0,
        }
    }
}

impl Writer {
    /// Appends an integer in the smallest of listpack's integer encodings.
    pub fn int(&mut self, v: i64) {
        let at = self.buf.len();
        match v {
            0..=127 => self.buf.push(v as u8),
            -4096..=4095 => {
                let u = (v & 0x1fff) as u16;
                self.buf
                    .extend_from_slice(&[0xc0 | (u >> 8) as u8, u as u8]);
            }
            -32_768..=32_767 => {
                self.buf.push(0xf1);
                self.buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            -8_388_608..=8_388_607 => {
                self.buf.push(0xf2);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            _ if i32::try_from(v).is_ok() => {
                self.buf.push(0xf3);
                self.buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            _ => {
                self.buf.push(0xf4);
                self.buf.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.back(at);
    }

    /// Appends a string; one that is an integer's canonical text goes as that integer, as
    /// `lpAppend` stores it (it reads back as the same text).
    pub fn str(&mut self, s: &[u8]) {
        if s.len() <= 20 {
            let n = std::str::from_utf8(s)
                .ok()
                .and_then(|t| t.parse::<i64>().ok());
            if let Some(n) = n.filter(|n| n.to_string().as_bytes() == s) {
                return self.int(n);
            }
        }
        let at = self.buf.len();
        match s.len() {
            0..=63 => self.buf.push(0x80 | s.len() as u8),
            64..=4095 => self
                .buf
                .extend_from_slice(&[0xe0 | (s.len() >> 8) as u8, s.len() as u8]),
            _ => {
                self.buf.push(0xf0);
                self.buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
            }
        }
        self.buf.extend_from_slice(s);
        self.back(at);
    }

    /// Appends the back-length of the entry that starts at `at` (`lpEncodeBacklen`).
    fn back(&mut self, at: usize) {
        let l = (self.buf.len() - at) as u64;
        let width = match l {
            0..=127 => 1,
            128..=16_382 => 2,
            16_383..=2_097_150 => 3,
            2_097_151..=268_435_454 => 4,
            _ => 5,
        };
        for i in (0..width).rev() {
            let b = ((l >> (7 * i)) & 127) as u8;
            // Every byte but the first has its high bit set.
            self.buf.push(if i + 1 < width { b | 128 } else { b });
        }
        self.n += 1;
    }

    /// The listpack: its header (total bytes, entry count or 65,535 past that) and end byte.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(0xff);
        let total = self.buf.len() as u32;
        self.buf[..4].copy_from_slice(&total.to_le_bytes());
        let n = u16::try_from(self.n).unwrap_or(u16::MAX);
        self.buf[4..6].copy_from_slice(&n.to_le_bytes());
        self.buf
    }
}

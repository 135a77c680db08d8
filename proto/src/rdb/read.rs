//! Reading a DUMP payload (`rdbLoadObject` for the types served): its footer checked, then
//! the value, every length bounded by the bytes left (so a forged length allocates
//! nothing), every string in any of RDB's encodings.

use super::listpack::{entries, intset};
use super::stream::{T_STREAM, T_STREAM_2, T_STREAM_3};
use super::*;

/// A DUMP payload's body, its footer (RDB version, CRC-64) checked and taken off.
pub(crate) fn checked_body(payload: &[u8]) -> Result<&[u8], RdbError> {
    if payload.len() < 10 {
        return Err(RdbError::VersionOrChecksum);
    }
    let (body, crc) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let crc = u64::from_le_bytes(crc.try_into().map_err(|_| RdbError::BadFormat)?);
    if version > MAX_VERSION || crc64(body) != crc {
        return Err(RdbError::VersionOrChecksum);
    }
    Ok(&body[..body.len() - 2])
}

/// The value of a DUMP payload.
pub fn restore(payload: &[u8]) -> Result<Value, RdbError> {
    let mut r = Reader {
        b: checked_body(payload)?,
        p: 0,
    };
    let t = r.byte()?;
    let v = r.value(t)?;
    match r.p == r.b.len() {
        true => Ok(v),
        false => Err(RdbError::BadFormat),
    }
}

pub(crate) struct Reader<'a> {
    b: &'a [u8],
    p: usize,
}

fn bad<T>() -> Result<T, RdbError> {
    Err(RdbError::BadFormat)
}

/// A length: a plain one, or the encoding of a special string (`Err`-free either way).
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    /// A reader of `b` from its start.
    pub(crate) fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b, p: 0 }
    }

    /// Whether every byte has been read.
    pub(crate) fn done(&self) -> bool {
        self.p == self.b.len()
    }

    /// Bytes read so far.
    pub(crate) fn at(&self) -> usize {
        self.p
    }

    /// Eight bytes as a little-endian number.
    pub(crate) fn u64_le(&mut self) -> Result<u64, RdbError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| RdbError::BadFormat)?,
        ))
    }

    fn left(&self) -> usize {
        self.b.len() - self.p
    }

    /// Four bytes as a little-endian number.
    pub(crate) fn u32_le(&mut self) -> Result<u32, RdbError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes(
            b.try_into().map_err(|_| RdbError::BadFormat)?,
        ))
    }

    pub(crate) fn byte(&mut self) -> Result<u8, RdbError> {
        let b = *self.b.get(self.p).ok_or(RdbError::BadFormat)?;
        self.p += 1;
        Ok(b)
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&[u8], RdbError> {
        if n > self.left() {
            return bad();
        }
        self.p += n;
        Ok(&self.b[self.p - n..self.p])
    }

    fn len_or_enc(&mut self) -> Result<Len, RdbError> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => Len::Plain(u64::from(b & 0x3f)),
            1 => Len::Plain((u64::from(b & 0x3f) << 8) | u64::from(self.byte()?)),
            3 => Len::Encoded(b & 0x3f),
            _ => match b {
                0x80 => Len::Plain(u64::from(u32::from_be_bytes(
                    self.take(4)?.try_into().map_err(|_| RdbError::BadFormat)?,
                ))),
                0x81 => Len::Plain(u64::from_be_bytes(
                    self.take(8)?.try_into().map_err(|_| RdbError::BadFormat)?,
                )),
                _ => return bad(),
            },
        })
    }

    fn len(&mut self) -> Result<usize, RdbError> {
        usize::try_from(self.len64()?).map_err(|_| RdbError::BadFormat)
    }

    /// A plain length as a number (a stream's counters and ids are written as lengths).
    pub(crate) fn len64(&mut self) -> Result<u64, RdbError> {
        match self.len_or_enc()? {
            Len::Plain(n) => Ok(n),
            Len::Encoded(_) => bad(),
        }
    }

    /// A count of items, each at least `min` bytes: bounded by the bytes left.
    pub(crate) fn count(&mut self, min: usize) -> Result<usize, RdbError> {
        let n = self.len()?;
        match n.checked_mul(min) {
            Some(need) if need <= self.left() => Ok(n),
            _ => bad(),
        }
    }

    pub(crate) fn string(&mut self) -> Result<Vec<u8>, RdbError> {
        match self.len_or_enc()? {
            Len::Plain(n) => {
                let n = usize::try_from(n).map_err(|_| RdbError::BadFormat)?;
                Ok(self.take(n)?.to_vec())
            }
            Len::Encoded(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => {
                let v =
                    i16::from_le_bytes(self.take(2)?.try_into().map_err(|_| RdbError::BadFormat)?);
                Ok(v.to_string().into_bytes())
            }
            Len::Encoded(2) => {
                let v =
                    i32::from_le_bytes(self.take(4)?.try_into().map_err(|_| RdbError::BadFormat)?);
                Ok(v.to_string().into_bytes())
            }
            Len::Encoded(3) => {
                let (clen, len) = (self.len()?, self.len()?);
                let data = self.take(clen)?;
                // LZF expands at most 88 times (a 3-byte back reference of 264 bytes); a bigger claim is forged.
                if len > clen.saturating_mul(90).max(90) {
                    return bad();
                }
                let out = lzf::decompress(data, len).map_err(|_| RdbError::BadFormat)?;
                match out.len() == len {
                    true => Ok(out),
                    false => bad(),
                }
            }
            Len::Encoded(_) => bad(),
        }
    }

    /// An old (type 3) sorted set's score: a length byte and its decimal text.
    fn text_score(&mut self) -> Result<f64, RdbError> {
        match self.byte()? {
            253 => Ok(f64::NAN),
            254 => Ok(f64::INFINITY),
            255 => Ok(f64::NEG_INFINITY),
            n => {
                let t = std::str::from_utf8(self.take(usize::from(n))?)
                    .map_err(|_| RdbError::BadFormat)?;
                t.parse().map_err(|_| RdbError::BadFormat)
            }
        }
    }

    /// A value of RDB type `t`.
    pub(crate) fn value(&mut self, t: u8) -> Result<Value, RdbError> {
        Ok(match t {
            T_STRING => Value::String(self.string()?),
            T_LIST => {
                let n = self.count(1)?;
                Value::List((0..n).map(|_| self.string()).collect::<Result<_, _>>()?)
            }
            T_SET => {
                let n = self.count(1)?;
                Value::Set((0..n).map(|_| self.string()).collect::<Result<_, _>>()?)
            }
            T_ZSET | T_ZSET_2 => {
                let n = self.count(2)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.string()?;
                    let score = match t {
                        T_ZSET => self.text_score()?,
                        _ => f64::from_le_bytes(
                            self.take(8)?.try_into().map_err(|_| RdbError::BadFormat)?,
                        ),
                    };
                    if score.is_nan() {
                        return bad();
                    }
                    items.push((m, score));
                }
                Value::ZSet(items)
            }
            T_HASH => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((self.string()?, self.string()?));
                }
                Value::Hash(pairs)
            }
            T_SET_INTSET => Value::Set(intset(&self.string()?)?),
            T_SET_LISTPACK => Value::Set(entries(&self.string()?)?),
            T_HASH_LISTPACK => Value::Hash(pairs(entries(&self.string()?)?)?),
            T_ZSET_LISTPACK => {
                let mut items = Vec::new();
                for (m, s) in pairs(entries(&self.string()?)?)? {
                    let t = std::str::from_utf8(&s).map_err(|_| RdbError::BadFormat)?;
                    let score: f64 = t.parse().map_err(|_| RdbError::BadFormat)?;
                    if score.is_nan() {
                        return bad();
                    }
                    items.push((m, score));
                }
                Value::ZSet(items)
            }
            T_LIST_QUICKLIST_2 => {
                let nodes = self.count(2)?;
                let mut items = Vec::new();
                for _ in 0..nodes {
                    match self.len()? {
                        1 => items.push(self.string()?),
                        2 => items.extend(entries(&self.string()?)?),
                        _ => return bad(),
                    }
                }
                Value::List(items)
            }
            T_STREAM | T_STREAM_2 | T_STREAM_3 => Value::Stream(self.stream(t)?),
            other => return Err(RdbError::Unsupported(other)),
        })
    }
}

/// A hash's field and value, or a sorted set's member and score text.
type Pair = (Vec<u8>, Vec<u8>);

/// Alternate entries as pairs (an odd count is malformed).
fn pairs(e: Vec<Vec<u8>>) -> Result<Vec<Pair>, RdbError> {
    if !e.len().is_multiple_of(2) {
        return bad();
    }
    let mut it = e.into_iter();
    let mut out = Vec::new();
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Ok(out)
}

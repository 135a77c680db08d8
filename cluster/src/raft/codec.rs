//! The Raft side's formats, on disk and on the wire (docs/CLUSTER.md, "Formats"):
//! `postcard` (serde with varints; its wire format is stable since 1.0), and a version in
//! front of everything: each file starts with an 8-byte header (a 7-byte name and the
//! format), each frame between replicas with the format byte.
//!
//! Format 1 was bincode 1.3 with no version. Its files (a log, a vote, a snapshot written
//! before this format) are still read — with [`legacy`] — and rewritten in this format
//! when a group opens; frames of format 1 are not spoken (every node of a cluster is
//! upgraded together).

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The format this build writes.
pub const FORMAT: u8 = 2;

/// The header of a log file.
pub const LOG: [u8; 8] = *b"AKVRLOG\x02";
/// The header of a vote file.
pub const VOTE: [u8; 8] = *b"AKVRVOT\x02";
/// The header of a snapshot file.
pub const SNAPSHOT: [u8; 8] = *b"AKVRSNP\x02";

/// `v` in this format (no header: the caller frames it).
pub fn to_bytes<T: Serialize + ?Sized>(v: &T) -> std::io::Result<Vec<u8>> {
    postcard::to_stdvec(v).map_err(std::io::Error::other)
}

/// [`to_bytes`]'s inverse; bytes it did not make (trailing bytes included) are an error.
pub fn from_bytes<T: DeserializeOwned>(b: &[u8]) -> std::io::Result<T> {
    let (v, rest) = postcard::take_from_bytes(b).map_err(std::io::Error::other)?;
    if !rest.is_empty() {
        return Err(std::io::Error::other("trailing bytes"));
    }
    Ok(v)
}

/// Which format a file of kind `header` is in: `Some(FORMAT)` after the header, `Some(1)`
/// for a file of format 1 (no header), `None` for a header of a format this build does
/// not know (a newer one).
pub fn file_format(bytes: &[u8], header: &[u8; 8]) -> Option<u8> {
    match bytes.get(..8) {
        Some(h) if h == header => Some(FORMAT),
        Some(h) if h[..7] == header[..7] => None,
        _ => Some(1),
    }
}

/// `v` in format `format` (this one, or 1 for files written before it).
pub fn from_bytes_in<T: DeserializeOwned>(format: u8, b: &[u8]) -> std::io::Result<T> {
    if format == FORMAT {
        from_bytes(b)
    } else {
        legacy::from_bytes(b)
    }
}

/// The error for a file of a format newer than this build's (`what` names the file).
pub fn newer(what: &str, bytes: &[u8]) -> std::io::Error {
    std::io::Error::other(format!(
        "{what} was written in format {} by a newer accelkv (this one reads formats 1 to {FORMAT})",
        bytes.get(7).copied().unwrap_or(0)
    ))
}

/// A checked file of kind `header` holding `v`: the header, `u32 crc32c(body) | body`.
pub fn checked_file<T: Serialize + ?Sized>(header: &[u8; 8], v: &T) -> std::io::Result<Vec<u8>> {
    let body = to_bytes(v)?;
    let mut b = header.to_vec();
    b.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    b.extend_from_slice(&body);
    Ok(b)
}

/// [`checked_file`]'s inverse, which also reads the file of format 1 (`u32 crc32c(body) |
/// body` in bincode, no header): the value, and whether the file was of format 1 (to be
/// written again). `what` names the file in errors.
pub fn read_checked_file<T: DeserializeOwned>(
    b: &[u8],
    header: &[u8; 8],
    what: &str,
) -> std::io::Result<(T, bool)> {
    let format = file_format(b, header).ok_or_else(|| newer(what, b))?;
    let body = if format == FORMAT {
        &b[header.len()..]
    } else {
        b
    };
    let corrupt = |why: String| std::io::Error::other(format!("{what} is corrupt{why}"));
    let (crc, body) = (
        body.get(..4).ok_or_else(|| corrupt(String::new()))?,
        &body[4..],
    );
    if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().unwrap()) {
        return Err(corrupt(String::new()));
    }
    let v = from_bytes_in(format, body).map_err(|e| corrupt(format!(": {e}")))?;
    Ok((v, format != FORMAT))
}

/// A frame body: the format byte, then the value.
pub fn frame<T: Serialize + ?Sized>(v: &T) -> std::io::Result<Vec<u8>> {
    let mut b = vec![FORMAT];
    b.extend_from_slice(&to_bytes(v)?);
    Ok(b)
}

/// [`frame`]'s inverse: a frame of another format is refused with what it is.
pub fn unframe<T: DeserializeOwned>(b: &[u8]) -> std::io::Result<T> {
    match b.first() {
        Some(&FORMAT) => from_bytes(&b[1..]),
        Some(&other) => Err(std::io::Error::other(format!(
            "a Raft frame of format {other} (this node speaks {FORMAT}): every node of a cluster must run the same format"
        ))),
        None => Err(std::io::Error::other("an empty Raft frame")),
    }
}

/// Format 1: bincode 1.3, read only to upgrade files written before format 2.
pub mod legacy {
    use serde::de::DeserializeOwned;

    pub fn from_bytes<T: DeserializeOwned>(b: &[u8]) -> std::io::Result<T> {
        bincode::deserialize(b).map_err(std::io::Error::other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_their_format() {
        let b = frame(&(7u64, "x".to_string())).unwrap();
        assert_eq!(b[0], FORMAT);
        assert_eq!(unframe::<(u64, String)>(&b).unwrap(), (7, "x".into()));
        let mut old = b.clone();
        old[0] = 1;
        let e = unframe::<(u64, String)>(&old).unwrap_err().to_string();
        assert!(e.contains("format 1"), "{e}");
        assert!(from_bytes::<u64>(&[1, 2]).is_err(), "trailing bytes");
    }

    #[test]
    fn files_say_their_format() {
        let mut b = LOG.to_vec();
        b.extend_from_slice(b"...");
        assert_eq!(file_format(&b, &LOG), Some(FORMAT));
        b[7] = 3;
        assert_eq!(file_format(&b, &LOG), None);
        assert_eq!(file_format(&[0u8; 12], &LOG), Some(1));
        assert_eq!(file_format(b"", &LOG), Some(1));
    }
}

//! memcached's reply lines: the classic `VALUE` blocks and status words, and the meta
//! commands' return flags, echoed in the order the request gave them.

use super::meta::MetaFlags;
use std::io::Write as _;

/// A classic retrieval's item: `VALUE <key> <flags> <bytes> [<cas unique>]`, the data, CRLF.
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    let _ = match cas {
        Some(c) => write!(out, " {flags} {} {c}\r\n", data.len()),
        None => write!(out, " {flags} {}\r\n", data.len()),
    };
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// A status line (`STORED`, `END`, ...) with its CRLF.
pub fn line(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// An unsigned number on a line of its own (`incr`/`decr`'s answer).
pub fn number(out: &mut Vec<u8>, n: u64) {
    let _ = write!(out, "{n}\r\n");
}

/// What a meta command's return flags report about an item.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ItemInfo {
    /// The client flags.
    pub flags: u32,
    /// The value's size in bytes.
    pub size: usize,
    /// The CAS unique.
    pub cas: u64,
    /// Seconds to live; -1 when the item does not expire.
    pub ttl: i64,
}

/// A meta reply's head: the two-letter code (`VA <size>` when `value` is given, then
/// `HD`, `EN`, `NF`, `NS`, `EX`), the return flags the request asked for in its order
/// (`key`: the key as the request sent it, base64 when it had `b`; `item`: what they report,
/// `None` when there is no item, so only `O`, `k` and `b` are echoed), CRLF, and the value
/// with its CRLF.
pub fn meta(
    out: &mut Vec<u8>,
    code: &str,
    flags: &MetaFlags<'_>,
    key: &[u8],
    item: Option<&ItemInfo>,
    value: Option<&[u8]>,
) {
    match value {
        Some(v) => {
            let _ = write!(out, "VA {}", v.len());
        }
        None => out.extend_from_slice(code.as_bytes()),
    }
    for t in flags.tokens.clone() {
        let Some((&letter, arg)) = t.split_first() else {
            continue;
        };
        let _ = match (letter, item) {
            (b'O', _) => {
                out.extend_from_slice(b" O");
                out.extend_from_slice(arg);
                Ok(())
            }
            (b'k', _) => {
                out.extend_from_slice(b" k");
                out.extend_from_slice(key);
                Ok(())
            }
            (b'b', _) if flags.ret_key => {
                out.extend_from_slice(b" b");
                Ok(())
            }
            (b'f', Some(i)) => write!(out, " f{}", i.flags),
            (b's', Some(i)) => write!(out, " s{}", i.size),
            (b'c', Some(i)) => write!(out, " c{}", i.cas),
            (b't', Some(i)) => write!(out, " t{}", i.ttl),
            _ => Ok(()),
        };
    }
    out.extend_from_slice(b"\r\n");
    if let Some(v) = value {
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
}

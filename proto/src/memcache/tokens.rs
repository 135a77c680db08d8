//! Lines and tokens of memcached's text protocol: a line ends in CRLF (a bare LF is
//! accepted, as memcached does), tokens are separated by spaces (runs of spaces count as
//! one), keys are 1 to 250 bytes with no whitespace or control characters.

use super::{McError, McLimits};

/// The space-separated tokens of a line, borrowed from it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Tokens<'a> {
    rest: &'a [u8],
}

impl<'a> Tokens<'a> {
    /// The tokens of `line` (without its line end).
    pub fn new(line: &'a [u8]) -> Self {
        Tokens { rest: line }
    }

    /// Whether no token is left.
    pub fn is_empty(&self) -> bool {
        self.rest.iter().all(|&b| b == b' ')
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|&b| b != b' ')?;
        let rest = &self.rest[start..];
        let len = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        self.rest = &rest[len..];
        Some(&rest[..len])
    }
}

/// The first line of `buf` (without CRLF or LF) and the offset after it; `Ok(None)` while
/// it is incomplete; `LineTooLong` once it is longer than memcached reads (`max_line`, or
/// `max_get_line` for a retrieval command).
pub(crate) fn split_line<'a>(
    buf: &'a [u8],
    limits: &McLimits,
) -> Result<Option<(&'a [u8], usize)>, McError> {
    let max = if is_get(buf) {
        limits.max_get_line
    } else {
        limits.max_line
    };
    let window = &buf[..buf.len().min(max + 2)];
    match window.iter().position(|&b| b == b'\n') {
        Some(nl) => {
            let line = &buf[..nl];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.len() > max {
                return Err(McError::LineTooLong);
            }
            Ok(Some((line, nl + 1)))
        }
        None if buf.len() > max + 1 => Err(McError::LineTooLong),
        None => Ok(None),
    }
}

fn is_get(buf: &[u8]) -> bool {
    [b"get ".as_slice(), b"gets ", b"gat ", b"gats "]
        .iter()
        .any(|p| buf.starts_with(p))
}

/// A key memcached's text protocol accepts: 1 to `max_key` bytes. memcached 1.6 splits
/// lines on spaces only, so it takes any other byte in a key (tabs and control characters
/// too, which its documentation discourages and load tools such as memaslap send); so does
/// this decoder. A line end cannot be inside a token.
pub(crate) fn valid_key(k: &[u8], limits: &McLimits) -> bool {
    !k.is_empty() && k.len() <= limits.max_key && !k.iter().any(|&b| b == b' ' || b == b'\r')
}

/// A decimal number: digits only (a leading `-` for signed types), no overflow.
pub(crate) fn parse_num<T: std::str::FromStr>(t: &[u8]) -> Option<T> {
    let digits = t.strip_prefix(b"-").unwrap_or(t);
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(t).ok()?.parse().ok()
}

//! RESP (the Redis serialization protocol), the subset accelkv speaks: commands as arrays
//! of bulk strings or inline lines (what `redis-cli`, client libraries and
//! `redis-benchmark`'s PING_INLINE send), and replies as simple strings, errors, integers,
//! bulk strings and arrays; for a connection that switched with `HELLO 3`, RESP3's null,
//! map and verbatim string replies ([`Version`], [`bulk_in`], [`map`], [`verbatim`]).
//!
//! ```text
//! command  := '*' n CRLF ( '$' len CRLF bytes CRLF ){n}  |  inline-line CRLF
//! reply    := '+' line CRLF | '-' line CRLF | ':' int CRLF | '$' len CRLF bytes CRLF
//!           | '$-1' CRLF | '*' n CRLF reply{n} | '*-1' CRLF
//! ```
//! Parsers never panic, return `Ok(None)` when more bytes are needed, and check declared
//! sizes against [`Limits`] before allocating.

use crate::limits::Limits;
use std::fmt;

/// Why RESP input was rejected (the connection should get `-ERR Protocol error` and close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RespError {
    /// Not RESP.
    Protocol(&'static str),
    /// A command's element is not a bulk string (this byte started it).
    Expected(u8),
    /// A declared size over its limit.
    TooLarge {
        /// What.
        what: &'static str,
        /// Declared size.
        len: usize,
        /// Limit.
        max: usize,
    },
}

impl fmt::Display for RespError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RespError::Protocol(why) => write!(f, "Protocol error: {why}"),
            RespError::Expected(got) => {
                write!(f, "Protocol error: expected '$', got '{}'", char::from(*got))
            }
            // Redis's texts first (what clients and tests look for), then the limit.
            RespError::TooLarge { what, len, max } => match *what {
                "array" => write!(f, "Protocol error: invalid multibulk length"),
                // A server limit lower than Redis's 512 MB: say which.
                "bulk string" => write!(
                    f,
                    "Protocol error: invalid bulk length ({len} bytes exceed this server's limit of {max}: --max-value)"
                ),
                _ => write!(
                    f,
                    "Protocol error: {what} of {len} exceeds the limit of {max}"
                ),
            },
        }
    }
}

impl std::error::Error for RespError {}

/// Finds the CRLF-terminated line starting at `at`; `Ok(None)` if it is not complete.
fn line(buf: &[u8], at: usize, max: usize) -> Result<Option<(&[u8], usize)>, RespError> {
    let rest = buf.get(at..).unwrap_or(&[]);
    match rest.iter().position(|&b| b == b'\n') {
        Some(nl) => {
            if nl > max + 1 {
                return Err(RespError::TooLarge {
                    what: "line",
                    len: nl,
                    max,
                });
            }
            if nl == 0 || rest.get(nl - 1) != Some(&b'\r') {
                return Err(RespError::Protocol("expected CRLF"));
            }
            if rest.get(..nl - 1).is_some_and(|l| l.contains(&b'\r')) {
                return Err(RespError::Protocol("CR inside a line"));
            }
            Ok(rest.get(..nl - 1).map(|l| (l, at + nl + 1)))
        }
        None if rest.len() > max + 2 => Err(RespError::TooLarge {
            what: "line",
            len: rest.len(),
            max,
        }),
        None => Ok(None),
    }
}

/// A bulk string's bytes (`None`: the null bulk string) and the offset after it.
type Bulk<'a> = (Option<&'a [u8]>, usize);

/// The body of a bulk string whose length line `l` ended at `start`: (bytes, or `None` for a
/// null bulk string; the offset after it), or `Ok(None)` if more bytes are needed.
fn bulk_body<'a>(
    buf: &'a [u8],
    l: &[u8],
    start: usize,
    limits: &Limits,
) -> Result<Option<Bulk<'a>>, RespError> {
    let Some(n) = declared_len(l, "bulk string", limits.max_bulk)? else {
        return Ok(Some((None, start)));
    };
    if buf.len() < start + n + 2 {
        return Ok(None);
    }
    if buf.get(start + n..start + n + 2) != Some(b"\r\n") {
        return Err(RespError::Protocol("bulk string not followed by CRLF"));
    }
    Ok(Some((buf.get(start..start + n), start + n + 2)))
}

/// A declared length (of a bulk string or an array), checked against `max` before anything
/// is allocated; `None` for a negative (null) length.
fn declared_len(l: &[u8], what: &'static str, max: usize) -> Result<Option<usize>, RespError> {
    let n = int(l)?;
    if n < 0 {
        return Ok(None);
    }
    let n = n as usize;
    if n > max {
        return Err(RespError::TooLarge { what, len: n, max });
    }
    Ok(Some(n))
}

fn int(s: &[u8]) -> Result<i64, RespError> {
    std::str::from_utf8(s)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(RespError::Protocol("invalid integer"))
}

/// A parsed command: its arguments (borrowed from the input) and the bytes it took.
pub type Command<'a> = (Vec<&'a [u8]>, usize);

/// Parses one command at the start of `buf`, or `Ok(None)` if more bytes are needed.
pub fn parse_command<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<Command<'a>>, RespError> {
    let mut spans = Vec::new();
    Ok(parse_command_spans(buf, limits, &mut spans)?
        .map(|used| (spans.iter().map(|&(a, b)| &buf[a..b]).collect(), used)))
}

/// [`parse_command`] without allocating: appends each argument's `(start, end)` offsets in
/// `buf` to `spans` (a server reuses one list for a whole pipeline) and returns the bytes the
/// command took. On `Ok(None)` or an error, `spans` is left as it was.
pub fn parse_command_spans(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Vec<(usize, usize)>,
) -> Result<Option<usize>, RespError> {
    let mark = spans.len();
    let r = spans_of(buf, limits, spans);
    if !matches!(r, Ok(Some(_))) {
        spans.truncate(mark);
    }
    r
}

fn spans_of(
    buf: &[u8],
    limits: &Limits,
    spans: &mut Vec<(usize, usize)>,
) -> Result<Option<usize>, RespError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let base = buf.as_ptr() as usize;
    let offsets = |s: &[u8]| {
        let a = s.as_ptr() as usize - base;
        (a, a + s.len())
    };
    if first != b'*' {
        // Inline command: words separated by spaces, or quoted.
        let Some((l, end)) = line(buf, 0, limits.max_inline)? else {
            return Ok(None);
        };
        let mark = spans.len();
        for w in inline_words(l)? {
            if spans.len() - mark == limits.max_array {
                return Err(RespError::TooLarge {
                    what: "inline arguments",
                    len: inline_words(l)?.count(),
                    max: limits.max_array,
                });
            }
            spans.push(offsets(w));
        }
        return Ok(Some(end));
    }
    let multibulk = |e: RespError| match e {
        RespError::Protocol(_) => RespError::Protocol("invalid multibulk length"),
        e => e,
    };
    let Some((n, mut at)) = length_line(buf, 1, "array", limits.max_array).map_err(multibulk)?
    else {
        return Ok(None);
    };
    // A negative count is an empty command, skipped (as Redis does).
    let n = n.unwrap_or(0);
    let bulk = |e: RespError| match e {
        RespError::Protocol(_) => RespError::Protocol("invalid bulk length"),
        e => e,
    };
    for _ in 0..n {
        match buf.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&c) => return Err(RespError::Expected(c)),
        }
        let Some((len, start)) =
            length_line(buf, at + 1, "bulk string", limits.max_bulk).map_err(bulk)?
        else {
            return Ok(None);
        };
        let Some(len) = len else {
            return Err(RespError::Protocol("invalid bulk length"));
        };
        if buf.len() < start + len + 2 {
            return Ok(None);
        }
        if buf.get(start + len..start + len + 2) != Some(b"\r\n") {
            return Err(RespError::Protocol("bulk string not followed by CRLF"));
        }
        spans.push((start, start + len));
        at = start + len + 2;
    }
    Ok(Some(at))
}

/// The words of an inline command line: separated by spaces; a word may be quoted with
/// `"` or `'` to hold spaces (a quote must close, and be followed by a space or the end,
/// as Redis requires: "unbalanced quotes in request"). Escapes inside quotes are refused,
/// since an argument is a span of the input here.
fn inline_words(l: &[u8]) -> Result<impl Iterator<Item = &[u8]>, RespError> {
    let mut words = Vec::new();
    let mut i = 0;
    while i < l.len() {
        match l[i] {
            b' ' | b'\t' => i += 1,
            q @ (b'"' | b'\'') => {
                let Some(close) = l[i + 1..].iter().position(|&b| b == q) else {
                    return Err(RespError::Protocol("unbalanced quotes in request"));
                };
                let word = &l[i + 1..i + 1 + close];
                if q == b'"' && word.contains(&b'\\') {
                    return Err(RespError::Protocol(
                        "escapes in quoted inline arguments are not supported (send RESP arrays)",
                    ));
                }
                let after = i + 2 + close;
                if after < l.len() && !matches!(l[after], b' ' | b'\t') {
                    return Err(RespError::Protocol("unbalanced quotes in request"));
                }
                words.push(word);
                i = after;
            }
            _ => {
                let len = l[i..]
                    .iter()
                    .position(|&b| b == b' ' || b == b'\t')
                    .unwrap_or(l.len() - i);
                words.push(&l[i..i + len]);
                i += len;
            }
        }
    }
    Ok(words.into_iter())
}

/// The declared length on the line at `at` (an array's or a bulk string's, checked against
/// `max`; `None` for a negative one) and the offset after the line, or `Ok(None)` if the
/// line is not complete. A plain run of digits ending in CRLF, the whole of what clients
/// send, is read in one pass; anything else takes the general path ([`line`] and
/// [`declared_len`]), which gives the same answer for every input.
#[inline]
pub(crate) fn length_line(
    buf: &[u8],
    at: usize,
    what: &'static str,
    max: usize,
) -> Result<Option<(Option<usize>, usize)>, RespError> {
    let rest = buf.get(at..).unwrap_or(&[]);
    let mut n: usize = 0;
    let mut i = 0;
    // At most 18 digits: no overflow, and within the 32-byte line limit.
    while i < 18 {
        match rest.get(i) {
            Some(&d @ b'0'..=b'9') => n = n * 10 + usize::from(d - b'0'),
            Some(b'\r') if i > 0 => {
                return match rest.get(i + 1) {
                    Some(b'\n') if n > max => Err(RespError::TooLarge { what, len: n, max }),
                    Some(b'\n') => Ok(Some((Some(n), at + i + 2))),
                    None => Ok(None),
                    Some(_) => general_length_line(buf, at, what, max),
                };
            }
            None => return Ok(None),
            Some(_) => return general_length_line(buf, at, what, max),
        }
        i += 1;
    }
    general_length_line(buf, at, what, max)
}

/// [`length_line`] for any input: the line, then its integer.
#[cold]
fn general_length_line(
    buf: &[u8],
    at: usize,
    what: &'static str,
    max: usize,
) -> Result<Option<(Option<usize>, usize)>, RespError> {
    let Some((l, next)) = line(buf, at, 32)? else {
        return Ok(None);
    };
    Ok(Some((declared_len(l, what, max)?, next)))
}

/// A reply value (for clients and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `+OK`
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo` or `$-1` (None).
    Bulk(Option<Vec<u8>>),
    /// `*2 ...` or `*-1` (None).
    Array(Option<Vec<Value>>),
}

/// Parses one reply at the start of `buf`: the value and the bytes it took, or `Ok(None)`.
pub fn parse_reply(buf: &[u8], limits: &Limits) -> Result<Option<(Value, usize)>, RespError> {
    parse_reply_at(buf, 0, limits, 0)
}

/// A reply's type byte, its first line, and where that line ends.
type Head<'a> = (u8, &'a [u8], usize);

/// The head of the reply at `at`: its type byte, its first line and where the line ends
/// (`Ok(None)`: more bytes are needed); nesting past `limits.max_depth` is refused.
fn reply_head<'a>(
    buf: &'a [u8],
    at: usize,
    limits: &Limits,
    depth: usize,
) -> Result<Option<Head<'a>>, RespError> {
    if depth > limits.max_depth {
        return Err(RespError::TooLarge {
            what: "nesting",
            len: depth,
            max: limits.max_depth,
        });
    }
    let Some(&t) = buf.get(at) else {
        return Ok(None);
    };
    Ok(line(buf, at + 1, limits.max_inline)?.map(|(l, next)| (t, l, next)))
}

fn parse_reply_at(
    buf: &[u8],
    at: usize,
    limits: &Limits,
    depth: usize,
) -> Result<Option<(Value, usize)>, RespError> {
    let Some((t, l, next)) = reply_head(buf, at, limits, depth)? else {
        return Ok(None);
    };
    let text = || String::from_utf8_lossy(l).into_owned();
    Ok(Some(match t {
        b'+' => (Value::Simple(text()), next),
        b'-' => (Value::Error(text()), next),
        b':' => (Value::Integer(int(l)?), next),
        b'$' => match bulk_body(buf, l, next, limits)? {
            None => return Ok(None),
            Some((b, end)) => (Value::Bulk(b.map(<[u8]>::to_vec)), end),
        },
        b'*' => {
            let Some(n) = declared_len(l, "array", limits.max_array)? else {
                return Ok(Some((Value::Array(None), next)));
            };
            // Grown as elements arrive: a declared count alone reserves little.
            let mut items = Vec::with_capacity(n.min(1024));
            let mut pos = next;
            for _ in 0..n {
                let Some((v, p)) = parse_reply_at(buf, pos, limits, depth + 1)? else {
                    return Ok(None);
                };
                items.push(v);
                pos = p;
            }
            (Value::Array(Some(items)), pos)
        }
        _ => return Err(RespError::Protocol("unknown reply type")),
    }))
}

/// The length of the one reply, RESP2 or RESP3, at the start of `buf`, without decoding it
/// (`Ok(None)`: more bytes are needed). Every RESP3 type is framed: null `_`, boolean `#`,
/// double `,`, big number `(`, verbatim `=`, blob error `!`, map `%`, set `~`, push `>` and
/// attributes `|` (which precede the reply they annotate and are counted with it). A proxy
/// relays replies whole with it.
pub fn reply_len(buf: &[u8], limits: &Limits) -> Result<Option<usize>, RespError> {
    reply_end(buf, 0, limits, 0)
}

fn reply_end(
    buf: &[u8],
    at: usize,
    limits: &Limits,
    depth: usize,
) -> Result<Option<usize>, RespError> {
    let Some((t, l, next)) = reply_head(buf, at, limits, depth)? else {
        return Ok(None);
    };
    let items = |per: usize| -> Result<Option<usize>, RespError> {
        let Some(n) = declared_len(l, "aggregate", limits.max_array)? else {
            return Ok(Some(next));
        };
        let mut pos = next;
        for _ in 0..n * per {
            let Some(p) = reply_end(buf, pos, limits, depth + 1)? else {
                return Ok(None);
            };
            pos = p;
        }
        Ok(Some(pos))
    };
    match t {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Some(next)),
        b'$' | b'=' | b'!' => Ok(bulk_body(buf, l, next, limits)?.map(|(_, end)| end)),
        b'*' | b'~' | b'>' => items(1),
        b'%' => items(2),
        b'|' => match items(2)? {
            Some(p) => reply_end(buf, p, limits, depth + 1),
            None => Ok(None),
        },
        _ => Err(RespError::Protocol("unknown reply type")),
    }
}

/// Appends `+s\r\n`.
pub fn simple(out: &mut Vec<u8>, s: &str) {
    out.push(b'+');
    out.extend_from_slice(s.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends `-msg\r\n` (line breaks in `msg` become spaces).
pub fn error(out: &mut Vec<u8>, msg: &str) {
    out.push(b'-');
    out.extend(
        msg.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal, without allocating (replies are encoded per request).
fn decimal(out: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `:n\r\n`.
pub fn integer(out: &mut Vec<u8>, n: i64) {
    out.push(b':');
    decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends a bulk string, or `$-1\r\n` for `None`.
pub fn bulk(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            out.push(b'$');
            decimal(out, b.len() as i64);
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        None => out.extend_from_slice(b"$-1\r\n"),
    }
}

/// The protocol a connection's replies are in: RESP2 unless it switched with `HELLO 3`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Version {
    /// RESP2 (nulls are `$-1`, maps are flat arrays).
    #[default]
    Resp2,
    /// RESP3 (nulls are `_`, maps `%`, verbatim strings `=`).
    Resp3,
}

/// Appends a bulk string, or the null of `v` (`$-1\r\n` in RESP2, `_\r\n` in RESP3).
pub fn bulk_in(out: &mut Vec<u8>, b: Option<&[u8]>, v: Version) {
    match (b, v) {
        (None, Version::Resp3) => out.extend_from_slice(b"_\r\n"),
        (b, _) => bulk(out, b),
    }
}

/// Appends a map header of `n` pairs: `%n\r\n` in RESP3, an array of `2n` in RESP2 (the
/// caller appends key, value, key, value…).
pub fn map(out: &mut Vec<u8>, n: usize, v: Version) {
    match v {
        Version::Resp3 => header(out, b'%', n),
        Version::Resp2 => array(out, 2 * n),
    }
}

/// Appends text as a verbatim string (`=len\r\ntxt:…` in RESP3, as Redis answers INFO),
/// a bulk string in RESP2.
pub fn verbatim(out: &mut Vec<u8>, text: &[u8], v: Version) {
    match v {
        Version::Resp3 => {
            out.push(b'=');
            decimal(out, text.len() as i64 + 4);
            out.extend_from_slice(b"\r\ntxt:");
            out.extend_from_slice(text);
            out.extend_from_slice(b"\r\n");
        }
        Version::Resp2 => bulk(out, Some(text)),
    }
}

/// Appends a set header of `n` members: `~n\r\n` in RESP3, an array in RESP2.
pub fn set(out: &mut Vec<u8>, n: usize, v: Version) {
    match v {
        Version::Resp3 => header(out, b'~', n),
        Version::Resp2 => array(out, n),
    }
}

/// Appends a null array: `*-1\r\n` in RESP2 (EXEC after a WATCH conflict), `_\r\n` in
/// RESP3.
pub fn null_array(out: &mut Vec<u8>, v: Version) {
    match v {
        Version::Resp3 => out.extend_from_slice(b"_\r\n"),
        Version::Resp2 => out.extend_from_slice(b"*-1\r\n"),
    }
}

/// Appends an array header `*n\r\n` (the caller appends `n` elements).
pub fn array(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n)
}

/// Appends the header of an out-of-band message of `n` elements: RESP3's push type
/// (`>n\r\n`), an array in RESP2 (pub/sub messages and subscription replies).
pub fn push(out: &mut Vec<u8>, n: usize, v: Version) {
    match v {
        Version::Resp3 => header(out, b'>', n),
        Version::Resp2 => header(out, b'*', n),
    }
}

/// Appends an aggregate's header: its type byte, the count, CRLF.
fn header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    decimal(out, n as i64);
    out.extend_from_slice(b"\r\n");
}

/// Appends a command as an array of bulk strings (what clients send).
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    array(out, args.len());
    for a in args {
        bulk(out, Some(a));
    }
}

/// Appends a reply value.
pub fn value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Simple(s) => simple(out, s),
        Value::Error(s) => error(out, s),
        Value::Integer(n) => integer(out, *n),
        Value::Bulk(b) => bulk(out, b.as_deref()),
        Value::Array(None) => out.extend_from_slice(b"*-1\r\n"),
        Value::Array(Some(items)) => {
            array(out, items.len());
            for i in items {
                value(out, i);
            }
        }
    }
}

#[cfg(test)]
mod decimal_tests {
    #[test]
    fn integers_and_lengths_match_to_string() {
        for n in [0i64, 1, -1, 9, 10, 99, 100, 12345, i64::MAX, i64::MIN, -907] {
            let mut out = Vec::new();
            super::integer(&mut out, n);
            assert_eq!(out, format!(":{n}\r\n").into_bytes());
        }
        let mut out = Vec::new();
        super::bulk(&mut out, Some(&[b'x'; 1234]));
        assert!(out.starts_with(b"$1234\r\n"));
    }
}

#[cfg(test)]
mod resp3_tests {
    use super::*;

    #[test]
    fn nulls_maps_and_verbatim_strings_per_version() {
        let enc = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut out = Vec::new();
            f(&mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(enc(&|o| bulk_in(o, None, Version::Resp2)), "$-1\r\n");
        assert_eq!(enc(&|o| bulk_in(o, None, Version::Resp3)), "_\r\n");
        assert_eq!(
            enc(&|o| bulk_in(o, Some(b"v"), Version::Resp3)),
            "$1\r\nv\r\n"
        );
        assert_eq!(enc(&|o| map(o, 2, Version::Resp3)), "%2\r\n");
        assert_eq!(enc(&|o| map(o, 2, Version::Resp2)), "*4\r\n");
        assert_eq!(
            enc(&|o| verbatim(o, b"a:1", Version::Resp3)),
            "=7\r\ntxt:a:1\r\n"
        );
        assert_eq!(
            enc(&|o| verbatim(o, b"a:1", Version::Resp2)),
            "$3\r\na:1\r\n"
        );
    }
}

#[cfg(test)]
mod length_line_tests {
    use super::*;
    use proptest::prelude::*;

    /// Argument spans and the bytes a command took.
    type Parsed = Option<(Vec<(usize, usize)>, usize)>;

    /// The command parser before `length_line`: every length through `line` and
    /// `declared_len`. The fast path must give the same answer for every input.
    fn reference(buf: &[u8], limits: &Limits) -> Result<Parsed, RespError> {
        if buf.first() != Some(&b'*') {
            let mut spans = Vec::new();
            return parse_command_spans(buf, limits, &mut spans).map(|r| r.map(|n| (spans, n)));
        }
        let mb = |e: RespError| match e {
            RespError::Protocol(_) => RespError::Protocol("invalid multibulk length"),
            e => e,
        };
        let bk = |e: RespError| match e {
            RespError::Protocol(_) => RespError::Protocol("invalid bulk length"),
            e => e,
        };
        let Some((l, mut at)) = line(buf, 1, 32).map_err(mb)? else {
            return Ok(None);
        };
        let n = declared_len(l, "array", limits.max_array)
            .map_err(mb)?
            .unwrap_or(0);
        let mut spans = Vec::new();
        for _ in 0..n {
            match buf.get(at) {
                None => return Ok(None),
                Some(b'$') => {}
                Some(&c) => return Err(RespError::Expected(c)),
            }
            let Some((l, start)) = line(buf, at + 1, 32).map_err(bk)? else {
                return Ok(None);
            };
            let Some(n) = declared_len(l, "bulk string", limits.max_bulk).map_err(bk)? else {
                return Err(RespError::Protocol("invalid bulk length"));
            };
            if buf.len() < start + n + 2 {
                return Ok(None);
            }
            if buf.get(start + n..start + n + 2) != Some(b"\r\n") {
                return Err(RespError::Protocol("bulk string not followed by CRLF"));
            }
            spans.push((start, start + n));
            at = start + n + 2;
        }
        Ok(Some((spans, at)))
    }

    fn command(args: &[Vec<u8>]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a);
            out.extend_from_slice(b"\r\n");
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Commands, cut anywhere and with bytes changed anywhere (lengths and signs and
        /// CRLFs included), parse exactly as the general parser parses them.
        #[test]
        fn same_as_the_general_parser(
            args in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 0..5),
            cut in any::<usize>(),
            flips in proptest::collection::vec((any::<usize>(), prop_oneof![
                Just(b'-'), Just(b'+'), Just(b'\r'), Just(b'\n'), Just(b'0'), Just(b'9'),
                Just(b'$'), Just(b' '), any::<u8>()]), 0..3),
            small in any::<bool>(),
        ) {
            let mut buf = command(&args);
            for (at, b) in flips {
                if !buf.is_empty() {
                    let i = at % buf.len();
                    buf[i] = b;
                }
            }
            buf.truncate(cut % (buf.len() + 1));
            let limits = if small {
                Limits { max_bulk: 8, max_array: 2, ..Limits::default() }
            } else {
                Limits::default()
            };
            let mut spans = Vec::new();
            let got = parse_command_spans(&buf, &limits, &mut spans).map(|r| r.map(|n| (spans, n)));
            prop_assert_eq!(got, reference(&buf, &limits));
        }
    }

    #[test]
    fn long_and_signed_lengths_take_the_general_path() {
        let limits = Limits::default();
        for line in [
            &b"*+1\r\n$1\r\na\r\n"[..],
            b"*01\r\n$1\r\na\r\n",
            b"*1\r\n$-0\r\n\r\n",
            b"*1\r\n$0000000000000000000001\r\na\r\n",
            b"*99999999999999999999\r\n",
        ] {
            let mut spans = Vec::new();
            let got = parse_command_spans(line, &limits, &mut spans).map(|r| r.map(|n| (spans, n)));
            assert_eq!(
                got,
                reference(line, &limits),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
    }
}

//! memcached's text protocol, as memcached 1.6's `protocol.txt` documents it: the classic
//! commands ([`Command`]) and the meta commands ([`meta`]), decoded in place from a
//! connection's input with no allocation, plus the reply lines ([`reply`]), memcached's
//! expiry rule ([`Exptime`]) and its UDP framing ([`udp`]).
//!
//! ```text
//! storage   := ("set"|"add"|"replace"|"append"|"prepend") key flags exptime bytes [noreply] CRLF
//!              data CRLF
//!            | "cas" key flags exptime bytes cas-unique [noreply] CRLF data CRLF
//! retrieval := ("get"|"gets") key+ CRLF  |  ("gat"|"gats") exptime key+ CRLF
//! other     := "delete" key ["0"] [noreply] | ("incr"|"decr") key delta [noreply]
//!            | "touch" key exptime [noreply] | "flush_all" [delay] [noreply]
//!            | "version" | "verbosity" level [noreply] | "stats" [args] | "quit"
//! meta      := ("mg"|"md"|"ma"|"me") key flag* | "ms" key datalen flag* CRLF data CRLF | "mn"
//! ```
//!
//! [`parse`] never panics, returns `Ok(None)` while a command is incomplete, and checks
//! every declared length against [`McLimits`] before waiting for it. Its errors say what
//! memcached answers and how many input bytes to drop ([`McError`]).

pub mod meta;
pub mod reply;
mod tokens;
pub mod udp;

pub use meta::{Meta, MetaCmd, MetaFlags};
pub use tokens::Tokens;

use tokens::{parse_num, split_line, valid_key};

/// The limits the memcached decoder enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McLimits {
    /// Longest key: 250 bytes, as memcached (`KEY_MAX_LENGTH`).
    pub max_key: usize,
    /// Largest value (memcached's item size limit, `-I`). Default 1 MiB.
    pub max_value: usize,
    /// Longest command line other than a multi-key get: 2048 bytes, as memcached (a
    /// longer one closes the connection).
    pub max_line: usize,
    /// Longest `get`/`gets`/`gat`/`gats` line (memcached reads these in pieces; here the
    /// line must fit). Default 64 KiB: 250 keys of 250 bytes.
    pub max_get_line: usize,
}

impl Default for McLimits {
    fn default() -> Self {
        McLimits {
            max_key: 250,
            max_value: 1 << 20,
            max_line: 2048,
            max_get_line: 64 << 10,
        }
    }
}

/// A storage command's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// `set`: store whatever was there.
    Set,
    /// `add`: store only if the key is absent.
    Add,
    /// `replace`: store only if the key is present.
    Replace,
    /// `append`: add the data after the present value (flags and exptime ignored).
    Append,
    /// `prepend`: add the data before the present value.
    Prepend,
    /// `cas`: store only if the item's CAS unique is still `cas`.
    Cas,
}

/// A decoded classic command. Slices borrow the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command<'a> {
    /// `get`/`gets` (`cas`: gets, answer each item's CAS unique too), `gat`/`gats`
    /// (`touch`: the new exptime, applied to every item found).
    Get {
        keys: Tokens<'a>,
        cas: bool,
        touch: Option<Exptime>,
    },
    /// `set`, `add`, `replace`, `append`, `prepend`, `cas`.
    Store {
        op: StoreOp,
        key: &'a [u8],
        flags: u32,
        exptime: Exptime,
        data: &'a [u8],
        /// The CAS unique a `cas` compares with (0 for the others).
        cas: u64,
        noreply: bool,
    },
    /// `delete key [0] [noreply]`.
    Delete { key: &'a [u8], noreply: bool },
    /// `incr`/`decr key delta [noreply]`.
    Arith {
        key: &'a [u8],
        delta: u64,
        incr: bool,
        noreply: bool,
    },
    /// `touch key exptime [noreply]`.
    Touch {
        key: &'a [u8],
        exptime: Exptime,
        noreply: bool,
    },
    /// `flush_all [delay] [noreply]`: every item invalid now, or `delay` seconds from now
    /// (an exptime, so an absolute time works too).
    FlushAll { delay: Exptime, noreply: bool },
    /// `version`.
    Version,
    /// `verbosity level [noreply]` (accepted; logging is the server's `--log` setting).
    Verbosity { noreply: bool },
    /// `stats [group]`: the general statistics, or a group (`settings`, `items`, `slabs`,
    /// `conns`, `reset`, ...).
    Stats { args: Tokens<'a> },
    /// `quit`: close the connection.
    Quit,
    /// `shutdown` is refused (as memcached without `-A`), but parsed so it gets the right
    /// error.
    Shutdown,
    /// A meta command.
    Meta(Meta<'a>),
}

/// Why input was rejected: what memcached answers, and what to drop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McError {
    /// `ERROR`: an unknown command or an empty line. Drop `skip` bytes (the line).
    Unknown { skip: usize },
    /// `CLIENT_ERROR <msg>`. Drop `skip` bytes: the line, and a storage command's data
    /// block when its length could be read.
    Client { msg: &'static str, skip: usize },
    /// `SERVER_ERROR object too large for cache`: a storage command whose data is over
    /// `max_value`. Drop the line and swallow `swallow` more bytes (the data and its CRLF)
    /// as they arrive.
    TooLarge { skip: usize, swallow: usize },
    /// A line longer than memcached accepts (no CRLF within the limit): close the
    /// connection, as memcached does.
    LineTooLong,
}

impl McError {
    /// Writes the reply line memcached sends for this error to `out`; false for
    /// `LineTooLong`, which gets none (the connection closes).
    pub fn write_reply(&self, out: &mut Vec<u8>) -> bool {
        match self {
            McError::Unknown { .. } => out.extend_from_slice(b"ERROR\r\n"),
            McError::Client { msg, .. } => {
                out.extend_from_slice(b"CLIENT_ERROR ");
                out.extend_from_slice(msg.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            McError::TooLarge { .. } => {
                out.extend_from_slice(b"SERVER_ERROR object too large for cache\r\n")
            }
            McError::LineTooLong => return false,
        }
        true
    }
}

/// The generic malformed-command message (memcached's).
pub const BAD_FORMAT: &str = "bad command line format";
/// A storage command's data not followed by CRLF.
pub const BAD_CHUNK: &str = "bad data chunk";

/// memcached's exptime (seconds): 0 never expires; up to 30 days it is relative to now;
/// larger values are an absolute Unix time; a negative one has already expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exptime(pub i64);

/// Relative exptimes end here: 60 × 60 × 24 × 30 seconds.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// What an exptime means at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// No deadline.
    Never,
    /// Already expired: the item is stored invisible (a write that deletes).
    Past,
    /// The deadline, in milliseconds since the Unix epoch.
    At(u64),
}

impl Exptime {
    /// The deadline this exptime gives at `now_ms` (milliseconds since the Unix epoch).
    pub fn at(self, now_ms: u64) -> Expiry {
        let t = self.0;
        if t == 0 {
            return Expiry::Never;
        }
        if t < 0 {
            return Expiry::Past;
        }
        if t <= REALTIME_MAXDELTA {
            return Expiry::At(now_ms.saturating_add(t as u64 * 1000));
        }
        let at = (t as u64).saturating_mul(1000);
        if at <= now_ms {
            Expiry::Past
        } else {
            Expiry::At(at)
        }
    }
}

/// `CLIENT_ERROR <msg>`, dropping `skip` bytes.
pub(crate) fn client(msg: &'static str, skip: usize) -> McError {
    McError::Client { msg, skip }
}

/// Parses one command from the front of `buf`: `Ok(Some((command, bytes used)))`,
/// `Ok(None)` when more input is needed, or the error to answer.
pub fn parse<'a>(
    buf: &'a [u8],
    limits: &McLimits,
) -> Result<Option<(Command<'a>, usize)>, McError> {
    let Some((line, after)) = split_line(buf, limits)? else {
        return Ok(None);
    };
    let mut toks = Tokens::new(line);
    let Some(name) = toks.next() else {
        return Err(McError::Unknown { skip: after });
    };
    let cmd = match name {
        b"get" | b"gets" => get(toks, name == b"gets", None, after, limits)?,
        b"gat" | b"gats" => {
            let exp = toks.next().ok_or(client(BAD_FORMAT, after))?;
            let exp =
                Exptime(parse_num::<i64>(exp).ok_or(client("invalid exptime argument", after))?);
            get(toks, name == b"gats", Some(exp), after, limits)?
        }
        b"set" => return store(StoreOp::Set, toks, buf, after, limits),
        b"add" => return store(StoreOp::Add, toks, buf, after, limits),
        b"replace" => return store(StoreOp::Replace, toks, buf, after, limits),
        b"append" => return store(StoreOp::Append, toks, buf, after, limits),
        b"prepend" => return store(StoreOp::Prepend, toks, buf, after, limits),
        b"cas" => return store(StoreOp::Cas, toks, buf, after, limits),
        b"delete" => {
            let key = key_arg(&mut toks, after, limits)?;
            let mut rest: [Option<&[u8]>; 3] = [toks.next(), toks.next(), toks.next()];
            let noreply = take_noreply(&mut rest);
            // memcached accepts a legacy hold time of 0 and nothing else
            match rest {
                [None, None, None] | [Some(b"0"), None, None] => {}
                _ => {
                    return Err(client(
                        "bad command line format.  Usage: delete <key> [noreply]",
                        after,
                    ))
                }
            }
            Command::Delete { key, noreply }
        }
        b"incr" | b"decr" => {
            let key = key_arg(&mut toks, after, limits)?;
            let delta = toks.next().ok_or(client(BAD_FORMAT, after))?;
            let noreply = noreply_end(&mut toks, after)?;
            let delta =
                parse_num::<u64>(delta).ok_or(client("invalid numeric delta argument", after))?;
            Command::Arith {
                key,
                delta,
                incr: name == b"incr",
                noreply,
            }
        }
        b"touch" => {
            let key = key_arg(&mut toks, after, limits)?;
            let exp = toks.next().ok_or(client(BAD_FORMAT, after))?;
            let noreply = noreply_end(&mut toks, after)?;
            let exp = parse_num::<i64>(exp).ok_or(client("invalid exptime argument", after))?;
            Command::Touch {
                key,
                exptime: Exptime(exp),
                noreply,
            }
        }
        b"flush_all" => {
            let mut rest: [Option<&[u8]>; 3] = [toks.next(), toks.next(), toks.next()];
            let noreply = take_noreply(&mut rest);
            let delay = match rest {
                [None, None, None] => 0,
                [Some(d), None, None] => parse_num::<i64>(d).ok_or(client(BAD_FORMAT, after))?,
                _ => return Err(client(BAD_FORMAT, after)),
            };
            Command::FlushAll {
                delay: Exptime(delay),
                noreply,
            }
        }
        // memcached 1.6 answers `version` whatever follows it.
        b"version" => Command::Version,
        // One or two arguments (a level, which memcached reads with strtoul and so never
        // refuses, and `noreply`); anything else is an unknown command, as memcached's.
        b"verbosity" => {
            let rest: [Option<&[u8]>; 3] = [toks.next(), toks.next(), toks.next()];
            match rest {
                [Some(_), None, None] | [Some(_), Some(_), None] => {}
                _ => return Err(McError::Unknown { skip: after }),
            }
            let noreply = rest[..2].iter().flatten().last() == Some(&b"noreply".as_slice());
            Command::Verbosity { noreply }
        }
        b"stats" => Command::Stats { args: toks },
        b"quit" => Command::Quit,
        b"shutdown" => Command::Shutdown,
        b"mn" => {
            end(&mut toks, after)?;
            Command::Meta(Meta::noop())
        }
        b"mg" | b"md" | b"ma" | b"me" | b"ms" => {
            return meta::parse(name, toks, buf, after, limits)
        }
        _ => return Err(McError::Unknown { skip: after }),
    };
    Ok(Some((cmd, after)))
}

fn get<'a>(
    toks: Tokens<'a>,
    cas: bool,
    touch: Option<Exptime>,
    after: usize,
    limits: &McLimits,
) -> Result<Command<'a>, McError> {
    let mut any = false;
    for k in toks.clone() {
        if !valid_key(k, limits) {
            return Err(client(BAD_FORMAT, after));
        }
        any = true;
    }
    if !any {
        return Err(McError::Unknown { skip: after });
    }
    Ok(Command::Get {
        keys: toks,
        cas,
        touch,
    })
}

fn key_arg<'a>(
    toks: &mut Tokens<'a>,
    after: usize,
    limits: &McLimits,
) -> Result<&'a [u8], McError> {
    match toks.next() {
        Some(k) if valid_key(k, limits) => Ok(k),
        _ => Err(client(BAD_FORMAT, after)),
    }
}

/// Removes a trailing `noreply` from up to three optional tokens; true if there was one.
fn take_noreply(rest: &mut [Option<&[u8]>; 3]) -> bool {
    if let Some(last) = rest.iter_mut().rev().find(|t| t.is_some()) {
        if *last == Some(b"noreply".as_slice()) {
            *last = None;
            return true;
        }
    }
    false
}

/// An optional `noreply` and then the end of the line.
fn noreply_end(toks: &mut Tokens<'_>, after: usize) -> Result<bool, McError> {
    let noreply = match toks.next() {
        None => return Ok(false),
        Some(b"noreply") => true,
        Some(_) => return Err(client(BAD_FORMAT, after)),
    };
    end(toks, after)?;
    Ok(noreply)
}

fn end(toks: &mut Tokens<'_>, after: usize) -> Result<(), McError> {
    match toks.next() {
        None => Ok(()),
        Some(_) => Err(client(BAD_FORMAT, after)),
    }
}

/// The data block of a storage command whose line ends at `after`: `Ok(None)` while it is
/// incomplete, its bytes and the end of its CRLF otherwise.
pub(crate) fn data_block<'a>(
    buf: &'a [u8],
    after: usize,
    len: usize,
    limits: &McLimits,
) -> Result<Option<(&'a [u8], usize)>, McError> {
    if len > limits.max_value {
        return Err(McError::TooLarge {
            skip: after,
            swallow: len + 2,
        });
    }
    let end = after + len;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        // memcached drops the line and the declared bytes, then answers the error
        return Err(client(BAD_CHUNK, end + 2));
    }
    Ok(Some((&buf[after..end], end + 2)))
}

fn store<'a>(
    op: StoreOp,
    mut toks: Tokens<'a>,
    buf: &'a [u8],
    after: usize,
    limits: &McLimits,
) -> Result<Option<(Command<'a>, usize)>, McError> {
    let key = toks.next();
    let (flags, exp, bytes) = (toks.next(), toks.next(), toks.next());
    let cas = if op == StoreOp::Cas {
        toks.next()
    } else {
        Some(b"0".as_slice())
    };
    let noreply = noreply_end(&mut toks, after)?;
    let (Some(key), Some(flags), Some(exp), Some(bytes), Some(cas)) = (key, flags, exp, bytes, cas)
    else {
        return Err(client(BAD_FORMAT, after));
    };
    let len = parse_num::<u32>(bytes).ok_or(client(BAD_FORMAT, after))? as usize;
    if !valid_key(key, limits) {
        // as memcached: the error, and the data is then read as a command line
        return Err(client(BAD_FORMAT, after));
    }
    let (Some(flags), Some(exp), Some(cas)) = (
        parse_num::<u32>(flags),
        parse_num::<i64>(exp),
        parse_num::<u64>(cas),
    ) else {
        return Err(client(BAD_FORMAT, after));
    };
    let Some((data, used)) = data_block(buf, after, len, limits)? else {
        return Ok(None);
    };
    Ok(Some((
        Command::Store {
            op,
            key,
            flags,
            exptime: Exptime(exp),
            data,
            cas,
            noreply,
        },
        used,
    )))
}

#[cfg(test)]
mod tests;

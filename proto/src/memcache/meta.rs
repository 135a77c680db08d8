//! memcached's meta commands (`mg`, `ms`, `md`, `ma`, `me`, `mn`), as memcached 1.6's
//! `protocol.txt` documents them: a key, then flags, each a letter with an optional token
//! (`v`, `T30`, `Oabc`). [`MetaFlags`] holds them decoded (numbers parsed, modes checked)
//! and in the order sent ([`MetaFlags::tokens`]), since replies echo the return flags in
//! that order.

use super::tokens::{parse_num, valid_key, Tokens};
use super::{client, data_block, Command, Exptime, McError, McLimits, BAD_FORMAT};
use base64::Engine as _;

/// Which meta command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetaCmd {
    /// `mg`: get.
    Get,
    /// `ms`: set (mode `M`: set, add, replace, append, prepend).
    Set,
    /// `md`: delete.
    Delete,
    /// `ma`: arithmetic (mode `M`: incr, decr).
    Arith,
    /// `me`: debug (the item's metadata).
    Debug,
    /// `mn`: no-op (answers `MN`, marks the end of a pipeline of quiet commands).
    Noop,
}

/// A decoded meta command. Slices borrow the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta<'a> {
    pub cmd: MetaCmd,
    /// The key as sent: base64 when `flags.base64` ([`Meta::key_into`] decodes it).
    pub key: &'a [u8],
    /// `ms`'s data block.
    pub data: &'a [u8],
    pub flags: MetaFlags<'a>,
}

/// `ms`'s mode (`M`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SetMode {
    /// `S`: set (the default).
    #[default]
    Set,
    /// `E`: add (only if absent).
    Add,
    /// `R`: replace (only if present).
    Replace,
    /// `A`: append.
    Append,
    /// `P`: prepend.
    Prepend,
}

/// A meta command's flags.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MetaFlags<'a> {
    /// Every flag, in the order sent.
    pub tokens: Tokens<'a>,
    /// `b`: the key is base64 (and is returned so).
    pub base64: bool,
    /// `c`: return the CAS unique.
    pub ret_cas: bool,
    /// `f`: return the client flags.
    pub ret_flags: bool,
    /// `h`: return whether the item was fetched before.
    pub ret_hit: bool,
    /// `k`: return the key.
    pub ret_key: bool,
    /// `l`: return seconds since the last access.
    pub ret_last_access: bool,
    /// `q`: quiet: leave out the common answer (`EN` for mg; `HD` for ms, md, ma; `NF` for
    /// md).
    pub quiet: bool,
    /// `s`: return the value's size.
    pub ret_size: bool,
    /// `t`: return the remaining TTL in seconds (-1: none).
    pub ret_ttl: bool,
    /// `v`: return the value.
    pub ret_value: bool,
    /// `u`: do not bump the item in the LRU (accepted; no LRU here).
    pub no_bump: bool,
    /// `I`: invalidate (mark stale instead of deleting or failing).
    pub invalidate: bool,
    /// `x`: md removes the value but keeps the item.
    pub remove_value: bool,
    /// `O`: opaque token, echoed (at most 32 bytes).
    pub opaque: Option<&'a [u8]>,
    /// `C`: compare this CAS unique.
    pub compare_cas: Option<u64>,
    /// `E`: use this CAS unique for the new version.
    pub new_cas: Option<u64>,
    /// `F`: client flags to store.
    pub set_flags: Option<u32>,
    /// `N`: vivify on miss with this TTL (mg, ma).
    pub vivify: Option<Exptime>,
    /// `R`: win a recache when the TTL is below this.
    pub recache: Option<Exptime>,
    /// `T`: TTL to set (ms, ma) or to update (mg, md with I).
    pub ttl: Option<Exptime>,
    /// `M`: ms's mode.
    pub set_mode: SetMode,
    /// `M`: ma's mode: true for decrement.
    pub decr: bool,
    /// `D`: ma's delta (default 1).
    pub delta: Option<u64>,
    /// `J`: ma's initial value on an auto-vivify (default 0).
    pub initial: Option<u64>,
}

impl Meta<'static> {
    /// `mn`.
    pub fn noop() -> Self {
        Meta {
            cmd: MetaCmd::Noop,
            key: b"",
            data: b"",
            flags: MetaFlags::default(),
        }
    }
}

impl Meta<'_> {
    /// The key itself (base64-decoded when the `b` flag was given) written to `out`.
    pub fn key_into<'o>(&self, out: &'o mut [u8; 256]) -> &'o [u8] {
        if !self.flags.base64 {
            let n = self.key.len().min(out.len());
            out[..n].copy_from_slice(&self.key[..n]);
            return &out[..n];
        }
        // checked by the parser
        let n = base64::engine::general_purpose::STANDARD
            .decode_slice(self.key, &mut out[..])
            .unwrap_or(0);
        &out[..n]
    }
}

/// The flags each command accepts (memcached answers `CLIENT_ERROR invalid flag` for
/// others).
fn allowed(cmd: MetaCmd) -> &'static [u8] {
    match cmd {
        MetaCmd::Get => b"bcfhklOqstuvENRT",
        MetaCmd::Set => b"bcCEFIkOqsTM",
        MetaCmd::Delete => b"bCEIkOqTx",
        MetaCmd::Arith => b"bCENJDTMOqtcvk",
        MetaCmd::Debug => b"b",
        MetaCmd::Noop => b"",
    }
}

const BAD_TOKEN: &str = "bad token in command line format";

/// Parses a meta command whose name was `name` and whose other tokens are `toks`; `after`
/// is the offset after its line in `buf`.
pub(crate) fn parse<'a>(
    name: &[u8],
    mut toks: Tokens<'a>,
    buf: &'a [u8],
    after: usize,
    limits: &McLimits,
) -> Result<Option<(Command<'a>, usize)>, McError> {
    let cmd = match name {
        b"mg" => MetaCmd::Get,
        b"ms" => MetaCmd::Set,
        b"md" => MetaCmd::Delete,
        b"ma" => MetaCmd::Arith,
        _ => MetaCmd::Debug,
    };
    let Some(key) = toks.next() else {
        return Err(client(BAD_FORMAT, after));
    };
    let datalen = if cmd == MetaCmd::Set {
        let t = toks.next().ok_or(client(BAD_FORMAT, after))?;
        Some(parse_num::<u32>(t).ok_or(client("bad data chunk", after))? as usize)
    } else {
        None
    };
    let flags = flags(cmd, toks, after)?;
    let key_ok = if flags.base64 {
        let mut out = [0u8; 256];
        key.len() <= 4 * limits.max_key.div_ceil(3)
            && base64::engine::general_purpose::STANDARD
                .decode_slice(key, &mut out[..])
                .is_ok_and(|n| valid_len(&out[..n], limits))
    } else {
        valid_key(key, limits)
    };
    if !key_ok {
        return Err(client(BAD_FORMAT, after));
    }
    let (data, used) = match datalen {
        None => (&b""[..], after),
        Some(len) => match data_block(buf, after, len, limits)? {
            None => return Ok(None),
            Some(d) => d,
        },
    };
    Ok(Some((
        Command::Meta(Meta {
            cmd,
            key,
            data,
            flags,
        }),
        used,
    )))
}

/// A decoded binary key (the `b` flag) may hold any bytes: only its length is checked.
fn valid_len(k: &[u8], limits: &McLimits) -> bool {
    !k.is_empty() && k.len() <= limits.max_key
}

fn flags<'a>(cmd: MetaCmd, toks: Tokens<'a>, after: usize) -> Result<MetaFlags<'a>, McError> {
    let mut f = MetaFlags {
        tokens: toks.clone(),
        ..MetaFlags::default()
    };
    let mut seen = 0u64;
    for t in toks {
        let Some((&letter, arg)) = t.split_first() else {
            continue;
        };
        if !letter.is_ascii_alphabetic() || !allowed(cmd).contains(&letter) {
            return Err(client("invalid flag", after));
        }
        let bit = 1u64 << (letter - b'A');
        if seen & bit != 0 {
            return Err(client("duplicate flag", after));
        }
        seen |= bit;
        let num = |arg: &[u8]| parse_num::<u64>(arg).ok_or(client(BAD_TOKEN, after));
        let ttl = |arg: &[u8]| {
            parse_num::<i64>(arg)
                .map(Exptime)
                .ok_or(client(BAD_TOKEN, after))
        };
        match letter {
            b'b' => f.base64 = true,
            b'c' => f.ret_cas = true,
            b'f' => f.ret_flags = true,
            b'h' => f.ret_hit = true,
            b'k' => f.ret_key = true,
            b'l' => f.ret_last_access = true,
            b'q' => f.quiet = true,
            b's' => f.ret_size = true,
            b't' => f.ret_ttl = true,
            b'v' => f.ret_value = true,
            b'u' => f.no_bump = true,
            b'I' => f.invalidate = true,
            b'x' => f.remove_value = true,
            b'O' => {
                if arg.len() > 32 {
                    return Err(client("opaque token too long", after));
                }
                f.opaque = Some(arg);
            }
            b'C' => f.compare_cas = Some(num(arg)?),
            b'E' => f.new_cas = Some(num(arg)?),
            b'F' => f.set_flags = Some(parse_num::<u32>(arg).ok_or(client(BAD_TOKEN, after))?),
            b'N' => f.vivify = Some(ttl(arg)?),
            b'R' => f.recache = Some(ttl(arg)?),
            b'T' => f.ttl = Some(ttl(arg)?),
            b'D' => f.delta = Some(num(arg)?),
            b'J' => f.initial = Some(num(arg)?),
            b'M' => mode(cmd, arg, &mut f).ok_or(client(
                if cmd == MetaCmd::Set {
                    "invalid mode for ms STORE"
                } else {
                    "invalid mode for ma"
                },
                after,
            ))?,
            _ => return Err(client("invalid flag", after)),
        }
    }
    Ok(f)
}

fn mode(cmd: MetaCmd, arg: &[u8], f: &mut MetaFlags<'_>) -> Option<()> {
    let [m] = arg else { return None };
    match (cmd, m.to_ascii_uppercase()) {
        (MetaCmd::Set, b'S') => f.set_mode = SetMode::Set,
        (MetaCmd::Set, b'E') => f.set_mode = SetMode::Add,
        (MetaCmd::Set, b'R') => f.set_mode = SetMode::Replace,
        (MetaCmd::Set, b'A') => f.set_mode = SetMode::Append,
        (MetaCmd::Set, b'P') => f.set_mode = SetMode::Prepend,
        (MetaCmd::Arith, b'I' | b'+') => f.decr = false,
        (MetaCmd::Arith, b'D' | b'-') => f.decr = true,
        _ => return None,
    }
    Some(())
}

//! How RESP replies are written for what the core answers: store errors, write outcomes,
//! OK and nil, the errors for unknown commands and wrong argument counts, and the small
//! parsers the handlers share.

use crate::core::ops::{Failure, Outcome};
use crate::core::station::Done;
use accelkv_proto::resp::{self, Version};
use accelkv_tree::Error;
use smallvec::SmallVec;

/// A command name or option in upper case (on the stack for anything short).
pub(crate) fn upper(a: &[u8]) -> SmallVec<[u8; 24]> {
    a.iter().map(u8::to_ascii_uppercase).collect()
}

/// Appends the RESP error for a store error.
pub(crate) fn err_store(out: &mut Vec<u8>, e: &Error) {
    match e {
        Error::OutOfMemory { .. } => {
            resp::error(out, "OOM command not allowed: memory limit reached")
        }
        other => resp::error(out, &format!("ERR {other}")),
    }
}

pub(crate) fn parse_i64(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// Appends the reply to a write's outcome: `ok` for [`Outcome::Done`], `skipped` for
/// [`Outcome::Skipped`].
pub(crate) fn reply(
    out: &mut Vec<u8>,
    d: &Done,
    ver: Version,
    ok: impl FnOnce(&mut Vec<u8>),
    skipped: impl FnOnce(&mut Vec<u8>),
) {
    match &d.outcome {
        Err(e) => err_store(out, e),
        Ok(Outcome::Done) => ok(out),
        Ok(Outcome::Skipped) => skipped(out),
        Ok(Outcome::Old(v)) => resp::bulk_in(out, v.as_deref(), ver),
        Ok(Outcome::Int(n)) => resp::integer(out, *n),
        Ok(Outcome::Bytes(b)) => resp::bulk(out, Some(b)),
        Ok(Outcome::Failed(f)) => resp::error(out, &failure_text(f)),
        Ok(other) => resp::error(
            out,
            &format!("ERR internal error: unexpected outcome {other:?}"),
        ),
    }
}

/// The RESP error text for a refused write: WRONGTYPE for a byte-level write on a
/// collection, `ERR` and the reason otherwise.
pub(crate) fn failure_text(f: &Failure) -> String {
    match f {
        Failure::WrongType => format!("WRONGTYPE {f}"),
        f => format!("ERR {f}"),
    }
}

pub(crate) fn ok(out: &mut Vec<u8>) {
    resp::simple(out, "OK")
}

/// A null reply in the connection's protocol.
pub(crate) fn nil(v: Version) -> impl FnOnce(&mut Vec<u8>) {
    move |out| resp::bulk_in(out, None, v)
}

/// Redis's error for an unknown command.
pub(crate) fn unknown_command(c: &[&[u8]]) -> String {
    let args: Vec<String> = c[1..]
        .iter()
        .take(3)
        .map(|a| format!("'{}'", String::from_utf8_lossy(a)))
        .collect();
    format!(
        "ERR unknown command '{}', with args beginning with: {}",
        String::from_utf8_lossy(c[0]),
        args.join(" ")
    )
}

pub(crate) fn wrong_args(out: &mut Vec<u8>, name: &[u8]) {
    resp::error(
        out,
        &format!(
            "ERR wrong number of arguments for '{}' command",
            String::from_utf8_lossy(name).to_lowercase()
        ),
    );
}

/// Redis's error for a command on a key of another type.
pub(crate) const WRONGTYPE: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/// Redis's HELP reply of a container command: its header, `lines`, and HELP's own two.
pub(crate) fn help(out: &mut Vec<u8>, cmd: &str, lines: &[&str]) {
    resp::array(out, lines.len() + 3);
    resp::simple(
        out,
        &format!("{cmd} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"),
    );
    for l in lines {
        resp::simple(out, l);
    }
    resp::simple(out, "HELP");
    resp::simple(out, "    Print this help.");
}

/// Redis 7's checks of a container command's subcommand before it runs, given each
/// subcommand's arity (negative: at least): `false` after writing the error when `args[1]`
/// names none of them or the wrong number of arguments.
pub(crate) fn subcommand_ok(
    out: &mut Vec<u8>,
    cmd: &str,
    subs: &[(&str, i32)],
    args: &[&[u8]],
) -> bool {
    let sub = String::from_utf8_lossy(args[1]);
    let Some((name, arity)) = subs.iter().find(|(n, _)| n.eq_ignore_ascii_case(&sub)) else {
        resp::error(
            out,
            &format!("ERR unknown subcommand '{sub}'. Try {cmd} HELP."),
        );
        return false;
    };
    let n = args.len() as i32;
    if (*arity >= 0 && n != *arity) || n < -*arity {
        resp::error(
            out,
            &format!(
                "ERR wrong number of arguments for '{}|{}' command",
                cmd.to_lowercase(),
                name.to_lowercase()
            ),
        );
        return false;
    }
    true
}

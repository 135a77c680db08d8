//! MONITOR: every command the server runs, as one line to each connection in MONITOR mode,
//! in Redis's form: `+<secs>.<micros> [<db> <addr>] "<arg>" "<arg>" …` (`[<db> lua]` for a
//! script's commands), arguments escaped as Redis's `sdscatrepr` escapes them. The lines go
//! through the monitors' pub/sub queues (`pubsub.rs`), so a monitor that stops reading is
//! bounded and disconnected as a slow subscriber is.
//!
//! Which commands, as Redis 7.2: each once it has run (a command that parks is shown when it
//! first runs, not again when woken); the commands EXEC runs between its `multi` and `exec`;
//! EVAL and its kin before the script's own commands; not the administrative commands (the
//! table's `admin` flag: CONFIG, DEBUG, MONITOR itself…) nor those the gate refused.
//! Passwords are shown as `(redacted)` (AUTH, HELLO … AUTH, MIGRATE … AUTH). Cost while nobody monitors: one
//! relaxed load per command.

use crate::resp::call::flag::ADMIN;
use crate::resp::call::{Call, Spec};
use crate::resp::session::Session;
use accelkv_proto::resp;
use std::io::Write;

/// `MONITOR`: OK, then every command's line.
pub fn monitor(x: &mut Call<'_, '_>) {
    match crate::resp::commands::pubsub::subscriptions(x.s) {
        Some(subs) => {
            subs.monitor();
            resp::simple(x.out, "OK")
        }
        None => resp::error(x.out, "ERR this connection cannot monitor"),
    }
}

/// Whether `spec`'s line is fed before it runs (a script's, before its commands') rather
/// than after.
pub fn shown_before(spec: &Spec) -> bool {
    spec.runs_script()
}

/// Feeds the monitors the line of command `args` (`spec`) that `s` runs, if anyone
/// monitors and the command is shown.
pub fn feed(s: &Session, spec: &Spec, args: &[&[u8]]) {
    if !s.global.pubsub.monitoring() || spec.has(ADMIN) {
        return;
    }
    s.global.pubsub.feed_monitors(&line(s, args));
}

/// One command's line, without the leading `+` and the line end.
fn line(s: &Session, args: &[&[u8]]) -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut l = Vec::with_capacity(64);
    let _ = write!(
        l,
        "{}.{:06} [{} ",
        now.as_secs(),
        now.subsec_micros(),
        s.selected
    );
    match (s.scripting, &s.client) {
        (true, _) => l.extend_from_slice(b"lua"),
        (false, Some(r)) => {
            let _ = write!(l, "{}", r.entry.addr);
        }
        (false, None) => l.extend_from_slice(b"-"),
    }
    l.push(b']');
    let hidden = crate::resp::redact::secrets(args);
    for (i, a) in args.iter().enumerate() {
        l.push(b' ');
        match hidden.contains(&i) {
            true => l.extend_from_slice(b"\"(redacted)\""),
            false => repr(&mut l, a),
        }
    }
    l
}

/// `a` quoted as Redis's `sdscatrepr` quotes it.
fn repr(l: &mut Vec<u8>, a: &[u8]) {
    l.push(b'"');
    for &b in a {
        match b {
            b'\\' | b'"' => l.extend_from_slice(&[b'\\', b]),
            b'\n' => l.extend_from_slice(b"\\n"),
            b'\r' => l.extend_from_slice(b"\\r"),
            b'\t' => l.extend_from_slice(b"\\t"),
            7 => l.extend_from_slice(b"\\a"),
            8 => l.extend_from_slice(b"\\b"),
            0x20..=0x7e => l.push(b),
            _ => {
                let _ = write!(l, "\\x{b:02x}");
            }
        }
    }
    l.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::repr;

    #[test]
    fn arguments_quoted_as_redis_quotes_them() {
        let mut l = Vec::new();
        repr(&mut l, b"a \"b\"\\\n\r\t\x07\x08\x00\xff~");
        assert_eq!(l, b"\"a \\\"b\\\"\\\\\\n\\r\\t\\a\\b\\x00\\xff~\"".to_vec());
    }
}

//! Lua scripting, as Redis has it (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT LOAD, EXISTS,
//! FLUSH, KILL) on Lua 5.1, the version Redis embeds (mlua, built from source).
//!
//! A script runs on the loop thread that read it, in that thread's Lua state (`lua.rs`),
//! inside one station transaction: every command it calls through `redis.call` or
//! `redis.pcall` runs through the dispatcher as a command inside EXEC does, sees the
//! script's own earlier writes, and all of its writes are released to readers as one
//! version when it returns. A script that fails after writing keeps its writes, as Redis
//! does; one stopped by its time limit (5 s) or by SCRIPT KILL has its
//! writes discarded (the transaction is aborted), which Redis cannot do. Values cross
//! between Lua and RESP by Redis's rules (`convert.rs`).
//!
//! What differs from Redis: commands that walk the keyspace (SCAN, KEYS, RANDOMKEY,
//! FLUSHALL) are refused inside scripts as they are inside MULTI; the libraries are base,
//! table, string, math, bit and cjson (`libs.rs`; no cmsgpack or struct);
//! `redis.setresp(3)` is refused.

pub mod convert;
pub mod eval;
pub mod fn_lua;
pub mod functions;
pub mod libs;
pub mod lua;
pub mod msgpack;
pub mod structlib;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};

/// The server's scripts: loaded bodies by SHA-1 (hex), the running ones' kill switch, and
/// their time limit.
pub struct Scripts {
    pub bodies: Mutex<HashMap<String, Arc<Vec<u8>>>>,
    /// Scripts running now, on any loop.
    pub running: AtomicUsize,
    /// SCRIPT KILL asked: every running script stops at its next check.
    pub kill: AtomicBool,
    /// Redis's `lua-time-limit` (`busy-reply-threshold`) as CONFIG SET gave it, in
    /// milliseconds: reported, and changing nothing (`eval.rs`, `TIME_LIMIT`).
    pub limit_ms: AtomicU64,
    /// The function libraries (FUNCTION LOAD, `functions.rs`).
    pub functions: functions::Functions,
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts {
            bodies: Default::default(),
            running: Default::default(),
            kill: Default::default(),
            limit_ms: AtomicU64::new(5000),
            functions: Default::default(),
        }
    }
}

/// The flags a script's shebang line gives (`#!lua flags=no-writes,allow-oom`, Redis 7's
/// form) and where its body starts (that line's newline, so lines count as in the whole
/// script); `None`: no shebang (Redis's compatible mode). `Err`: Redis's error text.
pub fn shebang(body: &[u8]) -> Result<Option<(Vec<String>, usize)>, String> {
    if !body.starts_with(b"#!") {
        return Ok(None);
    }
    let (words, end) = shebang_words(body).ok_or("Invalid script shebang")?;
    let mut parts = words.iter().map(String::as_str);
    match parts.next() {
        Some("#!lua") => {}
        Some(other) => return Err(format!("Unexpected engine in script shebang: {other}")),
        None => return Err("Invalid engine in script shebang".into()),
    }
    let mut flags = Vec::new();
    for p in parts {
        let Some(list) = p.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {p}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            if !FLAGS.contains(&f) {
                return Err(format!("Unexpected flag in script shebang: {f}"));
            }
            flags.push(f.to_string());
        }
    }
    Ok(Some((flags, end)))
}

/// The words of `code`'s first line, split as Redis's `sdssplitargs` splits it (quotes
/// taken out), and where the line ends (its newline); `None` without a newline. A
/// script's shebang and a library's metadata line are read from it.
pub fn shebang_words(code: &[u8]) -> Option<(Vec<String>, usize)> {
    let end = code.iter().position(|&b| b == b'\n')?;
    let line = String::from_utf8_lossy(&code[..end]).replace('"', "");
    Some((
        line.split_ascii_whitespace().map(str::to_string).collect(),
        end,
    ))
}

/// Redis 7's script flags (a shebang's, a function's).
pub const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// The SHA-1 of a script body, in lower-case hex (EVALSHA's name for it).
pub fn sha1_hex(body: &[u8]) -> String {
    use sha1::{Digest, Sha1};
    let d = Sha1::digest(body);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_scripts_as_redis_does() {
        // Redis: SCRIPT LOAD "return 1" answers this.
        assert_eq!(
            super::sha1_hex(b"return 1"),
            "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
    }
}

//! Redis 7's functions: FUNCTION LOAD, DELETE, FLUSH, LIST, STATS, DUMP, RESTORE, KILL and
//! HELP, and FCALL and FCALL_RO. A library is Lua code whose first line names it
//! (`#!lua name=<lib>`) and whose body registers functions with
//! `redis.register_function`; the server keeps each library's code, its functions and a
//! version, and each loop thread's Lua state loads the code the first time one of its
//! functions is called there (`fn_lua.rs`). A function runs as a script does (`eval.rs`):
//! its commands through the dispatcher inside one transaction, stopped by the time limit
//! or FUNCTION KILL. FUNCTION LOAD checks the code by loading it on the calling thread.
//!
//! Durable as the keys are: after every change the libraries are written as one FUNCTION
//! DUMP payload under a reserved key ([`FN_KEY`], through the one write door, the reply
//! waiting for it as a write's does), read back at the first function command after a
//! start, and written again after FLUSHALL, which leaves functions alone as in Redis.
//! (Cluster mode keeps them per node and in memory.) FUNCTION DUMP and RESTORE move them to
//! and from Redis in its payload.

use crate::core::glob;
use crate::core::ops::Write;
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::commands::script::eval::run_with;
use crate::resp::commands::script::fn_lua::{self, valid_name, Registered};
use crate::resp::commands::script::Scripts;
use crate::resp::reply::{help, subcommand_ok};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One library: its name, whole code, where its body starts, its functions, its version.
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub body_at: usize,
    pub functions: Vec<Registered>,
    pub version: u64,
}

/// Where the libraries are stored: in the collections' reserved range with a key length of
/// 0, as the database table is (no client's key reaches it; the subkeys' reclaim skips it).
pub const FN_KEY: &[u8] = b"\xFF\xFF\x00\x00functions";

/// The server's libraries, by name.
#[derive(Default)]
pub struct Functions {
    libs: Mutex<BTreeMap<String, Arc<Library>>>,
    versions: AtomicU64,
    /// The stored libraries were read (at the first function command since start).
    loaded: AtomicBool,
    /// Serialises the first read and the writes of the stored libraries.
    store: Mutex<()>,
}

impl Functions {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Library>>> {
        self.libs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every library's code, in name order (an RDB file's functions, `sync.rs`).
    pub fn codes(&self) -> Vec<Vec<u8>> {
        self.lock().values().map(|l| l.code.clone()).collect()
    }

    /// Whether any library is loaded.
    pub fn any(&self) -> bool {
        !self.lock().is_empty()
    }

    /// Whether function `name` is flagged `no-writes` (CLIENT PAUSE WRITE lets it run).
    pub fn no_writes(&self, name: &[u8]) -> bool {
        let f = self.find(&String::from_utf8_lossy(name));
        f.is_some_and(|(_, f)| f.flags.iter().any(|g| g == "no-writes"))
    }

    /// The library holding function `name` (in any case, as Redis matches it) and the
    /// function as registered, if any.
    fn find(&self, name: &str) -> Option<(Arc<Library>, Registered)> {
        let libs = self.lock();
        libs.values().find_map(|l| {
            let f = l
                .functions
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(name))?;
            Some((l.clone(), f.clone()))
        })
    }
}

const SUBS: &[(&str, i32)] = &[
    ("LOAD", -3),
    ("DELETE", 3),
    ("FLUSH", -2),
    ("LIST", -2),
    ("STATS", 2),
    ("DUMP", 2),
    ("RESTORE", -3),
    ("KILL", 2),
    ("HELP", 2),
];

const HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

/// Reads the stored libraries, the first time a function command runs since start (a
/// library that no longer loads is left out, its error logged).
pub(crate) fn ensure_loaded(sh: &Shared, scripts: &Arc<Scripts>) {
    let f = &scripts.functions;
    if f.loaded.load(Ordering::Acquire) {
        return;
    }
    let _g = f.store.lock().unwrap_or_else(|e| e.into_inner());
    if f.loaded.load(Ordering::Acquire) {
        return;
    }
    if let Ok(Some(payload)) = sh.view().get(FN_KEY) {
        match accelkv_proto::rdb::restore_functions(&payload) {
            Ok(codes) => {
                for code in codes {
                    if let Err(e) = add(scripts, &code, true) {
                        tracing::warn!("a stored function library does not load: {e}");
                    }
                }
            }
            Err(e) => tracing::warn!("the stored function libraries are damaged: {e:?}"),
        }
    }
    f.loaded.store(true, Ordering::Release);
}

/// Writes the libraries as they are now under [`FN_KEY`] (none: removes it); the caller's
/// reply waits for the write as a write command's does.
pub fn persist(sh: &Shared, s: &mut Session) -> Result<(), String> {
    if sh.router().is_some() {
        return Ok(()); // cluster mode: per node, in memory
    }
    let scripts = s.global.scripts.clone();
    let f = &scripts.functions;
    let _g = f.store.lock().unwrap_or_else(|e| e.into_inner());
    let libs: Vec<Arc<Library>> = f.lock().values().cloned().collect();
    let write = match libs.is_empty() {
        true => Write::Delete,
        false => {
            let codes: Vec<&[u8]> = libs.iter().map(|l| l.code.as_slice()).collect();
            Write::Put(Cow::Owned(accelkv_proto::rdb::dump_functions(&codes)))
        }
    };
    let d = sh.writes().run_one(Op::new(FN_KEY, write));
    d.outcome.map_err(|e| format!("ERR {e}"))?;
    s.unreleased = s.unreleased.max(d.version);
    s.wrote = true;
    Ok(())
}

/// `FUNCTION <subcommand> ...`.
pub fn function(x: &mut Call<'_, '_>) {
    if !subcommand_ok(x.out, "FUNCTION", SUBS, x.args) {
        return;
    }
    let scripts = x.s.global.scripts.clone();
    ensure_loaded(x.sh, &scripts);
    let changes = [&b"LOAD"[..], b"DELETE", b"FLUSH", b"RESTORE"]
        .iter()
        .any(|c| x.args[1].eq_ignore_ascii_case(c));
    let mark = x.out.len();
    let (a, out) = (x.args, &mut *x.out);
    // LOAD and RESTORE add memory: refused past maxmemory, as Redis's `denyoom` refuses.
    let adds = a[1].eq_ignore_ascii_case(b"LOAD") || a[1].eq_ignore_ascii_case(b"RESTORE");
    if adds && x.sh.over_maxmemory() {
        return resp::error(out, crate::core::shared::OOM);
    }
    let r = match a[1].to_ascii_uppercase().as_slice() {
        b"LOAD" => load_cmd(&scripts, &a[2..], out),
        b"DELETE" => delete(&scripts, a[2]).map(|()| resp::simple(out, "OK")),
        b"FLUSH" => flush(&scripts, &a[2..]).map(|()| resp::simple(out, "OK")),
        b"LIST" => list(&scripts, &a[2..], x.s.proto, out),
        b"STATS" => {
            stats(&scripts, x.s.proto, out);
            Ok(())
        }
        b"DUMP" => {
            dump(&scripts, out);
            Ok(())
        }
        b"RESTORE" => restore(&scripts, &a[2..]).map(|()| resp::simple(out, "OK")),
        b"KILL" => kill(&scripts).map(|()| resp::simple(out, "OK")),
        _ => {
            help(out, "FUNCTION", HELP);
            Ok(())
        }
    };
    if let Err(e) = r {
        return resp::error(x.out, &e);
    }
    if changes && x.sh.router().is_none() {
        if let Err(e) = persist(x.sh, x.s) {
            x.out.truncate(mark);
            resp::error(x.out, &e)
        }
    }
}

/// A library's name and where its body starts, from its shebang line.
fn metadata(code: &[u8]) -> Result<(String, usize), String> {
    let text = String::from_utf8_lossy(code);
    if !text.starts_with("#!") {
        return Err("ERR Missing library metadata".into());
    }
    let Some((words, end)) = crate::resp::commands::script::shebang_words(code) else {
        return Err("ERR Invalid library metadata".into());
    };
    let mut parts = words.iter().map(String::as_str);
    let engine = parts.next().unwrap_or_default().trim_start_matches("#!");
    let mut name = None;
    for p in parts {
        match p.get(..5) {
            Some(k) if k.eq_ignore_ascii_case("name=") && name.is_none() => {
                name = Some(p[5..].to_string())
            }
            Some(k) if k.eq_ignore_ascii_case("name=") => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            _ => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(&name) {
        return Err("ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    Ok((name, end))
}

/// Checks `code` (loading it on this thread) and adds it, replacing a library of its name
/// when `replace`: the library's name.
fn add(scripts: &Arc<Scripts>, code: &[u8], replace: bool) -> Result<String, String> {
    let (name, body_at) = metadata(code)?;
    let f = &scripts.functions;
    if !replace && f.lock().contains_key(&name) {
        return Err(format!("ERR Library '{name}' already exists"));
    }
    let version = f.versions.fetch_add(1, Ordering::Relaxed) + 1;
    let functions =
        fn_lua::load(&name, &code[body_at..], version, scripts).map_err(|e| format!("ERR {e}"))?;
    let mut libs = f.lock();
    if !replace && libs.contains_key(&name) {
        return Err(format!("ERR Library '{name}' already exists"));
    }
    for other in libs.values().filter(|l| l.name != name) {
        if let Some(dup) = functions
            .iter()
            .find(|g| (other.functions.iter()).any(|o| o.name.eq_ignore_ascii_case(&g.name)))
        {
            return Err(format!("ERR Function {} already exists", dup.name));
        }
    }
    let lib = Library {
        name: name.clone(),
        code: code.to_vec(),
        body_at,
        functions,
        version,
    };
    libs.insert(name.clone(), Arc::new(lib));
    Ok(name)
}

fn load_cmd(scripts: &Arc<Scripts>, a: &[&[u8]], out: &mut Vec<u8>) -> Result<(), String> {
    let (replace, code) = match a {
        [code] => (false, code),
        [r, code] if r.eq_ignore_ascii_case(b"REPLACE") => (true, code),
        [r, ..] => {
            return Err(format!(
                "ERR Unknown option given: {}",
                String::from_utf8_lossy(r)
            ))
        }
        [] => return Err("ERR wrong number of arguments for 'function|load' command".into()),
    };
    let name = add(scripts, code, replace)?;
    resp::bulk(out, Some(name.as_bytes()));
    Ok(())
}

fn delete(scripts: &Scripts, name: &[u8]) -> Result<(), String> {
    match scripts
        .functions
        .lock()
        .remove(String::from_utf8_lossy(name).as_ref())
    {
        Some(_) => Ok(()),
        None => Err("ERR Library not found".into()),
    }
}

fn flush(scripts: &Scripts, a: &[&[u8]]) -> Result<(), String> {
    match a {
        [] => {}
        [m] if m.eq_ignore_ascii_case(b"ASYNC") || m.eq_ignore_ascii_case(b"SYNC") => {}
        [_] => return Err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option".into()),
        _ => return Err(
            "ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP."
                .into(),
        ),
    }
    scripts.functions.lock().clear();
    Ok(())
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
fn list(scripts: &Scripts, a: &[&[u8]], v: Version, out: &mut Vec<u8>) -> Result<(), String> {
    let (mut pattern, mut code) = (None, false);
    let mut i = 0;
    while i < a.len() {
        match a[i].to_ascii_uppercase().as_slice() {
            b"WITHCODE" if !code => code = true,
            b"LIBRARYNAME" if pattern.is_none() && i + 1 < a.len() => {
                pattern = Some(a[i + 1]);
                i += 1;
            }
            b"LIBRARYNAME" if i + 1 >= a.len() => {
                return Err("ERR library name argument was not given".into())
            }
            b"WITHCODE" | b"LIBRARYNAME" => {
                return Err(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(a[i])
                ))
            }
            _ => {
                return Err(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(a[i])
                ))
            }
        }
        i += 1;
    }
    let libs: Vec<Arc<Library>> = scripts
        .functions
        .lock()
        .values()
        .filter(|l| pattern.is_none_or(|p| glob::matches(p, l.name.as_bytes())))
        .cloned()
        .collect();
    resp::array(out, libs.len());
    for l in &libs {
        resp::map(out, if code { 4 } else { 3 }, v);
        resp::bulk(out, Some(b"library_name"));
        resp::bulk(out, Some(l.name.as_bytes()));
        resp::bulk(out, Some(b"engine"));
        resp::bulk(out, Some(b"LUA"));
        resp::bulk(out, Some(b"functions"));
        resp::array(out, l.functions.len());
        for f in &l.functions {
            resp::map(out, 3, v);
            resp::bulk(out, Some(b"name"));
            resp::bulk(out, Some(f.name.as_bytes()));
            resp::bulk(out, Some(b"description"));
            resp::bulk_in(out, f.description.as_deref().map(str::as_bytes), v);
            resp::bulk(out, Some(b"flags"));
            resp::set(out, f.flags.len(), v);
            for fl in &f.flags {
                resp::simple(out, fl);
            }
        }
        if code {
            resp::bulk(out, Some(b"library_code"));
            resp::bulk(out, Some(&l.code));
        }
    }
    Ok(())
}

/// `FUNCTION STATS`: the running function (nil: none is shown) and the engine's counts.
fn stats(scripts: &Scripts, v: Version, out: &mut Vec<u8>) {
    let libs = scripts.functions.lock();
    let fns: usize = libs.values().map(|l| l.functions.len()).sum();
    resp::map(out, 2, v);
    resp::bulk(out, Some(b"running_script"));
    resp::bulk_in(out, None, v);
    resp::bulk(out, Some(b"engines"));
    resp::map(out, 1, v);
    resp::bulk(out, Some(b"LUA"));
    resp::map(out, 2, v);
    resp::bulk(out, Some(b"libraries_count"));
    resp::integer(out, libs.len() as i64);
    resp::bulk(out, Some(b"functions_count"));
    resp::integer(out, fns as i64);
}

fn dump(scripts: &Scripts, out: &mut Vec<u8>) {
    let libs: Vec<Arc<Library>> = scripts.functions.lock().values().cloned().collect();
    let codes: Vec<&[u8]> = libs.iter().map(|l| l.code.as_slice()).collect();
    resp::bulk(out, Some(&accelkv_proto::rdb::dump_functions(&codes)));
}

/// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`: every library of the payload, or
/// none (a collision under APPEND, a bad library).
fn restore(scripts: &Arc<Scripts>, a: &[&[u8]]) -> Result<(), String> {
    if a.len() > 2 {
        return Err(
            "ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP."
                .into(),
        );
    }
    let policy = match a.get(1).map(|p| p.to_ascii_uppercase()) {
        None => b"APPEND".to_vec(),
        Some(p) if a.len() == 2 && matches!(p.as_slice(), b"FLUSH" | b"APPEND" | b"REPLACE") => p,
        Some(_) => {
            return Err(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
                    .into(),
            )
        }
    };
    let codes = accelkv_proto::rdb::restore_functions(a[0])
        .map_err(|_| "ERR DUMP payload version or checksum are wrong".to_string())?;
    let before = scripts.functions.lock().clone();
    if policy == b"FLUSH" {
        scripts.functions.lock().clear();
    }
    for code in &codes {
        if let Err(e) = add(scripts, code, policy == b"REPLACE") {
            *scripts.functions.lock() = before; // all or nothing
            let e = e.strip_prefix("ERR ").unwrap_or(&e).to_string();
            return Err(format!(
                "ERR {}",
                e.replace("Library '", "Library ")
                    .replace("' already", " already")
            ));
        }
    }
    Ok(())
}

fn kill(scripts: &Scripts) -> Result<(), String> {
    if scripts.running.load(Ordering::SeqCst) == 0 {
        return Err("NOTBUSY No scripts in execution right now.".into());
    }
    scripts.kill.store(true, Ordering::SeqCst);
    Ok(())
}

/// `FCALL function numkeys [key ...] [arg ...]`.
pub fn fcall(x: &mut Call<'_, '_>) {
    call(x, false)
}

/// `FCALL_RO function numkeys [key ...] [arg ...]`: only a function flagged `no-writes`.
pub fn fcall_ro(x: &mut Call<'_, '_>) {
    call(x, true)
}

fn call(x: &mut Call<'_, '_>, ro: bool) {
    if crate::resp::reply::parse_i64(x.args[2]).is_none() {
        return resp::error(x.out, "ERR Bad number of keys provided");
    }
    ensure_loaded(x.sh, &x.s.global.scripts.clone());
    let asked = String::from_utf8_lossy(x.args[1]);
    let Some((lib, f)) = x.s.global.scripts.functions.find(&asked) else {
        return resp::error(x.out, "ERR Function not found");
    };
    let (name, no_writes) = (f.name, f.flags.iter().any(|g| g == "no-writes"));
    let allow_oom = f.flags.iter().any(|g| g == "allow-oom");
    if ro && !no_writes {
        return resp::error(
            x.out,
            "ERR Can not execute a script with write flag using *_ro command.",
        );
    }
    let body = &lib.code[lib.body_at..];
    x.s.allow_oom = allow_oom;
    run_with(x, ro || no_writes, |keys, argv, deadline, scripts, exec| {
        fn_lua::call(
            (&lib.name, body, lib.version),
            &name,
            (keys, argv),
            deadline,
            scripts,
            exec,
        )
    });
    x.s.allow_oom = false;
}

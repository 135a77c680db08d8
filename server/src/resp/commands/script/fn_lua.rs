//! Functions (FUNCTION LOAD, FCALL) in each loop thread's Lua state (`lua.rs`): a library's
//! code runs once per thread and per version of the library, with
//! `redis.register_function` bound for that run only, and the functions it registers are
//! kept in the state's function table under the library's name; FCALL calls one of them
//! with its keys and arguments as two lists, as Redis does (no KEYS or ARGV globals).

use crate::resp::commands::script::lua::{
    in_state, list, with_calls, with_state, Ran, State, FN_TABLE,
};
use crate::resp::commands::script::{Scripts, FLAGS};
use accelkv_proto::resp::Value as Reply;
use mlua::{Function, Lua, MultiValue, Table, Value};
use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a library's code may run when it loads (Redis's 500 ms).
const LOAD_LIMIT: Duration = Duration::from_millis(500);

/// A library's environment, as Redis 7 gives it: while its code loads, the only global is
/// `redis` with `register_function`, `log` and the log levels (anything else is a
/// nonexistent global; nothing may be assigned); once loaded, `running()` turns the same
/// environment into the usual globals for its functions' calls.
const LOAD_ENV: &str = r#"
local register = ...
local loading = true
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local function readonly() error('Attempt to modify a readonly table', 2) end
local api = {
  register_function = function(...)
    if not loading then
      error('redis.register_function can only be called on FUNCTION LOAD command', 2)
    end
    return register(...)
  end,
  log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE,
  LOG_NOTICE = redis.LOG_NOTICE, LOG_WARNING = redis.LOG_WARNING,
  REDIS_VERSION = redis.REDIS_VERSION, REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM,
}
setmetatable(api, {__index = missing, __newindex = readonly})
local env = {}
setmetatable(env, {
  __index = function(_, k)
    if k == 'redis' then return api end
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = readonly,
})
local function running()
  loading = false
  setmetatable(env, {__index = _G, __newindex = readonly})
end
return env, running
"#;

/// One function a library registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    pub name: String,
    pub flags: Vec<String>,
    pub description: Option<String>,
}

/// Whether `name` is a valid library or function name: letters, digits and `_`, at least
/// one.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Loads library `name` from `body` (its code after the shebang line, from that line's
/// end, so lines count as in the whole code) into this thread's state as version `version`:
/// the functions it registered, or Redis's error text.
pub fn load(
    name: &str,
    body: &[u8],
    version: u64,
    scripts: &Arc<Scripts>,
) -> Result<Vec<Registered>, String> {
    with_state(|st| {
        st.watch_until(Instant::now() + LOAD_LIMIT, scripts);
        let r = load_in(st, name, body, version);
        match st.unwatch() {
            Some(_) => Err("FUNCTION LOAD timeout".into()),
            None => r,
        }
    })?
}

fn load_in(st: &State, name: &str, body: &[u8], version: u64) -> Result<Vec<Registered>, String> {
    let lua = &st.lua;
    let text = |e: mlua::Error| e.to_string();
    let chunk = lua
        .load(body)
        .set_name("@user_function")
        .into_function()
        .map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => {
                format!("Error compiling function: {message}")
            }
            e => format!("Error compiling function: {e}"),
        })?;
    let fns = lua.create_table().map_err(text)?;
    let found: RefCell<Vec<Registered>> = RefCell::new(Vec::new());
    let ran = lua.scope(|scope| {
        let register = scope.create_function(|_, args: MultiValue| {
            let (r, cb) = registration(&args).map_err(mlua::Error::RuntimeError)?;
            if found
                .borrow()
                .iter()
                .any(|f| f.name.eq_ignore_ascii_case(&r.name))
            {
                return Err(mlua::Error::RuntimeError(
                    "Function already exists in the library".into(),
                ));
            }
            fns.raw_set(r.name.as_str(), cb)?;
            found.borrow_mut().push(r);
            Ok(())
        })?;
        let make = lua.load(LOAD_ENV).set_name("@load_env").into_function()?;
        let (env, running): (Table, Function) = make.call(register)?;
        chunk.set_environment(env)?;
        let r = chunk.call::<()>(());
        running.call::<()>(())?;
        Ok(r)
    });
    match ran {
        Ok(Ok(())) => {}
        Ok(Err(e)) | Err(e) => {
            // Redis's text: its errors carry their own `ERR` inside the message.
            let m = clean(&e);
            let m = if m.starts_with("ERR ") {
                m
            } else {
                format!("ERR {m}")
            };
            return Err(format!("Error registering functions: {m}"));
        }
    }
    let found = found.into_inner();
    if found.is_empty() {
        return Err("No functions registered".into());
    }
    let entry = lua.create_table().map_err(text)?;
    entry.raw_set("version", version).map_err(text)?;
    entry.raw_set("functions", fns).map_err(text)?;
    let all: Table = lua.globals().raw_get(FN_TABLE).map_err(text)?;
    all.raw_set(name, entry).map_err(text)?;
    Ok(found)
}

/// What `redis.register_function` was given: `(name, callback)`, or one table of named
/// arguments (`function_name`, `callback`, `flags`, `description`).
fn registration(args: &MultiValue) -> Result<(Registered, Function), String> {
    let mut r = Registered {
        name: String::new(),
        flags: Vec::new(),
        description: None,
    };
    let cb = match args.len() {
        1 => {
            let Some(Value::Table(t)) = args.front() else {
                return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).".into());
            };
            named(t, &mut r)?
        }
        2 => {
            let (Some(Value::String(n)), Some(f)) = (args.front(), args.get(1)) else {
                return Err("first argument to redis.register_function must be a string".into());
            };
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            r.name = n.to_string_lossy();
            f.clone()
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&r.name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok((r, cb))
}

fn named(t: &Table, r: &mut Registered) -> Result<Function, String> {
    let mut cb = None;
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, v) = pair.map_err(|e| e.to_string())?;
        let Value::String(k) = k else {
            return Err(
                "named argument key given to redis.register_function is not a string".into(),
            );
        };
        match (k.to_string_lossy().as_str(), v) {
            ("function_name", Value::String(n)) => r.name = n.to_string_lossy(),
            ("function_name", _) => return Err("function_name argument given to redis.register_function must be a string".into()),
            ("description", Value::String(d)) => r.description = Some(d.to_string_lossy()),
            ("description", _) => return Err("description argument given to redis.register_function must be a string".into()),
            ("callback", Value::Function(f)) => cb = Some(f),
            ("callback", _) => return Err("callback argument given to redis.register_function must be a function".into()),
            ("flags", Value::Table(f)) => r.flags = flags(&f)?,
            ("flags", _) => return Err("flags argument to redis.register_function must be a table representing function flags".into()),
            _ => return Err("unknown argument given to redis.register_function".into()),
        }
    }
    if r.name.is_empty() {
        return Err("redis.register_function must get a function name argument".into());
    }
    cb.ok_or_else(|| "redis.register_function must get a callback argument".into())
}

fn flags(t: &Table) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for v in t.clone().sequence_values::<Value>() {
        let f = match v {
            Ok(Value::String(s)) => s.to_string_lossy().to_ascii_lowercase(),
            _ => return Err("unknown flag given".into()),
        };
        match FLAGS.contains(&f.as_str()) {
            true if !out.contains(&f) => out.push(f),
            true => {}
            false => return Err("unknown flag given".into()),
        }
    }
    Ok(out)
}

/// Calls function `fname` of library `lib` (its name, body and version) with `keys` and
/// `argv`, loading the library into this thread's state first if it holds another version.
pub fn call(
    (lib, body, version): (&str, &[u8], u64),
    fname: &str,
    (keys, argv): (&[&[u8]], &[&[u8]]),
    deadline: Instant,
    scripts: &Arc<Scripts>,
    exec: &mut dyn FnMut(&[Vec<u8>]) -> Reply,
) -> Ran {
    in_state(deadline, scripts, |st| {
        let f = match loaded(st, (lib, body, version), fname) {
            Ok(f) => f,
            Err(e) => {
                let mut out = Vec::new();
                accelkv_proto::resp::error(&mut out, &format!("ERR {}", clean(&e)));
                return Ok(out);
            }
        };
        let lua: &Lua = &st.lua;
        let (k, a) = (list(lua, keys)?, list(lua, argv)?);
        with_calls(st, exec, (fname, "@user_function"), || {
            st.fn_wrapper.call((f, k, a))
        })
    })
}

/// The function `fname` of `lib` as this thread's state holds it at `version`.
fn loaded(
    st: &State,
    (lib, body, version): (&str, &[u8], u64),
    fname: &str,
) -> Result<Function, String> {
    let all: Table = st
        .lua
        .globals()
        .raw_get(FN_TABLE)
        .map_err(|e| e.to_string())?;
    let current = match all.raw_get::<Value>(lib) {
        Ok(Value::Table(t)) => t.raw_get::<u64>("version").ok() == Some(version),
        _ => false,
    };
    if !current {
        load_in(st, lib, body, version)?;
    }
    let entry: Table = all.raw_get(lib).map_err(|e| e.to_string())?;
    let fns: Table = entry.raw_get("functions").map_err(|e| e.to_string())?;
    fns.raw_get::<Function>(fname)
        .map_err(|_| "Function not found".to_string())
}

/// An error's text on one line, without mlua's prefix and traceback.
fn clean(e: &dyn std::fmt::Display) -> String {
    let t = e.to_string();
    let t = t.strip_prefix("runtime error: ").unwrap_or(&t);
    let t = t.split("\nstack traceback:").next().unwrap_or(t);
    t.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_as_redis_allows_them() {
        assert!(valid_name("my_lib1"));
        assert!(!valid_name(""));
        assert!(!valid_name("a-b"));
        assert!(!valid_name("a b"));
    }
}

//! Each loop thread's Lua state: Lua 5.1 with the base, table, string and math libraries
//! (`dofile` and `loadfile` removed; globals read-only, as in Redis 7), the `redis` library,
//! and a hook
//! that stops a script past its deadline or asked to stop by SCRIPT KILL. Compiled
//! scripts are kept as the globals `f_<sha1>`, as Redis keeps them.

use crate::resp::commands::script::convert::{one, to_lua, to_resp};
use crate::resp::commands::script::Scripts;
use accelkv_proto::resp::Value as Reply;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Value, VmState};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Why a script was stopped before it finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    TimeLimit,
    Killed,
}

/// What a script run gave.
pub enum Ran {
    /// Its RESP reply (an error reply included).
    Reply(Vec<u8>),
    /// Stopped by its hook: its writes must be discarded.
    Stopped(Stop),
}

/// The hook's view of the script running now.
#[derive(Default)]
struct Watch {
    deadline: Cell<Option<Instant>>,
    stopped: Cell<Option<Stop>>,
    scripts: RefCell<Option<Arc<Scripts>>>,
}

pub(crate) struct State {
    pub(crate) lua: Lua,
    watch: Rc<Watch>,
    /// `pcall`s a compiled script and turns a raised error into an `{err = …}` table.
    wrapper: Function,
    /// The same for a function and its arguments.
    pub(crate) fn_wrapper: Function,
}

impl State {
    /// Watches what runs next until `deadline` (and SCRIPT KILL, FUNCTION KILL).
    pub(crate) fn watch_until(&self, deadline: Instant, scripts: &Arc<Scripts>) {
        self.watch.deadline.set(Some(deadline));
        self.watch.stopped.set(None);
        *self.watch.scripts.borrow_mut() = Some(scripts.clone());
    }

    /// Ends the watch: why the run was stopped, if it was.
    pub(crate) fn unwatch(&self) -> Option<Stop> {
        *self.watch.scripts.borrow_mut() = None;
        self.watch.stopped.take()
    }
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// The `redis` library's Lua part (`redis.call` and `redis.pcall` are Rust functions each
/// run binds to its connection).
const LIBRARY: &str = r#"
local getinfo = debug.getinfo
debug = nil
redis = {}
redis.error_reply = function(e) return {err = e} end
redis.status_reply = function(s) return {ok = s} end
redis.log = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.setresp = function(v)
  if v ~= 2 then error('accelkv scripts speak RESP2 only', 2) end
end
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
-- The Redis version INFO reports (redis_version), as Redis 7 gives scripts its own.
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = '7.0.0', 0x070000
dofile, loadfile = nil, nil
-- A Rust function's error as its text: without mlua's "runtime error: " and traceback.
local function err_text(e)
  local s = tostring(e):gsub('^runtime error: ', '')
  local cut = s:find('\nstack traceback:', 1, true)
  if cut then s = s:sub(1, cut - 1) end
  return s
end
-- Where an error was raised in the script (for the reply's "on @user_script:N").
__accelkv_where = function(e)
  if type(e) == 'table' and e.err then
    if not e.line then
      for level = 2, 6 do
        local at = getinfo(level, 'Sl')
        if not at then break end
        if (at.source == '@user_script' or at.source == '@user_function') and at.currentline > 0 then
          e.source, e.line = at.source, at.currentline
          break
        end
      end
    end
    return e
  end
  if type(e) == 'userdata' then return err_text(e) end
  return tostring(e)
end
-- What a script's pcall catches from redis.call is the error's text, as in Redis.
local raw_pcall, maxn = pcall, table.maxn
pcall = function(...)
  local r = {raw_pcall(...)}
  if r[1] == false and type(r[2]) == 'userdata' then
    r[2] = redis.__raised() or err_text(r[2])
  end
  return unpack(r, 1, maxn(r))
end
-- Globals are read-only and must exist, as in Redis 7.
setmetatable(_G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
})
"#;

/// Runs a compiled script under `xpcall`: whether it returned, and what (or what it raised,
/// a raised error table with the line it was raised at).
const WRAPPER: &str = r#"
local f = ...
return xpcall(f, __accelkv_where)
"#;

/// Runs a function (FCALL) with its keys and arguments under `xpcall`, as [`WRAPPER`].
const FN_WRAPPER: &str = r#"
local f, keys, args = ...
return xpcall(function() return f(keys, args) end, __accelkv_where)
"#;

/// Where each thread's state keeps the functions of the libraries it loaded: per library,
/// its generation and its functions by name.
pub(crate) const FN_TABLE: &str = "__accelkv_functions";

fn state() -> mlua::Result<State> {
    let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG;
    // SAFETY: mlua calls the debug library unsafe because a script holding it can break
    // the VM's invariants (debug.setmetatable, debug.setlocal on Rust frames). LIBRARY, run
    // before any script, keeps only `debug.getinfo` in a local of its own functions and
    // sets the global `debug` to nil, and globals are read-only after it: no script can
    // reach the library.
    let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::default()) };
    crate::resp::commands::script::libs::install(&lua)?;
    let cmsgpack = crate::resp::commands::script::msgpack::cmsgpack(&lua)?;
    lua.globals().raw_set("cmsgpack", cmsgpack)?;
    let st = crate::resp::commands::script::structlib::library(&lua)?;
    lua.globals().raw_set("struct", st)?;
    lua.load(LIBRARY).set_name("@redis_lib").exec()?;
    let redis: mlua::Table = lua.globals().raw_get("redis")?;
    redis.set(
        "sha1hex",
        lua.create_function(|_, s: mlua::String| Ok(super::sha1_hex(&s.as_bytes())))?,
    )?;
    let wrapper = lua
        .load(WRAPPER)
        .set_name("@script_wrapper")
        .into_function()?;
    let fn_wrapper = lua
        .load(FN_WRAPPER)
        .set_name("@script_wrapper")
        .into_function()?;
    lua.globals().raw_set(FN_TABLE, lua.create_table()?)?;
    let watch = Rc::new(Watch::default());
    let w = watch.clone();
    lua.set_hook(
        HookTriggers::new().every_nth_instruction(10_000),
        move |_, _| {
            if w.stopped.get().is_none() {
                let killed = w
                    .scripts
                    .borrow()
                    .as_ref()
                    .is_some_and(|s| s.kill.load(Ordering::Relaxed));
                if killed {
                    w.stopped.set(Some(Stop::Killed));
                } else if w.deadline.get().is_some_and(|d| Instant::now() >= d) {
                    w.stopped.set(Some(Stop::TimeLimit));
                }
            }
            match w.stopped.get() {
                // Raised again at every check, so a script's own pcall cannot keep it going.
                Some(_) => Err(mlua::Error::RuntimeError("script stopped".into())),
                None => Ok(VmState::Continue),
            }
        },
    );
    Ok(State {
        lua,
        watch,
        wrapper,
        fn_wrapper,
    })
}

/// One argument of `redis.call` as bytes (strings and numbers), as Redis takes them.
fn arg(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(n) => Some(n.to_string().into_bytes()),
        Value::Number(n) if n.fract() == 0.0 && n.abs() < 1e15 => {
            Some((*n as i64).to_string().into_bytes())
        }
        Value::Number(n) => Some(format!("{n}").into_bytes()),
        _ => None,
    }
}

/// Runs script `body` (named by `sha`) with `keys` and `argv`; `exec` runs one command of
/// it and answers its reply. Stops at `deadline` or when SCRIPT KILL asks.
pub fn run(
    (body, sha): (&[u8], &str),
    (keys, argv): (&[&[u8]], &[&[u8]]),
    deadline: Instant,
    scripts: &Arc<Scripts>,
    exec: &mut dyn FnMut(&[Vec<u8>]) -> Reply,
) -> Ran {
    in_state(deadline, scripts, |st| {
        run_in(st, (body, sha), (keys, argv), exec)
    })
}

/// Runs `f` in this thread's state, watched by the hook until `deadline`.
pub(crate) fn in_state(
    deadline: Instant,
    scripts: &Arc<Scripts>,
    f: impl FnOnce(&State) -> mlua::Result<Vec<u8>>,
) -> Ran {
    let ran = with_state(|st| {
        st.watch_until(deadline, scripts);
        let r = f(st);
        match (st.unwatch(), r) {
            (Some(why), _) => Ran::Stopped(why),
            (None, Ok(reply)) => Ran::Reply(reply),
            (None, Err(e)) => error(format!("ERR {e}")),
        }
    });
    ran.unwrap_or_else(|e| error(format!("ERR {e}")))
}

/// Runs `f` in this thread's state, made at its first use (`Err`: Lua could not start).
pub(crate) fn with_state<T>(f: impl FnOnce(&State) -> T) -> Result<T, String> {
    STATE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(state().map_err(|e| format!("Lua could not start: {e}"))?);
        }
        match slot.as_ref() {
            Some(st) => Ok(f(st)),
            None => Err("Lua could not start".into()),
        }
    })
}

fn error(text: String) -> Ran {
    let mut out = Vec::new();
    accelkv_proto::resp::error(&mut out, &text.replace(['\r', '\n'], " "));
    Ran::Reply(out)
}

/// The compiled script `f_<sha>`, compiling `body` the first time.
fn compiled(st: &State, body: &[u8], sha: &str) -> Result<Function, String> {
    let name = format!("f_{sha}");
    if let Ok(f) = st.lua.globals().raw_get::<Function>(name.as_str()) {
        return Ok(f);
    }
    let f = st
        .lua
        .load(body)
        .set_name("@user_script")
        .into_function()
        .map_err(|e| {
            let text = match e {
                mlua::Error::SyntaxError { message, .. } => message,
                e => e.to_string(),
            };
            format!("ERR Error compiling script (new function): {text}")
        })?;
    st.lua
        .globals()
        .raw_set(name, f.clone())
        .map_err(|e| e.to_string())?;
    Ok(f)
}

fn run_in(
    st: &State,
    (body, sha): (&[u8], &str),
    (keys, argv): (&[&[u8]], &[&[u8]]),
    exec: &mut dyn FnMut(&[Vec<u8>]) -> Reply,
) -> mlua::Result<Vec<u8>> {
    let lua = &st.lua;
    let f = match compiled(st, body, sha) {
        Ok(f) => f,
        Err(e) => {
            let mut out = Vec::new();
            accelkv_proto::resp::error(&mut out, &e.replace(['\r', '\n'], " "));
            return Ok(out);
        }
    };
    lua.globals().raw_set("KEYS", list(lua, keys)?)?;
    lua.globals().raw_set("ARGV", list(lua, argv)?)?;
    with_calls(st, exec, (sha, "@user_script"), || st.wrapper.call(f))
}

/// A script's or function's items as a Lua list.
pub(crate) fn list(lua: &Lua, items: &[&[u8]]) -> mlua::Result<mlua::Table> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, a) in items.iter().enumerate() {
        t.raw_set(i + 1, lua.create_string(a)?)?;
    }
    Ok(t)
}

/// Runs `go` (a wrapper's call) with `redis.call` and `redis.pcall` bound to `exec`: the
/// reply of what it returned, or the error reply of what it raised (`name` and `source`
/// naming the script or function in it).
pub(crate) fn with_calls(
    st: &State,
    exec: &mut dyn FnMut(&[Vec<u8>]) -> Reply,
    (name, source): (&str, &str),
    go: impl FnOnce() -> mlua::Result<(bool, Value)>,
) -> mlua::Result<Vec<u8>> {
    let lua = &st.lua;
    let redis: mlua::Table = lua.globals().raw_get("redis")?;
    // A command error `redis.call` raised: its text and the script's line.
    let raised: RefCell<Option<(String, i32)>> = RefCell::new(None);
    let exec = RefCell::new(exec);
    let command = |lua: &Lua, args: &MultiValue| -> mlua::Result<Value> {
        if args.is_empty() {
            let e = "ERR Please specify at least one argument for this redis lib call";
            return Ok(Value::Table(one(lua, "err", e)?));
        }
        let Some(cmd) = args.iter().map(arg).collect::<Option<Vec<_>>>() else {
            let e = "ERR Lua redis lib command arguments must be strings or integers";
            return Ok(Value::Table(one(lua, "err", e)?));
        };
        to_lua(lua, (exec.borrow_mut())(&cmd))
    };
    lua.scope(|scope| {
        // Rust functions, so `return redis.call(...)` keeps the script's frame (a tail call
        // of a Lua function would drop it) and an error knows the script's line.
        let call = scope.create_function(|lua, args: MultiValue| {
            let v = command(lua, &args)?;
            if let Value::Table(t) = &v {
                if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                    let text = e.to_string_lossy();
                    let line = lua.inspect_stack(1).map_or(0, |d| d.curr_line());
                    *raised.borrow_mut() = Some((text.clone(), line));
                    return Err(mlua::Error::RuntimeError(text));
                }
            }
            Ok(v)
        })?;
        let pcall = scope.create_function(|lua, args: MultiValue| command(lua, &args))?;
        let raised_text =
            scope.create_function(|_, ()| Ok(raised.borrow().as_ref().map(|r| r.0.clone())))?;
        redis.raw_set("call", call)?;
        redis.raw_set("pcall", pcall)?;
        redis.raw_set("__raised", raised_text)?;
        let (ok, v): (bool, Value) = go()?;
        let mut out = Vec::new();
        if ok {
            to_resp(&v, &mut out);
        } else {
            failure(&v, (name, source), raised.take(), &mut out);
        }
        Ok(out)
    })
}

/// The error reply of a script that raised `v`, with Redis 7.0's " script: <sha1>, on
/// @user_script:<line>." after the message.
fn failure(
    v: &Value,
    (sha, source): (&str, &str),
    raised: Option<(String, i32)>,
    out: &mut Vec<u8>,
) {
    let suffix = |line: Option<i64>| match line {
        Some(l) if l > 0 => format!(" script: {sha}, on {source}:{l}."),
        _ => format!(" script: {sha}, on {source}:?."),
    };
    let text = match v {
        Value::String(s) => s.to_string_lossy(),
        Value::Table(t) => {
            let err: String = t.raw_get("err").unwrap_or_default();
            let line: Option<i64> = t.raw_get("line").ok();
            return accelkv_proto::resp::error(out, &clean(&(err + &suffix(line))));
        }
        other => other.to_string().unwrap_or_default(),
    };
    let msg = match raised {
        // What redis.call raised, as the error it was.
        Some((err, line)) if text.contains(&err) => err + &suffix(Some(i64::from(line))),
        _ => {
            let line = text
                .strip_prefix(&source[1..])
                .and_then(|r| r.strip_prefix(':'))
                .and_then(|r| r.split(':').next())
                .and_then(|n| n.parse().ok());
            format!("ERR {text}{}", suffix(line))
        }
    };
    accelkv_proto::resp::error(out, &clean(&msg))
}

fn clean(t: &str) -> String {
    t.replace(['\r', '\n'], " ")
}

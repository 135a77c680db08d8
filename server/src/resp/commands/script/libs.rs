//! The libraries Redis gives scripts beyond Lua's own: `bit` (LuaBitOp: 32-bit operations
//! on numbers) and `cjson` (JSON: `encode`, `decode`, `null`), written here over
//! serde_json with lua-cjson's rules: a table whose keys are exactly 1..n is an array (an
//! empty table an object), other tables are objects with string or number keys, numbers
//! print as `%.14g`, and JSON null is `cjson.null`. `cmsgpack` is in `msgpack.rs`,
//! `struct` in `structlib.rs`.

use mlua::{FromLuaMulti, Function, IntoLuaMulti, Lua, Result, Table, Value};

/// Installs `bit` and `cjson` as globals (before the globals are made read-only).
pub fn install(lua: &Lua) -> Result<()> {
    lua.globals().raw_set("bit", bit(lua)?)?;
    lua.globals().raw_set("cjson", cjson(lua)?)?;
    Ok(())
}

/// A library function whose error carries the position of the script's line that called
/// it (`user_script:3: Missing bytes in input.`), as a C library's `luaL_error` does in
/// Redis; called from another C function (`pcall`) it has none, as there.
pub(crate) fn lib_fn<A: FromLuaMulti, R: IntoLuaMulti>(
    lua: &Lua,
    f: impl Fn(&Lua, A) -> Result<R> + 'static,
) -> Result<Function> {
    lua.create_function(move |lua, a: A| {
        f(lua, a).map_err(|e| {
            let text = match e {
                mlua::Error::RuntimeError(t) => t,
                other => other.to_string(),
            };
            let at = lua
                .inspect_stack(1)
                .and_then(|d| {
                    let line = d.curr_line();
                    let src = d.source().short_src?.into_owned();
                    (line > 0).then(|| format!("{src}:{line}: "))
                })
                .unwrap_or_default();
            mlua::Error::RuntimeError(format!("{at}{text}"))
        })
    })
}

/// A Lua number as LuaBitOp reads it: to a 32-bit integer, wrapping.
fn tobit(n: f64) -> i32 {
    (n.rem_euclid(4_294_967_296.0) as u64 as u32) as i32
}

fn bit(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    let fold = |lua: &Lua, f: fn(i32, i32) -> i32| {
        lua.create_function(move |_, args: mlua::Variadic<f64>| {
            let mut it = args.iter().map(|&n| tobit(n));
            let first = it.next().ok_or_else(|| {
                mlua::Error::RuntimeError("bad argument #1 (number expected, got no value)".into())
            })?;
            Ok(f64::from(it.fold(first, f)))
        })
    };
    t.set("band", fold(lua, |a, b| a & b)?)?;
    t.set("bor", fold(lua, |a, b| a | b)?)?;
    t.set("bxor", fold(lua, |a, b| a ^ b)?)?;
    t.set(
        "tobit",
        lua.create_function(|_, n: f64| Ok(f64::from(tobit(n))))?,
    )?;
    t.set(
        "bnot",
        lua.create_function(|_, n: f64| Ok(f64::from(!tobit(n))))?,
    )?;
    let shift = |lua: &Lua, f: fn(i32, u32) -> i32| {
        lua.create_function(move |_, (n, s): (f64, f64)| {
            Ok(f64::from(f(tobit(n), tobit(s) as u32 & 31)))
        })
    };
    t.set("lshift", shift(lua, |a, s| a.wrapping_shl(s))?)?;
    t.set("rshift", shift(lua, |a, s| ((a as u32) >> s) as i32)?)?;
    t.set("arshift", shift(lua, |a, s| a >> s)?)?;
    t.set("rol", shift(lua, |a, s| (a as u32).rotate_left(s) as i32)?)?;
    t.set("ror", shift(lua, |a, s| (a as u32).rotate_right(s) as i32)?)?;
    t.set(
        "bswap",
        lua.create_function(|_, n: f64| Ok(f64::from(tobit(n).swap_bytes())))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(|_, (n, digits): (f64, Option<f64>)| {
            let d = digits.map_or(8, |d| d as i32);
            let (upper, d) = (d < 0, d.unsigned_abs().clamp(1, 8) as usize);
            let x = tobit(n) as u32;
            let s = format!("{x:08x}");
            let s = &s[8 - d..];
            Ok(if upper {
                s.to_uppercase()
            } else {
                s.to_string()
            })
        })?,
    )?;
    Ok(t)
}

fn cjson(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("null", Value::NULL)?;
    t.set(
        "encode",
        lib_fn(lua, |_, v: Value| {
            let mut out = String::new();
            encode(&v, &mut out, 0)?;
            Ok(out)
        })?,
    )?;
    t.set(
        "decode",
        lib_fn(lua, |lua, s: mlua::String| {
            let v: serde_json::Value = serde_json::from_slice(&s.as_bytes()).map_err(|e| {
                mlua::Error::RuntimeError(format!("Expected value but found invalid token: {e}"))
            })?;
            decode(lua, &v)
        })?,
    )?;
    Ok(t)
}

fn number(n: f64, out: &mut String) -> Result<()> {
    if !n.is_finite() {
        return Err(mlua::Error::RuntimeError(
            "Cannot serialise number: must not be NaN or Inf".into(),
        ));
    }
    out.push_str(&crate::resp::commands::types::run::fmt_g(n, 14));
    Ok(())
}

fn string(s: &[u8], out: &mut String) {
    out.push('"');
    for ch in String::from_utf8_lossy(s).chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn encode(v: &Value, out: &mut String, depth: usize) -> Result<()> {
    if depth > 1000 {
        return Err(mlua::Error::RuntimeError(
            "Cannot serialise, excessive nesting (1001)".into(),
        ));
    }
    match v {
        Value::Nil => out.push_str("null"),
        Value::LightUserData(p) if p.0.is_null() => out.push_str("null"),
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Integer(n) => out.push_str(&n.to_string()),
        Value::Number(n) => number(*n, out)?,
        Value::String(s) => string(&s.as_bytes(), out),
        Value::Table(t) => table(t, out, depth)?,
        other => {
            return Err(mlua::Error::RuntimeError(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            )))
        }
    }
    Ok(())
}

fn table(t: &Table, out: &mut String, depth: usize) -> Result<()> {
    let pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().collect::<Result<_>>()?;
    let n = pairs.len();
    let is_array = n > 0
        && pairs.iter().all(|(k, _)| match k {
            Value::Integer(i) => *i >= 1 && (*i as usize) <= n,
            Value::Number(f) => f.fract() == 0.0 && *f >= 1.0 && (*f as usize) <= n,
            _ => false,
        });
    if is_array {
        out.push('[');
        for i in 1..=n {
            if i > 1 {
                out.push(',');
            }
            encode(&t.raw_get::<Value>(i)?, out, depth + 1)?;
        }
        out.push(']');
        return Ok(());
    }
    out.push('{');
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match k {
            Value::String(s) => string(&s.as_bytes(), out),
            Value::Integer(_) | Value::Number(_) => {
                let mut key = String::new();
                encode(k, &mut key, depth + 1)?;
                string(key.as_bytes(), out);
            }
            _ => {
                return Err(mlua::Error::RuntimeError(
                    "Cannot serialise table: table key must be a number or string".into(),
                ))
            }
        }
        out.push(':');
        encode(v, out, depth + 1)?;
    }
    out.push('}');
    Ok(())
}

fn decode(lua: &Lua, v: &serde_json::Value) -> Result<Value> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => Value::NULL,
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => Value::Number(n.as_f64().unwrap_or(0.0)),
        J::String(s) => Value::String(lua.create_string(s)?),
        J::Array(items) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, x) in items.iter().enumerate() {
                t.raw_set(i + 1, decode(lua, x)?)?;
            }
            Value::Table(t)
        }
        J::Object(m) => {
            let t = lua.create_table_with_capacity(0, m.len())?;
            for (k, x) in m {
                t.raw_set(k.as_str(), decode(lua, x)?)?;
            }
            Value::Table(t)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(lua: &Lua, code: &str) -> String {
        lua.load(code)
            .eval::<mlua::String>()
            .unwrap()
            .to_string_lossy()
    }

    #[test]
    fn bit_and_cjson_behave_as_redis_gives_them() {
        let lua = Lua::new();
        install(&lua).unwrap();
        assert_eq!(eval(&lua, "return tostring(bit.band(12, 10))"), "8");
        assert_eq!(eval(&lua, "return tostring(bit.bnot(0))"), "-1");
        assert_eq!(
            eval(&lua, "return tostring(bit.lshift(1, 31))"),
            "-2147483648"
        );
        assert_eq!(eval(&lua, "return tostring(bit.rshift(-1, 28))"), "15");
        assert_eq!(eval(&lua, "return bit.tohex(255, 4)"), "00ff");
        assert_eq!(
            eval(&lua, "return cjson.encode({1, 2, 'x'})"),
            "[1,2,\"x\"]"
        );
        assert_eq!(eval(&lua, "return cjson.encode({})"), "{}");
        assert_eq!(
            eval(&lua, "return cjson.encode({a = true})"),
            "{\"a\":true}"
        );
        assert_eq!(eval(&lua, "return cjson.encode(cjson.null)"), "null");
        assert_eq!(eval(&lua, "return cjson.encode('a/\"b')"), "\"a\\/\\\"b\"");
        assert_eq!(
            eval(&lua, "local t = cjson.decode('{\"k\":[1,null,\"v\"]}') return tostring(t.k[1]) .. tostring(t.k[2] == cjson.null) .. t.k[3]"),
            "1truev"
        );
    }
}

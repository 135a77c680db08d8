//! Values between Lua and RESP, by Redis's rules. A command's reply becomes: an integer a
//! number, a bulk string a string, a null `false`, an array a table (its nulls `false`), a
//! status `{ok = text}`, an error `{err = text}`. A script's result becomes: a number an
//! integer (truncated), a string a bulk string, `true` the integer 1, `false` or `nil` a
//! null, a table with `ok` a status, with `err` an error, any other table an array of its
//! elements up to the first nil.

use accelkv_proto::resp::{self, Value as Reply};
use mlua::{Lua, Result, Table, Value};

/// A command's reply as the Lua value `redis.call` answers.
pub fn to_lua(lua: &Lua, r: Reply) -> Result<Value> {
    Ok(match r {
        Reply::Integer(n) => Value::Number(n as f64),
        Reply::Bulk(Some(b)) => Value::String(lua.create_string(&b)?),
        Reply::Bulk(None) | Reply::Array(None) => Value::Boolean(false),
        Reply::Simple(s) => Value::Table(one(lua, "ok", &s)?),
        Reply::Error(e) => Value::Table(one(lua, "err", &e)?),
        Reply::Array(Some(items)) => {
            let t = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, v) in items.into_iter().enumerate() {
                t.raw_set(i + 1, to_lua(lua, v)?)?;
            }
            Value::Table(t)
        }
    })
}

/// `{name = text}`.
pub fn one(lua: &Lua, name: &str, text: &str) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(name, text)?;
    Ok(t)
}

/// Appends a script's result as its RESP reply.
pub fn to_resp(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Nil | Value::Boolean(false) => resp::bulk(out, None),
        Value::Boolean(true) => resp::integer(out, 1),
        Value::Integer(n) => resp::integer(out, *n),
        Value::Number(n) => resp::integer(out, *n as i64),
        Value::String(s) => resp::bulk(out, Some(&s.as_bytes())),
        Value::Table(t) => table(t, out),
        _ => resp::bulk(out, None),
    }
}

fn table(t: &Table, out: &mut Vec<u8>) {
    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
        return resp::error(out, &String::from_utf8_lossy(&e.as_bytes()));
    }
    if let Ok(Value::String(s)) = t.raw_get::<Value>("ok") {
        return resp::simple(out, &String::from_utf8_lossy(&s.as_bytes()));
    }
    let mut items = Vec::new();
    for i in 1.. {
        match t.raw_get::<Value>(i) {
            Ok(Value::Nil) | Err(_) => break,
            Ok(v) => items.push(v),
        }
    }
    resp::array(out, items.len());
    for v in &items {
        to_resp(v, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(lua: &Lua, r: Reply) -> Vec<u8> {
        let mut out = Vec::new();
        to_resp(&to_lua(lua, r).unwrap(), &mut out);
        out
    }

    #[test]
    fn replies_cross_into_lua_and_back_as_redis_has_them() {
        let lua = Lua::new();
        assert_eq!(round(&lua, Reply::Integer(-7)), b":-7\r\n");
        assert_eq!(
            round(&lua, Reply::Bulk(Some(b"x\0y".to_vec()))),
            b"$3\r\nx\0y\r\n"
        );
        assert_eq!(round(&lua, Reply::Bulk(None)), b"$-1\r\n");
        assert_eq!(round(&lua, Reply::Simple("OK".into())), b"+OK\r\n");
        assert_eq!(round(&lua, Reply::Error("ERR no".into())), b"-ERR no\r\n");
        let arr = Reply::Array(Some(vec![
            Reply::Integer(1),
            Reply::Bulk(None),
            Reply::Integer(3),
        ]));
        // A null inside an array is false in Lua, and false is a null again.
        assert_eq!(round(&lua, arr), b"*3\r\n:1\r\n$-1\r\n:3\r\n");
        let mut out = Vec::new();
        to_resp(&Value::Number(3.99), &mut out);
        to_resp(&Value::Boolean(true), &mut out);
        assert_eq!(out, b":3\r\n:1\r\n");
    }
}

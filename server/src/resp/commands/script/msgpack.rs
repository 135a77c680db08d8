//! `cmsgpack`, the MessagePack library Redis gives scripts (lua-cmsgpack's rules, which
//! job queues such as BullMQ rely on): `pack(...)` encodes each argument and concatenates
//! them; a number that is an integer is the smallest integer encoding, another a float32
//! when that loses nothing, else a float64; a table whose keys are exactly 1..n (an empty
//! one included) is an array, any other a map; nesting past 16 tables encodes nil.
//! `unpack(s)` answers every object in `s`; `unpack_one(s [, offset])` and
//! `unpack_limit(s, limit [, offset])` answer the offset after what they read (-1 at the
//! end) and then the objects. Encoding through `rmp`; decoding by marker here.

use crate::resp::commands::script::libs::lib_fn;
use mlua::{Lua, MultiValue, Result, Table, Value};
use rmp::Marker;

/// Tables nested deeper than this encode as nil, as lua-cmsgpack's LUACMSGPACK_MAX_NESTING.
const MAX_NESTING: usize = 16;

fn err(text: &str) -> mlua::Error {
    mlua::Error::RuntimeError(text.into())
}

/// The `cmsgpack` table.
pub fn cmsgpack(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lib_fn(lua, |lua, args: MultiValue| {
            if args.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, &mut out, 0)?;
            }
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "unpack",
        lib_fn(lua, |lua, s: mlua::String| {
            let (_, vals) = unpack(lua, &s.as_bytes(), 0, 0)?;
            Ok(MultiValue::from_vec(vals))
        })?,
    )?;
    t.set(
        "unpack_one",
        lib_fn(lua, |lua, (s, offset): (mlua::String, Option<i64>)| {
            limited(lua, &s.as_bytes(), 1, offset.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lib_fn(
            lua,
            |lua, (s, limit, offset): (mlua::String, i64, Option<i64>)| {
                limited(lua, &s.as_bytes(), limit, offset.unwrap_or(0))
            },
        )?,
    )?;
    Ok(t)
}

/// `unpack_limit`'s answer: the next offset (-1: all read), then the objects.
fn limited(lua: &Lua, s: &[u8], limit: i64, offset: i64) -> Result<MultiValue> {
    let start = usize::try_from(offset)
        .ok()
        .filter(|&o| o <= s.len())
        .ok_or_else(|| err("Start offset greater than input length."))?;
    let (end, mut vals) = unpack(lua, s, start, limit.max(0) as usize)?;
    let next = if end >= s.len() { -1 } else { end as i64 };
    vals.insert(0, Value::Integer(next));
    Ok(MultiValue::from_vec(vals))
}

/// Decodes objects from `s[at..]` (at most `limit`; 0: all): where it stopped, and them.
fn unpack(lua: &Lua, s: &[u8], at: usize, limit: usize) -> Result<(usize, Vec<Value>)> {
    let mut cur = Cursor { s, at };
    let mut vals = Vec::new();
    while cur.at < s.len() && (limit == 0 || vals.len() < limit) {
        vals.push(cur.value(lua)?);
    }
    Ok((cur.at, vals))
}

fn encode(v: &Value, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    let io = |e: rmp::encode::ValueWriteError| err(&e.to_string());
    match v {
        Value::Boolean(b) => rmp::encode::write_bool(out, *b).map_err(|e| err(&e.to_string()))?,
        Value::Integer(n) => int(out, *n)?,
        Value::Number(n) => number(out, *n)?,
        Value::String(s) => {
            let b = s.as_bytes();
            rmp::encode::write_str_len(out, b.len() as u32).map_err(io)?;
            out.extend_from_slice(&b);
        }
        Value::Table(t) if depth < MAX_NESTING => table(t, out, depth)?,
        _ => rmp::encode::write_nil(out).map_err(|e| err(&e.to_string()))?,
    }
    Ok(())
}

fn int(out: &mut Vec<u8>, n: i64) -> Result<()> {
    let r = if n >= 0 {
        rmp::encode::write_uint(out, n as u64)
    } else {
        rmp::encode::write_sint(out, n)
    };
    r.map(|_| ()).map_err(|e| err(&e.to_string()))
}

fn number(out: &mut Vec<u8>, n: f64) -> Result<()> {
    if n.is_finite() && n.fract() == 0.0 && n >= i64::MIN as f64 && n < i64::MAX as f64 {
        return int(out, n as i64);
    }
    let r = if f64::from(n as f32) == n || n.is_nan() {
        rmp::encode::write_f32(out, n as f32)
    } else {
        rmp::encode::write_f64(out, n)
    };
    r.map_err(|e| err(&e.to_string()))
}

/// Whether every key is a positive integer and they are exactly 1..n: lua-cmsgpack's
/// `table_is_an_array` (an empty table is one).
fn array_len(pairs: &[(Value, Value)]) -> Option<usize> {
    let mut max = 0usize;
    for (k, _) in pairs {
        let n = match k {
            Value::Integer(i) if *i > 0 => *i as usize,
            Value::Number(f) if *f > 0.0 && f.fract() == 0.0 => *f as usize,
            _ => return None,
        };
        max = max.max(n);
    }
    (max == pairs.len()).then_some(max)
}

fn table(t: &Table, out: &mut Vec<u8>, depth: usize) -> Result<()> {
    let io = |e: rmp::encode::ValueWriteError| err(&e.to_string());
    let pairs: Vec<(Value, Value)> = t.clone().pairs::<Value, Value>().collect::<Result<_>>()?;
    if let Some(n) = array_len(&pairs) {
        rmp::encode::write_array_len(out, n as u32).map_err(io)?;
        for i in 1..=n {
            encode(&t.raw_get::<Value>(i)?, out, depth + 1)?;
        }
        return Ok(());
    }
    rmp::encode::write_map_len(out, pairs.len() as u32).map_err(io)?;
    for (k, v) in &pairs {
        encode(k, out, depth + 1)?;
        encode(v, out, depth + 1)?;
    }
    Ok(())
}

/// A read position in the input.
struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.s.len())
            .ok_or_else(|| err("Missing bytes in input."))?;
        let b = &self.s[self.at..end];
        self.at = end;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| a << 8 | u64::from(b)))
    }

    fn int(&mut self, n: usize) -> Result<i64> {
        let u = self.uint(n)?;
        let shift = 64 - 8 * n as u32;
        Ok(((u << shift) as i64) >> shift)
    }

    fn value(&mut self, lua: &Lua) -> Result<Value> {
        let m = Marker::from_u8(self.take(1)?[0]);
        Ok(match m {
            Marker::Null => Value::Nil,
            Marker::True => Value::Boolean(true),
            Marker::False => Value::Boolean(false),
            Marker::FixPos(n) => Value::Integer(i64::from(n)),
            Marker::FixNeg(n) => Value::Integer(i64::from(n)),
            Marker::U8 => Value::Integer(self.uint(1)? as i64),
            Marker::U16 => Value::Integer(self.uint(2)? as i64),
            Marker::U32 => Value::Integer(self.uint(4)? as i64),
            Marker::U64 => uint64(self.uint(8)?),
            Marker::I8 => Value::Integer(self.int(1)?),
            Marker::I16 => Value::Integer(self.int(2)?),
            Marker::I32 => Value::Integer(self.int(4)?),
            Marker::I64 => Value::Integer(self.int(8)?),
            Marker::F32 => Value::Number(f64::from(f32::from_bits(self.uint(4)? as u32))),
            Marker::F64 => Value::Number(f64::from_bits(self.uint(8)?)),
            Marker::FixStr(n) => self.bytes(lua, usize::from(n))?,
            Marker::Str8 | Marker::Bin8 => {
                let n = self.uint(1)? as usize;
                self.bytes(lua, n)?
            }
            Marker::Str16 | Marker::Bin16 => {
                let n = self.uint(2)? as usize;
                self.bytes(lua, n)?
            }
            Marker::Str32 | Marker::Bin32 => {
                let n = self.uint(4)? as usize;
                self.bytes(lua, n)?
            }
            Marker::FixArray(n) => self.array(lua, usize::from(n))?,
            Marker::Array16 => {
                let n = self.uint(2)? as usize;
                self.array(lua, n)?
            }
            Marker::Array32 => {
                let n = self.uint(4)? as usize;
                self.array(lua, n)?
            }
            Marker::FixMap(n) => self.map(lua, usize::from(n))?,
            Marker::Map16 => {
                let n = self.uint(2)? as usize;
                self.map(lua, n)?
            }
            Marker::Map32 => {
                let n = self.uint(4)? as usize;
                self.map(lua, n)?
            }
            _ => return Err(err("Bad data format in input.")),
        })
    }

    fn bytes(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let b = self.take(n)?;
        Ok(Value::String(lua.create_string(b)?))
    }

    fn array(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let t = lua.create_table_with_capacity(n.min(1 << 16), 0)?;
        for i in 1..=n {
            let v = self.value(lua)?;
            t.raw_set(i, v)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, lua: &Lua, n: usize) -> Result<Value> {
        let t = lua.create_table_with_capacity(0, n.min(1 << 16))?;
        for _ in 0..n {
            let k = self.value(lua)?;
            let v = self.value(lua)?;
            if k.is_nil() {
                continue;
            }
            t.raw_set(k, v)?;
        }
        Ok(Value::Table(t))
    }
}

/// A uint64 past i64's range is a Lua number, as lua-cmsgpack pushes it.
fn uint64(u: u64) -> Value {
    i64::try_from(u).map_or(Value::Number(u as f64), Value::Integer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals()
            .set("cmsgpack", cmsgpack(&lua).unwrap())
            .unwrap();
        lua
    }

    fn packed(lua: &Lua, code: &str) -> Vec<u8> {
        lua.load(code)
            .eval::<mlua::String>()
            .unwrap()
            .as_bytes()
            .to_vec()
    }

    #[test]
    fn packs_as_lua_cmsgpack_does() {
        let lua = lua();
        assert_eq!(
            packed(&lua, "return cmsgpack.pack(1, -1, 200, -200)"),
            [0x01, 0xff, 0xcc, 200, 0xd1, 0xff, 0x38]
        );
        assert_eq!(
            packed(&lua, "return cmsgpack.pack(1.5)"),
            [0xca, 0x3f, 0xc0, 0, 0]
        );
        assert_eq!(packed(&lua, "return cmsgpack.pack(0.1)")[0], 0xcb);
        assert_eq!(packed(&lua, "return cmsgpack.pack({})"), [0x90]);
        assert_eq!(
            packed(&lua, "return cmsgpack.pack({'a', true})"),
            [0x92, 0xa1, b'a', 0xc3]
        );
        assert_eq!(
            packed(&lua, "return cmsgpack.pack({k = false})"),
            [0x81, 0xa1, b'k', 0xc2]
        );
        let deep = packed(
            &lua,
            "local t = {} for i = 1, 20 do t = {t} end return cmsgpack.pack(t)",
        );
        assert_eq!(deep[..16], [0x91; 16]);
        assert_eq!(deep[16], 0xc0);
    }

    #[test]
    fn unpacks_what_it_packs_and_what_others_write() {
        let lua = lua();
        let got: String = lua
            .load(
                "local a, b, c = cmsgpack.unpack(cmsgpack.pack({x = {1, 2, 'three'}}, 'y', -7))
                 return a.x[3] .. b .. c .. #a.x",
            )
            .eval()
            .unwrap();
        assert_eq!(got, "threey-73");
        // msgpackr's encoding of { attempts: 0 } and of a float64 and a bin8.
        lua.globals()
            .set(
                "s",
                lua.create_string([
                    0xde, 0, 1, 0xa8, b'a', b't', b't', b'e', b'm', b'p', b't', b's', 0,
                ])
                .unwrap(),
            )
            .unwrap();
        let n: i64 = lua
            .load("return cmsgpack.unpack(s).attempts")
            .eval()
            .unwrap();
        assert_eq!(n, 0);
        let one: (i64, i64) = lua
            .load("local o, v = cmsgpack.unpack_one(cmsgpack.pack(5, 6)) return o, v")
            .eval()
            .unwrap();
        assert_eq!(one, (1, 5));
        let last: (i64, i64) = lua
            .load("local o, v = cmsgpack.unpack_one(cmsgpack.pack(5, 6), 1) return o, v")
            .eval()
            .unwrap();
        assert_eq!(last, (-1, 6));
        for bad in [
            "cmsgpack.unpack('\\205')",
            "cmsgpack.unpack('\\193')",
            "cmsgpack.pack()",
        ] {
            assert!(lua.load(bad).exec().is_err(), "{bad}");
        }
    }
}

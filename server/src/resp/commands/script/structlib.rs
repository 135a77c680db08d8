//! `struct`, the binary packing library Redis gives scripts (Roberto Ierusalimschy's
//! struct.c, whose rules this follows): `struct.pack(fmt, ...)`, `struct.unpack(fmt, s
//! [, pos])` (the values, then the position after them, 1-based) and `struct.size(fmt)`.
//! Format: `>` big-endian, `<` little-endian, `!n` alignment (`!` alone: 8), `x` a zero
//! byte, `b`/`B` `h`/`H` `l`/`L` `T` `i[n]`/`I[n]` integers of 1, 2, 8, 8 and n (default 4,
//! at most 32) bytes, signed in lower case, `f` and `d` floats, `cn` n characters (`c0`:
//! the whole string when packing, the length read just before when unpacking), `s` a
//! zero-terminated string; spaces are ignored.

use crate::resp::commands::script::libs::lib_fn;
use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

fn err(text: String) -> mlua::Error {
    mlua::Error::RuntimeError(text)
}

/// Integers up to this many bytes.
const MAX_INT: usize = 32;
/// `!` without a size: the platform's widest alignment.
const MAX_ALIGN: usize = 8;

/// Where the format stands: endianness and alignment.
struct Header {
    little: bool,
    align: usize,
}

/// One option of the format: its letter and size.
struct Opt {
    code: u8,
    size: usize,
}

/// Reads the options of `fmt` one at a time, applying `>`, `<`, `!` and spaces to `h`.
/// (`f`: the library function, for its argument errors.)
fn options<'a>(
    fmt: &'a [u8],
    f: &'static str,
) -> impl Iterator<Item = Result<(Opt, bool, usize)>> + 'a {
    let mut h = Header {
        little: cfg!(target_endian = "little"),
        align: 1,
    };
    let mut i = 0;
    std::iter::from_fn(move || loop {
        let &c = fmt.get(i)?;
        i += 1;
        let mut num = |default: usize| -> usize {
            let start = i;
            while fmt.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            std::str::from_utf8(&fmt[start..i])
                .ok()
                .and_then(|t| t.parse().ok())
                .unwrap_or(default)
        };
        let size = match c {
            b' ' => continue,
            b'>' => {
                h.little = false;
                continue;
            }
            b'<' => {
                h.little = true;
                continue;
            }
            b'!' => {
                h.align = num(MAX_ALIGN);
                if !h.align.is_power_of_two() {
                    return Some(Err(err("alignment must be power of 2".into())));
                }
                continue;
            }
            b'x' | b'b' | b'B' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b's' => 0,
            b'c' => num(1),
            b'i' | b'I' => {
                let n = num(4);
                if n > MAX_INT {
                    return Some(Err(err(format!(
                        "integral size {n} is larger than limit of {MAX_INT}"
                    ))));
                }
                n
            }
            other => {
                return Some(Err(err(format!(
                    "bad argument #1 to '{f}' (invalid format option '{}')",
                    char::from(other)
                ))))
            }
        };
        return Some(Ok((Opt { code: c, size }, h.little, h.align)));
    })
}

/// Padding before an option of `size` at `len` bytes, under alignment `align`.
fn to_align(len: usize, opt: &Opt, align: usize) -> usize {
    if opt.size == 0 || opt.code == b'c' {
        return 0;
    }
    let size = opt.size.min(align);
    (size - (len & (size - 1))) & (size - 1)
}

fn put_int(out: &mut Vec<u8>, v: u64, little: bool, size: usize) {
    let bytes: Vec<u8> = (0..size)
        .map(|i| if i < 8 { (v >> (8 * i)) as u8 } else { 0 })
        .collect();
    if little {
        out.extend_from_slice(&bytes);
    } else {
        out.extend(bytes.iter().rev());
    }
}

fn pack(lua: &Lua, (fmt, args): (mlua::String, Variadic<Value>)) -> Result<mlua::String> {
    let fmt = fmt.as_bytes().to_vec();
    let mut out = Vec::new();
    let mut args = args.into_iter();
    let mut next = |n: usize| {
        args.next()
            .ok_or_else(|| err(format!("bad argument #{n} to 'pack'")))
    };
    let mut argn = 2;
    for o in options(&fmt, "pack") {
        let (opt, little, align) = o?;
        out.resize(out.len() + to_align(out.len(), &opt, align), 0);
        match opt.code {
            b'x' => out.push(0),
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(lua, next(argn)?, argn)?;
                let v = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                put_int(&mut out, v, little, opt.size);
                argn += 1;
            }
            b'f' | b'd' => {
                let n = number(lua, next(argn)?, argn)?;
                let b = if opt.code == b'f' {
                    (n as f32).to_bits().to_be_bytes().to_vec()
                } else {
                    n.to_bits().to_be_bytes().to_vec()
                };
                if little {
                    out.extend(b.iter().rev());
                } else {
                    out.extend_from_slice(&b);
                }
                argn += 1;
            }
            b'c' | b's' => {
                let s = string(lua, next(argn)?, argn)?;
                if opt.code == b's' {
                    out.extend_from_slice(&s);
                    out.push(0);
                } else {
                    let size = if opt.size == 0 { s.len() } else { opt.size };
                    if s.len() < size {
                        return Err(err(format!(
                            "bad argument #{argn} to 'pack' (string too short)"
                        )));
                    }
                    out.extend_from_slice(&s[..size]);
                }
                argn += 1;
            }
            _ => unreachable!("options() yields only the codes above"),
        }
    }
    lua.create_string(&out)
}

fn number(lua: &Lua, v: Value, n: usize) -> Result<f64> {
    match lua.coerce_number(v)? {
        Some(x) => Ok(x),
        None => Err(err(format!(
            "bad argument #{n} to 'pack' (number expected)"
        ))),
    }
}

fn string(lua: &Lua, v: Value, n: usize) -> Result<Vec<u8>> {
    match lua.coerce_string(v)? {
        Some(s) => Ok(s.as_bytes().to_vec()),
        None => Err(err(format!(
            "bad argument #{n} to 'pack' (string expected)"
        ))),
    }
}

fn unpack(
    lua: &Lua,
    (fmt, data, pos): (mlua::String, mlua::String, Option<i64>),
) -> Result<MultiValue> {
    let (fmt, data) = (fmt.as_bytes().to_vec(), data.as_bytes().to_vec());
    let mut at = usize::try_from(pos.unwrap_or(1) - 1)
        .map_err(|_| err("bad argument #3 to 'unpack' (offset must be 1 or greater)".into()))?;
    let mut vals: Vec<Value> = Vec::new();
    let short = || err("bad argument #2 to 'unpack' (data string too short)".into());
    for o in options(&fmt, "unpack") {
        let (opt, little, align) = o?;
        at += to_align(at, &opt, align);
        match opt.code {
            b'x' => {}
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let b = data.get(at..at + opt.size).ok_or_else(short)?;
                let mut v: u64 = 0;
                let order: Vec<u8> = if little {
                    b.iter().rev().copied().collect()
                } else {
                    b.to_vec()
                };
                for byte in order {
                    v = v << 8 | u64::from(byte);
                }
                let signed = opt.code.is_ascii_lowercase();
                let n = if signed && opt.size < 8 {
                    let mask = 1u64 << (opt.size * 8 - 1);
                    ((v ^ mask).wrapping_sub(mask)) as i64 as f64
                } else if signed {
                    v as i64 as f64
                } else {
                    v as f64
                };
                vals.push(Value::Number(n));
            }
            b'f' | b'd' => {
                let b = data.get(at..at + opt.size).ok_or_else(short)?;
                let mut b = b.to_vec();
                if little {
                    b.reverse();
                }
                let n = if opt.code == b'f' {
                    f64::from(f32::from_bits(u32::from_be_bytes(
                        b.try_into().unwrap_or_default(),
                    )))
                } else {
                    f64::from_bits(u64::from_be_bytes(b.try_into().unwrap_or_default()))
                };
                vals.push(Value::Number(n));
            }
            b'c' => {
                let size = if opt.size == 0 {
                    match vals.pop() {
                        Some(Value::Number(n)) if n >= 0.0 => n as usize,
                        Some(Value::Integer(n)) if n >= 0 => n as usize,
                        _ => return Err(err("format 'c0' needs a previous size".into())),
                    }
                } else {
                    opt.size
                };
                let b = data.get(at..at + size).ok_or_else(short)?;
                vals.push(Value::String(lua.create_string(b)?));
                at += size;
                continue;
            }
            b's' => {
                let rest = data.get(at..).ok_or_else(short)?;
                let end = rest
                    .iter()
                    .position(|&b| b == 0)
                    .ok_or_else(|| err("unfinished string in data".into()))?;
                vals.push(Value::String(lua.create_string(&rest[..end])?));
                at += end + 1;
                continue;
            }
            _ => unreachable!("options() yields only the codes above"),
        }
        at += opt.size;
    }
    vals.push(Value::Integer(at as i64 + 1));
    Ok(MultiValue::from_vec(vals))
}

fn size(_: &Lua, fmt: mlua::String) -> Result<i64> {
    let fmt = fmt.as_bytes().to_vec();
    let mut len = 0usize;
    for o in options(&fmt, "size") {
        let (opt, _, align) = o?;
        if opt.size == 0 {
            return Err(err("options 'c0' - 's' have undefined sizes".into()));
        }
        len += to_align(len, &opt, align) + opt.size;
    }
    Ok(len as i64)
}

/// The `struct` table.
pub fn library(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lib_fn(lua, pack)?)?;
    t.set("unpack", lib_fn(lua, unpack)?)?;
    t.set("size", lib_fn(lua, size)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("struct", library(&lua).unwrap()).unwrap();
        lua
    }

    #[test]
    fn packs_and_unpacks_as_struct_c_does() {
        let lua = lua();
        let b: mlua::String = lua
            .load("return struct.pack('>i2<I4b', 258, 1, -1)")
            .eval()
            .unwrap();
        assert_eq!(b.as_bytes().to_vec(), vec![1, 2, 1, 0, 0, 0, 0xff]);
        let r: (f64, f64, f64, i64) = lua
            .load("return struct.unpack('>i2<I4b', struct.pack('>i2<I4b', -2, 70000, -5))")
            .eval()
            .unwrap();
        assert_eq!(r, (-2.0, 70000.0, -5.0, 8));
        let s: (String, String, i64) = lua
            .load("return struct.unpack('sc3', struct.pack('sc3', 'hello', 'abcdef'))")
            .eval()
            .unwrap();
        assert_eq!(s, ("hello".into(), "abc".into(), 10));
        let c0: (String, i64) = lua
            .load("return struct.unpack('Bc0', struct.pack('Bc0', 3, 'xyz'))")
            .eval()
            .unwrap();
        assert_eq!(c0, ("xyz".into(), 5));
        let d: f64 = lua
            .load("return (struct.unpack('<d', struct.pack('<d', 1.25)))")
            .eval()
            .unwrap();
        assert_eq!(d, 1.25);
        let size: i64 = lua.load("return struct.size('!4bi')").eval().unwrap();
        assert_eq!(size, 8);
        let size: i64 = lua.load("return struct.size('bi')").eval().unwrap();
        assert_eq!(size, 5);
        for bad in [
            "struct.pack('q', 1)",
            "struct.size('s')",
            "struct.unpack('i', 'ab')",
            "struct.pack('i33', 1)",
        ] {
            assert!(lua.load(bad).exec().is_err(), "{bad}");
        }
    }
}

//! Redis's hash commands over the collection encoding (`encoding.rs`): one subkey per
//! field, holding the field's value. Every write is one transaction (its fields and the
//! metadata released as one version); every read sees one snapshot.

use crate::core::counters::OpClass;
use crate::core::ops::write::format_float;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, put, put_new, set_meta, Fail};
use crate::resp::commands::types::encoding::{field_key, Kind};
use crate::resp::commands::types::members;
use crate::resp::commands::types::packed::create;
use crate::resp::commands::types::run::{check, float_arg, int_arg, read, scan_opts, write_key};
use crate::resp::notify::{event, HASH};
use crate::resp::reply::wrong_args;
use accelkv_proto::resp::{self, Version};

const H: Kind = Kind::Hash;

/// `HSET key field value [field value ...]`: the number of fields added.
pub fn hset(x: &mut Call<'_, '_>) {
    if x.args.len() % 2 == 1 {
        return wrong_args(x.out, x.args[0]);
    }
    set_fields(x, false)
}

/// `HMSET key field value [field value ...]`: OK.
pub fn hmset(x: &mut Call<'_, '_>) {
    if x.args.len() % 2 == 1 {
        return wrong_args(x.out, x.args[0]);
    }
    set_fields(x, true)
}

fn set_fields(x: &mut Call<'_, '_>, ok: bool) {
    let (key, pairs) = (x.args[1], &x.args[2..]);
    let fields: Vec<&[u8]> = pairs.iter().step_by(2).copied().collect();
    let values: Vec<&[u8]> = pairs.iter().skip(1).step_by(2).copied().collect();
    if let Err(e) = check(x.sh, key, &fields, &values) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let mut m = src
                .meta(sh, s, key, H)?
                .unwrap_or_else(|| create(&mut s.packs, key, H));
            let p = m.prefix(key);
            let mut added = 0;
            for kv in pairs.chunks(2) {
                if put_new(sh, s, field_key(&p, kv[0]), kv[1])? {
                    added += 1;
                }
            }
            m.len += added;
            set_meta(sh, s, key, &m)?;
            event(s, HASH, "hset", key);
            Ok(added)
        },
        move |out, n, _| match ok {
            true => resp::simple(out, "OK"),
            false => resp::integer(out, n as i64),
        },
    )
}

/// `HSETNX key field value`: 1 if the field was set, 0 if it existed.
pub fn hsetnx(x: &mut Call<'_, '_>) {
    let (key, field, value) = (x.args[1], x.args[2], x.args[3]);
    if let Err(e) = check(x.sh, key, &[field], &[value]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let mut m = src
                .meta(sh, s, key, H)?
                .unwrap_or_else(|| create(&mut s.packs, key, H));
            let sk = field_key(&m.prefix(key), field);
            if src.get(sh, s, &sk)?.is_some() {
                return Ok(0);
            }
            put(sh, s, sk.as_slice(), value)?;
            m.len += 1;
            set_meta(sh, s, key, &m)?;
            event(s, HASH, "hset", key);
            Ok(1)
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// `HGET key field`.
pub fn hget(x: &mut Call<'_, '_>) {
    let (key, field) = (x.args[1], x.args[2]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, H)? {
            None => Ok(None),
            Some(m) => src.get(sh, s, &field_key(&m.prefix(key), field)),
        },
        |out, v, proto| resp::bulk_in(out, v.as_deref(), proto),
    )
}

/// `HMGET key field [field ...]`.
pub fn hmget(x: &mut Call<'_, '_>) {
    let (key, fields) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, H)? else {
                return Ok(vec![None; fields.len()]);
            };
            let p = m.prefix(key);
            fields
                .iter()
                .map(|f| src.get(sh, s, &field_key(&p, f)))
                .collect::<Result<Vec<_>, Fail>>()
        },
        |out, vs, proto| {
            resp::array(out, vs.len());
            for v in vs {
                resp::bulk_in(out, v.as_deref(), proto);
            }
        },
    )
}

/// `HDEL key field [field ...]`: the number of fields removed.
pub fn hdel(x: &mut Call<'_, '_>) {
    let (key, fields) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| members::remove_fields(sh, s, src, (key, H), fields),
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `HLEN key`.
pub fn hlen(x: &mut Call<'_, '_>) {
    members::len(x, H)
}

/// `HEXISTS key field`.
pub fn hexists(x: &mut Call<'_, '_>) {
    let (key, field) = (x.args[1], x.args[2]);
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, H)? {
            None => Ok(false),
            Some(m) => Ok(src.get(sh, s, &field_key(&m.prefix(key), field))?.is_some()),
        },
        |out, b, _| resp::integer(out, i64::from(b)),
    )
}

/// `HSTRLEN key field`.
pub fn hstrlen(x: &mut Call<'_, '_>) {
    let (key, field) = (x.args[1], x.args[2]);
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, H)? {
            None => Ok(0),
            Some(m) => Ok(src
                .get(sh, s, &field_key(&m.prefix(key), field))?
                .map_or(0, |v| v.len())),
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// Which parts of every field HGETALL, HKEYS and HVALS answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Both,
    Fields,
    Values,
}

fn all(x: &mut Call<'_, '_>, parts: Parts) {
    let key = x.args[1];
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| {
            let m = src.meta(sh, s, key, H)?;
            src.fields_encoded(sh, s, key, m.as_ref(), |body, f, v| {
                if parts != Parts::Values {
                    resp::bulk(body, Some(f));
                }
                if parts != Parts::Fields {
                    resp::bulk(body, Some(v));
                }
            })
        },
        move |out, (n, body), proto| {
            match parts {
                Parts::Both => resp::map(out, n, proto),
                Parts::Fields | Parts::Values => resp::array(out, n),
            }
            out.extend_from_slice(&body);
        },
    )
}

/// `HGETALL key`: every field and value, in field order.
pub fn hgetall(x: &mut Call<'_, '_>) {
    all(x, Parts::Both)
}

/// `HKEYS key`.
pub fn hkeys(x: &mut Call<'_, '_>) {
    all(x, Parts::Fields)
}

/// `HVALS key`.
pub fn hvals(x: &mut Call<'_, '_>) {
    all(x, Parts::Values)
}

/// Sets one field of the hash to what `f` makes of its current value (HINCRBY,
/// HINCRBYFLOAT): `f` answers the field's new bytes and the reply's value; a new field
/// counts toward the hash's length.
fn update_field<R>(
    x: &mut Call<'_, '_>,
    name: &'static str,
    f: impl FnOnce(Option<&[u8]>) -> Result<(Vec<u8>, R), Fail>,
    ok: impl FnOnce(&mut Vec<u8>, R, Version),
) {
    let (key, field) = (x.args[1], x.args[2]);
    if let Err(e) = check(x.sh, key, &[field], &[]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let mut m = src
                .meta(sh, s, key, H)?
                .unwrap_or_else(|| create(&mut s.packs, key, H));
            let sk = field_key(&m.prefix(key), field);
            let old = src.get(sh, s, &sk)?;
            let (new, reply) = f(old.as_deref())?;
            put(sh, s, sk.as_slice(), &new)?;
            if old.is_none() {
                m.len += 1;
                set_meta(sh, s, key, &m)?;
            }
            event(s, HASH, name, key);
            Ok(reply)
        },
        ok,
    )
}

/// `HINCRBY key field increment`.
pub fn hincrby(x: &mut Call<'_, '_>) {
    let by = match int_arg(x.args[3]) {
        Ok(n) => n,
        Err(e) => return fail(x.out, &e),
    };
    update_field(
        x,
        "hincrby",
        |v| {
            let old = match v {
                None => 0,
                Some(v) => crate::resp::reply::parse_i64(v)
                    .ok_or_else(|| Fail::Reply("ERR hash value is not an integer".into()))?,
            };
            let new = old
                .checked_add(by)
                .ok_or_else(|| Fail::Reply("ERR increment or decrement would overflow".into()))?;
            Ok((new.to_string().into_bytes(), new))
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// `HINCRBYFLOAT key field increment`.
pub fn hincrbyfloat(x: &mut Call<'_, '_>) {
    let by = match float_arg(x.args[3]) {
        Ok(n) if n.is_finite() => n,
        Ok(_) => {
            return resp::error(x.out, "ERR value is NaN or Infinity");
        }
        Err(e) => return fail(x.out, &e),
    };
    update_field(
        x,
        "hincrbyfloat",
        |v| {
            let not_float = || Fail::Reply("ERR hash value is not a float".into());
            let old = match v {
                None => 0.0,
                Some(v) => std::str::from_utf8(v)
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .filter(|n| n.is_finite())
                    .ok_or_else(not_float)?,
            };
            let new = old + by;
            if !new.is_finite() {
                return Err(Fail::Reply(
                    "ERR increment would produce NaN or Infinity".into(),
                ));
            }
            let text = format_float(new);
            Ok((text.clone().into_bytes(), text))
        },
        |out, t, _| resp::bulk(out, Some(t.as_bytes())),
    )
}

/// `HRANDFIELD key [count [WITHVALUES]]`.
pub fn hrandfield(x: &mut Call<'_, '_>) {
    members::random(x, H)
}

/// `HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]`.
pub fn hscan(x: &mut Call<'_, '_>) {
    match scan_opts(&x.args[3..], true) {
        Ok(o) => members::scan(x, H, o),
        Err(e) => fail(x.out, &e),
    }
}

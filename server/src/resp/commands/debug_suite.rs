//! The DEBUG subcommands Redis's own test suite calls besides the hooks in `debug.rs`:
//! DIGEST and DIGEST-VALUE (a SHA-1 of the data, to compare two states), PROTOCOL (one
//! reply of each RESP3 type, so a client's parser is tested), LISTPACK (whether a
//! collection is packed), and the knobs of Redis's internals that accelkv has no use for
//! (QUICKLIST-PACKED-THRESHOLD, RELOAD), answered OK after checking their arguments.

use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail, Src};
use crate::resp::commands::types::encoding::{Kind, Meta, RESERVED};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};
use sha1::{Digest, Sha1};

/// `DEBUG DIGEST`: the XOR of every key's digest (its name and its value's), 40 hex
/// digits, all zeros for an empty server, so two servers, or one before and after, holding
/// the same data answer the same.
pub fn digest(x: &mut Call<'_, '_>) {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let _ =
        x.sh.view()
            .scan_with(b"", Some(&RESERVED), usize::MAX, |k, _| {
                keys.push(k.to_vec())
            });
    let mut all = [0u8; 20];
    for k in &keys {
        match value_digest(x.sh, x.s, k) {
            Ok(Some(v)) => {
                let mut h = Sha1::new();
                h.update(k);
                h.update(v);
                all.iter_mut().zip(h.finalize()).for_each(|(a, b)| *a ^= b);
            }
            Ok(None) => {}
            Err(e) => return fail(x.out, &e),
        }
    }
    resp::simple(x.out, &hex(&all))
}

/// `DEBUG DIGEST-VALUE key ...`: each key's value's digest (all zeros for a missing key),
/// the key's name left out, so a copy answers what its source does.
pub fn digest_value(x: &mut Call<'_, '_>) {
    resp::array(x.out, x.args.len() - 2);
    for key in &x.args[2..] {
        let key = crate::resp::db::to_store(x.s.db, key).into_owned();
        match value_digest(x.sh, x.s, &key) {
            Ok(d) => resp::simple(x.out, &hex(&d.unwrap_or([0; 20]))),
            Err(e) => fail(x.out, &e),
        }
    }
}

fn hex(d: &[u8; 20]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The digest of what `key` (as stored) holds: its type and its contents in order (a
/// list's elements, a hash's fields and values, a set's members, a sorted set's members
/// and scores, a stream's entries), the same however the collection is kept.
fn value_digest(sh: &Shared, s: &mut Session, key: &[u8]) -> Result<Option<[u8; 20]>, Fail> {
    let src = Src::open(sh, s);
    let Some((v, flags)) = src.item(sh, s, key)? else {
        return Ok(None);
    };
    let mut h = Sha1::new();
    let Ok(m) = Meta::decode(&v, flags) else {
        h.update(b"string");
        h.update(&v);
        return Ok(Some(h.finalize().into()));
    };
    let m = src.meta(sh, s, key, m.kind)?.unwrap_or(m);
    h.update(m.kind.name());
    for (field, value) in src.fields(sh, s, key, &m)? {
        if m.kind != Kind::List {
            h.update((field.len() as u64).to_be_bytes());
            h.update(&field);
        }
        h.update((value.len() as u64).to_be_bytes());
        h.update(&value);
    }
    Ok(Some(h.finalize().into()))
}

/// `DEBUG LISTPACK key`: whether the collection is packed in one item (Redis prints the
/// listpack on its standard output; accelkv's item holds it whole).
pub fn listpack(x: &mut Call<'_, '_>) {
    let key = crate::resp::db::to_store(x.s.db, x.args[2]).into_owned();
    let src = Src::open(x.sh, x.s);
    match src.item(x.sh, x.s, &key) {
        Ok(None) => resp::error(x.out, "ERR no such key"),
        Ok(Some((v, f))) => match Meta::decode(&v, f) {
            Ok(m) if m.packed => resp::simple(x.out, "Listpack structure printed on stdout"),
            _ => resp::error(x.out, "ERR Not a listpack encoded object."),
        },
        Err(e) => fail(x.out, &e),
    }
}

/// `DEBUG QUICKLIST-PACKED-THRESHOLD size`: Redis's size past which a list element is a
/// node of its own. accelkv keeps each element of a long list as an item of its own
/// whatever its size, so only the argument is checked.
pub fn quicklist_packed_threshold(x: &mut Call<'_, '_>) {
    match memory_value(x.args[2]) {
        Some(n) if n <= (1 << 32) - (1 << 20) => resp::simple(x.out, "OK"),
        _ => resp::error(
            x.out,
            "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
        ),
    }
}

/// A memory value as Redis reads one (`memtoull`: digits and an optional unit), with the
/// parser CONFIG SET uses.
fn memory_value(a: &[u8]) -> Option<u64> {
    crate::config::size::Size::parse_bytes(a).map(|s| s.0)
}

/// `DEBUG PROTOCOL type`: one reply of a RESP type, as Redis answers it (RESP3 types
/// become their RESP2 forms on a RESP2 connection).
pub fn protocol(x: &mut Call<'_, '_>) {
    let (out, v) = (&mut *x.out, x.s.proto);
    let r3 = v == Version::Resp3;
    match x.args[2].to_ascii_lowercase().as_slice() {
        b"string" => resp::bulk(out, Some(b"Hello World")),
        b"integer" => resp::integer(out, 12345),
        b"double" if r3 => out.extend_from_slice(b",3.141\r\n"),
        b"double" => resp::bulk(out, Some(b"3.141")),
        b"bignum" if r3 => out.extend_from_slice(b"(1234567999999999999999999999999999999\r\n"),
        b"bignum" => resp::bulk(out, Some(b"1234567999999999999999999999999999999")),
        b"null" => resp::bulk_in(out, None, v),
        b"array" | b"set" => {
            match x.args[2].eq_ignore_ascii_case(b"set") {
                true => resp::set(out, 3, v),
                false => resp::array(out, 3),
            }
            (0..3).for_each(|j| resp::integer(out, j));
        }
        b"map" => {
            resp::map(out, 3, v);
            for j in 0..3 {
                resp::integer(out, j);
                boolean(out, j == 1, v);
            }
        }
        b"attrib" => {
            if r3 {
                out.extend_from_slice(b"|1\r\n");
                resp::bulk(out, Some(b"key-popularity"));
                resp::array(out, 2);
                resp::bulk(out, Some(b"key:123"));
                resp::integer(out, 90);
            }
            resp::bulk(out, Some(b"Some real reply following the attribute"));
        }
        b"push" if !r3 => resp::error(out, "ERR RESP2 is not supported by this command"),
        b"push" => {
            out.extend_from_slice(b">2\r\n");
            resp::bulk(out, Some(b"server-cpu-usage"));
            resp::integer(out, 42);
            resp::bulk(out, Some(b"Some real reply following the push reply"));
        }
        b"true" => boolean(out, true, v),
        b"false" => boolean(out, false, v),
        b"verbatim" => resp::verbatim(out, b"This is a verbatim\nstring", v),
        _ => resp::error(
            out,
            "ERR Wrong protocol type name. Please use one of the following: string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
        ),
    }
}

/// A boolean: `#t`/`#f` in RESP3, 1 or 0 in RESP2 (as Redis).
fn boolean(out: &mut Vec<u8>, b: bool, v: Version) {
    match v {
        Version::Resp3 => out.extend_from_slice(if b { b"#t\r\n" } else { b"#f\r\n" }),
        Version::Resp2 => resp::integer(out, i64::from(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::{hex, memory_value};

    #[test]
    fn memory_values_read_as_redis_reads_them() {
        assert_eq!(memory_value(b"1b"), Some(1));
        assert_eq!(memory_value(b"5KB"), Some(5120));
        assert_eq!(memory_value(b"2k"), Some(2000));
        assert_eq!(memory_value(b"0"), Some(0));
        assert_eq!(memory_value(b"1x"), None);
        assert_eq!(memory_value(b"gb"), None);
    }

    #[test]
    fn digests_are_forty_hex_digits() {
        let mut d = [0u8; 20];
        assert_eq!(hex(&d), "0".repeat(40));
        d[0] = 0xab;
        assert!(hex(&d).starts_with("ab00"));
    }
}

//! Redis's HyperLogLog commands on string values in Redis's own HLL format
//! (`accelkv_proto::hll`, docs/FORMAT.md "HyperLogLog"): PFADD and PFDEBUG as one station
//! operation on their key, PFCOUNT from a snapshot while the cached cardinality is fresh
//! (else as a write that caches it, as Redis does), PFMERGE and a PFCOUNT of several keys
//! in one transaction, and PFSELFTEST.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, put_string, Fail, Src};
use crate::resp::commands::types::run::{read, write, write_key};
use crate::resp::notify;
use crate::resp::reply::upper;
use crate::resp::session::Session;
use accelkv_proto::hll::{self, Encoding, Invalid, Registers};
use accelkv_proto::resp;

fn invalid(e: Invalid) -> Fail {
    Fail::Reply(e.text().to_string())
}

/// `hll-sparse-max-bytes` now.
fn sparse_max(s: &Session) -> usize {
    let max = s.global.tuning.get("hll-sparse-max-bytes");
    max.unwrap_or(hll::SPARSE_MAX_BYTES as i64).max(0) as usize
}

/// The HLL at `key` (`None`: absent), checked as Redis checks it.
fn load(sh: &Shared, s: &mut Session, src: &Src<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, Fail> {
    let v = src.string(sh, s, key)?;
    if let Some(v) = &v {
        hll::check(v).map_err(invalid)?;
    }
    Ok(v)
}

/// `PFADD key [element ...]`: 1 if a register changed (or the key was made), else 0.
pub fn pfadd(x: &mut Call<'_, '_>) {
    let (key, elements) = (x.args[1], &x.args[2..]);
    let max = sparse_max(x.s);
    x.sh.count(OpClass::Update);
    let f = |sh: &Shared, s: &mut Session, src: &Src<'_>| {
        // Most adds to a big HLL change nothing: looked at in place, without a copy.
        let needed = src.peek_string(sh, s, key, |cur| match cur {
            None => Ok(true),
            Some(v) => {
                hll::check(v)?;
                let mut any = false;
                for e in elements {
                    any |= hll::would_change(v, e)?;
                }
                Ok(any)
            }
        })?;
        if !needed.map_err(invalid)? {
            return Ok(false);
        }
        let (mut v, mut changed) = match load(sh, s, src, key)? {
            Some(v) => (v, false),
            None => (hll::new(), true),
        };
        for e in elements {
            changed |= hll::add(&mut v, e, max).map_err(invalid)?;
        }
        if changed {
            hll::invalidate(&mut v);
            put_string(sh, s, key, &v)?;
            notify::event(s, notify::STRING, "pfadd", key);
        }
        Ok(changed)
    };
    write_key(x, key, f, |out, changed, _| {
        resp::integer(out, i64::from(changed))
    });
}

/// `PFCOUNT key [key ...]`: one key's cardinality (its cache, or computed and cached), or
/// the cardinality of several keys' union (not cached).
pub fn pfcount(x: &mut Call<'_, '_>) {
    x.sh.count(OpClass::Get);
    let keys = &x.args[1..];
    if keys.len() > 1 {
        let f = |sh: &Shared, s: &mut Session, src: &Src<'_>| {
            let mut max: Box<Registers> = Box::new([0; hll::REGISTERS]);
            for k in keys {
                if let Some(v) = load(sh, s, src, k)? {
                    hll::merge_into(&mut max, &v).map_err(invalid)?;
                }
            }
            Ok(hll::count_registers(&max))
        };
        return read(x, f, |out, n, _| resp::integer(out, n as i64));
    }
    let key = keys[0];
    // A fresh cache answers from a snapshot; a stale one is recomputed and written back.
    let fresh = |sh: &Shared, s: &mut Session, src: &Src<'_>| match load(sh, s, src, key)? {
        None => Ok(Some(0)),
        Some(v) => Ok(hll::cached(&v)),
    };
    if x.s.tx.running.is_none() {
        // Outside a transaction: the header read in place, without copying the value.
        let peeked = x.sh.view().get_item_with(key, 0, |v, _, flags| {
            if crate::core::ops::typed::is_typed(flags) {
                return Err(Fail::WrongType);
            }
            hll::check(v).map_err(invalid)?;
            Ok(hll::cached(v))
        });
        match peeked {
            Ok(None) => return resp::integer(x.out, 0),
            Ok(Some(Ok(Some(n)))) => return resp::integer(x.out, n as i64),
            Ok(Some(Ok(None))) => {}
            Ok(Some(Err(e))) => return fail(x.out, &e),
            Err(e) => return crate::resp::reply::err_store(x.out, &e),
        }
    } else {
        let src = Src::open(x.sh, x.s);
        match fresh(x.sh, x.s, &src) {
            Ok(Some(n)) => return resp::integer(x.out, n as i64),
            Ok(None) => {}
            Err(e) => return fail(x.out, &e),
        }
    }
    let f = |sh: &Shared, s: &mut Session, src: &Src<'_>| {
        let Some(mut v) = load(sh, s, src, key)? else {
            return Ok(0);
        };
        if let Some(n) = hll::cached(&v) {
            return Ok(n);
        }
        let n = hll::count(&v).map_err(invalid)?;
        hll::set_cached(&mut v, n);
        put_string(sh, s, key, &v)?;
        Ok(n)
    };
    write_key(x, key, f, |out, n, _| resp::integer(out, n as i64));
}

/// `PFMERGE destkey [sourcekey ...]`: the union of the sources and the destination into
/// the destination (made if absent; dense if any input was).
pub fn pfmerge(x: &mut Call<'_, '_>) {
    let (dest, keys) = (x.args[1], &x.args[1..]);
    let max_bytes = sparse_max(x.s);
    x.sh.count(OpClass::Put);
    let f = |sh: &Shared, s: &mut Session, src: &Src<'_>| {
        let mut max: Box<Registers> = Box::new([0; hll::REGISTERS]);
        let mut dense = false;
        let mut dest_v = None;
        for (i, k) in keys.iter().enumerate() {
            let Some(v) = load(sh, s, src, k)? else {
                continue;
            };
            dense |= hll::merge_into(&mut max, &v).map_err(invalid)? == Encoding::Dense;
            if i == 0 {
                dest_v = Some(v);
            }
        }
        let mut v = dest_v.unwrap_or_else(hll::new);
        hll::write_registers(&mut v, &max, dense, max_bytes).map_err(invalid)?;
        put_string(sh, s, dest, &v)?;
        notify::event(s, notify::STRING, "pfadd", dest);
        Ok(())
    };
    write(x, f, |out, (), _| resp::simple(out, "OK"));
}

/// What a PFDEBUG subcommand answers.
enum Debug {
    Registers(Box<Registers>),
    Text(String),
    Status(&'static str),
    Int(i64),
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`: the registers (making the HLL dense, as
/// Redis does), the sparse opcodes as text, the encoding, or a conversion to dense.
pub fn pfdebug(x: &mut Call<'_, '_>) {
    let (sub, key) = (upper(x.args[1]), x.args[2]);
    let name = String::from_utf8_lossy(x.args[1]).into_owned();
    let f = |sh: &Shared, s: &mut Session, src: &Src<'_>| {
        let Some(mut v) = load(sh, s, src, key)? else {
            return Err(Fail::Reply("ERR The specified key does not exist".into()));
        };
        Ok(match sub.as_slice() {
            b"GETREG" => {
                if hll::to_dense(&mut v).map_err(invalid)? {
                    put_string(sh, s, key, &v)?;
                }
                Debug::Registers(hll::registers(&v).map_err(invalid)?)
            }
            b"DECODE" => match hll::check(&v).map_err(invalid)? {
                Encoding::Sparse => Debug::Text(hll::sparse::decode_text(&v[hll::HDR..])),
                Encoding::Dense => {
                    return Err(Fail::Reply("ERR HLL encoding is not sparse".into()))
                }
            },
            b"ENCODING" => Debug::Status(match hll::check(&v).map_err(invalid)? {
                Encoding::Sparse => "sparse",
                Encoding::Dense => "dense",
            }),
            b"TODENSE" => {
                let converted = hll::to_dense(&mut v).map_err(invalid)?;
                if converted {
                    put_string(sh, s, key, &v)?;
                }
                Debug::Int(i64::from(converted))
            }
            _ => {
                return Err(Fail::Reply(format!(
                    "ERR Unknown PFDEBUG subcommand '{name}'"
                )))
            }
        })
    };
    write_key(x, key, f, |out, d, _| match d {
        Debug::Registers(regs) => {
            resp::array(out, regs.len());
            for r in regs.iter() {
                resp::integer(out, i64::from(*r));
            }
        }
        Debug::Text(t) => resp::bulk(out, Some(t.as_bytes())),
        Debug::Status(t) => resp::simple(out, t),
        Debug::Int(n) => resp::integer(out, n),
    });
}

/// `PFSELFTEST`: the HLL code's self test (`hll::selftest`), with a seed from the clock.
pub fn pfselftest(x: &mut Call<'_, '_>) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    match hll::selftest(seed, sparse_max(x.s)) {
        Ok(()) => resp::simple(x.out, "OK"),
        Err(e) => resp::error(x.out, &format!("ERR {e}")),
    }
}

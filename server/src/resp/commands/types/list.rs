//! Redis's list commands over the collection encoding (`encoding.rs`): element `i` of a
//! list is the subkey whose field is the sequence number `head + i` (8 bytes, big-endian,
//! so key order is list order), holding the element; the metadata keeps `head` and `tail`
//! (one past the last). A push at either end writes one subkey and moves one bound; a pop
//! removes one; LINDEX and LSET are one point access and LRANGE one range scan. LINSERT,
//! LREM and LTRIM renumber what they must (the shorter side for LINSERT), as Redis's own
//! lists cost O(N) there. Every write is one transaction; every read one snapshot.
//! Moving between lists (LMOVE, the blocking pops) is in `list_move.rs`.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, put, remove, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{field_key, Kind, Meta};
use crate::resp::commands::types::members;
use crate::resp::commands::types::packed::create;
use crate::resp::commands::types::run::{
    bulks, check, count_arg, int_arg, rank_span, read, write_key,
};
use crate::resp::notify::{changed, event, LIST};
use crate::resp::session::Session;
use accelkv_proto::resp;

pub(crate) const L: Kind = Kind::List;

/// The subkey of the element with sequence number `seq`.
fn elem_key(prefix: &[u8], seq: u64) -> Vec<u8> {
    field_key(prefix, &seq.to_be_bytes())
}

/// The elements at indices `[from, to)` of list `m`.
fn slice(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    from: u64,
    to: u64,
) -> Result<Vec<Vec<u8>>, Fail> {
    let mut v = Vec::with_capacity(to.saturating_sub(from) as usize);
    each_elem(sh, s, src, (key, m), (from, to), |e| v.push(e.to_vec()))?;
    Ok(v)
}

/// Lends `f` the elements at indices `[from, to)` of list `m`, in order.
fn each_elem(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    (from, to): (u64, u64),
    mut f: impl FnMut(&[u8]),
) -> Result<(), Fail> {
    if from >= to {
        return Ok(());
    }
    let p = m.prefix(key);
    let (lo, hi) = (elem_key(&p, m.head + from), elem_key(&p, m.head + to));
    src.scan(sh, s, (&lo, &hi), (to - from) as usize, |_, e| f(e))
}

/// Writes `elems` as the elements from sequence number `seq` on.
fn write_from(
    sh: &Shared,
    s: &mut Session,
    p: &[u8],
    seq: u64,
    elems: &[Vec<u8>],
) -> Result<(), Fail> {
    for (i, e) in elems.iter().enumerate() {
        put(sh, s, elem_key(p, seq + i as u64), e)?;
    }
    Ok(())
}

/// Pushes `elems` at the left or right end of the list at `key` (inside the transaction),
/// creating it unless `existing`: the new length (0: absent and `existing`).
pub(crate) fn push(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    elems: &[&[u8]],
    (left, existing): (bool, bool),
) -> Result<u64, Fail> {
    let m = src.meta(sh, s, key, L)?;
    if m.is_none() && existing {
        return Ok(0);
    }
    let mut m = m.unwrap_or_else(|| create(&mut s.packs, key, L));
    let p = m.prefix(key);
    for e in elems {
        if left {
            m.head -= 1;
            put(sh, s, elem_key(&p, m.head), e)?;
        } else {
            put(sh, s, elem_key(&p, m.tail), e)?;
            m.tail += 1;
        }
    }
    m.len += elems.len() as u64;
    set_meta(sh, s, key, &m)?;
    s.block.wake.push(key);
    event(s, LIST, if left { "lpush" } else { "rpush" }, key);
    Ok(m.len)
}

/// Removes and answers up to `n` elements from one end of the list at `key` (inside the
/// transaction), in the order they leave (`None`: the key is absent).
pub(crate) fn pop(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    n: u64,
    left: bool,
) -> Result<Option<Vec<Vec<u8>>>, Fail> {
    let Some(mut m) = src.meta(sh, s, key, L)? else {
        return Ok(None);
    };
    let n = n.min(m.len);
    let (from, to) = if left { (0, n) } else { (m.len - n, m.len) };
    let mut items = slice(sh, s, src, (key, &m), from, to)?;
    let p = m.prefix(key);
    for i in from..to {
        remove(sh, s, elem_key(&p, m.head + i))?;
    }
    if left {
        m.head += n;
    } else {
        m.tail -= n;
        items.reverse();
    }
    m.len -= n;
    set_meta(sh, s, key, &m)?;
    shrunk(sh, s, src, key, &m)?;
    if n > 0 {
        changed(s, LIST, if left { "lpop" } else { "rpop" }, key, m.len == 0);
    }
    Ok(Some(items))
}

/// After a list kept as subkeys shrank: packed again once it is within half of
/// `list-max-listpack-size` (half its count when positive, half its bytes when
/// negative), as Redis 7.2 turns a one-node quicklist back into a listpack. The new list
/// takes a fresh id; the old subkeys are reclaimed with the other dead ones (`gc.rs`).
fn shrunk(sh: &Shared, s: &mut Session, src: &Src<'_>, key: &[u8], m: &Meta) -> Result<(), Fail> {
    if m.packed || m.len == 0 {
        return Ok(());
    }
    let (most, bytes) = match s.global.tuning.get("list-max-listpack-size").unwrap_or(-2) {
        n if n >= 0 => (n.max(1) as u64 / 2, u64::MAX),
        n => (
            u64::MAX,
            (4096u64 << (n.clamp(-5, -1).unsigned_abs() - 1)) / 2,
        ),
    };
    // Every element packs into one byte at least.
    if m.len > most || m.len > bytes {
        return Ok(());
    }
    // Sized a chunk at a time, stopping once past the limit: a list far over it costs a
    // chunk, not a read of every element.
    const CHUNK: u64 = 64;
    let (mut packed, mut at) = (0u64, 0u64);
    while at < m.len && packed <= bytes {
        let to = (at + CHUNK).min(m.len);
        each_elem(sh, s, src, (key, m), (at, to), |e| {
            packed += e.len() as u64 + 1 + (e.len() >= 128) as u64 * 4
        })?;
        at = to;
    }
    if packed > bytes {
        return Ok(());
    }
    let elems = slice(sh, s, src, (key, m), 0, m.len)?;
    store(sh, s, key, &elems).map(|_| ())
}

/// Replaces whatever `key` holds with a new list of `elems` (none: removes the key; SORT …
/// STORE), waking those parked on it.
pub(crate) fn store(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    elems: &[Vec<u8>],
) -> Result<u64, Fail> {
    let mut m = create(&mut s.packs, key, L);
    write_from(sh, s, &m.prefix(key), m.head, elems)?;
    m.len = elems.len() as u64;
    m.tail = m.head + m.len;
    set_meta(sh, s, key, &m)?;
    if m.len > 0 {
        s.block.wake.push(key);
    }
    Ok(m.len)
}

fn pushes(x: &mut Call<'_, '_>, left: bool, existing: bool) {
    let (key, elems) = (x.args[1], &x.args[2..]);
    if let Err(e) = check(x.sh, key, &[&[0u8; 8]], elems) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| push(sh, s, src, key, elems, (left, existing)),
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `LPUSH key element [element ...]`.
pub fn lpush(x: &mut Call<'_, '_>) {
    pushes(x, true, false)
}

/// `RPUSH key element [element ...]`.
pub fn rpush(x: &mut Call<'_, '_>) {
    pushes(x, false, false)
}

/// `LPUSHX key element [element ...]`: only onto an existing list.
pub fn lpushx(x: &mut Call<'_, '_>) {
    pushes(x, true, true)
}

/// `RPUSHX key element [element ...]`.
pub fn rpushx(x: &mut Call<'_, '_>) {
    pushes(x, false, true)
}

fn pops(x: &mut Call<'_, '_>, left: bool) {
    let key = x.args[1];
    if x.args.len() > 3 {
        return crate::resp::reply::wrong_args(x.out, x.args[0]);
    }
    let count = match count_arg(x.args.get(2)) {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| match count {
            Some(0) => Ok(src.meta(sh, s, key, L)?.map(|_| Vec::new())),
            c => pop(sh, s, src, key, c.unwrap_or(1), left),
        },
        move |out, items, v| match (count, items) {
            (None, items) => resp::bulk_in(
                out,
                items.as_ref().and_then(|i| i.first()).map(Vec::as_slice),
                v,
            ),
            (Some(_), None) => resp::null_array(out, v),
            (Some(_), Some(items)) => bulks(out, &items),
        },
    )
}

/// `LPOP key [count]`.
pub fn lpop(x: &mut Call<'_, '_>) {
    pops(x, true)
}

/// `RPOP key [count]`.
pub fn rpop(x: &mut Call<'_, '_>) {
    pops(x, false)
}

/// `LLEN key`.
pub fn llen(x: &mut Call<'_, '_>) {
    members::len(x, L)
}

/// An index into a list of `len` (negative from the end), if inside it.
fn index(i: i64, len: u64) -> Option<u64> {
    let i = if i < 0 { i + len as i64 } else { i };
    (0..len as i64).contains(&i).then_some(i as u64)
}

fn two_ints(a: &[u8], b: &[u8]) -> Result<(i64, i64), Fail> {
    Ok((int_arg(a)?, int_arg(b)?))
}

/// `LRANGE key start stop`.
pub fn lrange(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let (start, stop) = match two_ints(x.args[2], x.args[3]) {
        Ok(v) => v,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| match src.meta(sh, s, key, L)? {
            None => Ok((0, Vec::new())),
            Some(m) => {
                let (from, to) = rank_span(start, stop, m.len);
                encoded_slice(sh, s, src, (key, &m), from, to)
            }
        },
        |out, (n, body), _| {
            resp::array(out, n);
            out.extend_from_slice(&body);
        },
    )
}

/// The elements at indices `[from, to)` of list `m` as RESP bulk strings, one after the
/// other in one buffer, and how many: LRANGE's reply body written as the scan lends each
/// element, without a copy of each.
fn encoded_slice(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    from: u64,
    to: u64,
) -> Result<(usize, Vec<u8>), Fail> {
    let (mut n, mut body) = (0, Vec::new());
    each_elem(sh, s, src, (key, m), (from, to), |e| {
        resp::bulk(&mut body, Some(e));
        n += 1;
    })?;
    Ok((n, body))
}

/// `LINDEX key index`.
pub fn lindex(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let i = match int_arg(x.args[2]) {
        Ok(i) => i,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, L)? else {
                return Ok(None);
            };
            match index(i, m.len) {
                Some(i) => src.get(sh, s, &elem_key(&m.prefix(key), m.head + i)),
                None => Ok(None),
            }
        },
        |out, e, v| resp::bulk_in(out, e.as_deref(), v),
    )
}

/// `LSET key index element`.
pub fn lset(x: &mut Call<'_, '_>) {
    let (key, elem) = (x.args[1], x.args[3]);
    let i = match int_arg(x.args[2]) {
        Ok(i) => i,
        Err(e) => return fail(x.out, &e),
    };
    if let Err(e) = check(x.sh, key, &[], &[elem]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let m = src
                .meta(sh, s, key, L)?
                .ok_or_else(|| Fail::Reply("ERR no such key".into()))?;
            let i = index(i, m.len).ok_or_else(|| Fail::Reply("ERR index out of range".into()))?;
            put(sh, s, elem_key(&m.prefix(key), m.head + i), elem)?;
            event(s, LIST, "lset", key);
            Ok(())
        },
        |out, (), _| resp::simple(out, "OK"),
    )
}

/// `LINSERT key BEFORE|AFTER pivot element`: the new length, -1 without the pivot, 0
/// without the key.
pub fn linsert(x: &mut Call<'_, '_>) {
    let (key, pivot, elem) = (x.args[1], x.args[3], x.args[4]);
    let after = match x.args[2].to_ascii_uppercase().as_slice() {
        b"BEFORE" => false,
        b"AFTER" => true,
        _ => return resp::error(x.out, "ERR syntax error"),
    };
    if let Err(e) = check(x.sh, key, &[], &[elem]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, L)? else {
                return Ok(0);
            };
            let all = slice(sh, s, src, (key, &m), 0, m.len)?;
            let Some(at) = all.iter().position(|e| e.as_slice() == pivot) else {
                return Ok(-1);
            };
            let at = at + usize::from(after);
            let p = m.prefix(key);
            if at <= all.len() / 2 {
                // The front moves one to the left.
                m.head -= 1;
                write_from(sh, s, &p, m.head, &all[..at])?;
                put(sh, s, elem_key(&p, m.head + at as u64), elem)?;
            } else {
                write_from(sh, s, &p, m.head + at as u64 + 1, &all[at..])?;
                put(sh, s, elem_key(&p, m.head + at as u64), elem)?;
                m.tail += 1;
            }
            m.len += 1;
            set_meta(sh, s, key, &m)?;
            s.block.wake.push(key);
            event(s, LIST, "linsert", key);
            Ok(m.len as i64)
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// Keeps the elements `keep` of the list `m` at `key`, `first` being the index of the
/// first element that changed place or went (everything before it stays): rewrites from
/// there, removes what is left past the new end, and writes the metadata.
fn compact(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, mut m): (&[u8], Meta),
    first: u64,
    keep: &[Vec<u8>],
) -> Result<(), Fail> {
    let p = m.prefix(key);
    let new_len = first + keep.len() as u64;
    write_from(sh, s, &p, m.head + first, keep)?;
    for i in new_len..m.len {
        remove(sh, s, elem_key(&p, m.head + i))?;
    }
    m.len = new_len;
    m.tail = m.head + new_len;
    set_meta(sh, s, key, &m)?;
    changed(s, LIST, "lrem", key, m.len == 0);
    shrunk(sh, s, src, key, &m)
}

/// `LREM key count element`: removes the first `count` (from the tail when negative; all
/// when 0) elements equal to `element`.
pub fn lrem(x: &mut Call<'_, '_>) {
    let (key, elem) = (x.args[1], x.args[3]);
    let count = match int_arg(x.args[2]) {
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, L)? else {
                return Ok(0);
            };
            let all = slice(sh, s, src, (key, &m), 0, m.len)?;
            let limit = if count == 0 {
                usize::MAX
            } else {
                count.unsigned_abs() as usize
            };
            let mut gone = vec![false; all.len()];
            let order: Box<dyn Iterator<Item = usize>> = if count < 0 {
                Box::new((0..all.len()).rev())
            } else {
                Box::new(0..all.len())
            };
            let mut n = 0;
            for i in order.filter(|&i| all[i] == elem).take(limit) {
                gone[i] = true;
                n += 1;
            }
            let Some(first) = gone.iter().position(|&g| g) else {
                return Ok(0);
            };
            let keep: Vec<Vec<u8>> = (first..all.len())
                .filter(|&i| !gone[i])
                .map(|i| all[i].clone())
                .collect();
            compact(sh, s, src, (key, m), first as u64, &keep)?;
            Ok(n)
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `LTRIM key start stop`: keeps only the elements in the range.
pub fn ltrim(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let (start, stop) = match two_ints(x.args[2], x.args[3]) {
        Ok(v) => v,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, L)? else {
                return Ok(());
            };
            let (from, to) = rank_span(start, stop, m.len);
            let p = m.prefix(key);
            for i in (0..from).chain(to.max(from)..m.len) {
                remove(sh, s, elem_key(&p, m.head + i))?;
            }
            if from < to {
                m.head += from;
                m.len = to - from;
            } else {
                m.len = 0;
            }
            m.tail = m.head + m.len;
            set_meta(sh, s, key, &m)?;
            changed(s, LIST, "ltrim", key, m.len == 0);
            shrunk(sh, s, src, key, &m)
        },
        |out, (), _| resp::simple(out, "OK"),
    )
}

/// LPOS's options.
struct PosOpts {
    rank: i64,
    count: Option<usize>,
    maxlen: usize,
}

fn pos_opts(args: &[&[u8]]) -> Result<PosOpts, Fail> {
    let mut o = PosOpts {
        rank: 1,
        count: None,
        maxlen: 0,
    };
    let syntax = || Fail::Reply("ERR syntax error".into());
    for pair in args.chunks(2) {
        let [name, v] = pair else {
            return Err(syntax());
        };
        let n = int_arg(v)?;
        match name.to_ascii_uppercase().as_slice() {
            // Redis 7.2: a rank that cannot be negated is out of range.
            b"RANK" if n == i64::MIN => {
                return Err(Fail::Reply(
                    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807".into(),
                ))
            }
            b"RANK" if n == 0 => return Err(Fail::Reply(
                "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list".into(),
            )),
            b"RANK" => o.rank = n,
            b"COUNT" if n < 0 => return Err(Fail::Reply("ERR COUNT can't be negative".into())),
            b"COUNT" => o.count = Some(n as usize),
            b"MAXLEN" if n < 0 => return Err(Fail::Reply("ERR MAXLEN can't be negative".into())),
            b"MAXLEN" => o.maxlen = n as usize,
            _ => return Err(syntax()),
        }
    }
    Ok(o)
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]`.
pub fn lpos(x: &mut Call<'_, '_>) {
    let (key, elem) = (x.args[1], x.args[2]);
    let o = match pos_opts(&x.args[3..]) {
        Ok(o) => o,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, L)? else {
                return Ok(Vec::new());
            };
            let all = slice(sh, s, src, (key, &m), 0, m.len)?;
            let n = all.len();
            let examine = if o.maxlen == 0 { n } else { o.maxlen.min(n) };
            let order: Box<dyn Iterator<Item = usize>> = if o.rank < 0 {
                Box::new((0..n).rev().take(examine))
            } else {
                Box::new((0..n).take(examine))
            };
            let want = match o.count {
                Some(0) => usize::MAX,
                Some(c) => c,
                None => 1,
            };
            Ok(order
                .filter(|&i| all[i] == elem)
                .skip(o.rank.unsigned_abs() as usize - 1)
                .take(want)
                .collect())
        },
        move |out, found, v| match o.count {
            Some(_) => {
                resp::array(out, found.len());
                for i in found {
                    resp::integer(out, i as i64);
                }
            }
            None => match found.first() {
                Some(&i) => resp::integer(out, i as i64),
                None => resp::bulk_in(out, None, v),
            },
        },
    )
}

/// Appends `[key, [elements]]` (LMPOP, BLMPOP) or `[key, element]` (BLPOP, BRPOP).
pub(crate) fn key_and(out: &mut Vec<u8>, key: &[u8], items: &[Vec<u8>], nested: bool) {
    resp::array(out, 2);
    resp::bulk(out, Some(crate::resp::db::shown(key)));
    if nested {
        bulks(out, items);
    } else {
        resp::bulk(out, items.first().map(Vec::as_slice));
    }
}

#[cfg(test)]
mod tests {
    use super::index;
    use crate::resp::commands::types::run::rank_span as span;

    #[test]
    fn ranges_read_as_redis_reads_them() {
        assert_eq!(span(0, -1, 5), (0, 5));
        assert_eq!(span(-2, -1, 5), (3, 5));
        assert_eq!(span(-100, 100, 5), (0, 5));
        assert_eq!(span(3, 1, 5), (0, 0));
        assert_eq!(span(5, 10, 5), (0, 0));
        assert_eq!(span(0, -6, 5), (0, 0));
        assert_eq!(span(0, 0, 0), (0, 0));
        assert_eq!(index(-1, 3), Some(2));
        assert_eq!(index(3, 3), None);
        assert_eq!(index(-4, 3), None);
    }
}

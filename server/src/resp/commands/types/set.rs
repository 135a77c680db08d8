//! Redis's set commands over the collection encoding (`encoding.rs`): one subkey per
//! member, with an empty value. Every write is one transaction; every read one snapshot.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{
    fail, put, remove, set_meta, store_announced, Fail, Src,
};
use crate::resp::commands::types::encoding::{field_key, Kind};
use crate::resp::commands::types::members;
use crate::resp::commands::types::packed::create;
use crate::resp::commands::types::run::{
    check, int_arg, intercard_args, read, scan_opts, write, write_key,
};
use crate::resp::commands::types::sample::sample;
use crate::resp::notify::{changed, event, SET};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};
use std::collections::BTreeSet;

const S: Kind = Kind::Set;

/// Appends a set reply (`~` in RESP3, an array in RESP2).
fn set_reply<'m>(out: &mut Vec<u8>, members: impl ExactSizeIterator<Item = &'m [u8]>, v: Version) {
    resp::set(out, members.len(), v);
    for m in members {
        resp::bulk(out, Some(m));
    }
}

/// The members of the set at `key` (empty when absent).
fn members_of(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
) -> Result<BTreeSet<Vec<u8>>, Fail> {
    match src.meta(sh, s, key, S)? {
        None => Ok(BTreeSet::new()),
        Some(m) => Ok(src
            .fields(sh, s, key, &m)?
            .into_iter()
            .map(|f| f.0)
            .collect()),
    }
}

/// Adds `members` to the set at `key` (inside the transaction): how many were new.
fn add(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    members: &[&[u8]],
) -> Result<u64, Fail> {
    let mut m = src
        .meta(sh, s, key, S)?
        .unwrap_or_else(|| create(&mut s.packs, key, S));
    let p = m.prefix(key);
    let mut added = 0;
    for member in members {
        let sk = field_key(&p, member);
        if src.get(sh, s, &sk)?.is_none() {
            put(sh, s, sk.as_slice(), b"")?;
            added += 1;
        }
    }
    if added > 0 {
        m.len += added;
        set_meta(sh, s, key, &m)?;
        event(s, SET, "sadd", key);
    }
    Ok(added)
}

/// Removes `members` from the set at `key` (inside the transaction): how many were there.
fn rem(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    members: &[&[u8]],
) -> Result<u64, Fail> {
    members::remove_fields(sh, s, src, (key, S), members)
}

/// Replaces whatever `key` holds with a new set of `members` (none: removes the key).
fn store(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    members: &BTreeSet<Vec<u8>>,
) -> Result<u64, Fail> {
    let mut m = create(&mut s.packs, key, S);
    let p = m.prefix(key);
    for member in members {
        put(sh, s, field_key(&p, member), b"")?;
    }
    m.len = members.len() as u64;
    set_meta(sh, s, key, &m)?;
    Ok(m.len)
}

/// `SADD key member [member ...]`.
pub fn sadd(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    if let Err(e) = check(x.sh, key, members, &[]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| add(sh, s, src, key, members),
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `SREM key member [member ...]`.
pub fn srem(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| rem(sh, s, src, key, members),
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `SCARD key`.
pub fn scard(x: &mut Call<'_, '_>) {
    members::len(x, S)
}

/// Whether each of `members` is in the set at `key`.
fn contains(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    key: &[u8],
    members: &[&[u8]],
) -> Result<Vec<bool>, Fail> {
    let Some(m) = src.meta(sh, s, key, S)? else {
        return Ok(vec![false; members.len()]);
    };
    let p = m.prefix(key);
    members
        .iter()
        .map(|mb| Ok(src.get(sh, s, &field_key(&p, mb))?.is_some()))
        .collect()
}

/// `SISMEMBER key member`.
pub fn sismember(x: &mut Call<'_, '_>) {
    let (key, member) = (x.args[1], x.args[2]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| contains(sh, s, src, key, &[member]),
        |out, b, _| resp::integer(out, i64::from(b[0])),
    )
}

/// `SMISMEMBER key member [member ...]`.
pub fn smismember(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| contains(sh, s, src, key, members),
        |out, bs, _| {
            resp::array(out, bs.len());
            for b in bs {
                resp::integer(out, i64::from(b));
            }
        },
    )
}

/// `SMEMBERS key`: every member, in byte order.
pub fn smembers(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    x.sh.count(OpClass::Scan);
    read(
        x,
        // The reply's body is written as the scan lends each member, without copies.
        |sh, s, src| {
            let m = src.meta(sh, s, key, S)?;
            src.fields_encoded(sh, s, key, m.as_ref(), |body, member, _| {
                resp::bulk(body, Some(member))
            })
        },
        |out, (n, body), v| {
            resp::set(out, n, v);
            out.extend_from_slice(&body);
        },
    )
}

/// `SRANDMEMBER key [count]`.
pub fn srandmember(x: &mut Call<'_, '_>) {
    members::random(x, S)
}

/// `SPOP key [count]`: removes and answers random members.
pub fn spop(x: &mut Call<'_, '_>) {
    let key = x.args[1];
    let count = match x.args.get(2).map(|a| int_arg(a)).transpose() {
        Ok(Some(c)) if c < 0 => {
            return resp::error(x.out, "ERR value is out of range, must be positive")
        }
        Ok(c) => c,
        Err(e) => return fail(x.out, &e),
    };
    if x.args.len() > 3 {
        return resp::error(x.out, "ERR syntax error");
    }
    x.sh.count(OpClass::Delete);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, S)? else {
                return Ok(Vec::new());
            };
            let n = count.unwrap_or(1) as usize;
            let picked: Vec<Vec<u8>> = sample(sh, s, src, (key, &m), n, false)?
                .into_iter()
                .map(|f| f.0)
                .collect();
            let p = m.prefix(key);
            for member in &picked {
                remove(sh, s, field_key(&p, member))?;
            }
            m.len -= picked.len() as u64;
            set_meta(sh, s, key, &m)?;
            if !picked.is_empty() {
                changed(s, SET, "spop", key, m.len == 0);
            }
            Ok(picked)
        },
        move |out, picked, v| match count {
            None => resp::bulk_in(out, picked.first().map(Vec::as_slice), v),
            Some(_) => set_reply(out, picked.iter().map(Vec::as_slice), v),
        },
    )
}

/// `SMOVE source destination member`.
pub fn smove(x: &mut Call<'_, '_>) {
    let (src_key, dst_key, member) = (x.args[1], x.args[2], x.args[3]);
    if let Err(e) = check(x.sh, dst_key, &[member], &[]) {
        return fail(x.out, &e);
    }
    x.sh.count(OpClass::Put);
    write(
        x,
        |sh, s, src| {
            let from = src.meta(sh, s, src_key, S)?;
            src.meta(sh, s, dst_key, S)?; // WRONGTYPE before anything moves
            if from.is_none() || !contains(sh, s, src, src_key, &[member])?[0] {
                return Ok(0);
            }
            if src_key != dst_key {
                rem(sh, s, src, src_key, &[member])?;
                add(sh, s, src, dst_key, &[member])?;
            }
            Ok(1)
        },
        |out, n, _| resp::integer(out, n),
    )
}

/// Which combination SINTER, SUNION and SDIFF make.
#[derive(Clone, Copy)]
enum Op {
    Inter,
    Union,
    Diff,
}

fn combine(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    keys: &[&[u8]],
    op: Op,
) -> Result<BTreeSet<Vec<u8>>, Fail> {
    let mut acc = members_of(sh, s, src, keys[0])?;
    for k in &keys[1..] {
        let next = members_of(sh, s, src, k)?;
        acc = match op {
            Op::Inter => acc.intersection(&next).cloned().collect(),
            Op::Union => acc.union(&next).cloned().collect(),
            Op::Diff => acc.difference(&next).cloned().collect(),
        };
    }
    Ok(acc)
}

fn combined(x: &mut Call<'_, '_>, op: Op) {
    let keys = &x.args[1..];
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| combine(sh, s, src, keys, op),
        |out, all, v| set_reply(out, all.iter().map(Vec::as_slice), v),
    )
}

fn combined_store(x: &mut Call<'_, '_>, op: Op) {
    let (dst, keys) = (x.args[1], &x.args[2..]);
    x.sh.count(OpClass::Put);
    write(
        x,
        |sh, s, src| {
            let all = combine(sh, s, src, keys, op)?;
            for m in &all {
                crate::resp::commands::types::access::check_field(sh, dst, m)?;
            }
            let name = match op {
                Op::Inter => "sinterstore",
                Op::Union => "sunionstore",
                Op::Diff => "sdiffstore",
            };
            store_announced((sh, s, src), (SET, name, dst), |sh, s| {
                store(sh, s, dst, &all)
            })
        },
        |out, n, _| resp::integer(out, n as i64),
    )
}

/// `SINTER key [key ...]`.
pub fn sinter(x: &mut Call<'_, '_>) {
    combined(x, Op::Inter)
}

/// `SUNION key [key ...]`.
pub fn sunion(x: &mut Call<'_, '_>) {
    combined(x, Op::Union)
}

/// `SDIFF key [key ...]`.
pub fn sdiff(x: &mut Call<'_, '_>) {
    combined(x, Op::Diff)
}

/// `SINTERSTORE destination key [key ...]`.
pub fn sinterstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Inter)
}

/// `SUNIONSTORE destination key [key ...]`.
pub fn sunionstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Union)
}

/// `SDIFFSTORE destination key [key ...]`.
pub fn sdiffstore(x: &mut Call<'_, '_>) {
    combined_store(x, Op::Diff)
}

/// `SINTERCARD numkeys key [key ...] [LIMIT limit]`.
pub fn sintercard(x: &mut Call<'_, '_>) {
    let (keys, limit) = match intercard_args(&x.args[1..]) {
        Ok(v) => v,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| combine(sh, s, src, &keys, Op::Inter),
        move |out, all, _| {
            let n = if limit == 0 {
                all.len()
            } else {
                all.len().min(limit)
            };
            resp::integer(out, n as i64)
        },
    )
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub fn sscan(x: &mut Call<'_, '_>) {
    match scan_opts(&x.args[3..], false) {
        Ok(o) => members::scan(x, S, o),
        Err(e) => fail(x.out, &e),
    }
}

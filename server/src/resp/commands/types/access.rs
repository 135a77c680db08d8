//! One command's access to a collection: its metadata and its subkeys, read at one
//! snapshot (a read-only command outside MULTI), through the command's one station
//! operation (a write on one collection outside MULTI: `core/station_one.rs`), or through
//! the connection's transaction (a write on several keys, and everything inside MULTI or a
//! script); a read there sees the newest state with the command's own changes. What a
//! command writes is released to readers as one version.
//!
//! Isolation: every write of a collection's subkeys first reads its metadata key through
//! the station operation or the transaction, which owns that key's station slot until the
//! end; so while a command holds it, nobody else changes the collection.

use crate::core::ops::{Outcome, Write};
use crate::core::shared::Shared;
use crate::core::station::{Done, Op};
use crate::resp::commands::types::encoding::{self, Kind, Meta, NotMeta, SUBKEY_OVERHEAD};
use crate::resp::commands::types::packed::{self, Pack, Packs};
use crate::resp::notify;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use crate::resp::write_door::run_op;
use accelkv_proto::resp;
use accelkv_tree::{Error, Snapshot};
use std::borrow::Cow;

/// Why a command on a collection stops.
#[derive(Debug)]
pub(crate) enum Fail {
    /// The key holds another type.
    WrongType,
    /// The store failed.
    Store(Error),
    /// The command's own error (its whole RESP error text).
    Reply(String),
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail::Store(e)
    }
}

impl From<NotMeta> for Fail {
    fn from(n: NotMeta) -> Fail {
        match n {
            NotMeta::WrongType => Fail::WrongType,
            NotMeta::Corrupt => Fail::Reply("ERR corrupt collection metadata".into()),
        }
    }
}

pub(crate) use crate::resp::reply::WRONGTYPE;

/// Appends `f`'s RESP error.
pub(crate) fn fail(out: &mut Vec<u8>, f: &Fail) {
    match f {
        Fail::WrongType => resp::error(out, WRONGTYPE),
        Fail::Store(e) => err_store(out, e),
        Fail::Reply(t) => resp::error(out, t),
    }
}

/// A field (or member) without its subkey's prefix, and its value.
pub(crate) type Field = (Vec<u8>, Vec<u8>);

/// Where a command reads: a snapshot, the command's one station operation, or the running
/// transaction.
pub(crate) enum Src<'a> {
    Snap(Snapshot<'a>),
    One,
    Tx,
}

impl<'a> Src<'a> {
    /// The connection's transaction when one runs, else a snapshot of now.
    pub fn open(sh: &'a Shared, s: &Session) -> Src<'a> {
        match s.tx.running {
            Some(_) => Src::Tx,
            None => Src::Snap(sh.view().snapshot()),
        }
    }

    /// `key`'s value and client flags (`None`: absent or expired).
    pub fn item(
        &self,
        sh: &Shared,
        s: &mut Session,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u32)>, Fail> {
        match self {
            Src::Snap(snap) => Ok(snap.get_item(key)?.map(|(v, _, f)| (v, f))),
            Src::One => {
                covered(s, key)?;
                let cur = |c: Option<(&[u8], u64, u32)>| c.map(|(v, _, f)| (v.to_vec(), f));
                Ok(sh.writes().one_read(&mut s.one, key, cur)?)
            }
            Src::Tx => match run_op(sh, s, Op::new(key, Write::ReadItem)).outcome? {
                Outcome::Item(i) => Ok(Some((i.value, i.flags))),
                _ => Ok(None),
            },
        }
    }

    /// The collection at `key` if it is a `kind` (`None`: the key is absent), open for the
    /// command's reads and writes of its subkeys when it is packed (`packed.rs`).
    pub fn meta(
        &self,
        sh: &Shared,
        s: &mut Session,
        key: &[u8],
        kind: Kind,
    ) -> Result<Option<Meta>, Fail> {
        match self {
            Src::Snap(snap) => match snap.get_item(key)? {
                Some((v, _, flags)) => Ok(Some(decoded(&mut s.packs, key, Some(kind), &v, flags)?)),
                None => Ok(None),
            },
            Src::One => {
                covered(s, key)?;
                let (one, packs) = (&mut s.one, &mut s.packs);
                let peeked = sh.writes().one_peek(one, key, |cur| {
                    cur.map(|(v, flags)| decoded(packs, key, Some(kind), v, flags))
                })?;
                peeked.transpose()
            }
            // Decoded where the transaction holds the value, without copying it out.
            Src::Tx => {
                let tx = s.tx.running.as_deref_mut().ok_or_else(no_tx)?;
                let packs = &mut s.packs;
                let peeked = sh.writes().tx_peek(tx, key, |cur| {
                    cur.map(|(v, flags)| decoded(packs, key, Some(kind), v, flags))
                })?;
                peeked.transpose()
            }
        }
    }

    /// A subkey's value.
    pub fn get(
        &self,
        sh: &Shared,
        s: &mut Session,
        subkey: &[u8],
    ) -> Result<Option<Vec<u8>>, Fail> {
        if let Some(v) = s.packs.get(subkey) {
            return Ok(v);
        }
        match self {
            Src::Snap(snap) => Ok(snap.get(subkey)?),
            Src::One => {
                covered(s, subkey)?;
                let cur = |c: Option<(&[u8], u64, u32)>| c.map(|(v, _, _)| v.to_vec());
                Ok(sh.writes().one_read(&mut s.one, subkey, cur)?)
            }
            Src::Tx => match run_op(sh, s, Op::new(subkey, Write::Read)).outcome? {
                Outcome::Old(v) => Ok(v),
                _ => Ok(None),
            },
        }
    }

    /// The string value at `key` (`None`: absent; a collection: WRONGTYPE), read for a
    /// command that rewrites it in place (PFADD): through the one station operation, the
    /// key's deadline is remembered, so [`put_string`] keeps it.
    pub fn string(
        &self,
        sh: &Shared,
        s: &mut Session,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, Fail> {
        let item = match self {
            Src::One => {
                covered(s, key)?;
                let cur = |c: Option<(&[u8], u32)>| c.map(|(v, f)| (v.to_vec(), f));
                sh.writes().one_peek(&mut s.one, key, cur)?
            }
            _ => self.item(sh, s, key)?,
        };
        match item {
            Some((_, flags)) if crate::core::ops::typed::is_typed(flags) => Err(Fail::WrongType),
            other => Ok(other.map(|(v, _)| v)),
        }
    }

    /// Lends `f` the string value at `key` (`None`: absent; a collection: WRONGTYPE)
    /// without copying it where the source allows (the one station operation).
    pub fn peek_string<R>(
        &self,
        sh: &Shared,
        s: &mut Session,
        key: &[u8],
        f: impl FnOnce(Option<&[u8]>) -> R,
    ) -> Result<R, Fail> {
        if let Src::One = self {
            covered(s, key)?;
            let typed = |flags| crate::core::ops::typed::is_typed(flags);
            return sh.writes().one_peek(&mut s.one, key, |cur| match cur {
                Some((_, flags)) if typed(flags) => Err(Fail::WrongType),
                other => Ok(f(other.map(|(v, _)| v))),
            })?;
        }
        let v = self.string(sh, s, key)?;
        Ok(f(v.as_deref()))
    }

    /// Calls `f` for the subkeys in `[lo, hi)`, ascending, at most `limit`.
    pub fn scan(
        &self,
        sh: &Shared,
        s: &Session,
        (lo, hi): (&[u8], &[u8]),
        limit: usize,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Fail> {
        if s.packs.scan((lo, hi), limit, false, &mut f) {
            return Ok(());
        }
        match self {
            Src::Snap(snap) => Ok(snap.scan_with(lo, Some(hi), limit, f)?),
            Src::One => {
                covered(s, lo)?;
                Ok(sh.writes().one_scan(&s.one, (lo, hi), limit, f)?)
            }
            Src::Tx => {
                let tx = running(s)?;
                Ok(sh.writes().tx_scan(tx, (lo, hi), limit, f)?)
            }
        }
    }

    /// Calls `f` for the subkeys in `[lo, hi)`, descending, at most `limit`: one descent
    /// per leaf, so the last few of a long range cost what the first few do (inside the
    /// transaction, merged with its own writes).
    pub fn scan_rev(
        &self,
        sh: &Shared,
        s: &Session,
        (lo, hi): (&[u8], &[u8]),
        limit: usize,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Fail> {
        if s.packs.scan((lo, hi), limit, true, &mut f) {
            return Ok(());
        }
        match self {
            Src::Snap(snap) => Ok(snap.scan_rev_with(lo, hi, limit, f)?),
            Src::One => {
                covered(s, lo)?;
                Ok(sh.writes().one_scan_rev(&s.one, (lo, hi), limit, f)?)
            }
            Src::Tx => {
                let tx = running(s)?;
                Ok(sh.writes().tx_scan_rev(tx, (lo, hi), limit, f)?)
            }
        }
    }

    /// Every field of a collection with its value, in field order (the field without the
    /// subkey's prefix).
    pub fn fields(
        &self,
        sh: &Shared,
        s: &Session,
        key: &[u8],
        m: &Meta,
    ) -> Result<Vec<Field>, Fail> {
        let mut all = Vec::with_capacity(m.len as usize);
        self.each_field(sh, s, key, m, |f, v| all.push((f.to_vec(), v.to_vec())))?;
        Ok(all)
    }

    /// Lends `f` every field of a collection (without the subkey's prefix) with its value,
    /// in field order.
    fn each_field(
        &self,
        sh: &Shared,
        s: &Session,
        key: &[u8],
        m: &Meta,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Fail> {
        let (lo, hi) = encoding::fields_range(&m.prefix(key));
        self.scan(sh, s, (&lo, &hi), usize::MAX, |k, v| f(&k[lo.len()..], v))
    }

    /// A reply body of every field of a collection (absent: none), written as the scan
    /// lends each field without copying it: `put` appends what the reply holds of a field
    /// (without the subkey's prefix) and its value. How many fields, and the body.
    pub fn fields_encoded(
        &self,
        sh: &Shared,
        s: &Session,
        key: &[u8],
        m: Option<&Meta>,
        mut put: impl FnMut(&mut Vec<u8>, &[u8], &[u8]),
    ) -> Result<(usize, Vec<u8>), Fail> {
        let (mut n, mut body) = (0, Vec::new());
        if let Some(m) = m {
            self.each_field(sh, s, key, m, |f, v| {
                put(&mut body, f, v);
                n += 1;
            })?;
        }
        Ok((n, body))
    }
}

/// The collection an item holds (of `kind` when given: else WRONGTYPE), opened in `packs`
/// when packed; any stale copy of an unpacked one closed.
fn decoded(
    packs: &mut Packs,
    key: &[u8],
    kind: Option<Kind>,
    v: &[u8],
    flags: u32,
) -> Result<Meta, Fail> {
    let m = Meta::decode(v, flags)?;
    if kind.is_some_and(|k| k != m.kind) {
        return Err(Fail::WrongType);
    }
    if m.packed {
        packed::open(packs, key, &m, m.body(v)).map_err(|_| Fail::from(NotMeta::Corrupt))?;
    } else if !packs.is_empty() {
        packs.take(&m.prefix(key));
    }
    Ok(m)
}

/// The collection an item at `key` holds, whatever its kind, open for the command's reads
/// of its subkeys when packed (SORT, the STORE forms, which read items of several kinds).
pub(crate) fn opened(s: &mut Session, key: &[u8], v: &[u8], flags: u32) -> Result<Meta, Fail> {
    decoded(&mut s.packs, key, None, v, flags)
}

/// The connection's running transaction (a `Src::Tx` read needs one).
fn running(s: &Session) -> Result<&crate::core::station_tx::Tx, Fail> {
    s.tx.running.as_deref().ok_or_else(no_tx)
}

fn no_tx() -> Fail {
    Fail::Reply("ERR no transaction".into())
}

/// Refuses a key outside the collection the command's one station operation owns (a
/// handler run through `run::write_key` that touches another key is a bug: its write
/// would escape the operation's isolation).
fn covered(s: &Session, key: &[u8]) -> Result<(), Fail> {
    if s.one.covers(key) {
        return Ok(());
    }
    debug_assert!(false, "a one-key command touched another key");
    Err(Fail::Reply(
        "ERR internal error: a command on one key touched another".into(),
    ))
}

/// A write in the command's one station operation when it runs one (`None`: it does
/// not; the write goes through the write door).
fn one_write(
    s: &mut Session,
    key: &[u8],
    value: Option<&[u8]>,
    flags: u32,
) -> Option<Result<(), Fail>> {
    if !s.one.active() {
        return None;
    }
    Some(covered(s, key).map(|()| s.one.write(key, value, flags)))
}

/// The outcome of a write inside the transaction, as a `Fail` when it failed.
fn done(d: Done) -> Result<(), Fail> {
    match d.outcome? {
        Outcome::Failed(f) => Err(Fail::Reply(crate::resp::reply::failure_text(&f))),
        _ => Ok(()),
    }
}

/// Sets a subkey (inside the running transaction).
/// A subkey is moved into the transaction when the caller built it (no second copy).
pub(crate) fn put<'k>(
    sh: &Shared,
    s: &mut Session,
    subkey: impl Into<Cow<'k, [u8]>>,
    value: &'k [u8],
) -> Result<(), Fail> {
    let subkey = subkey.into();
    if s.packs.put(&subkey, value).is_some() {
        return Ok(());
    }
    if let Some(r) = one_write(s, &subkey, Some(value), 0) {
        return r;
    }
    done(run_op(sh, s, op(subkey, Write::Put(Cow::Borrowed(value)))))
}

/// An operation on a subkey, borrowed or built by the caller.
fn op<'k>(subkey: impl Into<Cow<'k, [u8]>>, write: Write<'k>) -> Op<'k> {
    Op {
        key: subkey.into(),
        write,
        hint: None,
    }
}

/// Sets a subkey (inside the running transaction), answering whether it was absent: one
/// station operation for HSET's read and write of a field.
pub(crate) fn put_new<'k>(
    sh: &Shared,
    s: &mut Session,
    subkey: impl Into<Cow<'k, [u8]>>,
    value: &'k [u8],
) -> Result<bool, Fail> {
    let subkey = subkey.into();
    if let Some(absent) = s.packs.put(&subkey, value) {
        return Ok(absent);
    }
    if s.one.active() {
        covered(s, &subkey)?;
        let absent = sh.writes().one_read(&mut s.one, &subkey, |c| c.is_none())?;
        s.one.write(&subkey, Some(value), 0);
        return Ok(absent);
    }
    let w = Write::Set {
        value: Cow::Borrowed(value),
        cond: crate::core::ops::Cond::Always,
        get: true,
        ttl: crate::core::ops::Ttl::Set(0),
    };
    match run_op(sh, s, op(subkey, w)).outcome? {
        Outcome::Old(v) => Ok(v.is_none()),
        Outcome::Failed(f) => Err(Fail::Reply(crate::resp::reply::failure_text(&f))),
        _ => Ok(false),
    }
}

/// Removes a subkey (inside the running transaction).
pub(crate) fn remove<'k>(
    sh: &Shared,
    s: &mut Session,
    subkey: impl Into<Cow<'k, [u8]>>,
) -> Result<(), Fail> {
    let subkey = subkey.into();
    if s.packs.remove(&subkey).is_some() {
        return Ok(());
    }
    if let Some(r) = one_write(s, &subkey, None, 0) {
        return r;
    }
    done(run_op(sh, s, op(subkey, Write::Remove)))
}

/// Sets the string value at `key`, keeping its deadline (an in-place change: PFADD).
pub(crate) fn put_string(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    value: &[u8],
) -> Result<(), Fail> {
    if let Some(r) = one_write(s, key, Some(value), 0) {
        return r;
    }
    let w = Write::Set {
        value: Cow::Borrowed(value),
        cond: crate::core::ops::Cond::Always,
        get: false,
        ttl: crate::core::ops::Ttl::Keep,
    };
    done(run_op(sh, s, Op::new(key, w)))
}

/// A store command's write (SINTERSTORE, ZUNIONSTORE, SORT … STORE, GEOSEARCHSTORE…):
/// `store` replaces what `dst` holds and answers the new size; announced as Redis does,
/// `name` of `class` when `dst` holds something, else `del` when it removed what was there
/// (whether it existed is looked at only while such events are wanted).
pub(crate) fn store_announced(
    (sh, s, src): (&Shared, &mut Session, &Src<'_>),
    (class, name, dst): (u32, &'static str, &[u8]),
    store: impl FnOnce(&Shared, &mut Session) -> Result<u64, Fail>,
) -> Result<u64, Fail> {
    let existed = notify::wants(s, class | notify::GENERIC) && src.item(sh, s, dst)?.is_some();
    let n = store(sh, s)?;
    if n > 0 {
        notify::event(s, class, name, dst);
    } else if existed {
        notify::event(s, notify::GENERIC, "del", dst);
    }
    Ok(n)
}

/// Writes a collection's metadata, keeping the key's deadline; an empty collection removes
/// the key, as Redis does, but for a stream, which stays (Redis keeps empty streams). A
/// packed collection is written whole, or, past its thresholds, as subkeys (`packed.rs`).
pub(crate) fn set_meta(sh: &Shared, s: &mut Session, key: &[u8], m: &Meta) -> Result<(), Fail> {
    let value = match m.packed {
        true => return set_packed(sh, s, key, m),
        false => (m.len > 0 || m.kind == Kind::Stream).then(|| Cow::Owned(m.encode())),
    };
    set_item(sh, s, key, m.kind, value)
}

/// Writes the metadata item of a collection of `kind` (`None`: removes the key).
fn set_item(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    kind: Kind,
    value: Option<Cow<'_, [u8]>>,
) -> Result<(), Fail> {
    let flags = kind.flags();
    if let Some(r) = one_write(s, key, value.as_deref(), flags) {
        return r;
    }
    done(run_op(sh, s, Op::new(key, Write::Typed { value, flags })))
}

/// Writes the open packed collection `m` back: one item while its thresholds allow, else
/// every subkey and its metadata record (from now on unpacked).
fn set_packed(sh: &Shared, s: &mut Session, key: &[u8], m: &Meta) -> Result<(), Fail> {
    let pack = s
        .packs
        .take(&m.prefix(key))
        .ok_or_else(|| Fail::Reply("ERR packed collection written while not open".into()))?;
    write_pack(sh, s, key, m, pack)
}

/// Writes back every open packed collection whose subkeys the command changed without
/// writing its record (LSET), as it was opened.
pub(crate) fn close_packs(sh: &Shared, s: &mut Session) -> Result<(), Fail> {
    while let Some(pack) = s.packs.take_dirty() {
        let (key, m) = (pack.key.clone(), pack.meta);
        write_pack(sh, s, &key, &m, pack)?;
    }
    Ok(())
}

fn write_pack(sh: &Shared, s: &mut Session, key: &[u8], m: &Meta, pack: Pack) -> Result<(), Fail> {
    let p = pack.prefix.as_slice();
    if m.len == 0 {
        return set_item(sh, s, key, m.kind, None);
    }
    if let Some(item) = packed::packed_item(&s.global.tuning, m, &pack) {
        return set_item(sh, s, key, m.kind, Some(Cow::Owned(item)));
    }
    let mut k = p.to_vec();
    let mut wrote = Ok(());
    pack.each(|suffix, v| {
        if wrote.is_ok() {
            k.truncate(p.len());
            k.extend_from_slice(suffix);
            wrote = match one_write(s, &k, Some(v), 0) {
                Some(r) => r,
                None => done(run_op(
                    sh,
                    s,
                    op(k.as_slice(), Write::Put(Cow::Borrowed(v))),
                )),
            };
        }
    });
    wrote?;
    let unpacked = Meta {
        packed: false,
        ..*m
    };
    set_item(sh, s, key, m.kind, Some(Cow::Owned(unpacked.encode())))
}

/// Refuses a field (or member) whose subkey would be longer than the store's keys may be.
pub(crate) fn check_field(sh: &Shared, key: &[u8], field: &[u8]) -> Result<(), Fail> {
    check_field_len(sh, key, field.len())
}

/// Refuses a field of `len` bytes whose subkey would be longer than the store's keys may be.
pub(crate) fn check_field_len(sh: &Shared, key: &[u8], len: usize) -> Result<(), Fail> {
    let max = sh.view().config().max_key;
    if SUBKEY_OVERHEAD + key.len() + len > max {
        return Err(Fail::Reply(format!(
            "ERR key and field together longer than {} bytes (accelkv keeps each field in a key of the store)",
            max - SUBKEY_OVERHEAD
        )));
    }
    Ok(())
}

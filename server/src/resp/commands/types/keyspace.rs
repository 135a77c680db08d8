//! What the key-level commands need to know about collections: their type's name (TYPE,
//! OBJECT ENCODING, SCAN TYPE), where the user's keys end and the reserved subkeys begin
//! (DBSIZE, INFO keyspace), copying a collection to another key (RENAME, COPY),
//! and what one takes in memory (MEMORY USAGE).

use crate::core::ops::typed::is_typed;
use crate::core::shared::Shared;
use crate::resp::commands::types::access::{put, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{all_range, new_meta, Meta, RESERVED};
use crate::resp::commands::types::packed;
use crate::resp::db::DB_PREFIX;
use crate::resp::session::Session;
use accelkv_tree::Error;

/// `key`'s value and client flags at the read version: the confirming re-read when an
/// answer came without flags (a ring engine's GET, a scan's items) and its bytes start like
/// a collection's metadata.
pub(crate) fn item_now(sh: &Shared, key: &[u8]) -> Result<Option<(Vec<u8>, u32)>, Error> {
    Ok(sh.view().snapshot().get_item(key)?.map(|(v, _, f)| (v, f)))
}

/// Whether a value that came without flags (through a ring engine) is a collection's
/// metadata: it starts like one and the key's flags say so (`check`: the server and the
/// key; `None`: the answer had flags, so it is not).
pub(crate) fn looks_typed(check: Option<(&Shared, &[u8])>, v: &[u8]) -> bool {
    if !v.starts_with(&crate::resp::commands::types::encoding::MAGIC) {
        return false;
    }
    check.is_some_and(|(sh, key)| matches!(item_now(sh, key), Ok(Some((_, f))) if is_typed(f)))
}

/// TYPE's answer for an item with these flags and value.
pub(crate) fn type_name(value: &[u8], flags: u32) -> &'static str {
    match Meta::decode(value, flags) {
        Ok(m) => m.kind.name(),
        Err(_) => "string",
    }
}

/// OBJECT ENCODING's answer for an item with these flags and value, if it is a
/// collection: Redis 7.2's name for how accelkv keeps it (`packed.rs`).
pub(crate) fn encoding_name(value: &[u8], flags: u32) -> Option<&'static str> {
    let m = Meta::decode(value, flags).ok()?;
    Some(packed::encoding_name(&m))
}

/// The keys of each database (database 0 first, then those ≥ 1 that hold keys), by walking
/// the reserved part of the key space: the other databases' keys and every collection's
/// subkeys (so this costs a walk of them; DBSIZE, INFO keyspace). Database 0 holds the
/// rest.
pub(crate) fn keys_per_db(sh: &Shared) -> Vec<(u16, usize)> {
    let mut counts: Vec<(u16, usize)> = Vec::new();
    let mut reserved = 0usize;
    let _ = sh.view().scan_with(&DB_PREFIX, None, usize::MAX, |k, _| {
        reserved += 1;
        if let Some(&[a, b]) = k.strip_prefix(&DB_PREFIX).and_then(|r| r.get(..2)) {
            if k < RESERVED.as_slice() {
                let db = u16::from_be_bytes([a, b]);
                match counts.last_mut() {
                    Some((d, n)) if *d == db => *n += 1,
                    _ => counts.push((db, 1)),
                }
            }
        }
    });
    // The store's count holds expired items not yet swept: those of the reserved part
    // are taken off with it, so database 0's count is its own (with its expired ones, as
    // Redis's DBSIZE counts keys not yet expired lazily).
    let expired = sh.view().expired_from(&DB_PREFIX).unwrap_or(0);
    let db0 = sh.view().len().saturating_sub(reserved + expired);
    let mut all = vec![(0, db0)];
    all.extend(counts);
    all
}

/// The number of keys in database `db` (DBSIZE).
pub(crate) fn user_keys(sh: &Shared, db: u16) -> usize {
    if db == 0 {
        return keys_per_db(sh)[0].1;
    }
    let (lo, hi) = crate::resp::db::range(db);
    let mut n = 0usize;
    let _ = sh
        .view()
        .scan_with(&lo, Some(&hi), usize::MAX, |_, _| n += 1);
    n
}

/// Copies the collection `m` at `src` to `dst` under a fresh id, inside the transaction
/// (RENAME, COPY): what `dst` held before is replaced (its subkeys become garbage).
pub(crate) fn copy_collection(
    sh: &Shared,
    s: &mut Session,
    src: &[u8],
    dst: &[u8],
    m: &Meta,
) -> Result<(), Fail> {
    // Opened through the transaction: a packed one's subkeys are then read from its item.
    let m = &Src::Tx
        .meta(sh, s, src, m.kind)?
        .ok_or_else(|| Fail::Reply("ERR no such key".into()))?;
    let old = m.prefix(src);
    let (lo, hi) = all_range(&old);
    let mut subs: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(m.len as usize);
    Src::Tx.scan(sh, s, (&lo, &hi), usize::MAX, |k, v| {
        subs.push((k[old.len()..].to_vec(), v.to_vec()))
    })?;
    for (rest, _) in &subs {
        crate::resp::commands::types::access::check_field(sh, dst, &rest[1..])?;
    }
    let mut new = match m.packed {
        true => packed::create(&mut s.packs, dst, m.kind),
        false => new_meta(m.kind),
    };
    (new.len, new.head, new.tail, new.intset) = (m.len, m.head, m.tail, m.intset);
    let p = new.prefix(dst);
    // Every subkey (a sorted set's score index too), the part byte and what follows kept.
    let mut k = p.clone();
    for (rest, v) in &subs {
        k.truncate(p.len());
        k.extend_from_slice(rest);
        put(sh, s, k.as_slice(), v)?;
    }
    set_meta(sh, s, dst, &new)
}

/// MEMORY USAGE of a collection: its metadata item and every subkey's (a sorted set's
/// score index included).
pub(crate) fn memory_usage(sh: &Shared, key: &[u8], value: &[u8], flags: u32) -> usize {
    let mut bytes = sh.view().item_footprint(key.len(), value.len());
    if let Ok(m) = Meta::decode(value, flags) {
        let (lo, hi) = all_range(&m.prefix(key));
        let _ = sh.view().scan_with(&lo, Some(&hi), usize::MAX, |k, v| {
            bytes += sh.view().item_footprint(k.len(), v.len())
        });
    }
    bytes
}

//! A database's key prefix (`db.rs` has the rules; this part needs nothing else, so the
//! connection's state can use it): database 0 is the keys as they are, database `n` ≥ 1
//! keeps `key` as `FF FE | n u16 | key` (docs/FORMAT.md, "Databases"). In a cluster's slot
//! mode (`accelkv_proto::slot::placed`) there is database 0 alone, and its keys are kept
//! after their hash slot's two bytes (`slot u16 | key`).

use accelkv_proto::slot;
use std::borrow::Cow;

/// The first bytes of every key of a database other than 0.
pub const DB_PREFIX: [u8; 2] = [0xFF, 0xFE];

/// Where database `db`'s keys start (empty for 0).
pub fn prefix(db: u16) -> Vec<u8> {
    if db == 0 {
        return Vec::new();
    }
    let mut p = DB_PREFIX.to_vec();
    p.extend_from_slice(&db.to_be_bytes());
    p
}

/// The store's range `[lo, hi)` of database `db`'s keys: database 0 ends where the
/// reserved part (other databases, then collections' subkeys) begins.
pub fn range(db: u16) -> (Vec<u8>, Vec<u8>) {
    if db == 0 && slot::placed() {
        return (Vec::new(), slot::bound(slot::SLOTS).to_vec());
    }
    if db == 0 {
        return (Vec::new(), DB_PREFIX.to_vec());
    }
    let hi = match db.checked_add(1) {
        Some(n) => prefix(n),
        None => vec![0xFF, 0xFF],
    };
    (prefix(db), hi)
}

/// `key` of database `db` as the store keeps it.
pub fn to_store(db: u16, key: &[u8]) -> Cow<'_, [u8]> {
    if slot::placed() {
        return Cow::Owned(slot::place(key));
    }
    if db == 0 {
        return Cow::Borrowed(key);
    }
    let mut k = prefix(db);
    k.extend_from_slice(key);
    Cow::Owned(k)
}

/// A stored key as its client named it: the database prefix stripped.
pub fn shown(key: &[u8]) -> &[u8] {
    if slot::placed() {
        return slot::unplace(key);
    }
    match key.strip_prefix(&DB_PREFIX) {
        Some(rest) if rest.len() >= 2 => &rest[2..],
        _ => key,
    }
}

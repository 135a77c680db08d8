//! Redis's DUMP payload (docs/FORMAT.md "DUMP payloads"): one value in RDB encoding, then
//! the RDB version (2 bytes, little-endian) and a CRC-64 (Jones, as Redis's `crc64`) of
//! everything before it, little-endian. [`dump`] writes the plain encodings every Redis
//! since 5.0 loads (string, list, set, hash, sorted set with binary scores; version 9), and
//! a stream as Redis 7.2 does (version 11: its consumers' active times need it);
//! [`restore`] reads what Redis 5.0 to 7.2 write too: integer and LZF-compressed strings,
//! intsets, listpacks (small hashes, sets and sorted sets), quicklists and the three stream
//! forms. Modules and Redis 6's ziplists are refused as unsupported. Decoding never panics
//! on any input (fuzz target `rdb_restore`).

mod file;
mod functions;
mod listpack;
mod load;
mod read;
mod stream;

pub use file::File;
pub use functions::{dump_functions, restore_functions};
pub use load::{file_version, load_file, Item, LoadError};
pub use read::restore;
pub use stream::{Consumer, Group, Pending, Stream};

/// A value as DUMP and RESTORE carry it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    /// Elements head to tail.
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    /// Members and scores.
    ZSet(Vec<(Vec<u8>, f64)>),
    /// Fields and values.
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Stream(Stream),
}

/// Why a payload cannot be restored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RdbError {
    /// The version is newer than this reader knows, or the checksum is wrong.
    VersionOrChecksum,
    /// The bytes are not a valid encoding.
    BadFormat,
    /// A valid value of a type not restored here (its RDB type).
    Unsupported(u8),
}

/// The RDB version DUMP writes: Redis 5.0's, so every Redis since loads it.
pub const DUMP_VERSION: u16 = 9;
/// The RDB version of a stream's DUMP: Redis 7.2's, the first that keeps consumers'
/// active times (Redis 7.0 refuses it, as it refuses every DUMP of Redis 7.2).
pub const STREAM_DUMP_VERSION: u16 = 11;
/// The newest RDB version RESTORE reads (Redis 7.2's).
pub const MAX_VERSION: u16 = 11;

/// The file's opcodes (`rdb.h`): what follows is not a key.
pub(crate) const FUNCTION_PRE_GA: u8 = 0xF6;
pub(crate) const MODULE_AUX: u8 = 0xF7;
pub(crate) const IDLE: u8 = 0xF8;
pub(crate) const FREQ: u8 = 0xF9;
pub(crate) const AUX: u8 = 0xFA;
pub(crate) const RESIZEDB: u8 = 0xFB;
pub(crate) const EXPIRETIME_MS: u8 = 0xFC;
pub(crate) const EXPIRETIME: u8 = 0xFD;
pub(crate) const SELECTDB: u8 = 0xFE;
pub(crate) const EOF: u8 = 0xFF;
/// One library of functions (its code).
pub(crate) const FUNCTION2: u8 = 0xF5;

pub(crate) const T_STRING: u8 = 0;
pub(crate) const T_LIST: u8 = 1;
pub(crate) const T_SET: u8 = 2;
pub(crate) const T_ZSET: u8 = 3;
pub(crate) const T_HASH: u8 = 4;
pub(crate) const T_ZSET_2: u8 = 5;
pub(crate) const T_SET_INTSET: u8 = 11;
pub(crate) const T_HASH_LISTPACK: u8 = 16;
pub(crate) const T_ZSET_LISTPACK: u8 = 17;
pub(crate) const T_LIST_QUICKLIST_2: u8 = 18;
pub(crate) const T_SET_LISTPACK: u8 = 20;

/// Redis's CRC-64 (Jones polynomial, reflected).
pub fn crc64(data: &[u8]) -> u64 {
    const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    CRC.checksum(data)
}

/// Appends an RDB length.
pub(crate) fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a string: its length and bytes.
pub(crate) fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// The DUMP payload of a value.
pub fn dump(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    put_value(&mut out, v);
    out.extend_from_slice(&value_version(v).to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The RDB version a value's encoding needs: a stream's is Redis 7.2's.
pub(crate) fn value_version(v: &Value) -> u16 {
    match v {
        Value::Stream(_) => STREAM_DUMP_VERSION,
        _ => DUMP_VERSION,
    }
}

/// Appends a value's RDB type and encoding (a DUMP payload's body).
pub(crate) fn put_value(out: &mut Vec<u8>, v: &Value) {
    out.push(rdb_type(v));
    put_encoding(out, v);
}

/// A value's RDB type: the byte before its encoding (and, in a file, before its key).
pub(crate) fn rdb_type(v: &Value) -> u8 {
    match v {
        Value::String(_) => T_STRING,
        Value::List(_) => T_LIST,
        Value::Set(_) => T_SET,
        Value::ZSet(_) => T_ZSET_2,
        Value::Hash(_) => T_HASH,
        Value::Stream(_) => stream::T_STREAM_3,
    }
}

/// Appends a value's encoding, after its type (what DUMP and an RDB file's entry share).
pub(crate) fn put_encoding(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::String(s) => put_str(out, s),
        Value::List(items) | Value::Set(items) => {
            put_len(out, items.len() as u64);
            for i in items {
                put_str(out, i);
            }
        }
        Value::ZSet(items) => {
            put_len(out, items.len() as u64);
            // Redis writes its skiplist from the highest score; either order loads.
            for (m, score) in items.iter().rev() {
                put_str(out, m);
                out.extend_from_slice(&score.to_le_bytes());
            }
        }
        Value::Hash(pairs) => {
            put_len(out, pairs.len() as u64);
            for (f, val) in pairs {
                put_str(out, f);
                put_str(out, val);
            }
        }
        Value::Stream(s) => stream::write(out, s),
    }
}

#[cfg(test)]
mod stream_tests;
#[cfg(test)]
mod tests;

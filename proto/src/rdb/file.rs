//! A whole RDB file, as `redis-server` loads it at start (`redis-cli --rdb` asks a server
//! for one with SYNC): the magic `REDIS` and the version as four digits, auxiliary fields,
//! then per database `SELECTDB` and `RESIZEDB`, each key as its deadline (`EXPIRETIME_MS`,
//! when it has one), its value's RDB type, its name and its encoding (the ones DUMP writes),
//! the functions' libraries (`FUNCTION2`), and `EOF` with a CRC-64 of everything before it.
//! The version is 9 (Redis 5.0 and later load it) unless a stream is in it, whose encoding
//! is Redis 7.2's (version 11).

use super::*;

/// An RDB file being written: entries in any order of databases (each database's entries
/// together, after [`File::select`]).
pub struct File {
    /// Everything after the magic and version.
    body: Vec<u8>,
    version: u16,
}

impl File {
    /// A file whose auxiliary fields are `aux` (name, value), as Redis writes `redis-ver`,
    /// `ctime` and the like.
    pub fn new(aux: &[(&str, &[u8])]) -> File {
        let mut body = Vec::new();
        for (name, value) in aux {
            body.push(AUX);
            put_str(&mut body, name.as_bytes());
            put_str(&mut body, value);
        }
        File {
            body,
            version: DUMP_VERSION,
        }
    }

    /// Starts database `db`, which holds `keys` keys of which `expiring` have a deadline.
    pub fn select(&mut self, db: u64, keys: u64, expiring: u64) {
        self.body.push(SELECTDB);
        put_len(&mut self.body, db);
        self.body.push(RESIZEDB);
        put_len(&mut self.body, keys);
        put_len(&mut self.body, expiring);
    }

    /// One key of the database last selected: its deadline (Unix milliseconds, `None`:
    /// none), name and value.
    pub fn entry(&mut self, key: &[u8], value: &Value, deadline_ms: Option<u64>) {
        self.version = self.version.max(value_version(value));
        self.head(key, rdb_type(value), deadline_ms);
        put_encoding(&mut self.body, value);
    }

    /// [`File::entry`] of a string, from bytes borrowed where they lie.
    pub fn string(&mut self, key: &[u8], value: &[u8], deadline_ms: Option<u64>) {
        self.head(key, T_STRING, deadline_ms);
        put_str(&mut self.body, value);
    }

    /// What comes before an entry's value: its deadline, its type, its key.
    fn head(&mut self, key: &[u8], rdb_type: u8, deadline_ms: Option<u64>) {
        if let Some(ms) = deadline_ms {
            self.body.push(EXPIRETIME_MS);
            self.body.extend_from_slice(&ms.to_le_bytes());
        }
        self.body.push(rdb_type);
        put_str(&mut self.body, key);
    }

    /// One library of functions: its code (shebang line and body).
    pub fn function(&mut self, code: &[u8]) {
        self.body.push(FUNCTION2);
        put_str(&mut self.body, code);
    }

    /// The file's bytes.
    pub fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body.len() + 18);
        out.extend_from_slice(format!("REDIS{:04}", self.version).as_bytes());
        out.extend_from_slice(&self.body);
        out.push(EOF);
        let crc = crc64(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_magic_entries_eof_and_checksum() {
        let mut f = File::new(&[("redis-bits", b"64")]);
        f.select(0, 1, 1);
        f.entry(b"k", &Value::String(b"v".to_vec()), Some(1_000));
        f.string(b"k", b"v", Some(1_000));
        let bytes = f.finish();
        let mut want = b"REDIS0009".to_vec();
        want.extend_from_slice(&[AUX, 10]);
        want.extend_from_slice(b"redis-bits");
        want.extend_from_slice(&[2, b'6', b'4', SELECTDB, 0, RESIZEDB, 1, 1, EXPIRETIME_MS]);
        want.extend_from_slice(&1_000u64.to_le_bytes());
        want.extend_from_slice(&[T_STRING, 1, b'k', 1, b'v', EXPIRETIME_MS]);
        want.extend_from_slice(&1_000u64.to_le_bytes());
        want.extend_from_slice(&[T_STRING, 1, b'k', 1, b'v', EOF]);
        let crc = crc64(&want);
        want.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(bytes, want);
    }

    #[test]
    fn a_stream_makes_it_version_11() {
        let mut f = File::new(&[]);
        f.select(0, 1, 0);
        f.entry(b"s", &Value::Stream(Stream::default()), None);
        assert!(f.finish().starts_with(b"REDIS0011"));
    }
}

//! Reading a whole RDB file, as `redis-server` loads one at start and a replica loads the
//! snapshot its primary sends (`rdbLoadRioWithLoadingCtx`): the magic and version, then
//! opcodes — auxiliary fields, `SELECTDB`, `RESIZEDB`, a key's deadline (`EXPIRETIME_MS`,
//! or `EXPIRETIME` in seconds), its LRU idle time or LFU frequency (read and dropped), a
//! library of functions (`FUNCTION2`) — and keys, each as its value's RDB type, its name
//! and its encoding, up to `EOF` and the CRC-64 of everything before it (zero when the
//! writer had checksums off). Values decode as RESTORE's do (`read.rs`); a key of a type
//! not served here (a module's, Redis 6's ziplists) is skipped whole and handed over as
//! [`Item::Skipped`] with its type, never dropped silently. Every length is bounded by the
//! bytes left, so no input makes it panic or allocate past the file (fuzz target
//! `rdb_file`).

use super::read::Reader;
use super::*;

/// RDB types whose encoding is one string (Redis 6 and older: zipmap, ziplists).
const T_ONE_STRING: [u8; 4] = [9, 10, 12, 13];
/// A quicklist of ziplists (Redis 3.2 to 6): nodes, each a ziplist string.
const T_LIST_QUICKLIST: u8 = 14;
/// A module's value, self-describing since Redis 5 (`MODULE_2`).
const T_MODULE_2: u8 = 7;

/// One thing an RDB file holds, in file order.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// An auxiliary field (`redis-ver`, `repl-id`, …).
    Aux(Vec<u8>, Vec<u8>),
    /// The entries that follow belong to this database.
    Select(u64),
    /// A key: its name, value and deadline (Unix milliseconds).
    Entry {
        key: Vec<u8>,
        value: Value,
        deadline_ms: Option<u64>,
    },
    /// A key whose type is not served here (its RDB type), skipped.
    Skipped { key: Vec<u8>, rdb_type: u8 },
    /// One library of functions: its code.
    Function(Vec<u8>),
}

/// Why a file cannot be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    /// Bytes read before the failure.
    pub at: usize,
    pub why: String,
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.why, self.at)
    }
}

/// The RDB version of a file (its first nine bytes), if they are an RDB header this reader
/// knows.
pub fn file_version(b: &[u8]) -> Option<u16> {
    let head = b.get(..9)?;
    if &head[..5] != b"REDIS" || !head[5..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v: u16 = std::str::from_utf8(&head[5..]).ok()?.parse().ok()?;
    (1..=MAX_VERSION).contains(&v).then_some(v)
}

/// Reads the whole file `b`, handing each item to `each` in file order; an error `each`
/// returns stops the load and is returned as the load's. Returns the bytes read (the file
/// ends at `EOF` and its checksum; anything after is not read).
pub fn load_file(
    b: &[u8],
    mut each: impl FnMut(Item) -> Result<(), String>,
) -> Result<usize, LoadError> {
    if file_version(b).is_none() {
        return Err(LoadError {
            at: 0,
            why: "not an RDB file, or a version newer than 11".into(),
        });
    }
    let mut r = Reader::new(&b[9..]);
    let fail = |r: &Reader<'_>, why: String| LoadError {
        at: 9 + r.at(),
        why,
    };
    let bad = |r: &Reader<'_>, e: RdbError| fail(r, format!("malformed RDB: {e:?}"));
    let mut deadline: Option<u64> = None;
    loop {
        let op = r.byte().map_err(|e| bad(&r, e))?;
        let item = match op {
            EOF => break,
            AUX => {
                let name = r.string().map_err(|e| bad(&r, e))?;
                Item::Aux(name, r.string().map_err(|e| bad(&r, e))?)
            }
            SELECTDB => Item::Select(r.len64().map_err(|e| bad(&r, e))?),
            RESIZEDB => {
                r.len64().and_then(|_| r.len64()).map_err(|e| bad(&r, e))?;
                continue;
            }
            EXPIRETIME_MS => {
                deadline = Some(r.u64_le().map_err(|e| bad(&r, e))?);
                continue;
            }
            EXPIRETIME => {
                let s = r.u32_le().map_err(|e| bad(&r, e))?;
                deadline = Some(u64::from(s) * 1000);
                continue;
            }
            IDLE => {
                r.len64().map_err(|e| bad(&r, e))?;
                continue;
            }
            FREQ => {
                r.byte().map_err(|e| bad(&r, e))?;
                continue;
            }
            FUNCTION2 => Item::Function(r.string().map_err(|e| bad(&r, e))?),
            FUNCTION_PRE_GA => {
                return Err(fail(
                    &r,
                    "functions of Redis 7.0's release candidates".into(),
                ))
            }
            MODULE_AUX => return Err(fail(&r, "a module's auxiliary data".into())),
            t => entry(&mut r, t, deadline.take()).map_err(|e| bad(&r, e))?,
        };
        each(item).map_err(|why| fail(&r, why))?;
    }
    let end = 9 + r.at();
    // Version 5 and later end with a CRC-64 of everything before it (0: not computed).
    if file_version(b).is_some_and(|v| v >= 5) {
        let crc = r.u64_le().map_err(|e| bad(&r, e))?;
        if crc != 0 && crc != crc64(&b[..end]) {
            return Err(fail(&r, "the file's checksum does not match".into()));
        }
        return Ok(end + 8);
    }
    Ok(end)
}

/// A key of type `t`: decoded, or skipped whole when its type is not served.
fn entry(r: &mut Reader<'_>, t: u8, deadline_ms: Option<u64>) -> Result<Item, RdbError> {
    let key = r.string()?;
    if T_ONE_STRING.contains(&t) {
        r.string()?;
        return Ok(Item::Skipped { key, rdb_type: t });
    }
    if t == T_LIST_QUICKLIST {
        for _ in 0..r.count(1)? {
            r.string()?;
        }
        return Ok(Item::Skipped { key, rdb_type: t });
    }
    if t == T_MODULE_2 {
        skip_module(r)?;
        return Ok(Item::Skipped { key, rdb_type: t });
    }
    let value = r.value(t)?;
    Ok(Item::Entry {
        key,
        value,
        deadline_ms,
    })
}

/// A `MODULE_2` value: the module's id, then typed fields up to the end opcode.
fn skip_module(r: &mut Reader<'_>) -> Result<(), RdbError> {
    r.len64()?;
    loop {
        match r.len64()? {
            0 => return Ok(()),
            1 | 2 => {
                r.len64()?;
            }
            3 => {
                r.take(4)?;
            }
            4 => {
                r.take(8)?;
            }
            5 => {
                r.string()?;
            }
            _ => return Err(RdbError::BadFormat),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(b: &[u8]) -> Result<Vec<Item>, LoadError> {
        let mut out = Vec::new();
        load_file(b, |i| {
            out.push(i);
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn what_file_writes_loads_back() {
        let mut f = File::new(&[("redis-ver", b"7.2.6")]);
        f.select(0, 2, 1);
        f.entry(
            b"h",
            &Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
            None,
        );
        f.string(b"s", b"v", Some(1_700_000_000_000));
        f.select(3, 1, 0);
        f.entry(b"z", &Value::ZSet(vec![(b"m".to_vec(), 1.5)]), None);
        f.function(b"#!lua name=x\nreturn 1");
        let bytes = f.finish();
        let items = all(&bytes).unwrap();
        assert_eq!(
            items,
            vec![
                Item::Aux(b"redis-ver".to_vec(), b"7.2.6".to_vec()),
                Item::Select(0),
                Item::Entry {
                    key: b"h".to_vec(),
                    value: Value::Hash(vec![(b"f".to_vec(), b"v".to_vec())]),
                    deadline_ms: None
                },
                Item::Entry {
                    key: b"s".to_vec(),
                    value: Value::String(b"v".to_vec()),
                    deadline_ms: Some(1_700_000_000_000)
                },
                Item::Select(3),
                Item::Entry {
                    key: b"z".to_vec(),
                    value: Value::ZSet(vec![(b"m".to_vec(), 1.5)]),
                    deadline_ms: None
                },
                Item::Function(b"#!lua name=x\nreturn 1".to_vec()),
            ]
        );
        assert_eq!(load_file(&bytes, |_| Ok(())), Ok(bytes.len()));
    }

    #[test]
    fn a_wrong_checksum_or_a_cut_file_is_an_error() {
        let mut f = File::new(&[]);
        f.select(0, 1, 0);
        f.string(b"k", b"value", None);
        let mut bytes = f.finish();
        for cut in 0..bytes.len() {
            assert!(all(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        let e = all(&bytes).unwrap_err();
        assert!(e.why.contains("checksum"), "{e}");
        // A zero checksum: the writer had them off.
        bytes[n - 8..].fill(0);
        assert!(all(&bytes).is_ok());
    }

    #[test]
    fn keys_of_types_not_served_are_skipped_and_named() {
        let mut body = b"REDIS0009".to_vec();
        body.extend_from_slice(&[SELECTDB, 0]);
        // A Redis 6 hash ziplist (type 13): one string, skipped whole.
        body.extend_from_slice(&[13, 1, b'a', 3, 1, 2, 3]);
        // A module value: id, an unsigned field, a string field, the end.
        body.extend_from_slice(&[T_MODULE_2, 1, b'm', 5, 2, 7, 5, 2, b'x', b'y', 0]);
        body.extend_from_slice(&[EXPIRETIME, 1, 0, 0, 0, T_STRING, 1, b'k', 1, b'v', EOF]);
        let crc = crc64(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        let items = all(&body).unwrap();
        assert_eq!(
            items,
            vec![
                Item::Select(0),
                Item::Skipped {
                    key: b"a".to_vec(),
                    rdb_type: 13
                },
                Item::Skipped {
                    key: b"m".to_vec(),
                    rdb_type: T_MODULE_2
                },
                Item::Entry {
                    key: b"k".to_vec(),
                    value: Value::String(b"v".to_vec()),
                    deadline_ms: Some(1000)
                },
            ]
        );
    }

    #[test]
    fn a_file_redis_7_0_saved_loads_every_type() {
        // `SAVE` of a redis-server 7.0.15 holding one key of each type and a library.
        let b = include_bytes!("../../../fuzz/seeds/rdb_file/redis70-every-type.rdb");
        let items = all(b).unwrap();
        let entry = |k: &[u8]| {
            items.iter().find_map(|i| match i {
                Item::Entry {
                    key,
                    value,
                    deadline_ms,
                } if key.as_slice() == k => Some((value.clone(), *deadline_ms)),
                _ => None,
            })
        };
        let h = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec()),
        ];
        assert_eq!(entry(b"h"), Some((Value::Hash(h), None)));
        assert_eq!(
            entry(b"z"),
            Some((Value::ZSet(vec![(b"a".to_vec(), 1.0)]), None))
        );
        let l: Vec<Vec<u8>> = [b"1", b"2", b"3"].iter().map(|x| x.to_vec()).collect();
        assert_eq!(entry(b"l"), Some((Value::List(l), None)));
        assert!(matches!(entry(b"s"), Some((Value::Set(m), None)) if m.len() == 2));
        assert!(matches!(entry(b"s2"), Some((Value::Set(m), None)) if m.len() == 2));
        assert!(matches!(entry(b"k"), Some((Value::String(_), Some(d))) if d > 1_700_000_000_000));
        assert!(matches!(entry(b"x"), Some((Value::Stream(_), None))));
        assert!(items
            .iter()
            .any(|i| matches!(i, Item::Function(c) if c.starts_with(b"#!lua name=l"))));
        assert!(items.contains(&Item::Select(0)));
    }

    #[test]
    fn an_error_from_the_consumer_stops_the_load() {
        let mut f = File::new(&[]);
        f.select(0, 1, 0);
        f.string(b"k", b"v", None);
        let e = load_file(&f.finish(), |i| match i {
            Item::Entry { .. } => Err("full".into()),
            _ => Ok(()),
        })
        .unwrap_err();
        assert_eq!(e.why, "full");
        assert!(file_version(b"REDIS0012").is_none() && file_version(b"REDIS0011") == Some(11));
    }
}

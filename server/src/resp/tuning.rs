//! Redis's encoding-tuning parameters (`hash-max-listpack-entries` and its kin): CONFIG GET
//! and SET read and change them, under their Redis 7 names (7.2's for sets' listpacks)
//! and the older `ziplist` aliases. As in Redis they decide how long a collection stays
//! packed in one item (`types/packed.rs`, docs/FORMAT.md "Packed collections"), and so
//! what OBJECT ENCODING answers.

use crate::config::size::Size;
use std::sync::atomic::{AtomicI64, Ordering};

/// One parameter: its name, its older alias, its default and the values it takes.
pub struct Param {
    pub name: &'static str,
    pub alias: Option<&'static str>,
    pub default: i64,
    pub range: (i64, i64),
}

const fn p(
    name: &'static str,
    alias: Option<&'static str>,
    default: i64,
    range: (i64, i64),
) -> Param {
    Param {
        name,
        alias,
        default,
        range,
    }
}

const BIG: i64 = i64::MAX;

/// Every parameter, Redis 7's defaults.
pub static PARAMS: &[Param] = &[
    p(
        "hash-max-listpack-entries",
        Some("hash-max-ziplist-entries"),
        512,
        (0, BIG),
    ),
    p(
        "hash-max-listpack-value",
        Some("hash-max-ziplist-value"),
        64,
        (0, BIG),
    ),
    p("set-max-intset-entries", None, 512, (0, BIG)),
    p("set-max-listpack-entries", None, 128, (0, BIG)),
    p("set-max-listpack-value", None, 64, (0, BIG)),
    p(
        "zset-max-listpack-entries",
        Some("zset-max-ziplist-entries"),
        128,
        (0, BIG),
    ),
    p(
        "zset-max-listpack-value",
        Some("zset-max-ziplist-value"),
        64,
        (0, BIG),
    ),
    // Any int, as Redis takes it: below -5 reads as -5, 0 as 1 (packed.rs).
    p(
        "list-max-listpack-size",
        Some("list-max-ziplist-size"),
        -2,
        (i32::MIN as i64, i32::MAX as i64),
    ),
    p("list-compress-depth", None, 0, (0, BIG)),
    p("stream-node-max-bytes", None, 4096, (0, BIG)),
    p("stream-node-max-entries", None, 100, (0, BIG)),
    p("hll-sparse-max-bytes", None, 3000, (0, BIG)),
    // The slow log's (slowlog.rs): read by position on every command ([`SLOWER_THAN`]).
    p("slowlog-log-slower-than", None, 10_000, (-1, BIG)),
    p("slowlog-max-len", None, 128, (0, BIG)),
    // The latency monitor's (latency.rs), in milliseconds: read by position too.
    p("latency-monitor-threshold", None, 0, (0, BIG)),
];

/// Where `slowlog-log-slower-than` is in [`PARAMS`] (the dispatcher reads it by position).
pub const SLOWER_THAN: usize = 12;
/// Where `slowlog-max-len` is.
pub const SLOWLOG_MAX_LEN: usize = 13;
/// Where `latency-monitor-threshold` is.
pub const LATENCY_THRESHOLD: usize = 14;

/// The parameters' values now, shared by every connection.
pub struct Tuning {
    values: Vec<AtomicI64>,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            values: PARAMS.iter().map(|p| AtomicI64::new(p.default)).collect(),
        }
    }
}

fn index(name: &str) -> Option<usize> {
    PARAMS
        .iter()
        .position(|p| p.name == name || p.alias == Some(name))
}

impl Tuning {
    /// A parameter's value by its name or alias (`None`: not one of them).
    pub fn get(&self, name: &str) -> Option<i64> {
        index(name).map(|i| self.values[i].load(Ordering::Relaxed))
    }

    /// The parameter at position `i` of [`PARAMS`].
    pub fn at(&self, i: usize) -> i64 {
        self.values[i].load(Ordering::Relaxed)
    }

    /// Sets a parameter (`None`: not one of them; `Some(Err)`: Redis's error text).
    pub fn set(&self, name: &str, value: &[u8]) -> Option<Result<(), String>> {
        let i = index(name)?;
        let (lo, hi) = PARAMS[i].range;
        // Redis reads its `*-value` and `*-bytes` parameters as memory values (`4kb`).
        let memory = PARAMS[i].name.ends_with("-value") || PARAMS[i].name.ends_with("-bytes");
        let v = std::str::from_utf8(value)
            .ok()
            .and_then(|t| match t.parse::<i64>() {
                Ok(v) => Some(v),
                Err(_) if memory => Size::parse_bytes(value).and_then(|s| i64::try_from(s.0).ok()),
                Err(_) => None,
            });
        Some(match v {
            Some(v) if (lo..=hi).contains(&v) => {
                self.values[i].store(v, Ordering::Relaxed);
                Ok(())
            }
            Some(_) => Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument must be between {lo} and {hi} inclusive"
            )),
            None => Err(format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"
            )),
        })
    }

    /// Every parameter with its value (both names, as CONFIG GET * lists them).
    pub fn all(&self) -> Vec<(&'static str, String)> {
        let mut v = Vec::new();
        for (p, val) in PARAMS.iter().zip(&self.values) {
            let val = val.load(Ordering::Relaxed).to_string();
            v.push((p.name, val.clone()));
            if let Some(a) = p.alias {
                v.push((a, val));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_slow_log_parameters_are_where_the_dispatcher_reads_them() {
        assert_eq!(
            super::PARAMS[super::SLOWER_THAN].name,
            "slowlog-log-slower-than"
        );
        assert_eq!(
            super::PARAMS[super::SLOWLOG_MAX_LEN].name,
            "slowlog-max-len"
        );
    }

    use super::*;

    /// As in Redis, `*-value` and `*-bytes` take memory values; entry counts do not.
    #[test]
    fn memory_parameters_take_units() {
        let t = Tuning::default();
        assert_eq!(t.set("stream-node-max-bytes", b"4kb"), Some(Ok(())));
        assert_eq!(t.get("stream-node-max-bytes"), Some(4096));
        assert_eq!(t.set("hash-max-ziplist-value", b"1k"), Some(Ok(())));
        assert_eq!(t.get("hash-max-listpack-value"), Some(1000));
        assert!(matches!(
            t.set("hash-max-listpack-entries", b"1k"),
            Some(Err(_))
        ));
    }

    #[test]
    fn parameters_answer_by_either_name() {
        let t = Tuning::default();
        assert_eq!(t.get("hash-max-ziplist-entries"), Some(512));
        assert_eq!(t.set("hash-max-ziplist-entries", b"16"), Some(Ok(())));
        assert_eq!(t.get("hash-max-listpack-entries"), Some(16));
        assert!(matches!(
            t.set("set-max-intset-entries", b"-1"),
            Some(Err(_))
        ));
        assert!(matches!(
            t.set("list-max-listpack-size", b"x"),
            Some(Err(_))
        ));
        assert_eq!(t.set("list-max-listpack-size", b"-5"), Some(Ok(())));
        assert_eq!(t.set("nope", b"1"), None);
        assert_eq!(t.all().len(), PARAMS.len() + 5);
    }
}

//! Redis's numbered databases (SELECT, MOVE, FLUSHDB, COPY … DB) as key prefixes in the one
//! ordered store: database 0 is the keys as they are; database `n` ≥ 1 keeps `key` as
//! `FF FE | n u16 | key`, a part of the key space no client may write (docs/FORMAT.md,
//! "Databases"). The dispatcher rewrites the key arguments of every command run in a
//! database other than 0 ([`rewrite`], by the command table's key positions and the
//! movable-key commands' own rules); replies that name keys strip the prefix ([`shown`]);
//! the keyspace commands walk their database's range ([`range`]). A collection's subkeys
//! follow its prefixed key, so nothing else changes.

use crate::resp::call::Spec;
use smallvec::smallvec;

pub use crate::resp::prefix::{range, shown, to_store, DB_PREFIX};

/// Key positions: four in place, more on the heap.
pub type Keys = smallvec::SmallVec<[usize; 4]>;

/// Whether `spec`'s keys are found by reading its arguments ([`key_positions`]'s own cases:
/// a count, STREAMS, STORE, KEYS), not by the table's positions alone (Redis's
/// `movablekeys`).
pub fn movable_keys(spec: &Spec) -> bool {
    spec.runs_script()
        || matches!(
            spec.name,
            "LMPOP"
                | "ZMPOP"
                | "ZUNION"
                | "ZINTER"
                | "ZDIFF"
                | "ZINTERCARD"
                | "SINTERCARD"
                | "BLMPOP"
                | "BZMPOP"
                | "XREAD"
                | "XREADGROUP"
                | "SORT"
                | "SORT_RO"
                | "GEORADIUS"
                | "GEORADIUSBYMEMBER"
                | "ZUNIONSTORE"
                | "ZINTERSTORE"
                | "ZDIFFSTORE"
                | "MIGRATE"
        )
}

/// The positions of `args`'s keys: the table's for most commands, and for those whose keys
/// follow a count (EVAL-like, LMPOP, ZUNIONSTORE…) their own. Up to four without an
/// allocation (the gate's permission check asks for every command of a restricted user).
pub fn key_positions(spec: &Spec, args: &[&[u8]]) -> Keys {
    let count_at =
        |at: usize| -> Option<usize> { std::str::from_utf8(args.get(at)?).ok()?.parse().ok() };
    // A count past the arguments there are names no keys (the command is refused anyway).
    let after_count = |at: usize| -> Keys {
        let n = count_at(at).unwrap_or(0);
        match at + 1 + n <= args.len() {
            true => (at + 1..at + 1 + n).collect(),
            false => Keys::new(),
        }
    };
    match spec.name {
        "LMPOP" | "ZMPOP" | "ZUNION" | "ZINTER" | "ZDIFF" | "ZINTERCARD" | "SINTERCARD" => {
            after_count(1)
        }
        "BLMPOP" | "BZMPOP" => after_count(2),
        _ if spec.runs_script() => after_count(2),
        "XREAD" | "XREADGROUP" => {
            // The first half of what follows STREAMS.
            let at = (1..args.len()).find(|&i| args[i].eq_ignore_ascii_case(b"STREAMS"));
            let rest = at.map_or(0, |i| args.len() - i - 1);
            at.map_or(Keys::new(), |i| (i + 1..i + 1 + rest / 2).collect())
        }
        "SORT" | "SORT_RO" => {
            let mut v = smallvec![1];
            v.extend(
                (2..args.len().saturating_sub(1))
                    .filter(|&i| args[i].eq_ignore_ascii_case(b"STORE"))
                    .map(|i| i + 1),
            );
            v
        }
        "GEORADIUS" | "GEORADIUSBYMEMBER" => {
            // The source, and the key after STORE or STOREDIST among the options.
            let base = if spec.name == "GEORADIUS" { 6 } else { 5 };
            let mut v = smallvec![1];
            v.extend(
                (base..args.len().saturating_sub(1))
                    .filter(|&i| {
                        args[i].eq_ignore_ascii_case(b"STORE")
                            || args[i].eq_ignore_ascii_case(b"STOREDIST")
                    })
                    .map(|i| i + 1),
            );
            v
        }
        "ZUNIONSTORE" | "ZINTERSTORE" | "ZDIFFSTORE" => {
            let mut v = smallvec![1];
            v.extend(after_count(2));
            v
        }
        // The key, or those after KEYS when it is empty (AUTH and AUTH2 take 1 and 2).
        "MIGRATE" if args.get(3).is_some_and(|k| !k.is_empty()) => smallvec![3],
        "MIGRATE" => {
            let mut i = 6;
            while i < args.len() {
                match args[i].to_ascii_uppercase().as_slice() {
                    b"AUTH" => i += 2,
                    b"AUTH2" => i += 3,
                    b"KEYS" => return (i + 1..args.len()).collect(),
                    _ => i += 1,
                }
            }
            Keys::new()
        }
        "MEMORY" | "DEBUG" => {
            let sub = args.get(1).map(|a| a.to_ascii_uppercase());
            match sub.as_deref() {
                Some(b"USAGE" | b"OBJECT") if args.len() > 2 => smallvec![2],
                _ => Keys::new(),
            }
        }
        _ => spec.key_positions(args.len()).collect(),
    }
}

/// `args` with their keys in database `db` (`None`: nothing to change: database 0 outside
/// slot mode, a command without keys, or a script, whose keys its own commands will name).
pub fn rewrite(db: u16, spec: &Spec, args: &[&[u8]]) -> Option<Vec<Vec<u8>>> {
    if (db == 0 && !accelkv_proto::slot::placed()) || spec.runs_script() {
        return None;
    }
    let at = key_positions(spec, args);
    if at.is_empty() {
        return None;
    }
    let mut out: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
    for i in at {
        if let Some(a) = out.get_mut(i) {
            *a = to_store(db, a).into_owned();
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn databases_are_disjoint_ranges_below_the_subkeys() {
        let (lo0, hi0) = range(0);
        let (lo1, hi1) = range(1);
        let (lo2, _) = range(2);
        let k1 = to_store(1, b"user:1");
        let k1: &[u8] = &k1;
        assert!(lo0.is_empty() && hi0 <= lo1 && lo1.as_slice() <= k1 && k1 < hi1.as_slice());
        assert_eq!(hi1, lo2);
        assert!(b"zzz".as_slice() < hi0.as_slice() && b"\xff\xfd".as_slice() < hi0.as_slice());
        assert!(range(u16::MAX).1.as_slice() <= [0xFF, 0xFF].as_slice());
        assert_eq!(shown(k1), b"user:1");
        assert_eq!(shown(b"plain"), b"plain");
        assert_eq!(to_store(0, b"k").as_ref(), b"k");
    }
}

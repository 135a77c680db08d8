//! Item writes: operations on a key's whole item (its value, 32-bit client flags, deadline
//! and version), each optionally conditional on the item's version (compare-and-swap):
//! store with a condition (always, if absent, if present), concatenate (append or prepend),
//! unsigned 64-bit arithmetic (wrapping up, stopping at 0 down, optionally creating a
//! missing item), delete, touch (a new deadline), and a versioned read that answers the
//! item as it is. The memcached adapter expresses its storage, arithmetic, touch and
//! `gets` commands in these operands; the reservation station runs them like any other
//! [`super::Write`] (`Write::Item`), so they are ordered with every other write of the key.
//!
//! An item's version (memcached's CAS unique) is its key's version in the tree
//! (`Store::key_version`): it changes whenever the item does. It may also change when the
//! key's leaf is rebuilt, which makes a compare fail spuriously, never store over a change
//! it did not see.

pub use super::outcome::VersionedItem;
use super::outcome::{Effect, Failure, Outcome};
use std::borrow::Cow;

/// When a store applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemCond {
    /// `set`, `cas`, `ms` (mode S).
    Always,
    /// `add`, `ms ME`: only if absent.
    IfAbsent,
    /// `replace`, `ms MR`: only if present.
    IfPresent,
}

/// An item's new deadline: none, already past (the item is gone at once), or this
/// millisecond since the Unix epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ItemTtl {
    Never,
    Past,
    At(u64),
}

impl ItemTtl {
    fn deadline(self) -> u64 {
        match self {
            ItemTtl::Never => 0,
            ItemTtl::Past => 1, // 1 ms after the epoch: expired for every reader
            ItemTtl::At(d) => d,
        }
    }
}

/// One item write (or versioned read).
#[derive(Clone, Debug)]
pub enum ItemWrite<'a> {
    /// `set`/`add`/`replace`/`cas`, `ms`: store `value` with `flags` and `ttl`.
    Store {
        value: Cow<'a, [u8]>,
        flags: u32,
        ttl: ItemTtl,
        cond: ItemCond,
        /// Store only if the item's CAS unique is this (absent: `NOT_FOUND`).
        cas: Option<u64>,
    },
    /// `append`/`prepend`, `ms MA|MP`: add `data` to a present item, keeping its flags and
    /// deadline.
    Concat {
        data: Cow<'a, [u8]>,
        prepend: bool,
        cas: Option<u64>,
    },
    /// `incr`/`decr`, `ma`: the value as an unsigned decimal, plus or minus `delta`.
    Arith {
        delta: u64,
        incr: bool,
        cas: Option<u64>,
        /// `ma N<ttl> J<initial>`: on a miss, create the item with this value and TTL.
        vivify: Option<(u64, ItemTtl)>,
    },
    /// `delete`, `md`: remove a present item.
    Delete { cas: Option<u64> },
    /// `touch`, `gat`, `mg T`: set a present item's deadline.
    Touch { ttl: ItemTtl },
    /// `gets`, `gats`, `mg` asking for its CAS or TTL: the item as it is now (after `touch`,
    /// when given), ordered with the writes of its key.
    Read { touch: Option<ItemTtl> },
}

/// The key's state a memcached write runs on.
pub struct Current<'c> {
    pub value: Option<&'c [u8]>,
    pub deadline: u64,
    pub flags: u32,
    /// The CAS unique (only computed when [`ItemWrite::needs_version`]).
    pub version: u64,
}

impl<'a> ItemWrite<'a> {
    /// Whether the write compares or answers the item's CAS unique.
    pub fn needs_version(&self) -> bool {
        match self {
            ItemWrite::Store { cas, .. }
            | ItemWrite::Concat { cas, .. }
            | ItemWrite::Arith { cas, .. }
            | ItemWrite::Delete { cas } => cas.is_some(),
            ItemWrite::Touch { .. } => false,
            ItemWrite::Read { .. } => true,
        }
    }

    /// Whether the write works on the item's bytes (concatenation, arithmetic), and so
    /// refuses a typed value (`typed.rs`); a read answers it with its flags.
    pub fn is_byte_level(&self) -> bool {
        matches!(self, ItemWrite::Concat { .. } | ItemWrite::Arith { .. })
    }

    /// Whether the outcome depends on the current item (all but a plain `set`).
    pub fn reads(&self) -> bool {
        !matches!(
            self,
            ItemWrite::Store {
                cond: ItemCond::Always,
                cas: None,
                ..
            }
        )
    }

    /// The same write owning its operands.
    pub fn into_owned(self) -> ItemWrite<'static> {
        let own = |c: Cow<'a, [u8]>| Cow::Owned(c.into_owned());
        match self {
            ItemWrite::Store {
                value,
                flags,
                ttl,
                cond,
                cas,
            } => ItemWrite::Store {
                value: own(value),
                flags,
                ttl,
                cond,
                cas,
            },
            ItemWrite::Concat { data, prepend, cas } => ItemWrite::Concat {
                data: own(data),
                prepend,
                cas,
            },
            ItemWrite::Arith {
                delta,
                incr,
                cas,
                vivify,
            } => ItemWrite::Arith {
                delta,
                incr,
                cas,
                vivify,
            },
            ItemWrite::Delete { cas } => ItemWrite::Delete { cas },
            ItemWrite::Touch { ttl } => ItemWrite::Touch { ttl },
            ItemWrite::Read { touch } => ItemWrite::Read { touch },
        }
    }

    /// Runs the write on the key's current item: its effect and its answer. `Skipped` is
    /// memcached's `NOT_STORED`/`NOT_FOUND`, `Mismatch` its `EXISTS` (or `NOT_FOUND` when
    /// absent), `Uint` incr/decr's new value, `Item` a read's item.
    pub fn apply(self, cur: &Current<'_>, max_value: usize) -> (Effect<'a>, Outcome) {
        let keep = |o: Outcome| (Effect::Keep, o);
        let cas_fails = |cas: Option<u64>| match cas {
            Some(_) if cur.value.is_none() => Some(Outcome::Mismatch { absent: true }),
            Some(c) if c != cur.version => Some(Outcome::Mismatch { absent: false }),
            _ => None,
        };
        match self {
            ItemWrite::Store {
                value,
                flags,
                ttl,
                cond,
                cas,
            } => {
                if let Some(o) = cas_fails(cas) {
                    return keep(o);
                }
                let applies = match cond {
                    ItemCond::Always => true,
                    ItemCond::IfAbsent => cur.value.is_none(),
                    ItemCond::IfPresent => cur.value.is_some(),
                };
                if !applies {
                    return keep(Outcome::Skipped);
                }
                match ttl {
                    ItemTtl::Past => (Effect::Remove, Outcome::Done),
                    _ => (Effect::SetItem(value, ttl.deadline(), flags), Outcome::Done),
                }
            }
            ItemWrite::Concat { data, prepend, cas } => match cas_fails(cas) {
                Some(o) => keep(o),
                None => concat(cur, &data, prepend, max_value),
            },
            ItemWrite::Arith {
                delta,
                incr,
                cas,
                vivify,
            } => {
                if cur.value.is_some() {
                    if let Some(o) = cas_fails(cas) {
                        return keep(o);
                    }
                }
                arith(cur, delta, incr, cas, vivify)
            }
            ItemWrite::Delete { cas } => {
                if let Some(o) = cas_fails(cas) {
                    return keep(o);
                }
                match cur.value {
                    None => keep(Outcome::Skipped),
                    Some(_) => (Effect::Remove, Outcome::Done),
                }
            }
            ItemWrite::Touch { ttl } => match (cur.value, ttl) {
                (None, _) => keep(Outcome::Skipped),
                (Some(_), ItemTtl::Past) => (Effect::Remove, Outcome::Done),
                (Some(_), t) => (Effect::SetDeadline(t.deadline()), Outcome::Done),
            },
            ItemWrite::Read { touch } => read(cur, touch),
        }
    }
}

/// append/prepend: `data` added to a present item, keeping its flags and deadline.
fn concat<'a>(
    cur: &Current<'_>,
    data: &[u8],
    prepend: bool,
    max_value: usize,
) -> (Effect<'a>, Outcome) {
    let Some(old) = cur.value else {
        return (Effect::Keep, Outcome::Skipped);
    };
    if old.len() + data.len() > max_value {
        return (Effect::Keep, Outcome::Failed(Failure::TooLarge));
    }
    let mut new = Vec::with_capacity(old.len() + data.len());
    if prepend {
        new.extend_from_slice(data);
        new.extend_from_slice(old);
    } else {
        new.extend_from_slice(old);
        new.extend_from_slice(data);
    }
    let e = Effect::SetItem(Cow::Owned(new), cur.deadline, cur.flags);
    (e, Outcome::Done)
}

/// incr/decr (unsigned 64-bit: wrapping on incr, stopping at 0 on decr); on a miss, the
/// item created from `vivify` when asked (and no CAS was given). A present item's CAS was
/// checked by the caller.
fn arith<'a>(
    cur: &Current<'_>,
    delta: u64,
    incr: bool,
    cas: Option<u64>,
    vivify: Option<(u64, ItemTtl)>,
) -> (Effect<'a>, Outcome) {
    let Some(old) = cur.value else {
        return match (cas, vivify) {
            (None, Some((initial, ttl))) => {
                let v = Cow::Owned(initial.to_string().into_bytes());
                (
                    Effect::SetItem(v, ttl.deadline(), 0),
                    Outcome::Created(initial),
                )
            }
            (Some(_), _) => (Effect::Keep, Outcome::Mismatch { absent: true }),
            (None, None) => (Effect::Keep, Outcome::Skipped),
        };
    };
    let Some(n) = parse_u64(old) else {
        return (Effect::Keep, Outcome::Failed(Failure::NotInteger));
    };
    let n = if incr {
        n.wrapping_add(delta)
    } else {
        n.saturating_sub(delta)
    };
    // As memcached, which rewrites the item in place when the result fits: a shorter
    // result is padded with spaces to the old length ("10" decr 1 is "9 "; protocol.txt:
    // clients must not rely on either form).
    let mut v = n.to_string().into_bytes();
    if v.len() < old.len() {
        v.resize(old.len(), b' ');
    }
    (
        Effect::SetItem(Cow::Owned(v), cur.deadline, cur.flags),
        Outcome::Uint(n),
    )
}

/// A versioned read: the item as it is now, after `touch` when given.
fn read<'a>(cur: &Current<'_>, touch: Option<ItemTtl>) -> (Effect<'a>, Outcome) {
    // A typed value (`typed.rs`) is not an item a protocol without types can read.
    let Some(v) = cur.value.filter(|_| !super::typed::is_typed(cur.flags)) else {
        return (Effect::Keep, Outcome::Skipped);
    };
    let mut item = VersionedItem {
        value: v.to_vec(),
        flags: cur.flags,
        deadline: cur.deadline,
        cas: cur.version,
    };
    match touch {
        None => (Effect::Keep, Outcome::Item(Box::new(item))),
        Some(ItemTtl::Past) => (Effect::Remove, Outcome::Item(Box::new(item))),
        Some(t) => {
            item.deadline = t.deadline();
            let d = item.deadline;
            (Effect::SetDeadline(d), Outcome::Item(Box::new(item)))
        }
    }
}

/// memcached's incr/decr operand, read as its `safe_strtoull` reads it: optional leading
/// whitespace and `+`, decimal digits that fit in 64 bits, then the end of the value or a
/// whitespace byte (whatever follows it is ignored: "12 ab" is 12). Anything else (empty,
/// a `-`, letters right after the digits, overflow) is not a number.
fn parse_u64(v: &[u8]) -> Option<u64> {
    let space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let v = &v[v.iter().take_while(|&&b| space(b)).count()..];
    let v = v.strip_prefix(b"+").unwrap_or(v);
    let digits = v.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || v.get(digits).is_some_and(|&b| !space(b)) {
        return None;
    }
    std::str::from_utf8(&v[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cur<'c>(v: Option<&'c [u8]>, version: u64) -> Current<'c> {
        Current {
            value: v,
            deadline: 0,
            flags: 9,
            version,
        }
    }

    fn outcome(w: ItemWrite<'_>, c: &Current<'_>) -> Outcome {
        w.apply(c, 1 << 20).1
    }

    #[test]
    fn cas_compares_the_version_and_tells_absent_from_changed() {
        let store = |cas| ItemWrite::Store {
            value: Cow::Borrowed(b"x"),
            flags: 1,
            ttl: ItemTtl::Never,
            cond: ItemCond::Always,
            cas: Some(cas),
        };
        assert_eq!(outcome(store(7), &cur(Some(b"a"), 7)), Outcome::Done);
        assert_eq!(
            outcome(store(6), &cur(Some(b"a"), 7)),
            Outcome::Mismatch { absent: false }
        );
        assert_eq!(
            outcome(store(7), &cur(None, 7)),
            Outcome::Mismatch { absent: true }
        );
    }

    #[test]
    fn incr_wraps_decr_stops_at_zero_and_text_is_refused() {
        let arith = |delta, incr| ItemWrite::Arith {
            delta,
            incr,
            cas: None,
            vivify: None,
        };
        let max = u64::MAX.to_string();
        assert_eq!(
            outcome(arith(2, true), &cur(Some(max.as_bytes()), 1)),
            Outcome::Uint(1)
        );
        assert_eq!(
            outcome(arith(5, false), &cur(Some(b"3"), 1)),
            Outcome::Uint(0)
        );
        assert_eq!(
            outcome(arith(1, true), &cur(Some(b"10  "), 1)),
            Outcome::Uint(11)
        );
        // as memcached's safe_strtoull: whatever follows a space is ignored
        assert_eq!(
            outcome(arith(1, true), &cur(Some(b" +7 x"), 1)),
            Outcome::Uint(8)
        );
        assert_eq!(
            outcome(arith(1, true), &cur(Some(b"99999999999999999999"), 1)),
            Outcome::Failed(Failure::NotInteger)
        );
        assert_eq!(
            outcome(arith(1, true), &cur(Some(b"abc"), 1)),
            Outcome::Failed(Failure::NotInteger)
        );
        assert_eq!(
            outcome(arith(1, true), &cur(Some(b"-1"), 1)),
            Outcome::Failed(Failure::NotInteger)
        );
        assert_eq!(outcome(arith(1, true), &cur(None, 1)), Outcome::Skipped);
    }

    #[test]
    fn a_shorter_result_is_space_padded_as_memcached_writes_it() {
        let w = ItemWrite::Arith {
            delta: 1,
            incr: false,
            cas: None,
            vivify: None,
        };
        match w.apply(&cur(Some(b"10"), 1), 100).0 {
            Effect::SetItem(v, ..) => assert_eq!(&*v, b"9 "),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn append_keeps_flags_and_deadline_and_needs_an_item() {
        let c = Current {
            value: Some(b"ab"),
            deadline: 77,
            flags: 5,
            version: 1,
        };
        let w = ItemWrite::Concat {
            data: Cow::Borrowed(b"c"),
            prepend: true,
            cas: None,
        };
        match w.apply(&c, 100).0 {
            Effect::SetItem(v, 77, 5) => assert_eq!(&*v, b"cab"),
            e => panic!("{e:?}"),
        }
        let w = ItemWrite::Concat {
            data: Cow::Borrowed(b"c"),
            prepend: false,
            cas: None,
        };
        assert_eq!(outcome(w, &cur(None, 1)), Outcome::Skipped);
    }

    #[test]
    fn add_and_replace_follow_presence_and_a_past_ttl_removes() {
        let store = |cond, ttl| ItemWrite::Store {
            value: Cow::Borrowed(b"x"),
            flags: 0,
            ttl,
            cond,
            cas: None,
        };
        assert_eq!(
            outcome(
                store(ItemCond::IfAbsent, ItemTtl::Never),
                &cur(Some(b"a"), 1)
            ),
            Outcome::Skipped
        );
        assert_eq!(
            outcome(store(ItemCond::IfPresent, ItemTtl::Never), &cur(None, 1)),
            Outcome::Skipped
        );
        let (e, o) = store(ItemCond::Always, ItemTtl::Past).apply(&cur(Some(b"a"), 1), 10);
        assert!(matches!(e, Effect::Remove));
        assert_eq!(o, Outcome::Done);
    }
}

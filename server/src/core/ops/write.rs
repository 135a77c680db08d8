//! What each write does to its key's value: the one definition of every write the server
//! accepts (binary PUT/UPDATE/DELETE, fetch-and-add, CAS and vector operations; RESP SET and
//! its options, SETNX, GETSET, DEL, INCR and friends), as a value the reservation station
//! owns and runs atomically per key. [`Write::apply`] is a pure function of the key's current
//! value and deadline; the protocols only turn its [`Outcome`] into their replies.
//!
//! Expiry follows Redis: a write that replaces a value wholesale (PUT, SET, UPDATE, GETSET,
//! MSET) clears the key's deadline unless it sets one (SET EX, KEEPTTL); a write that
//! changes a value in place (INCR*, APPEND, SETRANGE, fetch-and-add, CAS, vector
//! operations) keeps it; EXPIRE and friends change only the deadline. Deadlines are
//! absolute, in milliseconds since the Unix epoch (0: none).
//!
//! Operands are borrowed from the request (`Cow::Borrowed`) while the operation runs on the
//! loop that decoded it, and copied ([`Write::into_owned`]) only when it has to wait in
//! another loop's queue.

pub use super::outcome::{Effect, Failure, Outcome, Ttl};
use super::vector::{self, Elem, Overflow, Registry, Scalar, VectorCall, VectorError};
use std::borrow::Cow;

/// When a RESP SET applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// Always (plain SET, GETSET).
    Always,
    /// Only if the key is absent (NX, SETNX).
    IfAbsent,
    /// Only if the key is present (XX).
    IfPresent,
}

/// When EXPIRE applies: Redis 7's NX, XX, GT and LT, each a check that must pass. A key
/// without a deadline counts as expiring never, so GT never applies to it and LT does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireCond {
    /// NX: only if the key has no deadline.
    pub nx: bool,
    /// XX: only if the key has a deadline.
    pub xx: bool,
    /// GT: only if the new deadline is later than the key's.
    pub gt: bool,
    /// LT: only if the new deadline is earlier than the key's.
    pub lt: bool,
}

impl ExpireCond {
    /// Only on a key with a deadline (PERSIST).
    pub const IF_SOME: ExpireCond = ExpireCond {
        nx: false,
        xx: true,
        gt: false,
        lt: false,
    };

    /// Whether setting deadline `new` applies to a key whose deadline is `old` (0: none).
    pub fn applies(&self, old: u64, new: u64) -> bool {
        let none = old == 0;
        !(self.nx && !none
            || self.xx && none
            || self.gt && (none || new <= old)
            || self.lt && !none && new >= old)
    }
}

/// One write.
#[derive(Clone, Debug)]
pub enum Write<'a> {
    /// Sets the value, whatever it was (binary PUT, plain SET, MSET).
    Put(Cow<'a, [u8]>),
    /// Sets the value under a condition, answering the old value if `get` (SET NX|XX|GET,
    /// SETNX, GETSET).
    Set {
        /// The new value.
        value: Cow<'a, [u8]>,
        /// When it applies.
        cond: Cond,
        /// Whether the old value is the answer.
        get: bool,
        /// The deadline it sets (or keeps).
        ttl: Ttl,
    },
    /// Sets the key's deadline (0: removes it, PERSIST); a deadline already past removes
    /// the key. Answers `Done` if it applied, `Skipped` if the key is absent or `cond`
    /// failed.
    Expire {
        /// The new deadline (ms since the Unix epoch; 0: none).
        deadline: u64,
        /// When it applies.
        cond: ExpireCond,
    },
    /// Answers the value and changes the deadline (GETEX): `None` leaves it, `Some(0)`
    /// removes it, a deadline already past removes the key.
    GetEx(Option<u64>),
    /// Changes nothing and answers the key's deadline (TTL, PTTL, EXPIRETIME).
    ReadDeadline,
    /// Replaces the value of a present key (binary UPDATE).
    Update(Cow<'a, [u8]>),
    /// Removes a present key (binary DELETE, RESP DEL).
    Delete,
    /// Removes the key without looking (FLUSHALL).
    Remove,
    /// Adds to a decimal integer value, absent counting as 0, overflow an error (INCRBY).
    IncrBy(i64),
    /// Adds to a decimal floating-point value, absent counting as 0 (INCRBYFLOAT).
    IncrByFloat(f64),
    /// Appends to the value, absent counting as empty; answers the new length (APPEND).
    Append(Cow<'a, [u8]>),
    /// Overwrites part of the value at a byte offset, padding with zero bytes; answers the
    /// new length (SETRANGE). An empty patch of an absent key creates nothing.
    SetRange {
        /// Where the patch starts.
        offset: usize,
        /// The bytes written there.
        patch: Cow<'a, [u8]>,
    },
    /// Sets or clears the bit at `offset` (bit 0 the most significant of byte 0), growing
    /// the value with zero bytes as needed; answers the bit's old value (SETBIT).
    SetBit {
        /// The bit's position.
        offset: u64,
        /// Set (true) or clear it.
        bit: bool,
    },
    /// Removes the key and answers its value (GETDEL).
    GetDel,
    /// Changes nothing and answers the value: a read ordered with the writes around it
    /// (GET and the other reads inside a transaction).
    Read,
    /// Adds to one 8-byte integer element, absent counting as 0; answers the original bytes.
    FetchAdd {
        /// Element type (`U64` or `I64`).
        elem: Elem,
        /// What an out-of-range sum does.
        overflow: Overflow,
        /// The addend.
        delta: i64,
    },
    /// Sets `new` if the value is `expected` (`None`: the key is absent).
    Cas {
        /// The value required.
        expected: Option<Cow<'a, [u8]>>,
        /// The value set.
        new: Cow<'a, [u8]>,
    },
    /// An item write or versioned read (`item.rs`), which also sees and sets the
    /// item's client flags and compares its CAS unique.
    Item(super::item::ItemWrite<'a>),
    /// Changes nothing and answers the item, typed or not: its value, deadline and client
    /// flags ([`Outcome::Item`], its CAS unique 0), or [`Outcome::Skipped`] when absent.
    ReadItem,
    /// Sets a typed value (`typed.rs`) with these client flags, keeping the key's deadline
    /// (a new key gets none); `None` removes the key. An adapter's write of its own
    /// encoding (a collection's metadata record).
    Typed {
        /// The new value (`None`: remove the key).
        value: Option<Cow<'a, [u8]>>,
        /// Its client flags.
        flags: u32,
    },
    /// A KV-Direct vector operation on a present key.
    Vector(VectorCall<'a>),
}

fn parse_i64(a: &[u8]) -> Option<i64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

impl<'a> Write<'a> {
    /// Whether the outcome depends on the current value (false: the station need not read
    /// the key).
    pub fn reads(&self) -> bool {
        if let Write::Item(m) = self {
            return m.reads();
        }
        !matches!(
            self,
            Write::Put(_)
                | Write::Remove
                | Write::Set {
                    cond: Cond::Always,
                    get: false,
                    ttl: Ttl::Set(_),
                    ..
                }
        )
    }

    /// The same write owning its operands (to wait in another thread's queue).
    pub fn into_owned(self) -> Write<'static> {
        let own = |c: Cow<'a, [u8]>| Cow::Owned(c.into_owned());
        match self {
            Write::Put(v) => Write::Put(own(v)),
            Write::Item(m) => Write::Item(m.into_owned()),
            Write::Set {
                value,
                cond,
                get,
                ttl,
            } => Write::Set {
                value: own(value),
                cond,
                get,
                ttl,
            },
            Write::Expire { deadline, cond } => Write::Expire { deadline, cond },
            Write::GetEx(t) => Write::GetEx(t),
            Write::ReadDeadline => Write::ReadDeadline,
            Write::Update(v) => Write::Update(own(v)),
            Write::Delete => Write::Delete,
            Write::Remove => Write::Remove,
            Write::IncrBy(n) => Write::IncrBy(n),
            Write::IncrByFloat(n) => Write::IncrByFloat(n),
            Write::Append(v) => Write::Append(own(v)),
            Write::SetRange { offset, patch } => Write::SetRange {
                offset,
                patch: own(patch),
            },
            Write::SetBit { offset, bit } => Write::SetBit { offset, bit },
            Write::GetDel => Write::GetDel,
            Write::Read => Write::Read,
            Write::FetchAdd {
                elem,
                overflow,
                delta,
            } => Write::FetchAdd {
                elem,
                overflow,
                delta,
            },
            Write::Cas { expected, new } => Write::Cas {
                expected: expected.map(own),
                new: own(new),
            },
            Write::ReadItem => Write::ReadItem,
            Write::Typed { value, flags } => Write::Typed {
                value: value.map(own),
                flags,
            },
            Write::Vector(call) => Write::Vector(call.into_owned()),
        }
    }

    /// [`Write::apply`] on the key's whole current item: its value, deadline, client flags
    /// and (for an item write that compares or answers it) version. What the
    /// reservation station calls.
    pub fn apply_item(
        self,
        cur: &super::item::Current<'_>,
        registry: &Registry,
        max_value: usize,
    ) -> (Effect<'a>, Outcome) {
        if let Write::ReadItem = self {
            return read_item(cur.value, cur.deadline, cur.flags);
        }
        if cur.value.is_some() && super::typed::is_typed(cur.flags) {
            return self.apply_typed(cur, registry, max_value);
        }
        match self {
            Write::Item(m) => m.apply(cur, max_value),
            w => w.apply(cur.value, cur.deadline, registry, max_value),
        }
    }

    /// Whether the write works on the value's bytes (and so refuses a typed value).
    fn is_byte_level(&self) -> bool {
        match self {
            Write::Item(m) => m.is_byte_level(),
            Write::Set { get, .. } => *get,
            Write::IncrBy(_)
            | Write::IncrByFloat(_)
            | Write::Append(_)
            | Write::SetRange { .. }
            | Write::SetBit { .. }
            | Write::GetDel
            | Write::GetEx(_)
            | Write::Read
            | Write::FetchAdd { .. }
            | Write::Cas { .. }
            | Write::Vector(_) => true,
            Write::Put(_)
            | Write::Expire { .. }
            | Write::ReadDeadline
            | Write::Update(_)
            | Write::Delete
            | Write::Remove
            | Write::ReadItem
            | Write::Typed { .. } => false,
        }
    }

    /// [`Write::apply_item`] on a present typed value: byte-level writes refuse it; a
    /// whole-value write that would keep the flags (SET KEEPTTL) clears them, so what it
    /// leaves is a plain value.
    fn apply_typed(
        self,
        cur: &super::item::Current<'_>,
        registry: &Registry,
        max_value: usize,
    ) -> (Effect<'a>, Outcome) {
        if self.is_byte_level() {
            return (Effect::Keep, Outcome::Failed(Failure::WrongType));
        }
        let (effect, outcome) = match self {
            Write::Item(m) => m.apply(cur, max_value),
            w => w.apply(cur.value, cur.deadline, registry, max_value),
        };
        match effect {
            Effect::Set(v, Ttl::Keep) => (Effect::SetItem(v, cur.deadline, 0), outcome),
            e => (e, outcome),
        }
    }

    /// Runs the write on the key's current value `cur` (`None`: absent; always `None` when
    /// [`Write::reads`] is false) and its deadline `deadline` (0: none): its effect and its
    /// answer. `max_value` bounds what APPEND and SETRANGE may grow a value to. An item
    /// write sees flags 0 and version 0 here: [`Write::apply_item`] gives it the item's.
    pub fn apply(
        self,
        cur: Option<&[u8]>,
        deadline: u64,
        registry: &Registry,
        max_value: usize,
    ) -> (Effect<'a>, Outcome) {
        let keep = |o: Outcome| (Effect::Keep, o);
        let past = |d: u64| d != 0 && d <= accelkv_tree::now_ms();
        match self {
            Write::Item(m) => {
                let cur = super::item::Current {
                    value: cur,
                    deadline,
                    flags: 0,
                    version: 0,
                };
                m.apply(&cur, max_value)
            }
            Write::Expire {
                deadline: new,
                cond,
            } => {
                if cur.is_none() || !cond.applies(deadline, new) {
                    return keep(Outcome::Skipped);
                }
                if past(new) {
                    return (Effect::Remove, Outcome::Done);
                }
                (Effect::SetDeadline(new), Outcome::Done)
            }
            Write::GetEx(t) => get_ex(cur, deadline, t),
            Write::ReadDeadline => keep(Outcome::Deadline(cur.map(|_| deadline))),
            Write::IncrByFloat(by) => incr_by_float(cur, by),
            Write::Append(v) => append(cur, &v, max_value),
            Write::SetRange { offset, patch } => set_range(cur, offset, &patch, max_value),
            Write::SetBit { offset, bit } => set_bit(cur, offset, bit, max_value),
            Write::GetDel => match cur {
                None => keep(Outcome::Old(None)),
                Some(v) => (Effect::Remove, Outcome::Old(Some(v.to_vec()))),
            },
            Write::Read => keep(Outcome::Old(cur.map(<[u8]>::to_vec))),
            Write::ReadItem => read_item(cur, deadline, 0),
            Write::Put(v) => (Effect::Set(v, Ttl::Set(0)), Outcome::Done),
            Write::Remove => (Effect::Remove, Outcome::Done),
            Write::Typed { value, flags } => typed(cur, deadline, value, flags),
            Write::Set {
                value,
                cond,
                get,
                ttl,
            } => set(cur, value, cond, get, ttl),
            Write::Update(v) => match cur {
                None => keep(Outcome::Skipped),
                Some(_) => (Effect::Set(v, Ttl::Set(0)), Outcome::Done),
            },
            Write::Delete => match cur {
                None => keep(Outcome::Skipped),
                Some(_) => (Effect::Remove, Outcome::Done),
            },
            Write::IncrBy(by) => incr_by(cur, by),
            Write::FetchAdd {
                elem,
                overflow,
                delta,
            } => fetch_add(cur, elem, overflow, delta),
            Write::Cas { expected, new } => {
                if cur == expected.as_deref() {
                    (Effect::Set(new, Ttl::Keep), Outcome::Done)
                } else {
                    keep(Outcome::Mismatch {
                        absent: cur.is_none(),
                    })
                }
            }
            Write::Vector(call) => vector_op(cur, registry, &call),
        }
    }
}

/// ReadItem: the item, typed or not, or Skipped when absent.
fn read_item<'a>(cur: Option<&[u8]>, deadline: u64, flags: u32) -> (Effect<'a>, Outcome) {
    let Some(v) = cur else {
        return (Effect::Keep, Outcome::Skipped);
    };
    let item = super::item::VersionedItem {
        value: v.to_vec(),
        flags,
        deadline,
        cas: 0,
    };
    (Effect::Keep, Outcome::Item(Box::new(item)))
}

/// Typed: sets the typed value keeping a present key's deadline, or removes the key.
fn typed<'a>(
    cur: Option<&[u8]>,
    deadline: u64,
    value: Option<Cow<'a, [u8]>>,
    flags: u32,
) -> (Effect<'a>, Outcome) {
    match value {
        None => (Effect::Remove, Outcome::Done),
        Some(v) => {
            let keep = if cur.is_some() { deadline } else { 0 };
            (Effect::SetItem(v, keep, flags), Outcome::Done)
        }
    }
}

/// A KV-Direct vector operation on a present value.
fn vector_op<'a>(
    cur: Option<&[u8]>,
    registry: &Registry,
    call: &VectorCall<'_>,
) -> (Effect<'a>, Outcome) {
    let Some(cur) = cur else {
        return (Effect::Keep, Outcome::Skipped);
    };
    match vector::run(registry, call, cur) {
        Err(e) => (Effect::Keep, Outcome::Failed(Failure::Vector(e))),
        Ok(r) => {
            let effect = r.new_value.map_or(Effect::Keep, modified);
            (effect, Outcome::Bytes(r.reply))
        }
    }
}

/// SET with its condition (NX, XX) and GET.
fn set<'a>(
    cur: Option<&[u8]>,
    value: Cow<'a, [u8]>,
    cond: Cond,
    get: bool,
    ttl: Ttl,
) -> (Effect<'a>, Outcome) {
    let applies = match cond {
        Cond::Always => true,
        Cond::IfAbsent => cur.is_none(),
        Cond::IfPresent => cur.is_some(),
    };
    let answer = match (get, applies) {
        (true, _) => Outcome::Old(cur.map(<[u8]>::to_vec)),
        (false, true) => Outcome::Done,
        (false, false) => Outcome::Skipped,
    };
    if applies {
        (Effect::Set(value, ttl), answer)
    } else {
        (Effect::Keep, answer)
    }
}

/// A value changed in place: the deadline is kept.
fn modified<'a>(v: Vec<u8>) -> Effect<'a> {
    Effect::Set(Cow::Owned(v), Ttl::Keep)
}

/// GETEX: the value, and its deadline changed to `t` (`None`: kept; past: removed).
fn get_ex<'a>(cur: Option<&[u8]>, deadline: u64, t: Option<u64>) -> (Effect<'a>, Outcome) {
    let Some(v) = cur else {
        return (Effect::Keep, Outcome::Old(None));
    };
    let answer = Outcome::Old(Some(v.to_vec()));
    match t {
        None => (Effect::Keep, answer),
        Some(d) if d != 0 && d <= accelkv_tree::now_ms() => (Effect::Remove, answer),
        Some(d) if d == deadline => (Effect::Keep, answer),
        Some(d) => (Effect::SetDeadline(d), answer),
    }
}

/// INCRBYFLOAT: the value as a finite float (absent: 0) plus `by`, written as Redis does.
fn incr_by_float<'a>(cur: Option<&[u8]>, by: f64) -> (Effect<'a>, Outcome) {
    let old = match cur {
        None => 0.0,
        Some(v) => match std::str::from_utf8(v)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
        {
            Some(n) if n.is_finite() => n,
            _ => return (Effect::Keep, Outcome::Failed(Failure::NotFloat)),
        },
    };
    let n = old + by;
    if !n.is_finite() {
        return (Effect::Keep, Outcome::Failed(Failure::NotFinite));
    }
    let text = format_float(n);
    (
        modified(text.clone().into_bytes()),
        Outcome::Bytes(text.into_bytes()),
    )
}

/// APPEND: the new length, or too large past `max_value`.
fn append<'a>(cur: Option<&[u8]>, v: &[u8], max_value: usize) -> (Effect<'a>, Outcome) {
    let old = cur.unwrap_or_default();
    if old.len() + v.len() > max_value {
        return (Effect::Keep, Outcome::Failed(Failure::TooLarge));
    }
    let mut new = Vec::with_capacity(old.len() + v.len());
    new.extend_from_slice(old);
    new.extend_from_slice(v);
    let len = new.len() as i64;
    (modified(new), Outcome::Int(len))
}

/// SETBIT: the bit at `offset` set or cleared (the value grown with zero bytes to hold it,
/// too large past `max_value`), its old value.
fn set_bit<'a>(
    cur: Option<&[u8]>,
    offset: u64,
    bit: bool,
    max_value: usize,
) -> (Effect<'a>, Outcome) {
    let old = cur.unwrap_or_default();
    let byte = (offset / 8) as usize;
    let mask = 0x80u8 >> (offset % 8);
    if byte >= max_value {
        return (Effect::Keep, Outcome::Failed(Failure::TooLarge));
    }
    let was = old.get(byte).is_some_and(|b| b & mask != 0);
    if was == bit && cur.is_some() && byte < old.len() {
        return (Effect::Keep, Outcome::Int(i64::from(was)));
    }
    let mut new = old.to_vec();
    if new.len() <= byte {
        new.resize(byte + 1, 0);
    }
    if bit {
        new[byte] |= mask;
    } else {
        new[byte] &= !mask;
    }
    (modified(new), Outcome::Int(i64::from(was)))
}

/// SETRANGE: `patch` written at `offset` (zero-padded), the new length.
fn set_range<'a>(
    cur: Option<&[u8]>,
    offset: usize,
    patch: &[u8],
    max_value: usize,
) -> (Effect<'a>, Outcome) {
    let old = cur.unwrap_or_default();
    if patch.is_empty() {
        return (Effect::Keep, Outcome::Int(old.len() as i64));
    }
    let end = offset.saturating_add(patch.len());
    if end > max_value {
        return (Effect::Keep, Outcome::Failed(Failure::TooLarge));
    }
    let mut new = old.to_vec();
    if new.len() < end {
        new.resize(end, 0);
    }
    new[offset..end].copy_from_slice(patch);
    let len = new.len() as i64;
    (modified(new), Outcome::Int(len))
}

/// INCRBY: the value as a 64-bit integer (absent: 0) plus `by`, overflow refused.
fn incr_by<'a>(cur: Option<&[u8]>, by: i64) -> (Effect<'a>, Outcome) {
    let old = match cur {
        None => 0,
        Some(v) => match parse_i64(v) {
            Some(n) => n,
            None => return (Effect::Keep, Outcome::Failed(Failure::NotInteger)),
        },
    };
    match old.checked_add(by) {
        None => (Effect::Keep, Outcome::Failed(Failure::IncrOverflow)),
        Some(n) => (modified(n.to_string().into_bytes()), Outcome::Int(n)),
    }
}

/// A float as Redis's INCRBYFLOAT writes it: plain decimal, no exponent, trailing zeros
/// dropped (`10.5`, `3`, `0.1`).
/// A float as Redis writes INCRBYFLOAT's result.
pub fn format_float(n: f64) -> String {
    let t = format!("{n:.17}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    // The shortest text that reads back as the same float, when it is shorter.
    let short = format!("{n}");
    if !short.contains('e') && short.len() < t.len() {
        short
    } else {
        t.to_string()
    }
}

/// A fetch-and-add's original and new 8 bytes, or why it fails (a value that is not 8
/// bytes, an element that is not an 8-byte integer, an overflow under `checked`).
pub(crate) fn fetch_add_bytes(
    cur: Option<&[u8]>,
    elem: Elem,
    overflow: Overflow,
    delta: i64,
) -> Result<([u8; 8], [u8; 8]), VectorError> {
    let old = match cur {
        None => [0u8; 8],
        Some(c) => <[u8; 8]>::try_from(c).map_err(|_| {
            VectorError::BadLength(format!(
                "fetch-and-add needs an 8-byte value, not {} bytes",
                c.len()
            ))
        })?,
    };
    if elem.width() != 8 {
        return Err(VectorError::TypeMismatch(format!(
            "fetch-and-add takes U64 or I64 elements, not {elem:?}"
        )));
    }
    let Scalar::Int(o) = elem.read(&old) else {
        return Err(VectorError::TypeMismatch(format!(
            "fetch-and-add takes integer elements, not {elem:?}"
        )));
    };
    let n = overflow.fit(elem, o + i128::from(delta))?;
    let mut new = [0u8; 8];
    new.copy_from_slice(&(n as u64).to_le_bytes());
    Ok((old, new))
}

fn fetch_add(
    cur: Option<&[u8]>,
    elem: Elem,
    overflow: Overflow,
    delta: i64,
) -> (Effect<'static>, Outcome) {
    match fetch_add_bytes(cur, elem, overflow, delta) {
        Err(e) => (Effect::Keep, Outcome::Failed(Failure::Vector(e))),
        Ok((old, new)) => (
            Effect::Set(Cow::Owned(new.to_vec()), Ttl::Keep),
            Outcome::Fetched(old),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(w: Write<'_>, cur: Option<&[u8]>) -> (Option<Option<Vec<u8>>>, Outcome) {
        let (e, o) = w.apply(cur, 0, &Registry::default(), 1 << 20);
        let e = match e {
            Effect::Keep | Effect::SetDeadline(_) => None,
            Effect::Set(v, _) | Effect::SetItem(v, ..) => Some(Some(v.into_owned())),
            Effect::Remove => Some(None),
        };
        (e, o)
    }

    /// The effect on (value, deadline) of `w` on a key with value `cur` and `deadline`.
    fn apply_ttl(w: Write<'_>, cur: Option<&[u8]>, deadline: u64) -> (String, Outcome) {
        let (e, o) = w.apply(cur, deadline, &Registry::default(), 1 << 20);
        let e = match e {
            Effect::Keep => "keep".to_string(),
            Effect::Set(_, Ttl::Keep) => "set keep-ttl".to_string(),
            Effect::Set(_, Ttl::Set(d)) | Effect::SetItem(_, d, _) => format!("set ttl {d}"),
            Effect::SetDeadline(d) => format!("deadline {d}"),
            Effect::Remove => "remove".to_string(),
        };
        (e, o)
    }

    #[test]
    fn expiry_follows_redis() {
        let far = accelkv_tree::now_ms() + 100_000;
        let (later, past) = (far + 1, 5);
        let exp = |deadline, cond| Write::Expire { deadline, cond };
        let c = |nx, xx, gt, lt| ExpireCond { nx, xx, gt, lt };
        let (always, if_none, if_some) = (
            ExpireCond::default(),
            c(true, false, false, false),
            ExpireCond::IF_SOME,
        );
        let (gt, lt) = (c(false, false, true, false), c(false, false, false, true));
        // XX LT: a deadline is needed, and the new one must be earlier.
        assert_eq!(
            apply_ttl(exp(far, c(false, true, false, true)), Some(b"v"), 0).1,
            Outcome::Skipped
        );
        assert_eq!(
            apply_ttl(exp(far, c(false, true, false, true)), Some(b"v"), later).1,
            Outcome::Done
        );
        let one = Outcome::Done;
        let zero = Outcome::Skipped;
        assert_eq!(
            apply_ttl(exp(far, always), None, 0),
            ("keep".into(), zero.clone())
        );
        assert_eq!(
            apply_ttl(exp(far, always), Some(b"v"), 0),
            (format!("deadline {far}"), one.clone())
        );
        assert_eq!(
            apply_ttl(exp(past, always), Some(b"v"), 0),
            ("remove".into(), one.clone())
        );
        // NX/XX on whether there is a deadline; GT/LT with "none" as infinitely late.
        assert_eq!(apply_ttl(exp(far, if_none), Some(b"v"), far).1, zero);
        assert_eq!(apply_ttl(exp(far, if_none), Some(b"v"), 0).1, one);
        assert_eq!(apply_ttl(exp(far, if_some), Some(b"v"), 0).1, zero);
        assert_eq!(apply_ttl(exp(later, if_some), Some(b"v"), far).1, one);
        assert_eq!(apply_ttl(exp(later, gt), Some(b"v"), far).1, one);
        assert_eq!(apply_ttl(exp(far, gt), Some(b"v"), later).1, zero);
        assert_eq!(apply_ttl(exp(far, gt), Some(b"v"), 0).1, zero);
        assert_eq!(apply_ttl(exp(far, lt), Some(b"v"), 0).1, one);
        assert_eq!(apply_ttl(exp(later, lt), Some(b"v"), far).1, zero);
        // PERSIST is EXPIRE to "none" on a key that has a deadline.
        assert_eq!(
            apply_ttl(exp(0, if_some), Some(b"v"), far),
            ("deadline 0".into(), one)
        );
        assert_eq!(apply_ttl(exp(0, if_some), Some(b"v"), 0).1, zero);
        // Wholesale replacement clears the deadline, in-place changes keep it.
        assert_eq!(apply_ttl(Write::Put(b("x")), None, far).0, "set ttl 0");
        assert_eq!(
            apply_ttl(Write::IncrBy(1), Some(b"1"), far).0,
            "set keep-ttl"
        );
        assert_eq!(
            apply_ttl(Write::Append(b("x")), Some(b"1"), far).0,
            "set keep-ttl"
        );
        let set_ex = Write::Set {
            value: b("x"),
            cond: Cond::Always,
            get: false,
            ttl: Ttl::Set(far),
        };
        assert_eq!(apply_ttl(set_ex, None, 0).0, format!("set ttl {far}"));
        // GETEX answers the value and changes only the deadline.
        let old = Outcome::Old(Some(b"v".to_vec()));
        assert_eq!(
            apply_ttl(Write::GetEx(Some(far)), Some(b"v"), 0),
            (format!("deadline {far}"), old.clone())
        );
        assert_eq!(
            apply_ttl(Write::GetEx(Some(0)), Some(b"v"), far),
            ("deadline 0".into(), old.clone())
        );
        assert_eq!(
            apply_ttl(Write::GetEx(None), Some(b"v"), far),
            ("keep".into(), old.clone())
        );
        assert_eq!(
            apply_ttl(Write::GetEx(Some(past)), Some(b"v"), 0),
            ("remove".into(), old)
        );
        assert_eq!(
            apply_ttl(Write::ReadDeadline, Some(b"v"), far).1,
            Outcome::Deadline(Some(far))
        );
        assert_eq!(
            apply_ttl(Write::ReadDeadline, None, 0).1,
            Outcome::Deadline(None)
        );
    }

    fn b(s: &str) -> Cow<'_, [u8]> {
        Cow::Borrowed(s.as_bytes())
    }

    #[test]
    fn set_conditions_and_get() {
        let set = |cond, get| Write::Set {
            value: b("new"),
            cond,
            get,
            ttl: Ttl::Set(0),
        };
        let new = Some(Some(b"new".to_vec()));
        assert_eq!(
            apply(set(Cond::IfAbsent, false), None),
            (new.clone(), Outcome::Done)
        );
        assert_eq!(
            apply(set(Cond::IfAbsent, false), Some(b"x")),
            (None, Outcome::Skipped)
        );
        assert_eq!(
            apply(set(Cond::IfPresent, false), None),
            (None, Outcome::Skipped)
        );
        assert_eq!(
            apply(set(Cond::IfPresent, true), Some(b"x")),
            (new.clone(), Outcome::Old(Some(b"x".to_vec())))
        );
        assert_eq!(
            apply(set(Cond::IfAbsent, true), Some(b"x")),
            (None, Outcome::Old(Some(b"x".to_vec())))
        );
        assert_eq!(
            apply(set(Cond::Always, true), None),
            (new, Outcome::Old(None))
        );
    }

    #[test]
    fn incr_checks_integers_and_overflow() {
        assert_eq!(
            apply(Write::IncrBy(5), None),
            (Some(Some(b"5".to_vec())), Outcome::Int(5))
        );
        assert_eq!(
            apply(Write::IncrBy(-3), Some(b"10")),
            (Some(Some(b"7".to_vec())), Outcome::Int(7))
        );
        assert_eq!(
            apply(Write::IncrBy(1), Some(b"abc")),
            (None, Outcome::Failed(Failure::NotInteger))
        );
        let max = i64::MAX.to_string();
        assert_eq!(
            apply(Write::IncrBy(1), Some(max.as_bytes())),
            (None, Outcome::Failed(Failure::IncrOverflow))
        );
    }

    #[test]
    fn fetch_add_and_cas() {
        let fa = |delta, overflow| Write::FetchAdd {
            elem: Elem::U64,
            overflow,
            delta,
        };
        let (e, o) = apply(fa(2, Overflow::Wrap), Some(&u64::MAX.to_le_bytes()));
        assert_eq!(e, Some(Some(1u64.to_le_bytes().to_vec())));
        assert_eq!(o, Outcome::Fetched(u64::MAX.to_le_bytes()));
        let (e, o) = apply(fa(2, Overflow::Checked), Some(&u64::MAX.to_le_bytes()));
        assert_eq!(
            (e, o),
            (
                None,
                Outcome::Failed(Failure::Vector(VectorError::Overflow))
            )
        );
        let (e, o) = apply(fa(1, Overflow::Wrap), Some(b"short"));
        assert!(
            e.is_none()
                && matches!(
                    o,
                    Outcome::Failed(Failure::Vector(VectorError::BadLength(_)))
                )
        );
        let cas = |expected: Option<&'static str>| Write::Cas {
            expected: expected.map(b),
            new: b("n"),
        };
        assert_eq!(
            apply(cas(None), None),
            (Some(Some(b"n".to_vec())), Outcome::Done)
        );
        assert_eq!(
            apply(cas(None), Some(b"x")),
            (None, Outcome::Mismatch { absent: false })
        );
        assert_eq!(
            apply(cas(Some("x")), None),
            (None, Outcome::Mismatch { absent: true })
        );
    }

    #[test]
    fn setbit_grows_with_zero_bytes_and_answers_the_old_bit() {
        let set = |v: &[u8]| Some(Some(v.to_vec()));
        let bit = |offset, bit| Write::SetBit { offset, bit };
        // Bit 0 is the most significant bit of byte 0, as Redis's.
        assert_eq!(apply(bit(0, true), None), (set(&[0x80]), Outcome::Int(0)));
        assert_eq!(apply(bit(7, false), None), (set(&[0]), Outcome::Int(0)));
        assert_eq!(
            apply(bit(17, true), Some(&[0xff])),
            (set(&[0xff, 0, 0x40]), Outcome::Int(0))
        );
        assert_eq!(apply(bit(1, true), Some(&[0x40])), (None, Outcome::Int(1)));
        assert_eq!(
            apply(bit(1, false), Some(&[0x40])),
            (set(&[0]), Outcome::Int(1))
        );
        let (_, o) = Write::SetBit {
            offset: 8 << 20,
            bit: true,
        }
        .apply(None, 0, &Registry::default(), 1 << 20);
        assert_eq!(o, Outcome::Failed(Failure::TooLarge));
    }

    #[test]
    fn append_setrange_getdel_incrbyfloat() {
        let set = |v: &[u8]| Some(Some(v.to_vec()));
        assert_eq!(
            apply(Write::Append(b("lo")), Some(b"hel")),
            (set(b"hello"), Outcome::Int(5))
        );
        assert_eq!(
            apply(Write::Append(b("x")), None),
            (set(b"x"), Outcome::Int(1))
        );
        let sr = |offset, p: &'static str| Write::SetRange {
            offset,
            patch: b(p),
        };
        assert_eq!(
            apply(sr(6, "Redis"), Some(b"Hello World")),
            (set(b"Hello Redis"), Outcome::Int(11))
        );
        assert_eq!(apply(sr(2, "ab"), None), (set(b"\0\0ab"), Outcome::Int(4)));
        assert_eq!(apply(sr(3, ""), None), (None, Outcome::Int(0)));
        let (e, o) = Write::SetRange {
            offset: 10,
            patch: b("x"),
        }
        .apply(None, 0, &Registry::default(), 8);
        assert!(matches!(e, Effect::Keep) && o == Outcome::Failed(Failure::TooLarge));
        assert_eq!(
            apply(Write::GetDel, Some(b"v")),
            (Some(None), Outcome::Old(Some(b"v".to_vec())))
        );
        assert_eq!(apply(Write::GetDel, None), (None, Outcome::Old(None)));
        let f = |by, cur: Option<&[u8]>| apply(Write::IncrByFloat(by), cur);
        assert_eq!(
            f(0.1, Some(b"10.50")),
            (set(b"10.6"), Outcome::Bytes(b"10.6".to_vec()))
        );
        assert_eq!(
            f(-5.0, Some(b"5.0e3")),
            (set(b"4995"), Outcome::Bytes(b"4995".to_vec()))
        );
        assert_eq!(f(1.5, None), (set(b"1.5"), Outcome::Bytes(b"1.5".to_vec())));
        assert_eq!(
            f(1.0, Some(b"abc")),
            (None, Outcome::Failed(Failure::NotFloat))
        );
        assert_eq!(
            f(f64::MAX, Some(b"1.7976931348623157e308")),
            (None, Outcome::Failed(Failure::NotFinite))
        );
        assert_eq!(
            f(f64::INFINITY, Some(b"0")),
            (None, Outcome::Failed(Failure::NotFinite))
        );
    }

    #[test]
    fn update_delete_need_the_key() {
        assert_eq!(apply(Write::Update(b("v")), None), (None, Outcome::Skipped));
        assert_eq!(apply(Write::Delete, None), (None, Outcome::Skipped));
        assert_eq!(
            apply(Write::Delete, Some(b"v")),
            (Some(None), Outcome::Done)
        );
        assert!(!Write::Put(b("v")).reads() && !Write::Remove.reads());
        assert!(Write::Delete.reads());
        let owned = Write::Put(b("v")).into_owned();
        assert!(matches!(owned, Write::Put(Cow::Owned(ref v)) if v == b"v"));
    }
}

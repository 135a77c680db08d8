//! What a write does and answers, apart from the writes themselves: the effect on the
//! value ([`Effect`], with the deadline's [`Ttl`]), the answer ([`Outcome`], an item's
//! [`VersionedItem`] among them) and why a write was refused ([`Failure`]). Both kinds of
//! write (`write.rs`, `item.rs`) produce them, and the protocol adapters turn them into
//! replies; they live here so that neither kind of write imports the other's results.

use super::vector::VectorError;
use std::borrow::Cow;

/// What setting a value does to the key's deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    /// Keeps the deadline the key had (KEEPTTL; in-place changes).
    Keep,
    /// Sets this deadline (0: none).
    Set(u64),
}

/// What a write does to the value.
#[derive(Debug)]
pub enum Effect<'a> {
    /// Leaves it.
    Keep,
    /// Replaces it (inserting the key if absent), and sets or keeps the deadline. Setting a
    /// deadline replaces the value wholesale, so the client flags go back to 0; keeping it
    /// (an in-place change) keeps them.
    Set(Cow<'a, [u8]>, Ttl),
    /// Replaces it with this deadline (0: none) and these client flags (an item write).
    SetItem(Cow<'a, [u8]>, u64, u32),
    /// Keeps the value (the key is present) and sets its deadline (0: none).
    SetDeadline(u64),
    /// Removes the key.
    Remove,
}

/// What a write answers (before it is mapped to a protocol's reply).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Applied.
    Done,
    /// Not applied: the key is absent (UPDATE, DELETE, vector) or SET's condition failed.
    Skipped,
    /// SET … GET / GETSET: the value before (whether or not the SET applied).
    Old(Option<Vec<u8>>),
    /// INCRBY: the new value.
    Int(i64),
    /// The key's deadline: `None` absent, `Some(0)` no deadline.
    Deadline(Option<u64>),
    /// Fetch-and-add: the original 8 bytes.
    Fetched([u8; 8]),
    /// An item's unsigned arithmetic: the new value.
    Uint(u64),
    /// Item arithmetic on a miss, asked to create: the item was created with this initial value.
    Created(u64),
    /// A versioned read: the item.
    Item(Box<VersionedItem>),
    /// A vector operation's reply.
    Bytes(Vec<u8>),
    /// CAS found another value (`absent`: no value at all).
    Mismatch {
        /// Whether the key was absent.
        absent: bool,
    },
    /// Refused; the value is unchanged.
    Failed(Failure),
}

/// Why a write was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// INCRBY on a value that is not a decimal 64-bit integer.
    NotInteger,
    /// INCRBY past the 64-bit range.
    IncrOverflow,
    /// INCRBYFLOAT on a value that is not a number.
    NotFloat,
    /// INCRBYFLOAT to a NaN or an infinity.
    NotFinite,
    /// A value would grow past the store's largest value (SETRANGE, APPEND).
    TooLarge,
    /// A fetch-and-add or vector operation's own error.
    Vector(VectorError),
    /// A byte-level write on a typed value (`typed.rs`): Redis's WRONGTYPE.
    WrongType,
    /// The operation was dropped without running (an internal error).
    Lost,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NotInteger => f.write_str("value is not an integer or out of range"),
            Failure::IncrOverflow => f.write_str("increment or decrement would overflow"),
            Failure::NotFloat => f.write_str("value is not a valid float"),
            Failure::NotFinite => f.write_str("increment would produce NaN or Infinity"),
            Failure::TooLarge => f.write_str("string exceeds maximum allowed size"),
            Failure::Vector(e) => e.fmt(f),
            Failure::WrongType => {
                f.write_str("Operation against a key holding the wrong kind of value")
            }
            Failure::Lost => f.write_str("internal error: the write was lost"),
        }
    }
}

/// An item as a versioned read found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedItem {
    pub value: Vec<u8>,
    pub flags: u32,
    /// ms since the Unix epoch; 0: none.
    pub deadline: u64,
    pub cas: u64,
}

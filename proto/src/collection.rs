//! The byte format of Redis's collection types on the ordered store (docs/FORMAT.md,
//! "Redis types"), Kvrocks-style: a metadata record under the user's key, marked as typed
//! by its client flags, and one subkey per field or member in a reserved part of the key
//! space. Pure code: the server's RESP adapter (`server/src/resp/commands/types/`) gives it
//! meaning; the fuzz target `collection_meta` feeds the decoders arbitrary bytes.
//!
//! - The metadata record is an item whose client flags are `TYPED_BASE | tag` and whose
//!   value is `FE C0 | tag u8 | format u8 (1) | id u64 | len u64`, and for a list
//!   `| head u64 | tail u64` (big-endian); a stream's record has the same two words, holding
//!   its last id's milliseconds and sequence number.
//! - A subkey is `FF FF | key length u16 | key | id u64 | part u8 | rest`: `part` `f` and
//!   the field (hash: the field's value; set: an empty value; list: the element's sequence
//!   number, 8 bytes big-endian, holding the element; sorted set: the member, holding its
//!   score as 8 sortable bytes), or for a sorted set `part` `s`, the score's 8 sortable
//!   bytes and the member (an empty value): the score index. A stream's entry is the field
//!   with its id (milliseconds u64, sequence u64, big-endian, so key order is id order),
//!   holding its field-value pairs ([`encode_entry`]). Every subkey of one
//!   collection shares the prefix up to `part`, so the collection is one contiguous range.
//! - `id` is unique per collection ever created under a key, so the subkeys of a deleted,
//!   expired or overwritten collection are named by no live metadata.
//! - Keys beginning with `FF FF` are reserved for subkeys: no client writes them.

/// The reserved part of the key space: every key beginning with these bytes.
pub const RESERVED: [u8; 2] = [0xFF, 0xFF];
/// Client flags of a typed item: `TYPED_BASE | tag` for a one-byte type tag.
pub const TYPED_BASE: u32 = 0xFEC0_0000;
/// The bits that identify the typed range of client flags.
pub const TYPED_MASK: u32 = 0xFFFF_FF00;

/// Whether an item with these client flags is typed.
pub fn is_typed(flags: u32) -> bool {
    flags & TYPED_MASK == TYPED_BASE
}

/// The client flags of a typed item whose type tag is `tag`.
pub fn typed_flags(tag: u8) -> u32 {
    TYPED_BASE | u32::from(tag)
}

/// The type tag of a typed item's flags (`None`: not typed).
pub fn tag_of(flags: u32) -> Option<u8> {
    is_typed(flags).then_some((flags & 0xFF) as u8)
}

/// Whether a client may write this key: not in the reserved part of the key space, which
/// is every key beginning `FF FF` (collections' subkeys) or `FF FE` (the keys of RESP
/// databases other than 0, under their prefix).
pub fn user_key_ok(key: &[u8]) -> bool {
    !key.starts_with(&RESERVED) && !key.starts_with(&[0xFF, 0xFE])
}

/// The first bytes of every metadata record's value.
pub const MAGIC: [u8; 2] = [0xFE, 0xC0];
/// The metadata format of a collection kept as subkeys.
const FORMAT: u8 = 1;
/// The format of a small collection packed whole in its metadata item (`packed.rs`): the
/// same record, its body after it.
pub const PACKED: u8 = 2;
/// [`PACKED`] for a set that is an intset (Redis's encoding of a set of integers: it
/// stays one while its members are integers, and a set that held another member never
/// becomes one again, as in Redis).
pub const PACKED_INTSET: u8 = 3;
/// A list's sequence numbers start here, so both ends have room to grow.
pub const LIST_ORIGIN: u64 = 1 << 63;

/// A collection's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Hash,
    Set,
    ZSet,
    List,
    Stream,
}

impl Kind {
    /// The type tag in flags and metadata.
    pub fn tag(self) -> u8 {
        match self {
            Kind::Hash => b'h',
            Kind::Set => b's',
            Kind::ZSet => b'z',
            Kind::List => b'l',
            Kind::Stream => b'x',
        }
    }

    fn from_tag(t: u8) -> Option<Kind> {
        Some(match t {
            b'h' => Kind::Hash,
            b's' => Kind::Set,
            b'z' => Kind::ZSet,
            b'l' => Kind::List,
            b'x' => Kind::Stream,
            _ => return None,
        })
    }

    /// TYPE's answer.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hash => "hash",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::List => "list",
            Kind::Stream => "stream",
        }
    }

    /// Whether the metadata record has the two words after `len` (a list's head and tail,
    /// a stream's last id).
    fn has_bounds(self) -> bool {
        matches!(self, Kind::List | Kind::Stream)
    }

    /// The client flags of this type's metadata record.
    pub fn flags(self) -> u32 {
        typed_flags(self.tag())
    }
}

/// A collection's metadata record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Unique per collection created under its key.
    pub id: u64,
    /// Fields, members or elements.
    pub len: u64,
    /// A list's first element's sequence number.
    pub head: u64,
    /// One past a list's last element's sequence number.
    pub tail: u64,
    /// Whether the whole collection is packed in the item after the record (`packed.rs`),
    /// not kept as subkeys.
    pub packed: bool,
    /// A packed set that is an intset ([`PACKED_INTSET`]).
    pub intset: bool,
}

/// Why a key's item is not the collection a command wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotMeta {
    /// A plain value or another type: Redis's WRONGTYPE.
    WrongType,
    /// Typed flags over bytes this version cannot read.
    Corrupt,
}

impl Meta {
    /// A new, empty collection of `kind` with id `id`.
    pub fn empty(kind: Kind, id: u64) -> Meta {
        Meta {
            kind,
            id,
            len: 0,
            head: LIST_ORIGIN,
            tail: LIST_ORIGIN,
            packed: false,
            intset: false,
        }
    }

    /// The record's length in bytes (a packed collection's body follows it).
    pub fn record_len(&self) -> usize {
        if self.kind.has_bounds() {
            36
        } else {
            20
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(36);
        v.extend_from_slice(&MAGIC);
        v.push(self.kind.tag());
        v.push(match (self.packed, self.intset) {
            (false, _) => FORMAT,
            (true, false) => PACKED,
            (true, true) => PACKED_INTSET,
        });
        v.extend_from_slice(&self.id.to_be_bytes());
        v.extend_from_slice(&self.len.to_be_bytes());
        if self.kind.has_bounds() {
            v.extend_from_slice(&self.head.to_be_bytes());
            v.extend_from_slice(&self.tail.to_be_bytes());
        }
        v
    }

    /// The record an item holds, given its value and client flags (a packed collection's
    /// body, after the record, is [`Meta::body`]).
    pub fn decode(value: &[u8], flags: u32) -> Result<Meta, NotMeta> {
        let tag = tag_of(flags).ok_or(NotMeta::WrongType)?;
        let kind = Kind::from_tag(tag).ok_or(NotMeta::Corrupt)?;
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(value.get(at..at + 8)?.try_into().ok()?))
        };
        let want = if kind.has_bounds() { 36 } else { 20 };
        let format = value.get(3).copied();
        let intset = format == Some(PACKED_INTSET) && kind == Kind::Set;
        let packed = format == Some(PACKED) || intset;
        let size_ok = value.len() == want || packed && value.len() >= want;
        if !size_ok || value[..2] != MAGIC || value[2] != tag || !(packed || format == Some(FORMAT))
        {
            return Err(NotMeta::Corrupt);
        }
        let (id, len) = (u64_at(4), u64_at(12));
        let (head, tail) = match kind.has_bounds() {
            true => (u64_at(20), u64_at(28)),
            false => (Some(LIST_ORIGIN), Some(LIST_ORIGIN)),
        };
        match (id, len, head, tail) {
            (Some(id), Some(len), Some(head), Some(tail)) => Ok(Meta {
                kind,
                id,
                len,
                head,
                tail,
                packed,
                intset,
            }),
            _ => Err(NotMeta::Corrupt),
        }
    }

    /// What follows the record in a packed collection's item (empty for one kept as
    /// subkeys).
    pub fn body<'v>(&self, value: &'v [u8]) -> &'v [u8] {
        value.get(self.record_len()..).unwrap_or_default()
    }

    /// A stream's last id (the greatest it ever held; a new stream's is 0-0).
    pub fn last_id(&self) -> StreamId {
        match self.head {
            LIST_ORIGIN if self.tail == LIST_ORIGIN => StreamId::MIN,
            ms => StreamId { ms, seq: self.tail },
        }
    }

    /// Sets a stream's last id.
    pub fn set_last_id(&mut self, id: StreamId) {
        (self.head, self.tail) = (id.ms, id.seq);
    }

    /// The prefix every subkey of this collection starts with (up to `part`).
    pub fn prefix(&self, key: &[u8]) -> Vec<u8> {
        prefix(key, self.id)
    }
}

/// `FF FF | key length | key | id`; in a cluster's slot mode (`crate::slot::placed`), where
/// `key` is stored after its slot's two bytes, those two bytes come first, so the subkeys
/// sort within the slot and stay in the range that holds their key:
/// `slot | FF FF | key length | key | id`.
pub fn prefix(key: &[u8], id: u64) -> Vec<u8> {
    let mut p = Vec::with_capacity(key.len() + 15 + 16);
    if crate::slot::placed() {
        p.extend_from_slice(key.get(..2).unwrap_or_default());
    }
    p.extend_from_slice(&RESERVED);
    p.extend_from_slice(&(key.len() as u16).to_be_bytes());
    p.extend_from_slice(key);
    p.extend_from_slice(&id.to_be_bytes());
    p
}

/// Bytes a subkey adds to its key and field: the slot in slot mode, reserved prefix, key
/// length, id, part.
pub const SUBKEY_OVERHEAD: usize = 2 + 2 + 2 + 8 + 1;

/// The subkey of field (or member) `field` of the collection whose prefix is `prefix`.
pub fn field_key(prefix: &[u8], field: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 1 + field.len());
    k.extend_from_slice(prefix);
    k.push(b'f');
    k.extend_from_slice(field);
    k
}

/// The range `[lo, hi)` of the fields of the collection whose prefix is `prefix`.
pub fn fields_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = prefix.to_vec();
    lo.push(b'f');
    let mut hi = prefix.to_vec();
    hi.push(b'f' + 1);
    (lo, hi)
}

/// A stream entry's id: milliseconds and a sequence number, ordered as that pair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The 16 bytes of an entry's field: key order is id order.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.ms.to_be_bytes());
        b[8..].copy_from_slice(&self.seq.to_be_bytes());
        b
    }

    /// The id 16 bytes hold (`None`: not 16 bytes).
    pub fn from_bytes(b: &[u8]) -> Option<StreamId> {
        let b: &[u8; 16] = b.try_into().ok()?;
        Some(StreamId {
            ms: u64::from_be_bytes(b[..8].try_into().ok()?),
            seq: u64::from_be_bytes(b[8..].try_into().ok()?),
        })
    }

    /// The next id after this one (`None`: this is the greatest).
    pub fn next(self) -> Option<StreamId> {
        match self.seq.checked_add(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_add(1)?,
                seq: 0,
            }),
        }
    }
}

impl StreamId {
    /// The id just before this one (`None`: this is the smallest).
    pub fn prev(self) -> Option<StreamId> {
        match self.seq.checked_sub(1) {
            Some(seq) => Some(StreamId { ms: self.ms, seq }),
            None => Some(StreamId {
                ms: self.ms.checked_sub(1)?,
                seq: u64::MAX,
            }),
        }
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text().as_str())
    }
}

/// A stream id as text (`ms-seq`), on the stack ([`StreamId::text`]).
pub struct IdText {
    buf: [u8; 41],
    len: u8,
}

impl IdText {
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits and one '-' are ever written.
        std::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }
}

impl StreamId {
    /// The id as Redis writes it (`ms-seq`), without the formatting machinery: every
    /// stream reply names its entries' ids. (The reply encoder's `resp::decimal` writes
    /// digits the same way; sharing one function cost every GET 150 instructions.)
    pub fn text(&self) -> IdText {
        let mut t = IdText {
            buf: [0; 41],
            len: 0,
        };
        let put = |mut n: u64, t: &mut IdText| {
            let mut digits = [0u8; 20];
            let mut i = digits.len();
            loop {
                i -= 1;
                digits[i] = b'0' + (n % 10) as u8;
                n /= 10;
                if n == 0 {
                    break;
                }
            }
            let at = usize::from(t.len);
            t.buf[at..at + digits.len() - i].copy_from_slice(&digits[i..]);
            t.len += (digits.len() - i) as u8;
        };
        put(self.ms, &mut t);
        t.buf[usize::from(t.len)] = b'-';
        t.len += 1;
        put(self.seq, &mut t);
        t
    }
}

/// A stream entry's value: its field-value pairs, each `length u32 | bytes` (big-endian),
/// after their count (u32).
pub fn encode_entry<T: AsRef<[u8]>>(items: &[T]) -> Vec<u8> {
    let n: usize = items.iter().map(|i| 4 + i.as_ref().len()).sum();
    let mut v = Vec::with_capacity(4 + n);
    v.extend_from_slice(&(items.len() as u32).to_be_bytes());
    for i in items {
        v.extend_from_slice(&(i.as_ref().len() as u32).to_be_bytes());
        v.extend_from_slice(i.as_ref());
    }
    v
}

/// The items [`encode_entry`] wrote (`None`: the bytes are not such an entry).
pub fn decode_entry(b: &[u8]) -> Option<Vec<&[u8]>> {
    let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let mut items = Vec::with_capacity(n.min(b.len() / 4));
    let mut at = 4;
    for _ in 0..n {
        let len = u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        items.push(b.get(at + 4..(at + 4).checked_add(len)?)?);
        at += 4 + len;
    }
    (at == b.len()).then_some(items)
}

/// A sorted set's score as 8 bytes whose byte order is numeric order: the IEEE-754 bits,
/// all flipped for a negative number, only the sign flipped otherwise (`-0` is stored as
/// `0`, as Redis answers it; NaN is never a score).
pub fn encode_score(score: f64) -> [u8; 8] {
    let score = if score == 0.0 { 0.0 } else { score };
    let b = score.to_bits();
    let b = if b >> 63 == 1 { !b } else { b | 1 << 63 };
    b.to_be_bytes()
}

/// The score 8 bytes of [`encode_score`] hold (`None`: not 8 bytes, or a NaN).
pub fn decode_score(b: &[u8]) -> Option<f64> {
    let b = u64::from_be_bytes(b.try_into().ok()?);
    let b = if b >> 63 == 1 { b & !(1 << 63) } else { !b };
    Some(f64::from_bits(b)).filter(|f| !f.is_nan())
}

/// The subkey of a sorted set's score index entry: `prefix | 's' | score | member`, so the
/// index's key order is (score, member) order, as Redis orders a sorted set.
pub fn score_key(prefix: &[u8], score: f64, member: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(prefix.len() + 9 + member.len());
    k.extend_from_slice(prefix);
    k.push(b's');
    k.extend_from_slice(&encode_score(score));
    k.extend_from_slice(member);
    k
}

/// The range `[lo, hi)` of a sorted set's score index.
pub fn scores_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut lo = prefix.to_vec();
    lo.push(b's');
    let mut hi = prefix.to_vec();
    hi.push(b's' + 1);
    (lo, hi)
}

/// Every subkey of a collection: `[prefix, prefix + 1)` (fields and, for a sorted set,
/// its score index).
pub fn all_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut hi = prefix.to_vec();
    hi.push(0xFF);
    (prefix.to_vec(), hi)
}

/// The user key and id a subkey belongs to (`None`: not a well-formed subkey).
pub fn owner(subkey: &[u8]) -> Option<(&[u8], u64)> {
    let subkey = match crate::slot::placed() {
        true => subkey.get(2..)?,
        false => subkey,
    };
    let rest = subkey.strip_prefix(&RESERVED)?;
    let n = usize::from(u16::from_be_bytes(rest.get(..2)?.try_into().ok()?));
    if n == 0 {
        return None; // no collection has an empty key: the server's own records (SWAPDB's table)
    }
    let key = rest.get(2..2 + n)?;
    let id = u64::from_be_bytes(rest.get(2 + n..2 + n + 8)?.try_into().ok()?);
    Some((key, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips_and_refuses_what_it_is_not() {
        for kind in [Kind::Hash, Kind::Set, Kind::ZSet, Kind::List, Kind::Stream] {
            let mut m = Meta::empty(kind, 7);
            m.len = 42;
            if kind.has_bounds() {
                (m.head, m.tail) = (LIST_ORIGIN - 3, LIST_ORIGIN + 39);
            }
            let bytes = m.encode();
            assert_eq!(Meta::decode(&bytes, kind.flags()), Ok(m));
            assert_eq!(Meta::decode(&bytes, 0), Err(NotMeta::WrongType));
            assert_eq!(
                Meta::decode(&bytes[..bytes.len() - 1], kind.flags()),
                Err(NotMeta::Corrupt)
            );
        }
        assert_eq!(
            Meta::decode(b"plain", Kind::Hash.flags()),
            Err(NotMeta::Corrupt)
        );
    }

    #[test]
    fn stream_ids_and_entries_round_trip() {
        let ids = [
            StreamId::MIN,
            StreamId { ms: 0, seq: 1 },
            StreamId { ms: 1, seq: 0 },
            StreamId {
                ms: 1,
                seq: u64::MAX,
            },
            StreamId { ms: 2, seq: 0 },
            StreamId::MAX,
        ];
        for w in ids.windows(2) {
            assert!(w[0].to_bytes() < w[1].to_bytes());
        }
        assert_eq!(ids[0].next(), Some(ids[1]));
        assert_eq!(ids[3].next(), Some(ids[4]));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(ids[4].prev(), Some(ids[3]));
        assert_eq!(ids[1].prev(), Some(ids[0]));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::from_bytes(&ids[3].to_bytes()), Some(ids[3]));
        assert_eq!(ids[3].to_string(), "1-18446744073709551615");
        let e = encode_entry(&[&b"f"[..], b"", b"value"]);
        assert_eq!(decode_entry(&e), Some(vec![&b"f"[..], b"", b"value"]));
        for (ms, seq) in [(0, 0), (1, 2), (u64::MAX, u64::MAX), (1700000000000, 10)] {
            let id = StreamId { ms, seq };
            assert_eq!(id.text().as_str(), format!("{ms}-{seq}"));
            assert_eq!(id.to_string(), format!("{ms}-{seq}"));
        }
        assert_eq!(decode_entry(&e[..e.len() - 1]), None);
        assert_eq!(decode_entry(&[0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]), None);
        let mut m = Meta::empty(Kind::Stream, 1);
        assert_eq!(m.last_id(), StreamId::MIN);
        m.set_last_id(ids[4]);
        assert_eq!(
            Meta::decode(&m.encode(), Kind::Stream.flags())
                .unwrap()
                .last_id(),
            ids[4]
        );
    }

    #[test]
    fn scores_sort_as_their_bytes_and_round_trip() {
        let scores = [
            f64::NEG_INFINITY,
            -1e300,
            -2.5,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            f64::MIN_POSITIVE,
            1.0,
            1.5,
            3.0,
            1e300,
            f64::INFINITY,
        ];
        for w in scores.windows(2) {
            assert!(encode_score(w[0]) < encode_score(w[1]), "{} {}", w[0], w[1]);
        }
        for s in scores {
            assert_eq!(decode_score(&encode_score(s)), Some(s));
        }
        assert_eq!(encode_score(-0.0), encode_score(0.0));
        assert_eq!(decode_score(b"short"), None);
        let p = prefix(b"z", 1);
        let (lo, hi) = scores_range(&p);
        let (a, b) = (score_key(&p, 1.0, b"b"), score_key(&p, 1.0, b"a"));
        assert!(lo <= b && b < a && a < hi && score_key(&p, 2.0, b"a") > a);
        let (all_lo, all_hi) = all_range(&p);
        let (flo, fhi) = fields_range(&p);
        assert!(all_lo <= flo && fhi <= all_hi && all_lo <= lo && hi <= all_hi);
    }

    #[test]
    fn subkeys_of_one_collection_are_one_range_and_name_their_owner() {
        let p = prefix(b"user:1", 7);
        let (lo, hi) = fields_range(&p);
        let f = field_key(&p, b"name");
        assert!(lo <= f && f < hi);
        assert_eq!(owner(&f), Some((&b"user:1"[..], 7)));
        // A longer key sharing the first bytes is a different range.
        let other = field_key(&prefix(b"user:10", 7), b"a");
        assert!(!(lo <= other && other < hi));
        assert!(f.starts_with(&RESERVED) && !user_key_ok(&f) && user_key_ok(b"\xff\xfd"));
        assert!(!user_key_ok(b"\xff\xfe\x00\x01k"));
        assert_eq!(owner(b"\xff\xff\x00"), None);
        // An empty key is no collection's: the server's own records (SWAPDB's table).
        assert_eq!(owner(b"\xff\xff\x00\x00dbmap\x00\x00\x00"), None);
    }
}

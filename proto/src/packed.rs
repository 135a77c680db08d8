//! Small collections packed in one item, as Redis's listpack (docs/FORMAT.md, "Packed
//! collections"): while a hash, set, sorted set or list is small, its whole content follows
//! its metadata record in the key's own item (format byte [`PACKED`]), so a command is one
//! read and one write of one item, not one per field. Pure code: the server
//! (`server/src/resp/commands/types/packed.rs`) decides when a collection is small; the
//! fuzz target `collection_meta` feeds [`unpack`] arbitrary bytes.
//!
//! A packed collection holds exactly the subkeys its unpacked form would hold, less what
//! can be derived, each named by its *suffix*: the part byte and what follows it in the
//! subkey (`collection.rs`). [`unpack`] gives them back, in key order; [`pack`] writes them.
//! The body, after the record, is a sequence of length-prefixed strings (a length is
//! LEB128, at most 5 bytes, in its shortest form):
//!
//! - hash: `field value` per field, in field order;
//! - set: `member` per member, in member order;
//! - sorted set: `member` and its score's 8 sortable bytes per member, in member order (the
//!   score index, `s | score | member`, is derived);
//! - list: `element` per element, in list order (element `i` is sequence number
//!   `head + i`, so `tail - head` is the length).
//!
//! Streams are never packed.
//!
//! [`PACKED`]: crate::collection::PACKED

use crate::collection::{decode_score, Kind, Meta};

/// One subkey of a packed collection: its suffix (part byte and the rest) and its value.
pub type Entry = (Vec<u8>, Vec<u8>);

/// The longest string a body holds.
const MAX_STRING: usize = u32::MAX as usize;

fn put_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_str(out: &mut Vec<u8>, b: &[u8]) {
    put_len(out, b.len());
    out.extend_from_slice(b);
}

/// Reads one length-prefixed string at `*at`, moving past it (`None`: malformed).
#[inline]
fn get_str<'b>(body: &'b [u8], at: &mut usize) -> Option<&'b [u8]> {
    // The common case first: a length below 128 is its one byte.
    if let Some(&b) = body.get(*at) {
        if b < 0x80 {
            let s = body.get(*at + 1..*at + 1 + usize::from(b))?;
            *at += 1 + usize::from(b);
            return Some(s);
        }
    }
    let (mut n, mut shift) = (0usize, 0);
    loop {
        let b = *body.get(*at)?;
        *at += 1;
        n |= usize::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            // The shortest form only: a last byte of 0 after others would be a longer one.
            if b == 0 && shift > 0 {
                return None;
            }
            break;
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
    if n > MAX_STRING {
        return None;
    }
    let s = body.get(*at..at.checked_add(n)?)?;
    *at += n;
    Some(s)
}

/// The fields of the packed collection `m` whose body is `body`, lent in order without a
/// copy: a hash's field and value, a set's member and an empty value, a sorted set's
/// member and its score's 8 bytes, a list's element (as the value, the field empty). How
/// many (`None`: not a body [`pack`] writes for `m`).
pub fn for_each_field<'b>(
    m: &Meta,
    body: &'b [u8],
    mut f: impl FnMut(&'b [u8], &'b [u8]),
) -> Option<u64> {
    let (mut at, mut n) = (0, 0u64);
    let mut last: Option<&[u8]> = None;
    while at < body.len() {
        let s = get_str(body, &mut at)?;
        let (field, value): (&[u8], &[u8]) = match m.kind {
            Kind::Hash => (s, get_str(body, &mut at)?),
            Kind::Set => (s, &[]),
            Kind::ZSet => {
                let score = body.get(at..at.checked_add(8)?)?;
                decode_score(score)?;
                at += 8;
                (s, score)
            }
            Kind::List => (&[], s),
            Kind::Stream => return None,
        };
        if m.kind != Kind::List {
            if last.is_some_and(|l| l >= field) {
                return None; // out of order, or twice
            }
            last = Some(field);
        }
        f(field, value);
        n += 1;
    }
    let list_ok = m.kind != Kind::List || m.tail.checked_sub(m.head) == Some(n);
    (n == m.len && list_ok).then_some(n)
}

/// Appends one field to a body [`for_each_field`] reads (`m`'s kind decides what is
/// written: a set's value and a list's field are not; a sorted set's score must be its 8
/// bytes). Fields must come in order.
pub fn put_field(out: &mut Vec<u8>, kind: Kind, field: &[u8], value: &[u8]) {
    match kind {
        Kind::Hash => {
            put_str(out, field);
            put_str(out, value);
        }
        Kind::Set => put_str(out, field),
        Kind::ZSet => {
            put_str(out, field);
            out.extend_from_slice(value);
        }
        Kind::List => put_str(out, value),
        Kind::Stream => {}
    }
}

/// The item of collection `m` (its record, format `PACKED`) holding `entries`, its subkeys'
/// suffixes and values in key order; `None` when they are not what a packed `m` can hold
/// (a stream, a part byte the kind has no use for, a list's sequence numbers not
/// `head..tail`, a score not 8 bytes, a count not `m.len`).
pub fn pack<'e>(
    m: &Meta,
    entries: impl IntoIterator<Item = (&'e [u8], &'e [u8])>,
) -> Option<Vec<u8>> {
    if m.kind == Kind::Stream {
        return None;
    }
    let mut rec = *m;
    rec.packed = true;
    let mut out = rec.encode();
    let mut n = 0u64;
    for (suffix, value) in entries {
        let (&part, rest) = suffix.split_first()?;
        if part == b's' && m.kind == Kind::ZSet {
            continue; // derived from the members
        }
        if part != b'f' {
            return None;
        }
        let fits = match m.kind {
            Kind::Set => value.is_empty(),
            Kind::ZSet => value.len() == 8,
            Kind::List => rest == m.head.checked_add(n)?.to_be_bytes(),
            _ => true,
        };
        if !fits {
            return None;
        }
        put_field(&mut out, m.kind, rest, value);
        n += 1;
    }
    let list_ok = m.kind != Kind::List || m.tail.checked_sub(m.head) == Some(n);
    (n == m.len && list_ok).then_some(out)
}

/// The subkeys (suffix and value, in key order) of the packed collection `m` whose body is
/// `body` (`None`: not a body [`pack`] writes for `m`, or `m` is not a packed record).
pub fn unpack(m: &Meta, body: &[u8]) -> Option<Vec<Entry>> {
    if !m.packed {
        return None; // its subkeys are items of their own
    }
    let cap = usize::try_from(m.len).ok()?.min(body.len());
    let mut fields: Vec<Entry> = Vec::with_capacity(cap);
    let mut index: Vec<Entry> = Vec::new();
    let suffix = |part: u8, a: &[u8], b: &[u8]| [&[part][..], a, b].concat();
    for_each_field(m, body, |f, v| {
        if m.kind == Kind::List {
            // Past u64 only for a body for_each_field then refuses (`tail - head` is its count).
            let seq = m.head.wrapping_add(fields.len() as u64);
            fields.push((suffix(b'f', &seq.to_be_bytes(), &[]), v.to_vec()));
            return;
        }
        if m.kind == Kind::ZSet {
            index.push((suffix(b's', v, f), Vec::new()));
        }
        fields.push((suffix(b'f', f, &[]), v.to_vec()));
    })?;
    index.sort_unstable();
    fields.extend(index);
    Some(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::{encode_score, LIST_ORIGIN};

    fn meta(kind: Kind, len: u64) -> Meta {
        let mut m = Meta::empty(kind, 9);
        m.len = len;
        m.packed = true;
        if kind == Kind::List {
            (m.head, m.tail) = (LIST_ORIGIN - 2, LIST_ORIGIN - 2 + len);
        }
        m
    }

    fn round_trip(m: &Meta, entries: &[Entry]) {
        let item = pack(m, entries.iter().map(|(k, v)| (&k[..], &v[..]))).expect("packs");
        let back = Meta::decode(&item, m.kind.flags()).expect("record");
        assert_eq!(back, *m);
        assert_eq!(unpack(&back, back.body(&item)).as_deref(), Some(entries));
    }

    fn f(rest: &[u8], v: &[u8]) -> Entry {
        let mut k = vec![b'f'];
        k.extend_from_slice(rest);
        (k, v.to_vec())
    }

    #[test]
    fn every_kind_round_trips() {
        round_trip(&meta(Kind::Hash, 0), &[]);
        let long = vec![b'x'; 300];
        round_trip(&meta(Kind::Hash, 2), &[f(b"a", b"1"), f(&long, &long)]);
        round_trip(
            &meta(Kind::Set, 3),
            &[f(b"", b""), f(b"1", b""), f(b"b", b"")],
        );
        let m = meta(Kind::List, 2);
        round_trip(
            &m,
            &[
                f(&m.head.to_be_bytes(), b"x"),
                f(&(m.head + 1).to_be_bytes(), b""),
            ],
        );
        let (s1, s2) = (encode_score(2.5), encode_score(-1.0));
        let idx = |s: &[u8; 8], m: &[u8]| {
            let mut k = vec![b's'];
            k.extend_from_slice(s);
            k.extend_from_slice(m);
            (k, Vec::new())
        };
        round_trip(
            &meta(Kind::ZSet, 2),
            &[f(b"a", &s1), f(b"b", &s2), idx(&s2, b"b"), idx(&s1, b"a")],
        );
    }

    #[test]
    fn what_a_packed_collection_cannot_hold_is_refused() {
        let m = meta(Kind::List, 2);
        let gap = [
            f(&m.head.to_be_bytes(), b"x"),
            f(&(m.head + 2).to_be_bytes(), b"y"),
        ];
        assert_eq!(pack(&m, gap.iter().map(|(k, v)| (&k[..], &v[..]))), None);
        let one = [f(b"a", b"1")];
        let packs = |m: &Meta| pack(m, one.iter().map(|(k, v)| (&k[..], &v[..])));
        assert_eq!(packs(&meta(Kind::Hash, 2)), None, "a count not len");
        assert_eq!(packs(&meta(Kind::ZSet, 1)), None, "a score not 8 bytes");
        assert_eq!(pack(&meta(Kind::Stream, 0), std::iter::empty()), None);
    }

    #[test]
    fn fields_are_lent_as_they_are_packed() {
        let m = meta(Kind::Hash, 2);
        let mut body = Vec::new();
        put_field(&mut body, Kind::Hash, b"a", b"1");
        put_field(&mut body, Kind::Hash, b"b", &[7; 200]);
        let mut seen = Vec::new();
        assert_eq!(
            for_each_field(&m, &body, |f, v| seen.push((f.to_vec(), v.len()))),
            Some(2)
        );
        assert_eq!(seen, vec![(b"a".to_vec(), 1), (b"b".to_vec(), 200)]);
        let item = pack(
            &m,
            unpack(&m, &body)
                .unwrap()
                .iter()
                .map(|(k, v)| (&k[..], &v[..])),
        );
        assert_eq!(item.as_deref().map(|i| m.body(i)), Some(&body[..]));
        let l = meta(Kind::List, 1);
        let mut lb = Vec::new();
        put_field(&mut lb, Kind::List, b"", b"x");
        assert_eq!(
            for_each_field(&l, &lb, |f, v| assert!(f.is_empty() && v == b"x")),
            Some(1)
        );
        assert_eq!(
            for_each_field(&meta(Kind::Set, 1), b"\x01b\x01a", |_, _| ()),
            None
        );
    }

    #[test]
    fn malformed_bodies_are_refused() {
        let m = meta(Kind::Set, 2);
        assert_eq!(unpack(&m, b"\x01b\x01a"), None, "out of order");
        assert_eq!(unpack(&m, b"\x01a\x01a"), None, "twice");
        assert_eq!(unpack(&m, b"\x01a"), None, "fewer than len");
        assert_eq!(unpack(&m, b"\x01a\x05b"), None, "short string");
        assert_eq!(
            unpack(&meta(Kind::Set, 1), b"\x81\x00"),
            None,
            "long-form length"
        );
        assert_eq!(
            unpack(&meta(Kind::Set, 1), b"\xff\xff\xff\xff\xff\x01"),
            None
        );
        assert_eq!(
            unpack(&meta(Kind::ZSet, 1), b"\x01a\xff"),
            None,
            "short score"
        );
        assert!(unpack(&meta(Kind::Set, 2), b"\x01a\x01b").is_some());
    }

    /// A record of format 1 (subkeys) has no body to unpack: an empty one must not read as
    /// an empty packed collection, which would pack back as format 2 (found by the fuzz
    /// target `collection_meta`).
    #[test]
    fn a_subkey_record_is_not_unpacked() {
        let mut m = meta(Kind::Hash, 0);
        m.packed = false;
        let item = m.encode();
        let back = Meta::decode(&item, Kind::Hash.flags()).expect("record");
        assert!(!back.packed);
        assert_eq!(unpack(&back, back.body(&item)), None);
    }

    /// The fuzz target's property on stable: bodies made by mutating valid ones either
    /// are refused or pack back to the same bytes, and nothing panics.
    #[test]
    fn mutated_bodies_are_refused_or_round_trip() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let score = encode_score(1.0);
        let bodies: [(Kind, Vec<u8>); 4] = [
            (Kind::Hash, b"\x01a\x011\x01b\x00".to_vec()),
            (Kind::Set, b"\x01a\x02bb".to_vec()),
            (
                Kind::ZSet,
                [&b"\x01a"[..], &score, b"\x01b", &score].concat(),
            ),
            (Kind::List, b"\x01x\x00".to_vec()),
        ];
        for _ in 0..20_000 {
            let (kind, body) = &bodies[(next() % 4) as usize];
            let mut b = body.clone();
            for _ in 0..=next() % 3 {
                match next() % 3 {
                    0 if !b.is_empty() => {
                        let i = (next() as usize) % b.len();
                        b[i] = next() as u8;
                    }
                    1 => b.insert((next() as usize) % (b.len() + 1), next() as u8),
                    _ if !b.is_empty() => {
                        b.remove((next() as usize) % b.len());
                    }
                    _ => {}
                }
            }
            let m = meta(*kind, next() % 4);
            if let Some(entries) = unpack(&m, &b) {
                let item = pack(&m, entries.iter().map(|(k, v)| (&k[..], &v[..])));
                assert_eq!(item.as_deref().map(|i| m.body(i)), Some(&b[..]));
            }
        }
    }
}

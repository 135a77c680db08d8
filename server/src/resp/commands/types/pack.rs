//! One open packed collection (`packed.rs`) in memory, as a command reads and writes it:
//! the item's body as read, the bytes the command added, and where each field lies in
//! them, so opening a collection of n fields allocates nothing per field and a write is a
//! search and a move of n small records, as in Redis's listpack. It answers for the
//! subkeys the collection would have unpacked (`encoding.rs`), named by their suffix (the
//! part byte and what follows): `f` and the field (a list's: the sequence number), and a
//! sorted set's score index `s | score | member`, derived from its members.

use crate::resp::commands::types::encoding::{Kind, Meta};
use accelkv_proto::packed as format;
use std::cmp::Ordering;
use std::collections::VecDeque;

/// Where some bytes are: in the body as opened, or in what the command added.
#[derive(Clone, Copy, Debug, Default)]
struct Span {
    added: bool,
    at: u32,
    len: u32,
}

/// Where an unchanged field's encoding lies in the body as opened: `[start, end)`.
#[derive(Clone, Copy, Debug)]
struct Run {
    start: u32,
    end: u32,
}

/// One open packed collection.
pub(crate) struct Pack {
    /// `FF FF | key length | key | id`: what its subkeys would start with.
    pub prefix: Vec<u8>,
    /// Its key, and its record as opened (what a command that changes only its subkeys,
    /// LSET, writes back).
    pub key: Vec<u8>,
    pub meta: Meta,
    /// Changed by the running command and not yet written back.
    pub dirty: bool,
    body: Vec<u8>,
    added: Vec<u8>,
    /// A hash's, set's or sorted set's fields and values, in field order, each with where
    /// its encoding lies in `body` while it is unchanged (copied as it is when written).
    fields: Vec<(Span, Span, Option<Run>)>,
    /// A list's elements by sequence number from `base` (`None`: removed).
    elems: VecDeque<Option<Span>>,
    base: u64,
}

/// Compares `part | a | b` with `bound`, byte by byte.
fn cmp_suffix(part: u8, a: &[u8], b: &[u8], bound: &[u8]) -> Ordering {
    std::iter::once(&part).chain(a).chain(b).cmp(bound)
}

impl Pack {
    /// The collection `m` at `key` whose body is `body` (`None`: not a body this version
    /// writes); empty for a new collection.
    pub fn open(key: &[u8], m: &Meta, body: &[u8]) -> Option<Pack> {
        let mut p = Pack {
            prefix: m.prefix(key),
            key: key.to_vec(),
            meta: *m,
            dirty: false,
            body: body.to_vec(),
            added: Vec::new(),
            fields: Vec::new(),
            elems: VecDeque::new(),
            base: m.head,
        };
        // Every piece lent is a slice of `body` (but a set's empty value): its place is its
        // offset there.
        let base = body.as_ptr() as usize;
        let span = |s: &[u8]| match s.is_empty() {
            true => Span::default(),
            false => Span {
                added: false,
                at: (s.as_ptr() as usize - base) as u32,
                len: s.len() as u32,
            },
        };
        let (fields, elems) = (&mut p.fields, &mut p.elems);
        fields.reserve(m.len.min(1 << 16) as usize);
        // A field's encoding runs from the end of the one before it to the end of its
        // value (a set's: of its member).
        let mut start = 0u32;
        format::for_each_field(m, body, |f, v| {
            // Every piece lent is in `body`, empty ones too (at their place), but a set's
            // value, which is not stored.
            let last = if m.kind == Kind::Set { f } else { v };
            let end = (last.as_ptr() as usize - base + last.len()) as u32;
            match m.kind {
                Kind::List => elems.push_back(Some(span(v))),
                _ => fields.push((span(f), span(v), Some(Run { start, end }))),
            }
            start = end;
        })?;
        Some(p)
    }

    fn bytes(&self, s: Span) -> &[u8] {
        let all = if s.added { &self.added } else { &self.body };
        &all[s.at as usize..(s.at + s.len) as usize]
    }

    fn store(&mut self, b: &[u8]) -> Span {
        let at = self.added.len() as u32;
        self.added.extend_from_slice(b);
        Span {
            added: true,
            at,
            len: b.len() as u32,
        }
    }

    fn find(&self, field: &[u8]) -> Result<usize, usize> {
        self.fields
            .binary_search_by(|(f, _, _)| self.bytes(*f).cmp(field))
    }

    /// A list element's place in `elems` (`None`: before `base`).
    fn index(&self, seq: &[u8]) -> Option<usize> {
        let seq = u64::from_be_bytes(seq.try_into().ok()?);
        usize::try_from(seq.checked_sub(self.base)?).ok()
    }

    fn is_list(&self) -> bool {
        self.meta.kind == Kind::List
    }

    /// The value of the subkey with this suffix.
    pub fn get(&self, suffix: &[u8]) -> Option<Vec<u8>> {
        let (&part, rest) = suffix.split_first()?;
        match part {
            b'f' if self.is_list() => {
                let s = (*self.elems.get(self.index(rest)?)?)?;
                Some(self.bytes(s).to_vec())
            }
            b'f' => {
                let i = self.find(rest).ok()?;
                Some(self.bytes(self.fields[i].1).to_vec())
            }
            b's' if self.meta.kind == Kind::ZSet && rest.len() >= 8 => {
                let i = self.find(&rest[8..]).ok()?;
                (self.bytes(self.fields[i].1) == &rest[..8]).then(Vec::new)
            }
            _ => None,
        }
    }

    /// Sets the subkey with this suffix, answering whether it was absent. A sorted set's
    /// score index follows its members, so its entries are not kept.
    pub fn put(&mut self, suffix: &[u8], value: &[u8]) -> bool {
        self.dirty = true;
        let Some((&part, rest)) = suffix.split_first() else {
            return false;
        };
        match part {
            b'f' if self.is_list() => {
                let Ok(seq) = <[u8; 8]>::try_from(rest).map(u64::from_be_bytes) else {
                    return false;
                };
                while seq < self.base {
                    self.elems.push_front(None);
                    self.base -= 1;
                }
                let i = (seq - self.base) as usize;
                if self.elems.len() <= i {
                    self.elems.resize(i + 1, None);
                }
                let v = self.store(value);
                self.elems[i].replace(v).is_none()
            }
            b'f' => {
                let v = self.store(value);
                match self.find(rest) {
                    Ok(i) => {
                        (self.fields[i].1, self.fields[i].2) = (v, None);
                        false
                    }
                    Err(i) => {
                        let f = self.store(rest);
                        self.fields.insert(i, (f, v, None));
                        true
                    }
                }
            }
            _ => self.get(suffix).is_none(),
        }
    }

    /// Removes the subkey with this suffix.
    pub fn remove(&mut self, suffix: &[u8]) {
        self.dirty = true;
        match suffix.split_first() {
            Some((b'f', rest)) if self.is_list() => {
                if let Some(e) = self.index(rest).and_then(|i| self.elems.get_mut(i)) {
                    *e = None;
                }
            }
            Some((b'f', rest)) => {
                if let Ok(i) = self.find(rest) {
                    self.fields.remove(i);
                }
            }
            _ => {}
        }
    }

    /// A sorted set's score index: its members' (score, member), in that order.
    fn index_entries(&self) -> Vec<(&[u8], &[u8])> {
        if self.meta.kind != Kind::ZSet {
            return Vec::new();
        }
        let mut idx: Vec<(&[u8], &[u8])> = self
            .fields
            .iter()
            .map(|&(f, v, _)| (self.bytes(v), self.bytes(f)))
            .collect();
        idx.sort_unstable();
        idx
    }

    /// Lends `f` every subkey's suffix parts (part byte, and the rest in two pieces) and
    /// value, in key order (`rev`: descending), until it answers false.
    fn walk(&self, rev: bool, mut f: impl FnMut(u8, &[u8], &[u8], &[u8]) -> bool) {
        if self.is_list() {
            let live = self
                .elems
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Some((i, (*e)?)));
            let mut each = |(i, s): (usize, Span)| {
                let seq = (self.base + i as u64).to_be_bytes();
                f(b'f', &seq, &[], self.bytes(s))
            };
            match rev {
                false => _ = live.map(&mut each).take_while(|&go| go).count(),
                true => _ = live.rev().map(&mut each).take_while(|&go| go).count(),
            }
            return;
        }
        let index = self.index_entries();
        let fields = self
            .fields
            .iter()
            .map(|&(k, v, _)| (b'f', self.bytes(k), &[][..], self.bytes(v)));
        let scores = index.iter().map(|&(sc, m)| (b's', sc, m, &[][..]));
        let mut each = |(p, a, b, v): (u8, &[u8], &[u8], &[u8])| f(p, a, b, v);
        match rev {
            false => {
                _ = fields
                    .chain(scores)
                    .map(&mut each)
                    .take_while(|&go| go)
                    .count()
            }
            true => {
                _ = scores
                    .rev()
                    .chain(fields.rev())
                    .map(&mut each)
                    .take_while(|&go| go)
                    .count()
            }
        }
    }

    /// Lends `f` the subkeys whose suffixes are in `[lo, hi)` (`hi` `None`: no end), whole
    /// (the prefix included), ascending or descending, at most `limit`.
    pub fn scan(
        &self,
        (lo, hi): (&[u8], Option<&[u8]>),
        limit: usize,
        rev: bool,
        mut f: impl FnMut(&[u8], &[u8]),
    ) {
        let mut key = self.prefix.clone();
        let n = key.len();
        let mut left = limit;
        self.walk(rev, |p, a, b, v| {
            let below = cmp_suffix(p, a, b, lo) == Ordering::Less;
            let above = hi.is_some_and(|h| cmp_suffix(p, a, b, h) != Ordering::Less);
            if below || above {
                // Past the range in the walk's direction: done; before it: go on.
                return if rev { !below } else { !above };
            }
            if left == 0 {
                return false;
            }
            left -= 1;
            key.truncate(n);
            key.push(p);
            key.extend_from_slice(a);
            key.extend_from_slice(b);
            f(&key, v);
            true
        });
    }

    /// Lends `f` every subkey's suffix and value in key order (a conversion writes them).
    pub fn each(&self, mut f: impl FnMut(&[u8], &[u8])) {
        let mut suffix = Vec::new();
        self.walk(false, |p, a, b, v| {
            suffix.clear();
            suffix.push(p);
            suffix.extend_from_slice(a);
            suffix.extend_from_slice(b);
            f(&suffix, v);
            true
        });
    }

    /// The fields (members; a list's elements as values), in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.fields
            .iter()
            .map(|&(f, v, _)| (self.bytes(f), self.bytes(v)))
    }

    /// The item of `rec` (its record, then this body), or `None` when a list's elements
    /// are not its sequence numbers `head..tail` or a count is not `rec.len`.
    pub fn item(&self, rec: &Meta) -> Option<Vec<u8>> {
        let mut out = rec.encode();
        let mut n = 0u64;
        if self.is_list() {
            let mut expect = rec.head;
            for (i, e) in self.elems.iter().enumerate() {
                if let Some(s) = e {
                    if self.base + i as u64 != expect {
                        return None; // a hole, or not from the record's head
                    }
                    format::put_field(&mut out, Kind::List, &[], self.bytes(*s));
                    (n, expect) = (n + 1, expect + 1);
                }
            }
        } else {
            out.reserve(self.body.len() + self.added.len() + 8);
            // Unchanged fields that follow each other in the body are copied as one run.
            let mut run: Option<Run> = None;
            for &(f, v, orig) in &self.fields {
                match (run, orig) {
                    (Some(r), Some(o)) if r.end == o.start => run = Some(Run { end: o.end, ..r }),
                    _ => {
                        if let Some(r) = run.take() {
                            out.extend_from_slice(&self.body[r.start as usize..r.end as usize]);
                        }
                        match orig {
                            Some(o) => run = Some(o),
                            None => {
                                format::put_field(&mut out, rec.kind, self.bytes(f), self.bytes(v))
                            }
                        }
                    }
                }
                n += 1;
            }
            if let Some(r) = run {
                out.extend_from_slice(&self.body[r.start as usize..r.end as usize]);
            }
        }
        let list_ok = !self.is_list() || rec.tail.checked_sub(rec.head) == Some(n);
        (n == rec.len && list_ok).then_some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::commands::types::encoding::{encode_score, new_meta, LIST_ORIGIN};

    fn suffix(part: u8, rest: &[u8]) -> Vec<u8> {
        [&[part][..], rest].concat()
    }

    #[test]
    fn a_hash_is_searched_and_changed_in_place() {
        let mut m = new_meta(Kind::Hash);
        m.packed = true;
        let mut p = Pack::open(b"k", &m, b"").unwrap();
        assert!(p.put(&suffix(b'f', b"b"), b"2"));
        assert!(p.put(&suffix(b'f', b"a"), b"1"));
        assert!(!p.put(&suffix(b'f', b"a"), b"one"));
        assert_eq!(p.get(&suffix(b'f', b"a")), Some(b"one".to_vec()));
        p.remove(&suffix(b'f', b"b"));
        assert_eq!(p.get(&suffix(b'f', b"b")), None);
        m.len = 1;
        let item = p.item(&m).unwrap();
        let back = Meta::decode(&item, Kind::Hash.flags()).unwrap();
        let q = Pack::open(b"k", &back, back.body(&item)).unwrap();
        assert_eq!(
            q.fields().collect::<Vec<_>>(),
            vec![(&b"a"[..], &b"one"[..])]
        );
    }

    /// Unchanged fields are copied as they were, changed ones written anew, empty values
    /// and members included, and the item reads back the same.
    #[test]
    fn unchanged_fields_are_copied_and_changed_ones_rewritten() {
        for kind in [Kind::Hash, Kind::Set] {
            let mut m = new_meta(kind);
            m.packed = true;
            let mut p = Pack::open(b"k", &m, b"").unwrap();
            for f in [&b""[..], b"a", b"b", b"c", b"d"] {
                p.put(&suffix(b'f', f), if kind == Kind::Hash { f } else { b"" });
            }
            m.len = 5;
            let item = p.item(&m).unwrap();
            let back = Meta::decode(&item, kind.flags()).unwrap();
            let mut q = Pack::open(b"k", &back, back.body(&item)).unwrap();
            assert_eq!(
                q.item(&back).unwrap(),
                item,
                "nothing changed: the same bytes"
            );
            q.put(&suffix(b'f', b"b"), b"");
            q.remove(&suffix(b'f', b"c"));
            q.put(&suffix(b'f', b"e"), b"");
            let again = q.item(&back).unwrap();
            let r = Pack::open(b"k", &back, back.body(&again)).unwrap();
            let fields: Vec<_> = r.fields().map(|(f, _)| f.to_vec()).collect();
            assert_eq!(
                fields,
                [&b""[..], b"a", b"b", b"d", b"e"].map(<[u8]>::to_vec)
            );
        }
    }

    #[test]
    fn a_sorted_sets_score_index_is_derived_in_order() {
        let mut m = new_meta(Kind::ZSet);
        m.packed = true;
        let mut p = Pack::open(b"z", &m, b"").unwrap();
        for (member, score) in [(&b"a"[..], 3.0), (b"b", 1.0), (b"c", 2.0)] {
            p.put(&suffix(b'f', member), &encode_score(score));
        }
        let idx = [&[b's'][..], &encode_score(1.0), b"b"].concat();
        assert_eq!(p.get(&idx), Some(Vec::new()));
        let lo = p.prefix.clone();
        let (slo, shi) = (
            [lo.as_slice(), b"s"].concat(),
            [lo.as_slice(), b"t"].concat(),
        );
        let mut seen = Vec::new();
        p.scan(
            (&slo[lo.len()..], Some(&shi[lo.len()..])),
            2,
            false,
            |k, _| seen.push(k[k.len() - 1]),
        );
        assert_eq!(seen, b"bc");
        seen.clear();
        p.scan(
            (&slo[lo.len()..], Some(&shi[lo.len()..])),
            9,
            true,
            |k, _| seen.push(k[k.len() - 1]),
        );
        assert_eq!(seen, b"acb");
        let mut all = 0;
        p.each(|_, _| all += 1);
        assert_eq!(all, 6, "three members and their index entries");
    }

    #[test]
    fn a_list_grows_at_both_ends_and_refuses_holes() {
        let mut m = new_meta(Kind::List);
        m.packed = true;
        let mut p = Pack::open(b"l", &m, b"").unwrap();
        let seq = |s: u64| suffix(b'f', &s.to_be_bytes());
        p.put(&seq(LIST_ORIGIN), b"b");
        p.put(&seq(LIST_ORIGIN - 1), b"a");
        p.put(&seq(LIST_ORIGIN + 1), b"c");
        (m.head, m.tail, m.len) = (LIST_ORIGIN - 1, LIST_ORIGIN + 2, 3);
        let item = p.item(&m).unwrap();
        let back = Meta::decode(&item, Kind::List.flags()).unwrap();
        let q = Pack::open(b"l", &back, back.body(&item)).unwrap();
        assert_eq!(q.get(&seq(LIST_ORIGIN + 1)), Some(b"c".to_vec()));
        p.remove(&seq(LIST_ORIGIN));
        m.len = 2;
        assert!(p.item(&m).is_none(), "a hole in the middle");
    }
}

//! Small collections packed in one item (`accelkv_proto::packed`, docs/FORMAT.md "Packed
//! collections"), as Redis keeps a small hash, set, sorted set or list in one listpack or
//! intset: while a collection is under Redis's thresholds (`hash-max-listpack-entries` and
//! its kin, CONFIG SET changes them), its item holds it whole; past one, it is written out
//! as subkeys (`encoding.rs`) and stays so, as Redis never converts back (but a list that
//! shrinks to half its limit, `list.rs`, as Redis 7.2).
//!
//! The command families do not know which: a command opens the collection (`Src::meta`,
//! [`create`]), which unpacks a packed one here into its connection's [`Packs`]; every
//! subkey read and write of the command (`access.rs`) is then served from it, and the
//! metadata write that ends every writing command (`set_meta`) writes it back as one item,
//! or converts it. So one command reads one item and writes one item.

use crate::resp::commands::types::encoding::{self, prefix, Kind, Meta};
pub(crate) use crate::resp::commands::types::pack::Pack;
use crate::resp::tuning::Tuning;

/// A connection's open packed collections: those its running command reads or writes
/// (usually one; LMOVE, SMOVE and the STORE forms two or more).
#[derive(Default)]
pub struct Packs {
    open: Vec<Pack>,
}

impl Packs {
    /// Forgets every open collection (a command starts, or one failed midway).
    pub fn clear(&mut self) {
        self.open.clear();
    }

    /// Whether no collection is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    fn find(&self, subkey: &[u8]) -> Option<usize> {
        self.open.iter().position(|p| subkey.starts_with(&p.prefix))
    }

    /// Whether the collection with this prefix is open with changes not yet written.
    pub(crate) fn dirty(&self, prefix: &[u8]) -> bool {
        self.open.iter().any(|p| p.dirty && p.prefix == prefix)
    }

    /// Opens `pack` (replacing a copy opened before).
    pub(crate) fn open(&mut self, pack: Pack) {
        self.open.retain(|p| p.prefix != pack.prefix);
        self.open.push(pack);
    }

    /// Closes an open collection with changes not yet written, handing it over.
    pub(crate) fn take_dirty(&mut self) -> Option<Pack> {
        let i = self.open.iter().position(|p| p.dirty)?;
        Some(self.open.swap_remove(i))
    }

    /// Closes the collection with this prefix, handing it over to be written.
    pub(crate) fn take(&mut self, prefix: &[u8]) -> Option<Pack> {
        let i = self.open.iter().position(|p| p.prefix == prefix)?;
        Some(self.open.swap_remove(i))
    }

    /// A subkey's value (`None`: no open collection holds this subkey's prefix;
    /// `Some(None)`: one does, without it).
    pub(crate) fn get(&self, subkey: &[u8]) -> Option<Option<Vec<u8>>> {
        let p = &self.open[self.find(subkey)?];
        Some(p.get(&subkey[p.prefix.len()..]))
    }

    /// Sets a subkey, answering whether it was absent (`None`: not an open collection's).
    pub(crate) fn put(&mut self, subkey: &[u8], value: &[u8]) -> Option<bool> {
        let i = self.find(subkey)?;
        let p = &mut self.open[i];
        let n = p.prefix.len();
        Some(p.put(&subkey[n..], value))
    }

    /// Removes a subkey (`None`: not an open collection's).
    pub(crate) fn remove(&mut self, subkey: &[u8]) -> Option<()> {
        let i = self.find(subkey)?;
        let p = &mut self.open[i];
        let n = p.prefix.len();
        p.remove(&subkey[n..]);
        Some(())
    }

    /// Lends `f` the subkeys in `[lo, hi)` (whole, prefix included), ascending or
    /// descending, at most `limit` (`false`: no open collection holds `lo`'s prefix).
    pub(crate) fn scan(
        &self,
        (lo, hi): (&[u8], &[u8]),
        limit: usize,
        rev: bool,
        f: impl FnMut(&[u8], &[u8]),
    ) -> bool {
        let Some(i) = self.find(lo) else {
            return false;
        };
        let p = &self.open[i];
        let upper = match hi.strip_prefix(p.prefix.as_slice()) {
            Some(h) => Some(h),
            // An upper bound past every subkey of the collection.
            None if hi > p.prefix.as_slice() => None,
            None => return true,
        };
        p.scan((&lo[p.prefix.len()..], upper), limit, rev, f);
        true
    }
}

/// A new, empty collection of `kind` at `key`, open as a packed one (a stream, never
/// packed, is a record only).
pub(crate) fn create(packs: &mut Packs, key: &[u8], kind: Kind) -> Meta {
    let mut m = encoding::new_meta(kind);
    if kind != Kind::Stream {
        m.packed = true;
        m.intset = kind == Kind::Set; // an empty intset until a member is not an integer
        if let Some(mut p) = Pack::open(key, &m, b"") {
            p.dirty = true;
            packs.open(p);
        }
    }
    m
}

/// Opens the packed collection `m` whose item's body is `body`, unless the running command
/// has it open with changes.
pub(crate) fn open(packs: &mut Packs, key: &[u8], m: &Meta, body: &[u8]) -> Result<(), ()> {
    if packs.dirty(&prefix(key, m.id)) {
        return Ok(());
    }
    packs.open(Pack::open(key, m, body).ok_or(())?);
    Ok(())
}

/// What `m` should be written as, holding `pack`: its packed item (its tuning thresholds
/// not passed), or `None`: subkeys. A set stays an intset while it is one and its members
/// are integers, within `set-max-intset-entries`; else it is a listpack, as in Redis 7.2.
pub(crate) fn packed_item(t: &Tuning, m: &Meta, pack: &Pack) -> Option<Vec<u8>> {
    let param = |name: &str| t.get(name).unwrap_or(0).max(0) as u64;
    let widest = |values: bool| {
        pack.fields()
            .map(|(k, v)| k.len().max(if values { v.len() } else { 0 }))
            .max()
            .unwrap_or(0) as u64
    };
    let mut rec = *m;
    rec.packed = true;
    rec.intset = m.kind == Kind::Set
        && m.intset
        && m.len <= param("set-max-intset-entries")
        && all_integers(pack.fields().map(|(k, _)| k));
    let fits = match m.kind {
        Kind::Hash => {
            m.len <= param("hash-max-listpack-entries")
                && widest(true) <= param("hash-max-listpack-value")
        }
        Kind::Set => {
            rec.intset
                || m.len <= param("set-max-listpack-entries")
                    && widest(false) <= param("set-max-listpack-value")
        }
        Kind::ZSet => {
            m.len <= param("zset-max-listpack-entries")
                && widest(false) <= param("zset-max-listpack-value")
        }
        Kind::List => true, // by its bytes, below
        Kind::Stream => false,
    };
    if !fits {
        return None;
    }
    let item = pack.item(&rec)?;
    if m.kind == Kind::List && !list_fits(t.get("list-max-listpack-size").unwrap_or(-2), m, &item) {
        return None;
    }
    Some(item)
}

/// Whether a list packed as `item` is within `list-max-listpack-size` (`size`): at most
/// that many elements when positive (0 counts as 1, as Redis reads it), at most 4, 8, 16,
/// 32 or 64 KiB for -1 to -5 (below -5 as -5), as Redis sizes one listpack node of its
/// quicklist.
fn list_fits(size: i64, m: &Meta, item: &[u8]) -> bool {
    match size {
        n if n >= 0 => m.len <= n.max(1) as u64,
        n => item.len() - m.record_len() <= 4096 << (n.clamp(-5, -1).unsigned_abs() - 1),
    }
}

/// Whether every member is an integer as Redis's intset holds one (a 64-bit integer
/// written in its shortest form).
fn all_integers<'a>(mut members: impl Iterator<Item = &'a [u8]>) -> bool {
    members.all(|m| {
        m.len() <= 20
            && std::str::from_utf8(m)
                .is_ok_and(|t| t.parse::<i64>().is_ok_and(|n| n.to_string() == t))
    })
}

/// OBJECT ENCODING's answer for collection `m`: Redis 7.2's names for what accelkv keeps
/// (packed: `listpack`, or `intset` for a set of integers that has been one; as subkeys:
/// `hashtable`, `skiplist`, `quicklist`).
pub(crate) fn encoding_name(m: &Meta) -> &'static str {
    match (m.kind, m.packed) {
        (Kind::Stream, _) => "stream",
        (Kind::Set, true) if m.intset => "intset",
        (_, true) => "listpack",
        (Kind::Hash | Kind::Set, false) => "hashtable",
        (Kind::ZSet, false) => "skiplist",
        (Kind::List, false) => "quicklist",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack_of(entries: &[(&[u8], &[u8])]) -> Pack {
        let mut m = encoding::new_meta(Kind::Hash);
        m.packed = true;
        let mut p = Pack::open(b"k", &m, b"").unwrap();
        for (k, v) in entries {
            p.put(k, v);
        }
        p
    }

    #[test]
    fn thresholds_decide_the_encoding() {
        let t = Tuning::default();
        let mut m = encoding::new_meta(Kind::Hash);
        m.len = 1;
        assert!(packed_item(&t, &m, &pack_of(&[(b"fa", b"1")])).is_some());
        let wide = vec![b'x'; 65];
        assert!(packed_item(&t, &m, &pack_of(&[(b"fa", &wide)])).is_none());
        t.set("hash-max-listpack-entries", b"0");
        assert!(packed_item(&t, &m, &pack_of(&[(b"fa", b"1")])).is_none());
        let mut s = encoding::new_meta(Kind::Set);
        (s.len, s.packed, s.intset) = (1, true, true);
        t.set("set-max-listpack-entries", b"0");
        assert!(packed_item(&t, &s, &pack_of(&[(b"f12", b"")])).is_some());
        assert!(packed_item(&t, &s, &pack_of(&[(b"fab", b"")])).is_none());
        // A set that is no longer an intset stays a listpack with integers only.
        s.intset = false;
        assert!(packed_item(&t, &s, &pack_of(&[(b"f12", b"")])).is_none());
        assert!(!all_integers([&b"012"[..]].into_iter()));
    }

    #[test]
    fn a_list_is_packed_up_to_its_node_size() {
        let m = encoding::new_meta(Kind::List);
        let item = vec![0u8; m.record_len() + 8192];
        assert!(list_fits(-2, &m, &item) && !list_fits(-1, &m, &item));
        assert!(list_fits(-5, &m, &item));
        let mut m3 = m;
        m3.len = 3;
        assert!(list_fits(3, &m3, &item) && !list_fits(2, &m3, &item));
        let mut m1 = m;
        m1.len = 1;
        assert!(list_fits(0, &m1, &item), "0 is one element");
        m1.len = 2;
        assert!(!list_fits(0, &m1, &item));
        assert!(list_fits(-6, &m, &item), "below -5 is -5: 64 KiB");
    }

    #[test]
    fn scans_see_the_open_collections_subkeys_in_order() {
        let mut packs = Packs::default();
        let p = prefix(b"k", 1);
        let sub = |s: &[u8]| [p.as_slice(), s].concat();
        let mut m = encoding::new_meta(Kind::Hash);
        (m.id, m.packed) = (1, true);
        let mut pack = Pack::open(b"k", &m, b"").unwrap();
        pack.put(b"fa", b"1");
        pack.put(b"fb", b"2");
        pack.dirty = false;
        packs.open(pack);
        assert_eq!(packs.put(&sub(b"fc"), b"3"), Some(true));
        assert_eq!(packs.put(&sub(b"fa"), b"0"), Some(false));
        assert_eq!(packs.get(&sub(b"fa")), Some(Some(b"0".to_vec())));
        assert_eq!(packs.get(&sub(b"fz")), Some(None));
        assert_eq!(packs.get(&prefix(b"other", 1)), None);
        let (lo, hi) = encoding::fields_range(&p);
        let mut seen = Vec::new();
        assert!(packs.scan((&lo, &hi), 2, true, |k, v| seen
            .push((k.to_vec(), v.to_vec()))));
        assert_eq!(
            seen,
            vec![(sub(b"fc"), b"3".to_vec()), (sub(b"fb"), b"2".to_vec())]
        );
        packs.remove(&sub(b"fb"));
        assert!(packs.dirty(&p));
        assert_eq!(packs.take(&p).map(|p| p.fields().count()), Some(2));
        assert!(!packs.scan((&lo, &hi), 9, false, |_, _| ()));
    }
}

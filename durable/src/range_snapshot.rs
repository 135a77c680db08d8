//! The range snapshot's bytes (docs/FORMAT.md, "Range snapshot"): what a replica of a range
//! ships to another in cluster mode. `AKV3 | bounds | clients' last writes | pages`, the
//! pages leaf pages of the page file's own format ([`crate::format`]: fences, items with
//! deadlines and client flags, a CRC-32C each), back to back, each recording its offset from
//! the first. The pages' fences must tile the bounds, which is what proves a snapshot whole.
//! Snapshots written before pages (`AKV1`, `AKV2`: a list of items) still decode, as one
//! part covering the range.
//!
//! This module only writes and checks the bytes; taking a snapshot of a store and
//! installing one is the server's (`cluster_snapshot.rs`).

use crate::format::{decode_header, decode_page, encode_leaf, CommitTag, LeafPage, Page};
use crate::format::{PageItem, PageValue};

/// One item: key, value, deadline (ms since the Unix epoch; 0: none), client flags.
pub type Item<'a> = (&'a [u8], &'a [u8], u64, u32);

/// The magic of a snapshot made of pages.
pub const MAGIC: &[u8; 4] = b"AKV3";

/// Commit tag of a snapshot's pages: the page file's recovery does not read snapshots, and
/// the fences, not a page count, prove one whole.
const TAG: CommitTag = CommitTag { seq: 1, pages: 0 };

const TORN: &str = "the snapshot is torn";

/// A client's last applied write in a range: its sequence number, the range's apply tick
/// when it was applied, and its reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientWrite<'a> {
    pub client: u64,
    pub seq: u64,
    pub tick: u64,
    pub reply: &'a [u8],
}

/// A key range of a snapshot (`low <= key < high`; `high` `None`: no bound) and its items:
/// one page, or the whole range in an older snapshot.
#[derive(Debug, PartialEq, Eq)]
pub struct Part<'a> {
    pub low: &'a [u8],
    pub high: Option<&'a [u8]>,
    pub items: Vec<Item<'a>>,
}

/// A decoded and checked snapshot.
#[derive(Debug, PartialEq, Eq)]
pub struct RangeSnapshot<'a> {
    /// The range's bounds (`low <= key < high`).
    pub low: &'a [u8],
    pub high: Option<&'a [u8]>,
    /// The clients' last writes, in client order (none in an `AKV1` snapshot).
    pub clients: Vec<ClientWrite<'a>>,
    /// The pages, in key order; together they cover exactly the bounds.
    pub parts: Vec<Part<'a>>,
}

impl RangeSnapshot<'_> {
    /// How many items the snapshot holds.
    pub fn items(&self) -> usize {
        self.parts.iter().map(|p| p.items.len()).sum()
    }
}

/// Writes a snapshot: the head first ([`Writer::new`]), then the pages in key order, each
/// starting where the previous one ended.
pub struct Writer {
    out: Vec<u8>,
    /// Where the first page starts (pages record their offsets from it).
    base: usize,
}

impl Writer {
    /// A snapshot of the range `[low, high)` whose clients' last writes are `clients`.
    pub fn new(low: &[u8], high: Option<&[u8]>, clients: &[ClientWrite<'_>]) -> Writer {
        let mut out = MAGIC.to_vec();
        put_bytes(&mut out, low);
        match high {
            Some(e) => {
                out.push(1);
                put_bytes(&mut out, e);
            }
            None => out.push(0),
        }
        put_clients(&mut out, clients);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        let base = out.len();
        Writer { out, base }
    }

    /// Appends the page holding `items` (in key order) of `[low, high)`; `low` `None`: the
    /// start of the key space. `lid` and `version` are the leaf's and the snapshot's.
    pub fn page(
        &mut self,
        lid: u64,
        version: u64,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        items: Vec<PageItem<'_>>,
    ) {
        let p = LeafPage {
            lid,
            version,
            commit: TAG,
            low,
            high,
            items,
        };
        let at = (self.out.len() - self.base) as u64;
        self.out.extend_from_slice(&encode_leaf(&p, at));
    }

    /// The snapshot's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

/// `u32 count`, then per client `u64 client | u64 seq | u64 tick | u32 length | reply`.
fn put_clients(out: &mut Vec<u8>, clients: &[ClientWrite<'_>]) {
    out.extend_from_slice(&(clients.len() as u32).to_le_bytes());
    for c in clients {
        for n in [c.client, c.seq, c.tick] {
            out.extend_from_slice(&n.to_le_bytes());
        }
        put_bytes(out, c.reply);
    }
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (h, t) = (b.get(..n)?, b.get(n..)?);
    *b = t;
    Some(h)
}

fn bytes<'a>(b: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize;
    take(b, n)
}

fn u64_of(b: &mut &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(take(b, 8)?.try_into().ok()?))
}

fn clients<'a>(b: &mut &'a [u8]) -> Option<Vec<ClientWrite<'a>>> {
    let n = u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize;
    // Each record is at least 28 bytes: a count the bytes cannot hold is torn, and is not
    // allowed to reserve memory for it.
    if n > b.len() / 28 {
        return None;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, seq, tick) = (u64_of(b)?, u64_of(b)?, u64_of(b)?);
        let reply = bytes(b)?;
        out.push(ClientWrite {
            client,
            seq,
            tick,
            reply,
        });
    }
    Some(out)
}

/// Decodes and checks a snapshot: every page's checksum, offset and order, and that the
/// pages' fences tile the bounds. Whatever the bytes, an error rather than a panic.
pub fn decode(whole: &[u8]) -> Result<RangeSnapshot<'_>, String> {
    let (magic, mut b) = whole.split_at_checked(4).ok_or(TORN)?;
    let older = match magic {
        m if m == MAGIC => false,
        b"AKV1" | b"AKV2" => true,
        _ => return Err("not a range snapshot (unknown magic)".into()),
    };
    let low = bytes(&mut b).ok_or(TORN)?;
    let high = match take(&mut b, 1).ok_or(TORN)?[0] {
        0 => None,
        1 => Some(bytes(&mut b).ok_or(TORN)?),
        _ => return Err("the snapshot's bounds are malformed".into()),
    };
    if high.is_some_and(|e| e <= low) {
        return Err("the snapshot's bounds are empty".into());
    }
    let clients = match magic {
        b"AKV1" => Vec::new(),
        _ => clients(&mut b).ok_or(TORN)?,
    };
    if !older {
        let head = &whole[..whole.len() - b.len()];
        let crc = u32::from_le_bytes(take(&mut b, 4).ok_or(TORN)?.try_into().map_err(|_| TORN)?);
        if crc32c::crc32c(head) != crc {
            return Err("the snapshot's head (bounds and clients) is damaged".into());
        }
    }
    let parts = match older {
        true => vec![Part {
            low,
            high,
            items: items_of(b).ok_or(TORN)?,
        }],
        false => pages(b, low, high)?,
    };
    Ok(RangeSnapshot {
        low,
        high,
        clients,
        parts,
    })
}

/// An older snapshot's items: `u32 key length | key | u32 value length | value | u64
/// deadline | u32 flags` each.
fn items_of(mut b: &[u8]) -> Option<Vec<Item<'_>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let k = bytes(&mut b)?;
        let v = bytes(&mut b)?;
        let d = u64_of(&mut b)?;
        let f = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?);
        out.push((k, v, d, f));
    }
    Some(out)
}

fn pages<'a>(
    sec: &'a [u8],
    low: &'a [u8],
    high: Option<&'a [u8]>,
) -> Result<Vec<Part<'a>>, String> {
    let bad =
        |at: usize, why: &dyn std::fmt::Display| format!("the snapshot's page at {at}: {why}");
    let mut parts: Vec<Part<'a>> = Vec::new();
    let mut at = 0;
    // The key the next page must start at (`None`: the last page ended the key space).
    let mut next = Some(low);
    while at < sec.len() {
        let len = decode_header(&sec[at..]).map_err(|e| bad(at, &e))?.len as usize;
        let p = match decode_page(&sec[at..], at as u64).map_err(|e| bad(at, &e))? {
            Page::Leaf(p) => p,
            Page::Ext(_) => {
                return Err(bad(at, &"an extension page (snapshots keep values inline)"))
            }
            Page::Clock(_) | Page::Delta(_) => {
                return Err(bad(at, &"a clock or delta page (snapshots hold leaves)"))
            }
        };
        let from = p.low.unwrap_or_default();
        if next != Some(from) {
            return Err(bad(at, &"its fences do not follow the previous page's"));
        }
        let mut items = Vec::with_capacity(p.items.len());
        for (k, v, d, f) in p.items {
            match v {
                PageValue::Inline(v) => items.push((k, v, d, f)),
                PageValue::Ext(_) => return Err(bad(at, &"a value in an extension page")),
            }
        }
        next = p.high;
        parts.push(Part {
            low: from,
            high: p.high,
            items,
        });
        at += len;
    }
    match parts.last() {
        Some(last) if last.high == high => Ok(parts),
        _ => Err(TORN.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deadline far in the future (ms since the Unix epoch).
    const FAR: u64 = u64::MAX / 2;

    /// A snapshot of `[low, high)` cut into pages at `cuts`, the items `k<i>` for `i` in
    /// `keys`.
    fn snapshot(
        low: &[u8],
        high: Option<&[u8]>,
        cuts: &[&[u8]],
        keys: &[&[u8]],
        clients: &[ClientWrite<'_>],
    ) -> Vec<u8> {
        let mut w = Writer::new(low, high, clients);
        let fences: Vec<Option<&[u8]>> = std::iter::once(Some(low).filter(|l| !l.is_empty()))
            .chain(cuts.iter().map(|c| Some(*c)))
            .chain(std::iter::once(high))
            .collect();
        for (i, f) in fences.windows(2).enumerate() {
            let inside = |k: &[u8]| k >= f[0].unwrap_or_default() && f[1].is_none_or(|h| k < h);
            let items = keys
                .iter()
                .filter(|k| inside(k))
                .map(|k| (*k, PageValue::Inline(b"v".as_slice()), FAR, 3))
                .collect();
            w.page(i as u64, 9, f[0], f[1], items);
        }
        w.finish()
    }

    const CLIENT: ClientWrite<'static> = ClientWrite {
        client: 7,
        seq: 3,
        tick: 11,
        reply: b":3\r\n",
    };

    #[test]
    fn a_snapshot_round_trips() {
        let keys: &[&[u8]] = &[b"ka", b"kb", b"kc", b"kd", b"ke"];
        let data = snapshot(b"k", Some(b"l"), &[b"kb", b"kd"], keys, &[CLIENT]);
        let s = decode(&data).unwrap();
        assert_eq!((s.low, s.high), (&b"k"[..], Some(&b"l"[..])));
        assert_eq!(s.clients, vec![CLIENT]);
        assert_eq!(s.parts.len(), 3);
        assert_eq!(s.parts[1].low, b"kb");
        assert_eq!(
            s.parts[1].items,
            vec![(&b"kb"[..], &b"v"[..], FAR, 3), (b"kc", b"v", FAR, 3)]
        );
        assert_eq!(s.items(), 5);
        let empty = snapshot(b"", None, &[], &[], &[]);
        let s = decode(&empty).unwrap();
        assert_eq!(
            s.parts,
            vec![Part {
                low: b"",
                high: None,
                items: vec![]
            }]
        );
    }

    /// A snapshot's bytes before its first page, and each page.
    fn split_pages(data: &[u8]) -> (&[u8], Vec<&[u8]>) {
        let base = data.windows(4).position(|w| w == b"AKVP").unwrap();
        let mut pages = Vec::new();
        let mut at = base;
        while at < data.len() {
            let len = decode_header(&data[at..]).unwrap().len as usize;
            pages.push(&data[at..at + len]);
            at += len;
        }
        (&data[..base], pages)
    }

    #[test]
    fn torn_or_damaged_snapshots_are_refused() {
        let keys: &[&[u8]] = &[b"ka", b"kb", b"kc", b"kd", b"ke", b"kf"];
        let data = snapshot(b"k", Some(b"l"), &[b"kb", b"kd", b"kf"], keys, &[CLIENT]);
        assert!(decode(&data).is_ok());
        for cut in 0..data.len() {
            assert!(decode(&data[..cut]).is_err(), "a prefix of {cut} bytes");
        }
        for at in 0..data.len() {
            let mut bad = data.clone();
            bad[at] ^= 0x20;
            assert!(decode(&bad).is_err(), "a flipped bit at {at}");
        }
        assert!(decode(b"AKV9").is_err());
        // Pages moved, each still whole: every page records its offset.
        let (head, pages) = split_pages(&data);
        assert!(pages.len() >= 3);
        let swapped = [head, pages[1], pages[0], &pages[2..].concat()].concat();
        assert!(decode(&swapped).is_err());
        // A page left out, the others written again at their new offsets: the fences
        // show the gap.
        let mut gap = head.to_vec();
        for p in [pages[0]].iter().chain(&pages[2..]) {
            let Ok(Page::Leaf(leaf)) = decode_page(p, decode_header(p).unwrap().offset) else {
                panic!("a leaf page");
            };
            let at = (gap.len() - head.len()) as u64;
            gap.extend_from_slice(&encode_leaf(&leaf, at));
        }
        assert!(decode(&gap).unwrap_err().contains("do not follow"));
        // Bounds wider than the pages cover.
        let mut wider = Writer::new(b"j", Some(b"l"), &[]);
        wider.page(1, 9, Some(b"k"), Some(b"l"), vec![]);
        assert!(decode(&wider.finish())
            .unwrap_err()
            .contains("do not follow"));
        let mut short = Writer::new(b"k", Some(b"m"), &[]);
        short.page(1, 9, Some(b"k"), Some(b"l"), vec![]);
        assert_eq!(decode(&short.finish()).unwrap_err(), TORN);
        // A client count the bytes cannot hold.
        let mut many = Writer::new(b"", None, &[]).finish();
        let n = many.len();
        many[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode(&many).unwrap_err(), TORN);
    }

    #[test]
    fn older_snapshots_decode_as_one_part() {
        let mut s = b"AKV1".to_vec();
        put_bytes(&mut s, b"k");
        s.push(1);
        put_bytes(&mut s, b"p");
        let head = s.len();
        put_bytes(&mut s, b"key");
        put_bytes(&mut s, b"value");
        s.extend_from_slice(&FAR.to_le_bytes());
        s.extend_from_slice(&9u32.to_le_bytes());
        let snap = decode(&s).unwrap();
        assert_eq!((snap.low, snap.high), (&b"k"[..], Some(&b"p"[..])));
        assert!(snap.clients.is_empty(), "AKV1 has none");
        assert_eq!(
            snap.parts[0].items,
            vec![(&b"key"[..], &b"value"[..], FAR, 9)]
        );
        for cut in (0..s.len()).filter(|&c| c != head) {
            assert!(decode(&s[..cut]).is_err(), "{cut}");
        }
        let mut v2 = b"AKV2".to_vec();
        v2.extend_from_slice(&s[4..head]);
        put_clients(&mut v2, &[CLIENT]);
        v2.extend_from_slice(&s[head..]);
        let snap = decode(&v2).unwrap();
        assert_eq!(snap.clients, vec![CLIENT]);
        assert_eq!(snap.items(), 1);
    }

    proptest! {
        /// Whatever a peer or a damaged file hands over, decoding answers a snapshot or an
        /// error, never a panic; so does a valid snapshot with bytes overwritten.
        #[test]
        fn decoding_any_bytes_is_safe(
            raw in proptest::collection::vec(any::<u8>(), 0..512),
            edits in proptest::collection::vec((0usize..4096, any::<u8>()), 0..8),
        ) {
            for magic in [&b""[..], b"AKV1", b"AKV2", b"AKV3"] {
                let _ = decode(&[magic, &raw].concat());
            }
            let keys: &[&[u8]] = &[b"ka", b"kb", b"kc", b"kd", b"ke", b"kf"];
            let mut data = snapshot(b"k", None, &[b"kc"], keys, &[CLIENT]);
            for (at, byte) in edits {
                let n = data.len();
                data[at % n] = byte;
            }
            let _ = decode(&data);
        }

        /// Any bounds, cuts, items and clients written decode to what was written.
        #[test]
        fn anything_written_decodes(
            mut keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..6), 0..40),
            cuts in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..6), 0..6),
            replies in proptest::collection::vec((any::<u64>(), proptest::collection::vec(any::<u8>(), 0..20)), 0..5),
            bounded in any::<bool>(),
        ) {
            let mut cuts: Vec<Vec<u8>> = cuts.into_iter().collect();
            let high = bounded.then(|| cuts.pop()).flatten();
            let low = match cuts.is_empty() { true => Vec::new(), false => cuts.remove(0) };
            if high.as_ref().is_some_and(|h| h <= &low) { return Ok(()); }
            keys.retain(|k| k >= &low && high.as_ref().is_none_or(|h| k < h));
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            let cuts: Vec<&[u8]> = cuts.iter().map(Vec::as_slice).collect();
            let clients: Vec<ClientWrite> = replies.iter().enumerate()
                .map(|(i, (t, r))| ClientWrite { client: i as u64, seq: *t / 2, tick: *t, reply: r })
                .collect();
            let data = snapshot(&low, high.as_deref(), &cuts, &keys, &clients);
            let s = decode(&data).map_err(TestCaseError::fail)?;
            prop_assert_eq!((s.low, s.high), (low.as_slice(), high.as_deref()));
            prop_assert_eq!(&s.clients, &clients);
            prop_assert_eq!(s.parts.len(), cuts.len() + 1);
            let got: Vec<&[u8]> = s.parts.iter().flat_map(|p| p.items.iter().map(|i| i.0)).collect();
            prop_assert_eq!(got, keys);
        }
    }
}

//! A range's snapshot in cluster mode (docs/FORMAT.md, "Range snapshot"): the range's
//! leaves as pages of the page file's own format (accelkv-durable's `format.rs`: fences,
//! items with deadlines and client flags, a CRC-32C each), all taken at one read version,
//! after the range's bounds and its clients' last writes. The pages' fences tile the
//! bounds, which is what proves a snapshot whole.
//!
//! A replica installs a snapshot page by page, after every page was checked (a torn or
//! corrupted snapshot changes nothing): each page's key range switches from what the store
//! holds to the page's items in one atomic batch, so nothing is replayed and no reader of
//! the store sees half a page. Snapshots written before pages (`AKV1`, `AKV2`: a list of
//! items) still decode, as one part covering the range.

use crate::cluster_machine::Bounds;
use crate::cluster_once::Sessions;
use accelkv_durable::format::{
    decode_header, decode_page, encode_leaf, CommitTag, LeafPage, Page, PageValue,
};
use accelkv_tree::{BatchEntry, Store, MAX_BATCH};

/// One item: key, value, deadline (ms since the Unix epoch; 0: none), client flags.
pub(crate) type Item<'a> = (&'a [u8], &'a [u8], u64, u32);

/// The magic of a snapshot made of pages.
const PAGES: &[u8] = b"AKV3";

/// A page holds one leaf's items, or a part of them once the page's values come to this
/// many bytes (so a leaf of large values is never one huge page or one huge batch).
const PAGE_CUT: usize = 256 << 10;

/// Commit tag of a snapshot's pages: the file's recovery does not read snapshots, and the
/// fences, not a page count, prove one whole.
const TAG: CommitTag = CommitTag { seq: 1, pages: 0 };

/// A key range of a snapshot (`low <= key < high`; `high` `None`: no bound) and its items:
/// one page, or the whole range in an older snapshot.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Part<'a> {
    pub low: &'a [u8],
    pub high: Option<&'a [u8]>,
    pub items: Vec<Item<'a>>,
}

/// A decoded snapshot.
#[derive(Debug)]
pub(crate) struct Decoded<'a> {
    pub bounds: Bounds,
    pub sessions: Sessions,
    pub parts: Vec<Part<'a>>,
}

impl Decoded<'_> {
    /// How many items the snapshot holds.
    pub fn items(&self) -> usize {
        self.parts.iter().map(|p| p.items.len()).sum()
    }
}

/// The range `b` of `store` as a snapshot: `AKV3 | bounds | sessions | pages`, the pages
/// back to back, each recording its offset from the first. An error if a leaf could not
/// be read (a snapshot missing it would lose keys).
pub(crate) fn encode(store: &Store, b: &Bounds, sessions: &Sessions) -> Result<Vec<u8>, String> {
    let mut out = PAGES.to_vec();
    put_bounds(&mut out, b);
    sessions.encode(&mut out);
    let base = out.len();
    let (lo, hi) = (b.0.as_slice(), b.1.as_deref());
    let snap = store.snapshot();
    let version = snap.version();
    let mut key = lo.to_vec();
    loop {
        let next = snap
            .leaf(&key, |img| {
                // The page starts where the previous one ended (the range's start for the
                // first), whatever this leaf's own lower fence, so the pages tile the range.
                let from = key.as_slice();
                let mut low = Some(from).filter(|l| !l.is_empty());
                let high = match (img.high, hi) {
                    (Some(h), Some(e)) => Some(h.min(e)),
                    (h, e) => h.or(e),
                };
                let inside = |k: &[u8]| k >= from && high.is_none_or(|h| k < h);
                let mut items = Vec::new();
                let mut size = 0;
                for &(k, v, d, f) in img.items.iter().filter(|i| inside(i.0)) {
                    if size >= PAGE_CUT {
                        page(&mut out, base, img.lid, version, low, Some(k), items);
                        (low, items, size) = (Some(k), Vec::new(), 0);
                    }
                    size += k.len() + v.len();
                    items.push((k, PageValue::Inline(v), d, f));
                }
                page(&mut out, base, img.lid, version, low, high, items);
                high.map(<[u8]>::to_vec)
            })
            .map_err(|e| format!("reading the range's leaves for a snapshot: {e}"))?;
        match next {
            Some(n) if hi != Some(n.as_slice()) => key = n,
            _ => return Ok(out),
        }
    }
}

fn page<'a>(
    out: &mut Vec<u8>,
    base: usize,
    lid: u64,
    version: u64,
    low: Option<&'a [u8]>,
    high: Option<&'a [u8]>,
    items: Vec<accelkv_durable::format::PageItem<'a>>,
) {
    let p = LeafPage {
        lid,
        version,
        commit: TAG,
        low,
        high,
        items,
    };
    let at = (out.len() - base) as u64;
    out.extend_from_slice(&encode_leaf(&p, at));
}

fn put_bounds(out: &mut Vec<u8>, b: &Bounds) {
    put_bytes(out, &b.0);
    match &b.1 {
        Some(e) => {
            out.push(1);
            put_bytes(out, e);
        }
        None => out.push(0),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
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

const TORN: &str = "the snapshot is torn";

/// Decodes and checks a snapshot: every page's checksum, offset and order, and that the
/// pages' fences tile the bounds. Whatever the bytes, an error rather than a panic.
pub(crate) fn decode(b: &[u8]) -> Result<Decoded<'_>, String> {
    let (magic, mut b) = b.split_at_checked(4).ok_or(TORN)?;
    let older = match magic {
        PAGES => false,
        b"AKV1" | b"AKV2" => true,
        _ => return Err("not a range snapshot (unknown magic)".into()),
    };
    let start = bytes(&mut b).ok_or(TORN)?;
    let end = match take(&mut b, 1).ok_or(TORN)?[0] {
        0 => None,
        1 => Some(bytes(&mut b).ok_or(TORN)?),
        _ => return Err("the snapshot's bounds are malformed".into()),
    };
    if end.is_some_and(|e| e <= start) {
        return Err("the snapshot's bounds are empty".into());
    }
    let sessions = match magic {
        b"AKV1" => Sessions::default(),
        _ => Sessions::decode(&mut b).ok_or(TORN)?,
    };
    let parts = match older {
        true => vec![Part {
            low: start,
            high: end,
            items: items_of(b).ok_or(TORN)?,
        }],
        false => pages(b, start, end)?,
    };
    Ok(Decoded {
        bounds: (start.to_vec(), end.map(<[u8]>::to_vec)),
        sessions,
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
        let d = u64::from_le_bytes(take(&mut b, 8)?.try_into().ok()?);
        let f = u32::from_le_bytes(take(&mut b, 4)?.try_into().ok()?);
        out.push((k, v, d, f));
    }
    Some(out)
}

fn pages<'a>(
    sec: &'a [u8],
    start: &'a [u8],
    end: Option<&'a [u8]>,
) -> Result<Vec<Part<'a>>, String> {
    let bad =
        |at: usize, why: &dyn std::fmt::Display| format!("the snapshot's page at {at}: {why}");
    let mut parts: Vec<Part<'a>> = Vec::new();
    let mut at = 0;
    // The key the next page must start at (`None`: the last page ended the key space).
    let mut next = Some(start);
    while at < sec.len() {
        let len = decode_header(&sec[at..]).map_err(|e| bad(at, &e))?.len as usize;
        let p = match decode_page(&sec[at..], at as u64).map_err(|e| bad(at, &e))? {
            Page::Leaf(p) => p,
            Page::Ext(_) => {
                return Err(bad(at, &"an extension page (snapshots keep values inline)"))
            }
        };
        let low = p.low.unwrap_or_default();
        if next != Some(low) {
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
            low,
            high: p.high,
            items,
        });
        at += len;
    }
    match parts.last() {
        Some(last) if last.high == end => Ok(parts),
        _ => Err(TORN.into()),
    }
}

/// Makes the store hold, within each part's range, exactly the part's items, leaving keys
/// `mine` refuses as they are: one atomic batch per part (more for a part of more than
/// [`MAX_BATCH`] writes). An item the store refuses (memory full) is an error.
pub(crate) fn install(
    store: &Store,
    parts: &[Part<'_>],
    mine: impl Fn(&[u8]) -> bool,
) -> Result<(), String> {
    let failed = |e: accelkv_tree::Error| format!("installing a snapshot: {e}");
    for p in parts {
        let mut held = Vec::new();
        held_keys(store, p.low, p.high, |keys| {
            held.extend(keys);
            Ok(())
        })?;
        let mut ops: Vec<BatchEntry<'_>> = Vec::new();
        let mut items = p.items.iter().peekable();
        for k in &held {
            while items.next_if(|i| i.0 < k.as_slice()).is_some() {}
            if items.peek().is_none_or(|i| i.0 != k.as_slice()) && mine(k) {
                ops.push((k, None));
            }
        }
        for &(k, v, d, f) in p.items.iter().filter(|i| mine(i.0)) {
            ops.push((k, Some((v, d, f))));
        }
        for chunk in ops.chunks(MAX_BATCH) {
            let b = store.write_batch_items_unwaited(chunk).map_err(failed)?;
            store.wait_visible(b.version);
            for r in b.results {
                r.map_err(failed)?;
            }
        }
    }
    Ok(())
}

/// The keys the store holds in `[low, high)`, handed to `f` up to 4,096 at a time (each
/// batch read after `f` had the one before, so `f` may delete them).
pub(crate) fn held_keys(
    store: &Store,
    low: &[u8],
    high: Option<&[u8]>,
    mut f: impl FnMut(Vec<Vec<u8>>) -> Result<(), String>,
) -> Result<(), String> {
    let mut from = low.to_vec();
    loop {
        let got = store.scan(&from, high, 4096);
        let Some((last, _)) = got.last() else {
            return Ok(());
        };
        from = last.clone();
        from.push(0);
        f(got.into_iter().map(|(k, _)| k).collect())?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accelkv_tree::Config;

    /// A deadline far in the future (ms since the Unix epoch).
    const FAR: u64 = u64::MAX / 2;

    fn b(lo: &str, hi: Option<&str>) -> Bounds {
        (lo.as_bytes().to_vec(), hi.map(|h| h.as_bytes().to_vec()))
    }

    /// A store with small leaves holding `n` keys `k00000`…, some expiring, some flagged.
    fn store(n: usize) -> Store {
        let s = Store::new(Config {
            node_size: 4096,
            ..Config::default()
        })
        .unwrap();
        for i in 0..n {
            let k = format!("k{i:05}");
            let d = if i % 7 == 0 { FAR } else { 0 };
            s.put_item(k.as_bytes(), format!("v{i}").as_bytes(), d, (i % 3) as u32)
                .unwrap();
        }
        s
    }

    fn contents(s: &Store) -> Vec<(Vec<u8>, Vec<u8>, u64, u32)> {
        let snap = s.snapshot();
        let mut out = Vec::new();
        let mut key = Vec::new();
        loop {
            let next = snap
                .leaf(&key, |img| {
                    for &(k, v, d, f) in &img.items {
                        out.push((k.to_vec(), v.to_vec(), d, f));
                    }
                    img.high.map(<[u8]>::to_vec)
                })
                .unwrap();
            match next {
                Some(n) => key = n,
                None => return out,
            }
        }
    }

    #[test]
    fn a_range_round_trips_through_pages_into_another_store() {
        let from = store(2000);
        let mut sessions = Sessions::default();
        sessions.record(7, 3, b":3\r\n");
        for bounds in [b("", None), b("k00500", Some("k01500")), b("k01999", None)] {
            let data = encode(&from, &bounds, &sessions).unwrap();
            let snap = decode(&data).unwrap();
            assert_eq!(snap.bounds, bounds);
            assert_eq!(snap.sessions.seen(7, 3).as_deref(), Some(&b":3\r\n"[..]));
            assert!(
                snap.parts.len() > 1 || bounds.0 == b"k01999",
                "one page per leaf"
            );
            // The target holds stale keys inside the range and keys outside it.
            let to = store(0);
            for k in ["a", "k00500", "k00777", "k01499x", "k01500", "z"] {
                to.put(k.as_bytes(), b"old").unwrap();
            }
            install(&to, &snap.parts, |_| true).unwrap();
            let inside =
                |k: &[u8]| k >= bounds.0.as_slice() && bounds.1.as_deref().is_none_or(|e| k < e);
            let want: Vec<_> = contents(&from)
                .into_iter()
                .filter(|i| inside(&i.0))
                .collect();
            let got: Vec<_> = contents(&to).into_iter().filter(|i| inside(&i.0)).collect();
            assert_eq!(got, want, "{bounds:?}");
            for k in ["a", "k01500", "z"] {
                let outside = !inside(k.as_bytes());
                let kept = to.get(k.as_bytes()).unwrap() == Some(b"old".to_vec());
                assert_eq!(kept, outside, "{k} in {bounds:?}");
            }
        }
    }

    #[test]
    fn keys_another_range_holds_are_left_alone() {
        let from = store(300);
        let data = encode(&from, &b("", None), &Sessions::default()).unwrap();
        let to = store(0);
        to.put(b"k00100", b"theirs").unwrap();
        to.put(b"k00100x", b"theirs").unwrap();
        let snap = decode(&data).unwrap();
        install(&to, &snap.parts, |k| !k.starts_with(b"k001")).unwrap();
        assert_eq!(to.get(b"k00100").unwrap(), Some(b"theirs".to_vec()));
        assert_eq!(to.get(b"k00100x").unwrap(), Some(b"theirs".to_vec()));
        assert_eq!(to.get(b"k00101").unwrap(), None);
        assert_eq!(to.get(b"k00200").unwrap(), Some(b"v200".to_vec()));
    }

    #[test]
    fn large_values_are_cut_into_several_pages() {
        let from = store(0);
        let big = vec![7u8; 100 << 10];
        for i in 0..8 {
            from.put(format!("big{i}").as_bytes(), &big).unwrap();
        }
        let data = encode(&from, &b("", None), &Sessions::default()).unwrap();
        let snap = decode(&data).unwrap();
        assert_eq!(snap.items(), 8);
        assert!(
            snap.parts.iter().all(|p| p.items.len() <= 3),
            "{:?}",
            snap.parts.len()
        );
    }

    #[test]
    fn an_empty_range_is_one_empty_page() {
        let data = encode(&store(50), &b("m", Some("n")), &Sessions::default()).unwrap();
        let snap = decode(&data).unwrap();
        assert_eq!(
            snap.parts,
            vec![Part {
                low: b"m",
                high: Some(b"n"),
                items: vec![]
            }]
        );
    }

    #[test]
    fn torn_or_damaged_snapshots_are_refused() {
        let data = encode(&store(300), &b("k", Some("l")), &Sessions::default()).unwrap();
        assert!(decode(&data).is_ok());
        for cut in 0..data.len() {
            assert!(decode(&data[..cut]).is_err(), "a prefix of {cut} bytes");
        }
        for at in (0..data.len()).step_by(97) {
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
        assert_eq!(snap.bounds, b("k", Some("p")));
        assert_eq!(snap.sessions, Sessions::default(), "AKV1 has none");
        assert_eq!(
            snap.parts[0].items,
            vec![(&b"key"[..], &b"value"[..], FAR, 9)]
        );
        for cut in (0..s.len()).filter(|&c| c != head) {
            assert!(decode(&s[..cut]).is_err(), "{cut}");
        }
        let mut sessions = Sessions::default();
        sessions.record(7, 3, b":3\r\n");
        let mut v2 = b"AKV2".to_vec();
        v2.extend_from_slice(&s[4..head]);
        sessions.encode(&mut v2);
        v2.extend_from_slice(&s[head..]);
        let snap = decode(&v2).unwrap();
        assert_eq!(snap.sessions.seen(7, 3).as_deref(), Some(&b":3\r\n"[..]));
        assert_eq!(snap.items(), 1);
        let to = store(0);
        to.put(b"l", b"stale").unwrap();
        install(&to, &snap.parts, |_| true).unwrap();
        assert_eq!(to.get(b"l").unwrap(), None);
        assert_eq!(to.get(b"key").unwrap(), Some(b"value".to_vec()));
    }

    proptest::proptest! {
        /// Whatever a peer or a damaged file hands over, decoding answers a snapshot or an
        /// error, never a panic; so does a valid snapshot with bytes overwritten.
        #[test]
        fn decoding_any_bytes_is_safe(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            edits in proptest::collection::vec((0usize..4096, proptest::prelude::any::<u8>()), 0..8),
        ) {
            for magic in [&b""[..], b"AKV1", b"AKV2", b"AKV3"] {
                let _ = decode(&[magic, &raw].concat());
            }
            static VALID: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
                encode(&store(60), &b("k", None), &Sessions::default()).unwrap()
            });
            let mut data = VALID.clone();
            for (at, byte) in edits {
                let n = data.len();
                data[at % n] = byte;
            }
            let _ = decode(&data);
        }
    }
}

/// What a snapshot costs, against the item-list snapshots it replaced (docs/BENCHMARKS.md,
/// "Range snapshots"). A measurement, not a test; it asserts nothing about time:
/// `cargo test --release -p accelkv-server --features cluster --lib snapshot_costs -- --ignored --nocapture`
#[cfg(test)]
mod costs {
    use super::*;
    use accelkv_tree::Config;
    use std::time::Instant;

    #[test]
    #[ignore]
    fn snapshot_costs() {
        let n: usize = std::env::var("ITEMS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(500_000);
        let value = [b'x'; 100];
        let from = Store::new(Config::default()).unwrap();
        for i in 0..n {
            from.put(format!("user{:012}", i * 7919 % n).as_bytes(), &value)
                .unwrap();
        }
        let all: Bounds = (Vec::new(), None);
        // The item list: magic, bounds, no clients, each item 4 + key + 4 + value + 12.
        let listed = 4 + 5 + 4 + n * (4 + 16 + 4 + value.len() + 12);
        for round in 1..=3 {
            let t = Instant::now();
            let data = encode(&from, &all, &Sessions::default()).unwrap();
            let encoded = t.elapsed();
            let t = Instant::now();
            let snap = decode(&data).unwrap();
            let decoded = t.elapsed();
            let pages = Store::new(Config::default()).unwrap();
            let t = Instant::now();
            install(&pages, &snap.parts, |_| true).unwrap();
            let into_empty = t.elapsed();
            let t = Instant::now();
            install(&pages, &snap.parts, |_| true).unwrap();
            let over_image = t.elapsed();
            // How item-list snapshots were installed: every key deleted, then put one by one.
            let items = Store::new(Config::default()).unwrap();
            let put_all = |s: &Store| {
                for p in &snap.parts {
                    for &(k, v, d, f) in &p.items {
                        s.put_item(k, v, d, f).unwrap();
                    }
                }
            };
            let t = Instant::now();
            put_all(&items);
            let old_into_empty = t.elapsed();
            let t = Instant::now();
            for (k, _) in items.scan(b"", None, usize::MAX) {
                items.delete(&k).unwrap();
            }
            put_all(&items);
            let old_over_image = t.elapsed();
            eprintln!(
                "round {round}: {n} items, {} pages, {} bytes (item list {listed}); encode {encoded:.0?}, decode and check {decoded:.0?}; install into an empty store {into_empty:.0?} (item list {old_into_empty:.0?}), over the previous image {over_image:.0?} (item list {old_over_image:.0?})",
                snap.parts.len(),
                data.len(),
            );
        }
    }
}

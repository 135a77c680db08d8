//! A range's snapshot in cluster mode (docs/FORMAT.md, "Range snapshot"): the range's
//! leaves as pages of the page file's own format, all taken at one read version, after the
//! range's bounds and its clients' last writes. The bytes are written and checked by
//! accelkv-durable's `range_snapshot.rs`; this module takes a snapshot of the store and
//! installs one.
//!
//! A replica installs a snapshot page by page, after every page was checked (a torn or
//! corrupted snapshot changes nothing): each page's key range switches from what the store
//! holds to the page's items in one atomic batch, so nothing is replayed and no reader of
//! the store sees half a page.

use crate::cluster::bounds::Bounds;
use crate::cluster::once::Sessions;
use accelkv_durable::format::PageValue;
use accelkv_durable::range_snapshot::{self, Part, Writer};
use accelkv_tree::{BatchEntry, Store, MAX_BATCH};

/// A page holds one leaf's items, or a part of them once the page's values come to this
/// many bytes (so a leaf of large values is never one huge page or one huge batch).
const PAGE_CUT: usize = 256 << 10;

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

/// The range `b` of `store` as a snapshot: its head, then one page per leaf (more for a
/// leaf of large values), each starting where the previous one ended. An error if a leaf
/// could not be read (a snapshot missing it would lose keys).
pub(crate) fn encode(store: &Store, b: &Bounds, sessions: &Sessions) -> Result<Vec<u8>, String> {
    let (lo, hi) = (b.0.as_slice(), b.1.as_deref());
    let mut out = Writer::new(lo, hi, &sessions.clients());
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
                        out.page(img.lid, version, low, Some(k), items);
                        (low, items, size) = (Some(k), Vec::new(), 0);
                    }
                    size += k.len() + v.len();
                    items.push((k, PageValue::Inline(v), d, f));
                }
                out.page(img.lid, version, low, high, items);
                high.map(<[u8]>::to_vec)
            })
            .map_err(|e| format!("reading the range's leaves for a snapshot: {e}"))?;
        match next {
            Some(n) if hi != Some(n.as_slice()) => key = n,
            _ => return Ok(out.finish()),
        }
    }
}

/// Decodes and checks a snapshot (accelkv-durable's `range_snapshot::decode`): whatever
/// the bytes, an error rather than a panic.
pub(crate) fn decode(b: &[u8]) -> Result<Decoded<'_>, String> {
    let s = range_snapshot::decode(b)?;
    Ok(Decoded {
        bounds: (s.low.to_vec(), s.high.map(<[u8]>::to_vec)),
        sessions: Sessions::from_clients(&s.clients),
        parts: s.parts,
    })
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
    fn an_older_snapshot_installs_as_one_part() {
        // AKV2: bounds, one client, one item (docs/FORMAT.md "Range snapshot").
        let mut s = b"AKV2".to_vec();
        let one = 1u32.to_le_bytes();
        // `k` up to `p`, then a table of one client.
        for part in [&one[..], b"k", &[1], &one, b"p", &one] {
            s.extend_from_slice(part);
        }
        for n in [7u64, 3, 1] {
            s.extend_from_slice(&n.to_le_bytes());
        }
        s.extend_from_slice(&4u32.to_le_bytes());
        s.extend_from_slice(b":3\r\n");
        for field in [&b"key"[..], b"value"] {
            s.extend_from_slice(&(field.len() as u32).to_le_bytes());
            s.extend_from_slice(field);
        }
        s.extend_from_slice(&FAR.to_le_bytes());
        s.extend_from_slice(&9u32.to_le_bytes());
        let snap = decode(&s).unwrap();
        assert_eq!(snap.bounds, b("k", Some("p")));
        assert_eq!(snap.sessions.seen(7, 3).as_deref(), Some(&b":3\r\n"[..]));
        let to = store(0);
        to.put(b"l", b"stale").unwrap();
        install(&to, &snap.parts, |_| true).unwrap();
        assert_eq!(to.get(b"l").unwrap(), None);
        assert_eq!(to.get(b"key").unwrap(), Some(b"value".to_vec()));
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

//! Bytes of memory per item (Honeycomb reports 1.44× the raw key and value bytes): a store
//! bulk-loaded with N items of 16-byte keys and values, a store filled by random PUTs, and a
//! `BTreeMap<[u8; 16], [u8; 16]>`, each measured by the store's own accounting and by the
//! growth of this process's resident set.
//!
//! `cargo run --release -p accelkv-tree --example memory -- 10000000`

mod common;

use accelkv_tree::{Config, Store};
use common::{key, rss};
use std::collections::BTreeMap;

fn value16(i: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000_000);
    let raw = (n * 32) as f64;
    println!(
        "{n} items of 16-byte keys and 16-byte values ({:.0} MB raw)",
        raw / 1e6
    );
    println!("| structure | bytes/item (accounting) | × raw | bytes/item (RSS growth) | × raw |");
    println!("|---|---|---|---|---|");
    let row = |name: &str, acct: Option<f64>, rss_bytes: u64| {
        let r = rss_bytes as f64 / n as f64;
        match acct {
            Some(a) => println!(
                "| {name} | {a:.1} | {:.2} | {r:.1} | {:.2} |",
                a / 32.0,
                r / 32.0
            ),
            None => println!("| {name} | – | – | {r:.1} | {:.2} |", r / 32.0),
        }
    };
    {
        let mut sorted: Vec<([u8; 16], [u8; 16])> = (0..n).map(|i| (key(i), value16(i))).collect();
        sorted.sort_unstable();
        let before = rss();
        let s = Store::bulk_load(Config::default(), sorted.iter().map(|(k, v)| (k, v)))
            .expect("bulk load");
        let grown = rss().saturating_sub(before);
        let st = s.stats();
        row(
            "accelkv, bulk load (90% fill)",
            Some(st.bytes_per_item),
            grown,
        );
    }
    {
        let before = rss();
        let s = Store::new(Config::default()).expect("store");
        for i in 0..n {
            s.put(&key(i), &value16(i)).expect("put");
        }
        let grown = rss().saturating_sub(before);
        let st = s.stats();
        row("accelkv, random PUTs", Some(st.bytes_per_item), grown);
        println!(
            "(random PUTs: depth {}, {} leaves, {:.0}% average leaf fill)",
            st.depth,
            st.leaves,
            100.0 * st.used_bytes as f64 / st.node_bytes as f64
        );
    }
    {
        let before = rss();
        let mut m = BTreeMap::new();
        for i in 0..n {
            m.insert(key(i), value16(i));
        }
        let grown = rss().saturating_sub(before);
        row("BTreeMap<[u8;16],[u8;16]>, random inserts", None, grown);
        std::hint::black_box(&m);
    }
}

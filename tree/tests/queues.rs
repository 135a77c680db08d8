//! A key range used as a queue: items taken from its front one at a time (what ZPOPMIN,
//! LPOP and SPOP do to a collection's subkeys), after inserts in random order. Every leaf
//! emptied by the deletes must leave the tree, or each scan from the front walks the run
//! of empty leaves behind it; and the backward scan's last items must match a model.

use accelkv_tree::{Config, Store};
use std::collections::BTreeSet;

fn key(i: u64) -> Vec<u8> {
    format!("q:{i:08}").into_bytes()
}

/// Random-order inserts of `n` keys, then: a snapshot of the keys present.
fn filled(s: &Store, n: u64) -> BTreeSet<Vec<u8>> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut model = BTreeSet::new();
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = key(x % n);
        s.put(&k, b"0123456789abcdef").expect("put");
        model.insert(k);
    }
    model
}

#[test]
fn taking_from_the_front_leaves_no_empty_leaf_behind() {
    let s = Store::new(Config::default()).expect("store");
    let mut model = filled(&s, 60_000);
    let taken = model.len() / 2;
    for _ in 0..taken {
        let mut first = None;
        s.scan_latest_with(b"q:", Some(b"q;"), 1, |k, _| first = Some(k.to_vec()))
            .expect("scan");
        let first = first.expect("an item is left");
        assert_eq!(Some(&first), model.first(), "the front is the model's");
        s.delete(&first).expect("delete");
        model.pop_first();
    }
    let st = s.stats();
    assert_eq!(st.items, model.len() as u64);
    // Before emptied leaves were merged whenever their sibling's items fit one leaf, this
    // run left 22 of them at the front. What may stay: one per interior node, a leaf whose
    // parent routes to nothing else (no sibling to merge with).
    assert!(
        st.empty_leaves <= st.interiors,
        "{} empty leaves of {} ({} interior nodes) after taking {taken} from the front",
        st.empty_leaves,
        st.leaves,
        st.interiors
    );
}

#[test]
fn the_last_items_of_a_thinned_range_read_backwards_match_the_model() {
    let s = Store::new(Config::default()).expect("store");
    let mut model = filled(&s, 20_000);
    // Thin the range unevenly: whole runs gone, and every third key elsewhere, so the
    // backward scan's window past a probe often holds fewer items than asked for.
    let gone: Vec<Vec<u8>> = model
        .iter()
        .enumerate()
        .filter(|(i, _)| (i / 500) % 3 == 1 || i % 3 == 0)
        .map(|(_, k)| k.clone())
        .collect();
    for k in &gone {
        s.delete(k).expect("delete");
        model.remove(k);
    }
    let keys: Vec<&Vec<u8>> = model.iter().collect();
    for (hi, limit) in [
        (20_000, 1),
        (20_000, 7),
        (15_000, 40),
        (9_999, 300),
        (600, 5000),
    ] {
        let hi = key(hi);
        let got: Vec<Vec<u8>> = s
            .try_scan_rev(b"q:", &hi, limit)
            .expect("scan")
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let want: Vec<Vec<u8>> = keys
            .iter()
            .rev()
            .filter(|k| k.as_slice() < hi.as_slice())
            .take(limit)
            .map(|k| k.to_vec())
            .collect();
        assert_eq!(
            got,
            want,
            "below {:?}, {limit} items",
            String::from_utf8_lossy(&hi)
        );
    }
}

//! Decode-only fuzz target for the node format: arbitrary bytes (padded or cut to a node
//! size) go through `validate_node`; a node it accepts is then read every way a reader
//! reads one (the tail's fingerprints and slots included, an interior node's heads block
//! read without a view too), and a log entry appended the
//! way the tree's writer appends one must leave a node that validates. Nothing may panic.
//!
//! `cargo +nightly fuzz run node_decode fuzz/seeds/node_decode -- -max_total_time=60`
//! (seeds: `cargo run -p accelkv-node --example node_seeds fuzz/seeds/node_decode`)

#![no_main]

use accelkv_node::{append_owned, validate_node, NodeView, ValueRef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the node size; the rest is the node.
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let size = 4096usize << (sel % 5);
    let mut node = vec![0u8; size];
    let n = rest.len().min(size);
    node[..n].copy_from_slice(&rest[..n]);
    // Keep the size byte consistent often enough to get past the first check.
    if sel & 0x80 != 0 {
        node[47] = size.trailing_zeros() as u8;
    }
    if validate_node(&node).is_err() {
        return;
    }
    let view = NodeView::from_node(&node);
    let probe = rest.get(..rest.len().min(16)).unwrap_or(&[]);
    if view.is_leaf() {
        // Clocks: expire nothing, a typical time, and past every deadline.
        for (rv, now) in [(0, 0), (view.version(), 1_700_000_000_000), (u64::MAX, u64::MAX)] {
            let _ = view.leaf_iter(rv, now).count();
            let _ = view.leaf_get(probe, rv, now);
            let _ = view.leaf_floor(probe, rv, now);
            let _ = view.leaf_lower_bound(probe, rv, now).count();
        }
        let _ = accelkv_node::plan_append(&view, probe);
        if !probe.is_empty() && probe.len() <= accelkv_node::layout::MAX_KEY {
            let version = view.version().saturating_add(1);
            let mut node = node.clone();
            let value = ValueRef::inline(probe);
            let value = (sel & 0x40 != 0).then_some(&value);
            if append_owned(&mut node, probe, value, version) {
                if let Err(e) = validate_node(&node) {
                    panic!("an append left an invalid node: {e}");
                }
                let v = NodeView::from_node(&node);
                assert_eq!(
                    v.leaf_get(probe, version, 0).map(|x| x.data),
                    value.map(|x| x.data),
                    "an appended entry is what a GET of its key finds"
                );
            }
        }
    } else {
        let child = view.child_for(probe);
        let _ = view.child_below(probe);
        let _ = view.interior_entries();
        // Routing by the heads block from the raw bytes agrees with the view, or declines.
        if let Some(raw) = accelkv_node::route_heads(&node[accelkv_node::layout::ATOMIC_END..], probe) {
            assert_eq!(raw, child, "route_heads disagrees with the view");
        }
    }
});

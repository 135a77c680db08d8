//! Decode-only fuzz target for the node format: arbitrary bytes (padded or cut to a node
//! size) go through `validate_node`; a node it accepts is then read every way a reader
//! reads one. Nothing may panic.
//!
//! `cargo +nightly fuzz run node_decode -- -max_total_time=60`

#![no_main]

use accelkv_node::layout::used_of;
use accelkv_node::{validate_node, NodeView};
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
    let word = u64::from_le_bytes(node[0..8].try_into().expect("8 bytes"));
    let view = NodeView::from_node(&node, used_of(word));
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
    } else {
        let _ = view.child_for(probe);
        let _ = view.child_below(probe);
        let _ = view.interior_entries();
    }
});

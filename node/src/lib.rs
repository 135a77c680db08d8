//! Honeycomb node format for accelkv (Honeycomb §3.1; layout drawn in docs/FORMAT.md).
//!
//! Pure code: the byte layout of fixed-size B+tree nodes, builders that write a whole node,
//! the log-block appender, and the search inside one node (Retina's fingerprints for a point
//! lookup, a binary search of the item slots for a range or a child, the log block ordered
//! by order hints and merged by back pointers). Nothing here knows about threads
//! or memory allocation; the tree crate owns buffers and publishes them.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod builder;
pub mod fingerprint;
pub mod keys;
pub mod layout;
pub mod leaf;
pub mod log;
pub mod validate;
pub mod view;

#[cfg(test)]
mod tests;

pub use builder::{
    build_interior, build_leaf, build_leaf_full, build_leaf_raw, interior_item_size,
    leaf_fits_full, leaf_item_size, leaf_sorted_bytes, NodeMeta, Overflow, RawItem,
};
pub use fingerprint::{fingerprint, key_hash};
pub use keys::cmp_keys;
pub use layout::Geometry;
pub use leaf::{Candidate, LeafIter};
pub use log::{
    append_owned, encode_log_entry, encode_log_slot, log_entry_len, plan_append, plan_append_fp,
    set_log_delta, AppendPlan,
};
pub use validate::{validate_node, Corrupt};
pub use view::{
    route_heads, tail_len, NodeView, SortedItem, SortedIter, TailShape, ValueData, ValueRef,
};

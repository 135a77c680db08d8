//! Honeycomb node format for accelkv (Honeycomb §3.1; layout drawn in docs/FORMAT.md).
//!
//! Pure code: the byte layout of fixed-size B+tree nodes, builders that write a whole node,
//! the log-block appender, and the search inside one node (shortcut block → one segment, log
//! block ordered by order hints, merged by back pointers). Nothing here knows about threads
//! or memory allocation; the tree crate owns buffers and publishes them.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod builder;
pub mod keys;
pub mod layout;
pub mod leaf;
pub mod log;
pub mod validate;
pub mod view;

#[cfg(test)]
mod tests;

pub use builder::{
    build_interior, build_leaf, build_leaf_full, interior_item_size, leaf_item_size,
    leaf_sorted_bytes, NodeMeta, Overflow,
};
pub use keys::cmp_keys;
pub use layout::Geometry;
pub use leaf::LeafIter;
pub use log::{encode_log_entry, log_entry_len, plan_append, set_log_delta, AppendPlan};
pub use validate::{validate_node, Corrupt};
pub use view::{NodeView, SegmentCursor, SortedIter, ValueData, ValueRef};

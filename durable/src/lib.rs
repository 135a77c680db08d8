//! accelkv durability without a write-ahead log (Retina's version-based crash consistency,
//! DESIGN.md "durability"): leaves are persisted as pages that carry their LID, version,
//! key range, commit number and a CRC-32C, written out of place into slab-allocated slots of
//! one page file; a commit that changes a few keys of a leaf writes only those keys, packed
//! with the commit's other such changes into delta pages, and images the leaf whole once its
//! changes pass a bound; values too large for a leaf go to extension pages; writes share
//! `fdatasync`s (group commit). Recovery scans the page file, finds the newest commit whose
//! pages are all intact (discarding what a crash left of a later one), keeps the newest
//! image of every key range up to it (with the delta entries newer than it), and rebuilds the tree: the state as of one version, a
//! prefix of the writes. Under the relaxed sync policies, writers are slowed when the page
//! writer falls behind, so what a crash can lose stays bounded. Interior nodes are never
//! written. docs/FORMAT.md ("Page file") and docs/ARCHITECTURE.md ("Durability") describe
//! the format and the argument.
//!
//! ```
//! use accelkv_durable::Store;
//! let dir = std::env::temp_dir().join(format!("accelkv-doc-{}", std::process::id()));
//! {
//!     let store = Store::open(&dir).unwrap();
//!     store.put(b"apple", b"red").unwrap(); // returns once durable
//! }
//! let store = Store::open(&dir).unwrap(); // recovers
//! assert_eq!(store.get(b"apple").unwrap(), Some(b"red".to_vec()));
//! # drop(store);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod commit;
mod cover;
mod delta;
mod error;
pub mod fault;
pub mod format;
mod images;
pub mod index;
mod index_close;
mod index_open;
pub mod io;
mod mirror;
mod pager;
mod pass1;
pub mod range_snapshot;
mod recovery;
mod replay;
mod slab;
mod store;

pub use commit::{Callback, SyncPolicy, NONE_MAX_LAG};
pub use delta::{Deltas, DELTA_PAGE_BYTES, MIN_LEAF_ENTRIES};
pub use error::{Error, Result};
pub use index::INDEX_FILE;
pub use recovery::{LoadProgress, RecoveryReport};
pub use store::{
    Durability, DurableStats, Options, Store, DEFAULT_LEASE, LOCK_FILE, MIN_LEASE, PAGE_FILE,
};

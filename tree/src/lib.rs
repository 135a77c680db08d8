//! accelkv store core: an MVCC B+tree over Honeycomb nodes (Honeycomb §3) with wait-free
//! reads, a concurrent CPU write path, epoch-based reclamation, bulk load, and the in-process
//! `Store` API. The node byte format lives in the `accelkv-node` crate; docs/FORMAT.md and
//! docs/ARCHITECTURE.md describe both.
//!
//! ```
//! use accelkv_tree::{Config, Store};
//! let store = Store::new(Config::default()).unwrap();
//! store.put(b"apple", b"red").unwrap();
//! store.put(b"banana", b"yellow").unwrap();
//! assert_eq!(store.get(b"apple").unwrap(), Some(b"red".to_vec()));
//! let items = store.scan(b"a", None, 10);
//! assert_eq!(items.len(), 2);
//! // Honeycomb's SCAN(kl, ku) starts at the largest key <= kl.
//! let floor = store.scan_floor(b"azure", b"z", 10);
//! assert_eq!(floor[0].0, b"apple");
//! ```

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod arena;
mod backoff;
mod batch;
mod bulk;
mod clock;
mod config;
mod epoch;
mod error;
pub mod failpoint;
mod locate;
mod mirror;
mod page_table;
pub mod prefetch;
mod raw;
mod remap;
mod smo;
mod store;
mod tree;
mod values;
mod version;
mod write;

pub use accelkv_node::keys::keys_eq;
pub use accelkv_node::layout::NO_DEADLINE;
pub use accelkv_node::{fingerprint, key_hash, Candidate, NodeView, ValueData, ValueRef};
pub use batch::MAX_BATCH;
pub use bulk::Recovered;
pub use clock::now_ms;
pub use config::Config;
pub use epoch::ReaderSlot;
pub use error::{Error, Result};
pub use locate::{StorePin, WriteHint};
pub use mirror::{ItemSink, MirrorStats, PageItem, PageOf, Pager};
pub use raw::{Raw, RemapSubscription, WriteObserver, ROOT_LID};
pub use remap::{Chunk, Remap, RemapFeed};
pub use store::ExpiredStep;
pub use store::{
    Batch, BatchEntry, BatchItem, LeafImage, Snapshot, Stats, Store, VersionView, Write,
};

//! accelkv read engines (DESIGN.md part "engine"): batches of GET, SCAN and SCAN_FLOOR run
//! off the caller's thread with many requests in flight and complete in any order, each
//! tagged with its request and the read version it ran at.
//!
//! * [`ReadEngine`] is the interface every back end implements (CPU now, GPU later).
//! * [`CpuEngine`] is the CPU back end: engine threads that each keep `G` requests in
//!   flight as explicit state machines, prefetching the next node while they work on
//!   another request (AMAC; the software counterpart of Honeycomb's key search units and
//!   memory access generator).
//! * [`HotCache`] is the hot-key cache in front of it (the RISC-V NIC accelerator's cache,
//!   with KV-Direct's bucket layout), filled by a control plane from sampled GET keys and
//!   kept exact by the writers.
//! * [`EngineStore`] routes a store's reads through an engine.
//! * [`start`] chooses and starts the engine (`auto|cpu|gpu`); an engine with memory of
//!   its own (the GPU engine) is offered through [`Accelerator`].
//!
//! ```
//! use accelkv_engine::{CpuEngine, EngineConfig, Reply, Request, Sink, ReadEngine};
//! use accelkv_tree::{Config, Store};
//! use std::sync::Arc;
//! let store = Arc::new(Store::new(Config::default()).unwrap());
//! store.put(b"k1", b"v1").unwrap();
//! let engine = CpuEngine::start(store.clone(), EngineConfig::default());
//! let sink = Sink::new();
//! engine.submit(&sink, vec![(7, Request::get(b"k1")), (8, Request::scan(b"k", None, 10))]);
//! let mut done = Vec::new();
//! sink.wait(&mut done, 2, std::time::Duration::from_secs(5));
//! assert_eq!(done.len(), 2);
//! let c = done.iter().find(|c| c.tag == 7).unwrap();
//! assert_eq!(c.reply, Reply::Value(Some(b"v1".to_vec())));
//! ```

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod amac;
mod cpu;
mod gets;
mod hash;
mod hot;
mod inline;
mod loader;
mod manager;
mod request;
mod routed;
mod select;
mod sketch;
mod submissions;

pub use cpu::{CpuEngine, EngineConfig, Staging, STRAIGHT_BYTES};
pub use hot::{HotCache, HotCacheStats};
pub use inline::{Found, InlineReader};
pub use loader::{LoadSink, Loader};
pub use request::{Completion, Items, ReadRef, Reply, Request, Sink};
pub use routed::EngineStore;
pub use select::{start, Accelerator, EngineKind, Offload, Sample, Started};
pub use submissions::{Submission, Submissions};

/// Counters an engine reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests completed.
    pub completed: u64,
    /// GETs answered by the hot-key cache.
    pub cache_hits: u64,
    /// GETs that looked in the cache and went on to the tree.
    pub cache_misses: u64,
    /// Keys installed in the cache by the control plane.
    pub cache_installs: u64,
    /// Keys evicted from the cache to make room.
    pub cache_evictions: u64,
    /// Whether the hot-key cache is in use (on while keys are hot enough to pay for it).
    pub cache_active: bool,
    /// Requests submitted and not yet taken into an engine thread's window.
    pub queued: u64,
}

/// A read engine: takes batches of read requests and completes them in any order.
pub trait ReadEngine: Send + Sync {
    /// Submits a batch of `(tag, request)`. Every request is given the global read version
    /// current at submission and completes into `sink`, tagged, in any order.
    fn submit(&self, sink: &std::sync::Arc<Sink>, batch: Vec<(u64, Request)>);

    /// Which back end this is ("cpu", ...).
    fn name(&self) -> &'static str;

    /// Counters.
    fn stats(&self) -> EngineStats;
}

//! accelkv's accelerator in RTL (issue 19): the hardware half of the read path that the
//! seeds (Honeycomb, KV-Direct, Algo-Logic) built on FPGAs, in SystemVerilog under `sv/`,
//! reading node bytes exactly as docs/FORMAT.md lays them out. docs/RTL.md describes the
//! micro-architecture.
//!
//! * `sv/ksu.sv`, the key search unit: one node, one key, at a read version; driven by
//!   `Ksu`.
//! * `sv/walk.sv`, the tree-walk engine: a request table, a memory-request generator, key
//!   search units with node buffers that double as an interior-node cache, out-of-order
//!   completion; driven cycle by cycle by `WalkSim` against a `Memory` with latency
//!   (`StoreMemory`: a live store's page table and nodes).
//! * `sv/frame_parser.sv`, the binary protocol's frame parser: a request frame a byte a
//!   cycle, its operations and outcome as `accelkv_proto::frame::decode_request` gives
//!   them; driven by `FrameParser`.
//! * `RtlEngine`: a `ReadEngine` back end that runs GET and SCAN through the simulated
//!   walk engine (`accelkv-server --engine rtl`, with the server's `rtl` feature).
//!
//! With the `sim` feature the crate verilates the RTL (Verilator, `apt-get install -y
//! verilator`) and links the simulation; the differential tests compare its answers with the
//! reference reader (`cargo test -p accelkv-rtl --features sim`). Without the feature the
//! crate is empty.

#[cfg(feature = "sim")]
mod engine;
#[cfg(feature = "sim")]
mod ksu;
#[cfg(feature = "sim")]
mod parser;
#[cfg(feature = "sim")]
mod store_mem;
#[cfg(feature = "sim")]
mod walk;

#[cfg(feature = "sim")]
pub use engine::{Rtl, RtlEngine};
#[cfg(feature = "sim")]
pub use ksu::{Answer, Ksu, Search};
#[cfg(feature = "sim")]
pub use parser::{FrameParser, Outcome, Parse, ParsedOp, ParserLimits, Verdict};
#[cfg(feature = "sim")]
pub use store_mem::StoreMemory;
#[cfg(feature = "sim")]
pub use walk::{
    Done, Lookup, Memory, RunStats, Stuck, WalkConfig, WalkSim, Walked, MAX_KEY, MAX_KSUS,
    MAX_NODE, MAX_SLOTS, UNMAPPED,
};

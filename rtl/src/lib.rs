//! accelkv's accelerator in RTL (issue 19): the hardware half of the read path that the
//! seeds (Honeycomb, KV-Direct, Algo-Logic) built on FPGAs, in SystemVerilog under `sv/`,
//! reading node bytes exactly as docs/FORMAT.md lays them out. docs/RTL.md describes the
//! micro-architecture.
//!
//! Built so far: the key search unit (`sv/ksu.sv`). With the `sim` feature the crate
//! verilates it (Verilator, `apt-get install -y verilator`) and links the simulation, and
//! `Ksu` drives it from Rust; the differential tests compare its answers with the node
//! crate's reference reader on nodes built by the tree's own builder and log writer
//! (`cargo test -p accelkv-rtl --features sim`). Without the feature the crate is empty.

#[cfg(feature = "sim")]
mod ksu;

#[cfg(feature = "sim")]
pub use ksu::{Answer, Ksu, Search};

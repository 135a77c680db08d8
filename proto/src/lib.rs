//! accelkv wire formats, pure encode/decode with no I/O (docs/PROTOCOL.md):
//!
//! * [`frame`]: the batched binary protocol v1 — many operations per frame, one frame per
//!   UDP datagram or length-delimited on TCP, per-operation status codes, replies in any
//!   order within a frame;
//! * [`resp`]: the RESP2 subset that lets Redis clients and tools talk to accelkv, and
//!   [`resp_stream`]: a RESP command whose big arguments are read into their own memory;
//! * [`memcache`]: memcached's text and meta commands, so memcached clients and tools work;
//! * [`hll`]: Redis's HyperLogLog string format, so PFADD's values read the same in Redis;
//! * [`rdb`]: Redis's DUMP serialization, so values move between Redis and accelkv;
//! * [`operand`]: the typed operands of atomics and vector operations;
//! * [`Limits`]: the sizes every decoder enforces.
//!
//! Decoders never panic on any input and never allocate beyond a limit; the fuzz targets in
//! `fuzz/` and the property tests check it.

#![deny(clippy::unwrap_used)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod collection;
pub mod frame;
pub mod hll;
mod limits;
pub mod memcache;
pub mod operand;
pub mod packed;
pub mod rdb;
pub mod resp;
pub mod resp_stream;
pub mod slot;

pub use frame::{Body, FrameError, Header, Opcode, Request, Response, Status};
pub use limits::Limits;
pub use resp::{RespError, Value};

//! The command families behind the RESP adapter: each file (or folder) one family's
//! handlers, every one a `fn(&mut Call)` that the command table (`../table.rs`) names and
//! the gate (`../gate.rs`) has checked. What a command does lives here; how a command
//! reaches it (decoding, batching, the checks, the dispatcher, the connection) lives one
//! folder up.

pub mod atomics;
pub mod bitfield;
pub mod bits;
pub mod cluster_emulated;
pub mod cluster_topology;
pub mod command;
pub mod config;
pub mod connection;
pub mod debug;
pub mod debug_suite;
pub mod dump;
pub mod expire;
pub mod geo;
pub mod hll;
pub mod introspect;
pub mod keys;
pub mod latency;
pub mod lcs;
pub mod lolwut;
pub mod migrate;
pub mod migrate_sockets;
pub mod pubsub;
pub mod rename;
pub mod replication;
pub mod script;
pub mod server;
pub mod slowlog;
pub mod strings;
pub mod swapdb;
pub mod sync;
pub mod tracking;
pub mod tx;
pub mod types;

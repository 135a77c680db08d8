//! The RESP adapter: Redis's protocol over TCP. `table.rs` is the command table (name,
//! arity, flags, key positions, handler), the one source of truth for RESP commands;
//! `gate.rs` checks every command once, in Redis's order, before its handler runs;
//! `dispatch.rs` runs a command past the gate; `batch.rs`
//! decodes a connection's input and batches runs of GETs and SETs; the other files hold the
//! handlers by family. The connection's state (`session.rs`: authentication, MULTI/WATCH,
//! the reply protocol) and the server-wide RESP state (SCAN cursors) live here.

pub mod adapter;
pub mod atomics;
pub mod batch;
pub mod bitfield;
pub mod bits;
pub mod block;
pub mod call;
pub mod cluster;
pub mod cmdstats;
pub mod command;
pub mod config;
pub mod connection;
pub mod cursors;
pub mod db;
pub mod dbmap;
pub mod debug;
pub mod dispatch;
pub mod door;
pub mod expire;
pub mod gate;
pub mod glob;
pub mod introspect;
pub mod keys;
pub mod lcs;
pub mod loading;
pub mod prefix;
pub mod rename;
pub mod reply;
pub mod script;
pub mod server;
pub mod session;
pub mod streamed;
pub mod strings;
pub mod swapdb;
pub mod table;
pub mod table_types;
pub mod tuning;
pub mod tx;
pub mod types;

//! The RESP adapter: Redis's protocol over TCP. `table.rs` is the command table (name,
//! arity, flags, key positions, handler), the one source of truth for RESP commands;
//! `gate.rs` checks every command once, in Redis's order, before its handler runs;
//! `dispatch.rs` runs a command past the gate; `batch.rs`
//! decodes a connection's input and batches runs of GETs and SETs. The command families'
//! handlers are in `commands/`: this folder is how a command reaches its handler, that one
//! what the command does. The connection's state (`session.rs`: authentication, MULTI/WATCH,
//! the reply protocol) and the server-wide RESP state (SCAN cursors) live here.

pub mod acl;
pub mod adapter;
pub mod batch;
pub mod block;
pub mod call;
pub mod cluster;
pub mod cmdstats;
pub mod commands;
pub mod cursors;
pub mod db;
pub mod dbmap;
pub mod dispatch;
pub mod door;
pub mod errorstats;
pub mod gate;
pub mod latency;
pub mod loading;
pub mod monitor;
pub mod notify;
pub mod notify_class;
pub mod output_limits;
pub mod pause;
pub mod pause_rules;
pub mod prefix;
pub mod pubsub;
pub mod redact;
pub mod replica;
pub mod reply;
pub mod session;
pub mod slowlog;
pub mod streamed;
pub mod subcommands;
pub mod table;
pub mod table_types;
pub mod tracking;
pub mod tuning;
pub mod write_door;

//! The network layer: one event loop per core with its connections, the datagram ports and
//! the wake-up mailbox (`event_loop.rs`, `conn.rs`), and the per-turn gathering of GETs
//! across connections (`gather.rs`), and TLS on a connection's stream (`tls.rs`; its configuration is loaded by
//! `config/tls_config.rs`). It knows a protocol only through the
//! [`session::Session`] trait an adapter implements; the composition root (`lib.rs`) hands
//! each listener its adapter.

pub mod conn;
pub mod event_loop;
pub mod gather;
pub mod loading;
pub mod mailbox;
pub mod session;
pub mod tls;

//! The memcached adapter: the text and meta protocols (`text.rs`, `meta.rs`), `stats` and
//! `flush_all` (`admin.rs`), a TCP connection's session (`session.rs`) and the UDP port
//! (`udp.rs`).

pub mod admin;
pub mod door;
pub mod loading;
pub mod meta;
pub mod session;
pub mod state;
pub mod text;
pub mod udp;

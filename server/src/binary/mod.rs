//! The binary protocol adapter (docs/PROTOCOL.md): request frames run by `frame.rs` (the
//! same code for TCP and UDP), a TCP connection's session (`session.rs`), the UDP port
//! (`udp.rs`), and cluster mode's routing of a frame's operations (`cluster.rs`).

pub mod answer;
pub mod cluster;
pub mod execute;
pub mod frame;
pub mod loading;
pub mod replica;
pub mod session;
pub mod udp;

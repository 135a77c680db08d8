//! accelkv beyond one machine (DESIGN.md §7, docs/CLUSTER.md). The key space is split into
//! contiguous ranges (`map.rs`); the range map and node membership live in etcd
//! (`coord.rs`), never in a home-made cluster manager; each range is replicated by one
//! openraft group (`raft/`), whose state machine is the node's store. Nothing here decodes
//! a client protocol: the server routes requests with the map and hands commands to the
//! groups as opaque bytes.

pub mod coord;
pub mod map;
pub mod raft;
pub mod testing;

pub use coord::Coordinator;
pub use map::{NodeAddr, NodeId, Range, RangeId, RangeMap};
/// The consensus library, for its types (metrics, errors).
pub use openraft;
pub use raft::group::{read_barrier, write, GroupStats, NotServed, Open, RaftNode, Tuning};
pub use raft::machine::Machine;

//! Cluster mode (`--cluster`, docs/CLUSTER.md): the node (`node/`: joining through etcd in
//! `join.rs`, the range map and one Raft group per range in `mod.rs`, the
//! [`Router`](crate::core::route::Router) the adapters call in `router.rs`, and what routing
//! reads from a command's arguments in `wire.rs`), its state machine (`machine.rs`), snapshots, splits, moves, and the
//! proxy to other nodes. It sits above the adapters: a replicated RESP command or binary
//! frame is applied through them.

mod bounds;
mod load;
mod machine;
mod moves;
pub mod node;
mod once;
mod proxy;
mod snapshot;
mod split;
mod stop;

/// How long a write or read barrier may wait for its group before the client hears so.
pub(crate) const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

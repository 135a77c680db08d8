//! One openraft group per range: the type configuration, the durable Raft log
//! (`log.rs`), the state machine over the node's store (`machine.rs`), the TCP transport
//! between replicas (`net.rs`) and the groups a node runs (`group.rs`). The consensus
//! itself is openraft's; this module only gives it storage, a network and a state machine.

pub mod codec;
pub mod group;
pub mod link;
pub mod log;
pub mod machine;
pub mod net;

use serde::{Deserialize, Serialize};
use std::io::Cursor;

/// A replicated command: opaque bytes the state machine (`machine::Machine`) decodes. The
/// server puts a RESP command there, with every relative time already made absolute so a
/// replay gives the same result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command(pub Vec<u8>);

/// What applying a command answered (the server: its RESP reply).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer(pub Vec<u8>);

openraft::declare_raft_types!(
    /// accelkv's openraft type configuration.
    pub Config:
        D = Command,
        R = Answer,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<Config>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A running group.
pub type Raft = openraft::Raft<Config>;
/// A log entry.
pub type Entry = openraft::Entry<Config>;
/// A log position.
pub type LogId = openraft::LogId<u64>;
/// A storage failure as openraft reports it.
pub type StorageError = openraft::StorageError<u64>;

/// A storage error from an I/O error, for openraft.
pub(crate) fn io_error(
    subject: openraft::ErrorSubject<u64>,
    verb: openraft::ErrorVerb,
    e: impl std::fmt::Display,
) -> StorageError {
    let e = std::io::Error::other(e.to_string());
    openraft::StorageIOError::new(subject, verb, openraft::AnyError::new(&e)).into()
}

//! A RESP connection's side of blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH,
//! BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, XREAD BLOCK): a command that finds nothing to take asks to park
//! ([`BlockState::req`]); the batch stops before it, leaving it at the head of the input,
//! and the adapter parks the connection in the core's registry (core/blocked.rs). Woken, the
//! connection runs the command again from the start: it takes what is there, answers its
//! timeout once the deadline set when it first parked has passed, or parks again. Inside
//! MULTI (and scripts) a blocking command never parks: it answers at once.
//!
//! The other half: every write that may give a key something to take notes the key
//! ([`BlockState::wake`]); the dispatcher wakes those keys' parked connections once the
//! write is committed (after the command, or after EXEC).

use crate::core::blocked::Ticket;
use std::time::Instant;

/// A blocking command that found nothing, asking to park.
pub struct BlockReq {
    pub keys: Vec<Vec<u8>>,
    pub deadline: Option<Instant>,
    /// The registry's epoch read before the command looked at its keys.
    pub seen: u64,
    /// A deletion of a key answers it (XREADGROUP's NOGROUP).
    pub on_nokey: bool,
    /// It takes what it finds (all but XREAD): served in the order such commands parked.
    pub takes: bool,
    /// It parked behind a woken command holding a key's turn, without looking.
    pub behind: bool,
}

/// What a connection knows about blocking.
#[derive(Default)]
pub struct BlockState {
    /// Keys this connection's writes gave something to take; woken once committed.
    pub wake: WakeKeys,
    /// Set by a blocking command that found nothing: park on these keys.
    pub req: Option<BlockReq>,
    /// While the command at the head of the input is parked: its deadline (`Some(None)`:
    /// none), set when it first parked.
    pub until: Option<Option<Instant>>,
    /// The connection's place in the registry while parked (dropping it leaves).
    pub ticket: Option<Ticket>,
    /// XREAD's ids to read after, `$` resolved when it first ran, kept while parked.
    pub after: Option<Vec<accelkv_proto::collection::StreamId>>,
    /// Set by CLIENT UNBLOCK on another connection before it wakes this one
    /// (core/blocked.rs `UNBLOCK_TIMEOUT` or `UNBLOCK_ERROR`; 0: not unblocked).
    pub unblocked: std::sync::Arc<std::sync::atomic::AtomicU8>,
    /// Never park: a command a cluster's range applies (its replicas cannot wait) answers
    /// what it finds, nothing included, as inside MULTI; the leader waits instead
    /// (server/src/cluster/node/blocking.rs).
    pub never: bool,
}

/// The keys a connection's writes gave something to take, in one buffer kept from command
/// to command: noting a key copies its bytes, allocating nothing once the buffer has grown.
#[derive(Default)]
pub struct WakeKeys {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl WakeKeys {
    /// Notes `key`.
    pub fn push(&mut self, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push(self.bytes.len());
    }

    /// Whether no key is noted.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Forgets every key, keeping the buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// The keys noted, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, &b)| &self.bytes[a..b])
    }
}

#[cfg(test)]
mod tests {
    use super::WakeKeys;

    #[test]
    fn wake_keys_keep_each_key_whole_and_in_order() {
        let mut w = WakeKeys::default();
        assert!(w.is_empty());
        for k in [&b"list"[..], b"", b"z\xff"] {
            w.push(k);
        }
        let got: Vec<&[u8]> = w.iter().collect();
        assert_eq!(got, vec![&b"list"[..], b"", b"z\xff"]);
        w.clear();
        assert!(w.is_empty());
        w.push(b"again");
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![&b"again"[..]]);
    }
}

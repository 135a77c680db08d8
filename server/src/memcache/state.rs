//! A memcached connection's state, and the adapter's server-wide state its connections
//! share (the pending delayed `flush_all`).

use crate::core::shared::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The memcached adapter's server-wide state, shared by its connections.
#[derive(Default)]
pub struct McGlobal {
    /// A `flush_all <delay>` pending: when it clears the store (ms since the Unix epoch;
    /// 0: none). The sweep thread runs it ([`McGlobal::run_due_flush`]); a later
    /// `flush_all` replaces it.
    pub(crate) flush_at: AtomicU64,
}

impl McGlobal {
    /// Runs a delayed `flush_all` once its moment has come (the sweep thread, ten times a
    /// second).
    pub fn run_due_flush(&self, sh: &Shared) {
        let at = self.flush_at.load(Ordering::Relaxed);
        if at != 0
            && accelkv_tree::now_ms() >= at
            && self
                .flush_at
                .compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            if let Err(e) = sh.writes().clear() {
                tracing::error!("memcached flush_all at {at} failed: {e}");
            }
        }
    }
}

/// A memcached connection's state.
pub struct McSession {
    /// The adapter's server-wide state (the pending delayed flush).
    pub global: Arc<McGlobal>,
    pub authed: bool,
    /// `quit` was received: close after the replies.
    pub quit: bool,
    /// A write ran since the connection last waited for durability.
    pub wrote: bool,
    /// The newest write version the replies since the last park rest on (0: none).
    pub unreleased: u64,
    /// Bytes of a refused storage command's data still to drop as they arrive.
    pub(crate) swallow: usize,
    /// A UDP datagram: reads come from the store on this thread, writes are refused.
    pub(crate) datagram: bool,
}

impl McSession {
    /// Whether the loop's gathered batch may answer this connection's leading `get`s
    /// (gather.rs): nothing of its own to wait for, nothing to swallow, authenticated.
    pub fn gatherable(&self, open: bool) -> bool {
        !self.quit
            && self.unreleased == 0
            && self.swallow == 0
            && !self.datagram
            && (open || self.authed)
    }

    /// A new connection's state.
    pub fn new(global: Arc<McGlobal>) -> McSession {
        McSession {
            global,
            authed: false,
            quit: false,
            wrote: false,
            unreleased: 0,
            swallow: 0,
            datagram: false,
        }
    }

    /// The session of one UDP datagram (`authed` when the server has no password).
    pub fn for_datagram(global: Arc<McGlobal>, authed: bool) -> McSession {
        McSession {
            authed,
            datagram: true,
            ..McSession::new(global)
        }
    }
}

//! How other threads reach an event loop: its mailbox, a waker and the messages posted to
//! it (parked replies settled by the committer, CLIENT KILL, cluster settlements).

use crate::core::clients::LoopHandle;
use crate::core::route::Settlement;
use mio::Waker;
use std::any::Any;
use std::sync::Mutex;

/// What other threads post to a loop.
pub enum Release {
    /// Connection `id` at `slot`'s parked replies are settled (durable, or the disk error).
    Conn {
        slot: usize,
        id: u64,
        result: Result<(), String>,
    },
    /// What datagram port `port` parked until durable is settled.
    Port {
        port: usize,
        held: Box<dyn Any + Send>,
        result: Result<(), String>,
    },
    /// A connection accepted while the data directory was recovered, to serve from now on.
    Adopt(crate::net::loading::Held),
    /// CLIENT KILL: close connection `id` at `slot`.
    Kill { slot: usize, id: u64 },
    /// Connection `id` at `slot` has messages queued to send (pub/sub).
    Push { slot: usize, id: u64 },
    /// Cluster mode: what connection `id` at `slot` waited for has settled.
    Settled {
        slot: usize,
        id: u64,
        settled: Settlement,
    },
}

/// How other threads reach a loop: a waker and the settled parked replies.
pub struct Mailbox {
    waker: Waker,
    released: Mutex<Vec<Release>>,
}

impl LoopHandle for Mailbox {
    fn kill(&self, slot: usize, id: u64) {
        self.post(Release::Kill { slot, id });
    }
}

impl Mailbox {
    /// Posts a settled reply and wakes the loop.
    pub fn post(&self, r: Release) {
        self.released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
        let _ = self.waker.wake();
    }

    /// Wakes the loop (to see the stop flag).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}

impl Mailbox {
    /// A mailbox woken through `waker`.
    pub fn new(waker: Waker) -> Mailbox {
        Mailbox {
            waker,
            released: Mutex::new(Vec::new()),
        }
    }

    /// Everything posted since the last call.
    pub fn take(&self) -> Vec<Release> {
        std::mem::take(&mut *self.released.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

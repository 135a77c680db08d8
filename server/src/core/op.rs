//! What the reservation station, its bursts and its transactions share: an operation
//! submitted to the station ([`Op`]: a key and its write), its answer ([`Done`]), and the
//! station's counters.

use crate::core::ops::{Failure, Outcome, Write};
use accelkv_tree::{Error, WriteHint};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// One operation submitted to the station: the key it reads and writes, and the write.
#[derive(Clone, Debug)]
pub struct Op<'a> {
    /// The key.
    pub key: Cow<'a, [u8]>,
    /// What it does.
    pub write: Write<'a>,
    /// Where its tree write lands, found by an interleaved descent for a whole batch
    /// (`Store::locate_writes`) under a pin the submitter holds until it is answered;
    /// dropped when the operation waits in another thread's queue.
    pub hint: Option<WriteHint<'a>>,
}

impl<'a> Op<'a> {
    /// An operation on a key borrowed from the request.
    pub fn new(key: &'a [u8], write: Write<'a>) -> Op<'a> {
        Op {
            key: Cow::Borrowed(key),
            write,
            hint: None,
        }
    }
}

/// An operation's answer once its effect is in the tree.
#[derive(Clone, Debug)]
pub struct Done {
    /// The write's outcome, or the store error its write (or read) failed with.
    pub outcome: Result<Outcome, Error>,
    /// The version its answer rests on: the write that made its effect, or (when it wrote
    /// nothing) the store's last write version, since the value it saw may come from a
    /// write not yet visible. It may not be visible to readers yet (`Store::is_visible`):
    /// the caller answers once it is.
    pub version: u64,
}

impl Done {
    pub(crate) fn lost() -> Done {
        Done {
            outcome: Ok(Outcome::Failed(Failure::Lost)),
            version: 0,
        }
    }
}

/// Counters.
#[derive(Debug, Default)]
pub struct StationStats {
    /// Operations executed.
    pub ops: AtomicU64,
    /// Tree writes issued (one per key per burst that changed it).
    pub tree_writes: AtomicU64,
    /// Operations that ran on a value forwarded from an earlier operation of their burst.
    pub forwarded: AtomicU64,
    /// Operations that waited in a slot another thread was draining.
    pub queued: AtomicU64,
    /// Typed values (`ops/typed.rs`) removed or replaced by a write other than their
    /// adapter's own: what may have left their parts behind (the RESP adapter's reclaim
    /// walks when it moves). Never reset.
    pub typed_dropped: AtomicU64,
}

impl StationStats {
    /// Zeroes every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for c in [&self.ops, &self.tree_writes, &self.forwarded, &self.queued] {
            c.store(0, Ordering::Relaxed);
        }
    }
}

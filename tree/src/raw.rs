//! Low-level read access for read engines: the page table, node bytes, version clocks and
//! reclamation, so an engine can walk the tree itself (with many requests in flight) and
//! must return exactly what the reference reader returns.
//!
//! Protocol an engine follows (docs/ARCHITECTURE.md, "External readers"):
//! 1. Before taking a read version for a request, publish an epoch no newer than
//!    [`Raw::current_epoch`] in a [`ReaderSlot`] it owns ([`ReaderSlot::enter`] or
//!    [`ReaderSlot::hold`]), and keep an epoch that old published until the request is done.
//! 2. Walk from [`ROOT_LID`]: [`Raw::page`] gives a node's newest buffer; follow
//!    `old_version()` while the buffer's version is newer than the read version; interior
//!    nodes route with `child_for`, leaves link right with `link()`.

use crate::epoch::ReaderSlot;
use crate::tree::{Garbage, Tree, ROOT};
use accelkv_node::{NodeView, ValueRef};

/// LID of the root node.
pub const ROOT_LID: u64 = ROOT;

/// Read access to a store's tree for engines; see the module docs.
#[derive(Clone, Copy)]
pub struct Raw<'s> {
    pub(crate) tree: &'s Tree,
}

impl<'s> Raw<'s> {
    /// The global read version.
    #[inline]
    pub fn read_version(&self) -> u64 {
        self.tree.versions.read_version()
    }

    /// The current reclamation epoch.
    pub fn current_epoch(&self) -> u64 {
        self.tree.epochs.current()
    }

    /// A reader slot for the engine's in-flight requests.
    pub fn reader_slot(&self) -> ReaderSlot {
        self.tree.epochs.register()
    }

    /// Arena offset of `lid`'s newest buffer.
    #[inline]
    pub fn page(&self, lid: u64) -> u64 {
        self.tree.pt.get(lid)
    }

    /// Address of `lid`'s page-table entry, for a prefetch (null if not allocated).
    #[inline]
    pub fn page_entry_addr(&self, lid: u64) -> *const u8 {
        self.tree.pt.entry_addr(lid)
    }

    /// Address of the buffer at arena offset `off`, for a prefetch.
    #[inline]
    pub fn node_addr(&self, off: u64) -> *const u8 {
        self.tree.arena.ptr(off)
    }

    /// The published bytes of the buffer at `off`.
    ///
    /// # Safety
    /// The caller follows the protocol of the module docs: an epoch published before it took
    /// the read version it walks at is still published, and `off` was reached by that walk.
    #[inline]
    pub unsafe fn view(&self, off: u64) -> NodeView<'s> {
        // SAFETY: the caller's published epoch protects the buffer (contract).
        unsafe { self.tree.view_raw(off) }
    }

    /// The bytes of a value found in a node read with [`Raw::view`].
    ///
    /// # Safety
    /// As for [`Raw::view`]: the caller's published epoch still protects the node.
    #[inline]
    pub unsafe fn value<'a>(&self, v: ValueRef<'a>) -> &'a [u8] {
        self.tree.value_bytes(v)
    }

    /// Frees `b` once every reader that may still hold a reference to it is done: the caller
    /// unlinked it from everything readers can reach before calling.
    pub fn retire<T: Send + 'static>(&self, b: Box<T>) {
        self.tree.retire([Garbage::Boxed(b)]);
    }

    /// The last write version handed out (writers may not have released it yet).
    pub fn last_write_version(&self) -> u64 {
        self.tree.versions.last_write()
    }
}

/// Told about every write after it is visible in node memory and before it is released to
/// readers; the write's release waits for `on_write` to return. The hot-key cache uses it
/// to update or invalidate its entry, so no reader sees a value outside its snapshot.
pub trait WriteObserver: Send + Sync {
    /// `value` is the key's new value, `None` for a delete; `version` its write version.
    fn on_write(&self, key: &[u8], value: Option<&[u8]>, version: u64);
}

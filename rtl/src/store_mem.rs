//! The walk engine's memory over a live store: page-table reads from the tree's page table,
//! node reads from the arena (the header's first word rebuilt from the published `used`,
//! then the node's published bytes), as Honeycomb's accelerator reads host memory.

use crate::walk::{Memory, UNMAPPED};
use accelkv_tree::Raw;

/// A store's page table and nodes, read as the walk engine asks.
pub struct StoreMemory<'s> {
    raw: Raw<'s>,
    /// Node bytes read so far.
    pub node_bytes: u64,
}

impl<'s> StoreMemory<'s> {
    /// Memory over `raw`.
    ///
    /// # Safety
    /// While it is used, the caller follows the protocol of `accelkv_tree::raw`: an epoch
    /// published before the read versions of the lookups it serves were taken stays
    /// published (so every node those walks reach stays allocated), and the store keeps
    /// every leaf in memory (`Raw::evicts` is false).
    pub unsafe fn new(raw: Raw<'s>) -> Self {
        StoreMemory { raw, node_bytes: 0 }
    }
}

impl Memory for StoreMemory<'_> {
    fn page(&mut self, lid: u64) -> u64 {
        self.raw.resident(lid).unwrap_or(UNMAPPED)
    }

    fn node(&mut self, off: u64, out: &mut Vec<u8>) {
        // SAFETY: `new`'s contract: the walk reached `off` from the page table at a read
        // version taken after the published epoch, which keeps the buffer allocated.
        let v = unsafe { self.raw.view(off) };
        let used = v.used() as u64;
        out.extend_from_slice(&(used << 32).to_le_bytes());
        out.extend_from_slice(&[0u8; 8]); // the left-sibling word: not read by a search
        out.extend_from_slice(v.published());
        self.node_bytes += used;
    }
}

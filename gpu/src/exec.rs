//! Where a batch runs: the interface between the engine's host logic and a device — a CUDA
//! GPU (cuda.rs) or the host emulation of the same kernels (emu.rs) — and the tables every
//! kernel reads (`struct akv_tables` in gpu/kernels/lookup.cu).

use crate::error::GpuError;
use crate::layout::Batch;
use crate::mirror::Updates;
use accelkv_tree::Chunk;

/// `struct akv_tables`: 64 bytes, device addresses as integers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tables {
    pub pt: u64,
    pub cslot: u64,
    pub cache: u64,
    pub chunks: u64,
    pub pt_len: u64,
    pub chunk_shift: u32,
    pub node_size: u32,
    pub head_cap: u32,
    pub seg_cap: u32,
    pub log_cap: u32,
    pub stage: u32,
}
const _: () = assert!(std::mem::size_of::<Tables>() == 64);

/// Sizes a device is set up with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub pt_cap: u64,
    pub slots: u32,
    pub max_chunks: usize,
    pub node_size: usize,
    pub chunk_size: usize,
    /// Header plus shortcut block of every node (the store's sorted-block start).
    pub head: usize,
    pub streams: usize,
}

impl Shape {
    /// Stage sizes: the header and shortcut block, a segment (or the rest of a small sorted
    /// block), the log block; a range that does not fit is read in place.
    pub(crate) fn tables(&self) -> Tables {
        let head = self.head.next_multiple_of(16) as u32;
        let (seg, log) = (1024u32, 1536u32);
        Tables {
            pt_len: self.pt_cap,
            chunk_shift: self.chunk_size.trailing_zeros(),
            node_size: self.node_size as u32,
            head_cap: head,
            seg_cap: seg,
            log_cap: log,
            stage: head + seg + log,
            ..Tables::default()
        }
    }
}

/// A device that runs batches.
pub(crate) trait Exec: Send + Sync {
    /// Maps arena chunks so kernels can read the buffers in them.
    fn map_chunks(&self, chunks: &[Chunk]) -> Result<(), GpuError>;

    /// Applies updates: `images[i]` (an interior node's bytes) into slot `u.copies[i].0`
    /// first, then the page-table and slot entries. Launches after this see them.
    fn apply(&self, u: &Updates, images: &[Vec<u8>]) -> Result<(), GpuError>;

    /// Runs `b` on stream `stream` (one caller per stream at a time) and calls `f` with its
    /// output bytes.
    fn lookup(&self, stream: usize, b: &Batch, f: &mut dyn FnMut(&[u8])) -> Result<(), GpuError>;

    /// The device, in words.
    fn describe(&self) -> String;
}

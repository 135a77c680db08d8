//! Arena of node buffers: large aligned chunks carved into fixed-size node buffers that are
//! addressed by a 64-bit offset (chunk index × chunk size + offset in chunk). Offsets, not
//! pointers, are what nodes and the page table store, so an engine that maps the chunks (a
//! GPU later) can translate them itself.
//!
//! Thread safety: `alloc` and `free` take an internal mutex; `ptr` is lock-free (an acquire
//! load of the chunk table), so readers translate offsets without blocking.
//!
//! Invariants:
//! 1. A chunk, once installed in the table, stays at its address until the arena is dropped.
//! 2. Every buffer offset is a multiple of the node size, so buffers are aligned to at least
//!    8 bytes and their header words can be accessed atomically.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Alignment of a chunk: 2 MiB, so chunks can be backed by huge pages and mapped by devices.
pub const CHUNK_ALIGN: usize = 2 << 20;

/// Buffers kept in quarantine in `poison` builds.
const QUARANTINE: usize = 16384;

/// The arena has no room left under its memory limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArenaFull;

struct State {
    /// Offset of the next never-used buffer.
    bump: u64,
    /// Offsets of freed buffers, reused first.
    free: Vec<u64>,
    /// `poison` builds: freed buffers wait here (FIFO) before reuse, so a reader that
    /// touches one soon after reclamation sees the poison rather than another node.
    quarantine: std::collections::VecDeque<u64>,
    chunks: usize,
}

/// Chunked arena of node buffers.
pub struct Arena {
    node_size: usize,
    chunk_size: usize,
    /// log2 of the chunk size (a power of two), so translating an offset is a shift and a
    /// mask rather than a division.
    chunk_shift: u32,
    table: Box<[AtomicPtr<u8>]>,
    state: Mutex<State>,
    live: AtomicUsize,
    /// Engines told about every new chunk (remap.rs invariant 3).
    pub(crate) feeds: crate::remap::Feeds,
}

impl Arena {
    /// An arena of `node_size` buffers in chunks of `chunk_size` bytes (a multiple of the
    /// node size), holding at most `limit` bytes of chunks.
    pub fn new(node_size: usize, chunk_size: usize, limit: usize) -> Arena {
        assert!(chunk_size.is_power_of_two() && chunk_size >= node_size);
        let max_chunks = limit.div_ceil(chunk_size).max(1);
        Arena {
            node_size,
            chunk_size,
            chunk_shift: chunk_size.trailing_zeros(),
            table: (0..max_chunks)
                .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                .collect(),
            state: Mutex::new(State {
                bump: 0,
                free: Vec::new(),
                quarantine: std::collections::VecDeque::new(),
                chunks: 0,
            }),
            live: AtomicUsize::new(0),
            feeds: Default::default(),
        }
    }

    fn align(&self) -> usize {
        CHUNK_ALIGN.max(self.node_size)
    }

    /// Allocates a zeroed-or-reused node buffer (contents unspecified) and returns its offset.
    pub fn alloc(&self) -> Result<u64, ArenaFull> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(off) = st.free.pop() {
            self.live.fetch_add(1, Ordering::Relaxed);
            return Ok(off);
        }
        let off = st.bump;
        let chunk = off as usize / self.chunk_size;
        if chunk >= st.chunks {
            if chunk >= self.table.len() {
                // Out of room: a quarantined buffer (poison builds) is better than failing.
                if let Some(off) = st.quarantine.pop_front() {
                    self.live.fetch_add(1, Ordering::Relaxed);
                    return Ok(off);
                }
                return Err(ArenaFull);
            }
            let p = chunk_mem::map(self.chunk_size, self.align());
            if p.is_null() {
                return Err(ArenaFull);
            }
            self.table[chunk].store(p, Ordering::Release);
            st.chunks += 1;
            // Announced under the lock, before any buffer of the chunk is handed out.
            self.feeds.chunk(self.chunk(chunk));
        }
        st.bump += self.node_size as u64;
        self.live.fetch_add(1, Ordering::Relaxed);
        Ok(off)
    }

    /// Returns a buffer for reuse. The caller guarantees no one can reach it any more.
    pub fn free(&self, off: u64) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.live.fetch_sub(1, Ordering::Relaxed);
        if cfg!(feature = "poison") {
            st.quarantine.push_back(off);
            if st.quarantine.len() > QUARANTINE {
                let oldest = st.quarantine.pop_front().expect("non-empty");
                st.free.push(oldest);
            }
            return;
        }
        st.free.push(off);
    }

    /// Address of the buffer at `off`.
    #[inline]
    pub fn ptr(&self, off: u64) -> *mut u8 {
        let chunk = (off >> self.chunk_shift) as usize;
        let base = self.table[chunk].load(Ordering::Acquire);
        debug_assert!(!base.is_null());
        // SAFETY: `off` came from `alloc`, so its chunk is installed (invariant 1) and the
        // offset within the chunk is below `chunk_size`.
        unsafe { base.add(off as usize & (self.chunk_size - 1)) }
    }

    /// Registers `feed` for chunk announcements and announces every chunk allocated so far,
    /// atomically with respect to `alloc`.
    pub(crate) fn subscribe(&self, feed: &std::sync::Arc<crate::remap::RemapFeed>) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        feed.chunks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend((0..st.chunks).map(|i| self.chunk(i)));
        self.feeds.add(feed);
    }

    /// Chunk `index` (installed) as announced to engines.
    fn chunk(&self, index: usize) -> crate::remap::Chunk {
        crate::remap::Chunk {
            index,
            base: self.table[index].load(Ordering::Acquire) as usize,
            len: self.chunk_size,
        }
    }

    /// Chunk size in bytes (a power of two).
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// Most chunks the arena can hold under its memory limit.
    pub fn max_chunks(&self) -> usize {
        self.table.len()
    }

    /// Node buffers currently allocated.
    pub fn live_buffers(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// Bytes of chunks allocated from the system.
    pub fn reserved_bytes(&self) -> usize {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.chunks * self.chunk_size
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for p in self.table.iter() {
            let p = p.load(Ordering::Acquire);
            if !p.is_null() {
                // SAFETY: `p` was mapped in `alloc` with this size and alignment, nothing
                // references it once the arena is dropped, and it is unmapped once.
                unsafe { chunk_mem::unmap(p, self.chunk_size, self.align()) };
            }
        }
    }
}

/// Chunk memory. On Unix an anonymous mapping: the kernel zeroes each page when it is first
/// touched, so a new chunk costs no `memset` of its whole size and an empty store does not
/// keep its first chunk resident. Elsewhere the global allocator's zeroed memory.
mod chunk_mem {
    /// `size` zeroed bytes aligned to `align` (a power of two), or null.
    #[cfg(unix)]
    pub(super) fn map(size: usize, align: usize) -> *mut u8 {
        let len = size + align;
        // SAFETY: an anonymous private mapping of `len` bytes; the parts before the aligned
        // start and after `size` bytes from it are unmapped again, leaving exactly the
        // returned range mapped (each `munmap` covers whole pages: `align` and `size` are
        // multiples of the page size).
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return std::ptr::null_mut();
            }
            let start = p as usize;
            let aligned = (start + align - 1) & !(align - 1);
            let head = aligned - start;
            if head > 0 {
                libc::munmap(p, head);
            }
            let tail = len - head - size;
            if tail > 0 {
                libc::munmap((aligned + size) as *mut libc::c_void, tail);
            }
            aligned as *mut u8
        }
    }

    /// Gives back what [`map`] returned.
    ///
    /// # Safety
    /// `p` came from `map(size, align)` and is not used afterwards.
    #[cfg(unix)]
    pub(super) unsafe fn unmap(p: *mut u8, size: usize, _align: usize) {
        // SAFETY: per the contract, `[p, p + size)` is one mapping of ours.
        unsafe { libc::munmap(p.cast(), size) };
    }

    #[cfg(not(unix))]
    pub(super) fn map(size: usize, align: usize) -> *mut u8 {
        let Ok(layout) = std::alloc::Layout::from_size_align(size, align) else {
            return std::ptr::null_mut();
        };
        // SAFETY: the layout has a non-zero size (chunk_size >= node_size >= 4096).
        unsafe { std::alloc::alloc_zeroed(layout) }
    }

    /// # Safety
    /// `p` came from `map(size, align)` and is not used afterwards.
    #[cfg(not(unix))]
    pub(super) unsafe fn unmap(p: *mut u8, size: usize, align: usize) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(size, align) {
            // SAFETY: allocated by `map` with this layout (contract).
            unsafe { std::alloc::dealloc(p, layout) };
        }
    }
}

// SAFETY: the arena hands out raw memory; synchronisation of the bytes in it is the tree's
// job (see tree.rs). The arena's own state is behind a mutex and atomics.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_reuse_and_limit() {
        let a = Arena::new(4096, 4096 * 4, 4096 * 8);
        let offs: Vec<u64> = (0..8).map(|_| a.alloc().unwrap()).collect();
        assert_eq!(a.alloc(), Err(ArenaFull));
        for w in offs.windows(2) {
            assert_eq!(w[1] - w[0], 4096);
        }
        for &o in &offs {
            assert_eq!(a.ptr(o) as usize % 4096, 0);
        }
        a.free(offs[3]);
        // Reused at once, or (poison builds) taken back from quarantine when nothing else
        // is left.
        assert_eq!(a.alloc(), Ok(offs[3]));
        assert_eq!(a.alloc(), Err(ArenaFull));
        assert_eq!(a.reserved_bytes(), 4096 * 8);
    }
}

//! Software prefetch: asks the memory system for bytes a request will read after the caller
//! has switched to other requests (the read engine's interleaved walk, the write path's
//! interleaved descent).

/// Prefetches the cache lines of `[p, p + len)` into all cache levels.
#[inline(always)]
pub fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let mut off = 0;
        while off < len {
            // SAFETY: a prefetch is a hint that never faults and reads nothing into the
            // program; `wrapping_add` keeps the address computation defined.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off) as *const i8) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, len);
    }
}

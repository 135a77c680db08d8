//! Host emulation of a device: the kernels of gpu/kernels/lookup.cu compiled as C++ (by
//! build.rs) and run on the calling thread over tables kept in host memory. It exists so the
//! engine's whole path — remap stream, page-table copy, interior cache, batch layout,
//! continuations, reclamation, and the kernels' node walk itself — is tested against the
//! reference reader on machines without a GPU. It is not a faster engine: one request at a
//! time, on one core.

use crate::error::GpuError;
use crate::exec::{Exec, Shape, Tables};
use crate::layout::Batch;
use crate::mirror::Updates;
use accelkv_tree::Chunk;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

extern "C" {
    fn akv_host_lookup(t: *const Tables, reqs: *const u8, keys: *const u8, nreq: u32, out: *mut u8);
    fn akv_host_group() -> u32;
    fn akv_host_sizes() -> u32;
}

/// The emulated device's memory.
pub struct HostExec {
    tables: Tables,
    pt: Box<[AtomicU64]>,
    cslot: Box<[AtomicU32]>,
    cache: Box<[AtomicU64]>,
    chunks: Box<[AtomicU64]>,
    node_size: usize,
}

impl HostExec {
    pub(crate) fn new(shape: &Shape) -> HostExec {
        // SAFETY: plain functions of the emulation library returning constants.
        let sizes = unsafe { akv_host_sizes() };
        assert_eq!(
            sizes,
            (48 << 16) | (16 << 8) | 64,
            "batch layout differs from akv_batch.h"
        );
        let pt: Box<[AtomicU64]> = (0..shape.pt_cap)
            .map(|_| AtomicU64::new(u64::MAX))
            .collect();
        let cslot: Box<[AtomicU32]> = (0..shape.pt_cap).map(|_| AtomicU32::new(0)).collect();
        let words = shape.slots as usize * shape.node_size / 8;
        let cache: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
        let chunks: Box<[AtomicU64]> = (0..shape.max_chunks).map(|_| AtomicU64::new(0)).collect();
        let mut tables = shape.tables();
        tables.pt = pt.as_ptr() as u64;
        tables.cslot = cslot.as_ptr() as u64;
        tables.cache = cache.as_ptr() as u64;
        tables.chunks = chunks.as_ptr() as u64;
        HostExec {
            tables,
            pt,
            cslot,
            cache,
            chunks,
            node_size: shape.node_size,
        }
    }

    /// Lanes per request group the emulation was built with.
    pub fn group() -> u32 {
        // SAFETY: returns a constant.
        unsafe { akv_host_group() }
    }
}

impl Exec for HostExec {
    fn map_chunks(&self, chunks: &[Chunk]) -> Result<(), GpuError> {
        for c in chunks {
            self.chunks[c.index].store(c.base as u64, Ordering::Release);
        }
        Ok(())
    }

    fn apply(&self, u: &Updates, images: &[Vec<u8>]) -> Result<(), GpuError> {
        let words = self.node_size / 8;
        for (&(slot, _), img) in u.copies.iter().zip(images) {
            // A fresh slot: no launch can reach it until its slot entry is stored below.
            let dst = &self.cache[slot as usize * words..(slot as usize + 1) * words];
            for (w, b) in dst.iter().zip(img.chunks(8)) {
                let mut a = [0u8; 8];
                a[..b.len()].copy_from_slice(b);
                w.store(u64::from_le_bytes(a), Ordering::Relaxed);
            }
        }
        for &(lid, off) in &u.pt {
            self.pt[lid as usize].store(off, Ordering::Release);
        }
        for &(lid, s) in &u.slots {
            self.cslot[lid as usize].store(s as u32, Ordering::Release);
        }
        Ok(())
    }

    fn lookup(&self, _stream: usize, b: &Batch, f: &mut dyn FnMut(&[u8])) -> Result<(), GpuError> {
        let mut out = vec![0u8; b.out_len];
        // SAFETY: the tables point at this exec's arrays (alive for `self`) and at arena
        // chunks mapped by `map_chunks`, which the store keeps until it is dropped (after the
        // engine). The caller holds an epoch published before every request's read version
        // was taken, so every buffer the kernel reaches stays allocated. Node bytes are read
        // below their acquired `used` only (invariant 1 of the tree); the table entries are
        // atomics read with __atomic_load_n. `out` has `out_len` bytes, which covers every
        // request's area (layout.rs).
        unsafe {
            akv_host_lookup(
                &self.tables,
                b.req_bytes().as_ptr(),
                b.keys.as_ptr(),
                b.reqs.len() as u32,
                out.as_mut_ptr(),
            )
        };
        f(&out);
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "host emulation of the GPU kernels (group of {} lanes)",
            HostExec::group()
        )
    }
}

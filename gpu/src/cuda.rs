//! The CUDA device: kernels compiled by NVRTC and loaded as PTX, the device tables (page-table
//! copy, interior-node cache, chunk map) in device memory, the arena's chunks registered as
//! pinned, device-mapped host memory (cacheable, not write-combined: the CPU keeps reading
//! and writing them at full speed), one CUDA stream per engine worker so one batch's copies,
//! another's kernel and a third's result delivery overlap, and results written by the
//! kernels straight into pinned host memory (only the bytes written cross PCIe).
//!
//! Ordering: updates run on their own stream and record an event; every lookup waits for the
//! newest such event before its kernel, so it sees the page table as of its batch.

use crate::error::GpuError;
use crate::exec::{Exec, Shape, Tables};
use crate::kernels::{arch_for, compile_ptx, GROUP};
use crate::layout::Batch;
use crate::mirror::Updates;
use accelkv_tree::Chunk;
use cudarc::driver::sys;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg,
};
use std::sync::{Arc, Mutex};

// SAFETY: `Tables` is repr(C), plain integers, laid out as `struct akv_tables`.
unsafe impl DeviceRepr for Tables {}

fn cuda<T>(r: Result<T, cudarc::driver::DriverError>) -> Result<T, GpuError> {
    r.map_err(|e| GpuError::Cuda(format!("{e:?}")))
}

fn check(r: sys::CUresult, what: &str) -> Result<(), GpuError> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Cuda(format!("{what}: {r:?}")))
    }
}

/// Pinned, device-mapped host memory the kernels write results into.
struct Pinned {
    host: *mut u8,
    dev: u64,
    len: usize,
}

impl Pinned {
    fn new(len: usize) -> Result<Pinned, GpuError> {
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: the context is current on this thread (callers bind it); `p` receives
        // `len` bytes of page-locked memory owned by this struct until Drop.
        check(
            unsafe { sys::cuMemHostAlloc(&mut p, len, flags) },
            "cuMemHostAlloc",
        )?;
        let mut dev: sys::CUdeviceptr = 0;
        // SAFETY: `p` was allocated with DEVICEMAP just above.
        check(
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, p, 0) },
            "cuMemHostGetDevicePointer",
        )?;
        Ok(Pinned {
            host: p as *mut u8,
            dev,
            len,
        })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemHostAlloc and freed once; no kernel uses it any more
        // (every lookup synchronises its stream before returning).
        unsafe { sys::cuMemFreeHost(self.host as *mut std::ffi::c_void) };
    }
}

struct Lane {
    stream: Arc<CudaStream>,
    reqs: CudaSlice<u8>,
    keys: CudaSlice<u8>,
    out: Pinned,
}

/// A CUDA device running the engine's kernels.
pub(crate) struct CudaExec {
    ctx: Arc<CudaContext>,
    lookup: CudaFunction,
    apply_fn: CudaFunction,
    tables: Tables,
    // Device memory the tables point at; kept alive here.
    _pt: CudaSlice<u64>,
    _cslot: CudaSlice<u32>,
    cache: Mutex<CudaSlice<u8>>,
    chunks: Mutex<CudaSlice<u64>>,
    updates: Arc<CudaStream>,
    last_update: Mutex<Option<CudaEvent>>,
    lanes: Vec<Mutex<Lane>>,
    registered: Mutex<Vec<usize>>,
    node_size: usize,
    name: String,
}

// SAFETY: the raw pinned pointers are owned by `Lane`s behind mutexes; CUDA handles are
// usable from any thread once the context is bound.
unsafe impl Send for CudaExec {}
// SAFETY: as above.
unsafe impl Sync for CudaExec {}

impl CudaExec {
    pub(crate) fn new(shape: &Shape) -> Result<CudaExec, GpuError> {
        let info = crate::probe::probe()?;
        let ctx = cuda(CudaContext::new(0))?;
        // The engine orders its streams itself (events below).
        // SAFETY: called before any allocation or stream is made on this context.
        unsafe { ctx.disable_event_tracking() };
        let ptx = compile_ptx(arch_for(info.capability.0, info.capability.1))?;
        let module = cuda(ctx.load_module(cudarc::nvrtc::Ptx::from_src(ptx)))?;
        let lookup = cuda(module.load_function("akv_lookup"))?;
        let apply_fn = cuda(module.load_function("akv_apply"))?;
        let updates = cuda(ctx.new_stream())?;
        let mut pt = cuda(updates.alloc_zeros::<u64>(shape.pt_cap as usize))?;
        cuda(updates.memcpy_htod(&vec![u64::MAX; shape.pt_cap as usize], &mut pt))?;
        let cslot = cuda(updates.alloc_zeros::<u32>(shape.pt_cap as usize))?;
        let cache = cuda(updates.alloc_zeros::<u8>(shape.slots as usize * shape.node_size))?;
        let chunks = cuda(updates.alloc_zeros::<u64>(shape.max_chunks))?;
        let mut tables = shape.tables();
        tables.pt = pt.device_ptr(&updates).0;
        tables.cslot = cslot.device_ptr(&updates).0;
        tables.cache = cache.device_ptr(&updates).0;
        tables.chunks = chunks.device_ptr(&updates).0;
        cuda(updates.synchronize())?;
        let mut lanes = Vec::new();
        for _ in 0..shape.streams {
            let stream = cuda(ctx.new_stream())?;
            lanes.push(Mutex::new(Lane {
                reqs: cuda(stream.alloc_zeros::<u8>(1 << 16))?,
                keys: cuda(stream.alloc_zeros::<u8>(1 << 16))?,
                out: Pinned::new(1 << 20)?,
                stream,
            }));
        }
        Ok(CudaExec {
            name: format!(
                "{} (compute {}.{}, {} MiB), {} streams",
                info.name,
                info.capability.0,
                info.capability.1,
                info.memory >> 20,
                shape.streams
            ),
            ctx,
            lookup,
            apply_fn,
            tables,
            _pt: pt,
            _cslot: cslot,
            cache: Mutex::new(cache),
            chunks: Mutex::new(chunks),
            updates,
            last_update: Mutex::new(None),
            lanes,
            registered: Mutex::new(Vec::new()),
            node_size: shape.node_size,
        })
    }
}

impl Exec for CudaExec {
    fn map_chunks(&self, chunks: &[Chunk]) -> Result<(), GpuError> {
        if chunks.is_empty() {
            return Ok(());
        }
        cuda(self.ctx.bind_to_thread())?;
        let mut table = self.chunks.lock().unwrap_or_else(|e| e.into_inner());
        for c in chunks {
            let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
            // SAFETY: `c` is an arena chunk of `c.len` bytes that the store keeps allocated
            // until it is dropped, after the engine (which unregisters it in Drop).
            check(
                unsafe { sys::cuMemHostRegister_v2(c.base as *mut std::ffi::c_void, c.len, flags) },
                "cuMemHostRegister",
            )?;
            self.registered
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(c.base);
            let mut dev: sys::CUdeviceptr = 0;
            // SAFETY: registered with DEVICEMAP just above.
            check(
                unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, c.base as *mut _, 0) },
                "cuMemHostGetDevicePointer",
            )?;
            let mut slot = table.slice_mut(c.index..c.index + 1);
            cuda(self.updates.memcpy_htod(&[dev], &mut slot))?;
        }
        cuda(self.updates.synchronize())
    }

    fn apply(&self, u: &Updates, images: &[Vec<u8>]) -> Result<(), GpuError> {
        if u.is_empty() {
            return Ok(());
        }
        cuda(self.ctx.bind_to_thread())?;
        let s = &self.updates;
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            for (&(slot, _), img) in u.copies.iter().zip(images) {
                let at = slot as usize * self.node_size;
                let mut dst = cache.slice_mut(at..at + img.len());
                cuda(s.memcpy_htod(img.as_slice(), &mut dst))?;
            }
        }
        let flat = |v: &[(u64, u64)]| -> Vec<u64> { v.iter().flat_map(|&(a, b)| [a, b]).collect() };
        let (pt, slots) = (flat(&u.pt), flat(&u.slots));
        let pt_dev = cuda(s.clone_htod(&pt.iter().copied().chain([0, 0]).collect::<Vec<_>>()))?;
        let sl_dev = cuda(s.clone_htod(&slots.iter().copied().chain([0, 0]).collect::<Vec<_>>()))?;
        let (nu, ns) = (u.pt.len() as u32, u.slots.len() as u32);
        let n = nu.max(ns);
        let (ptp, cp) = (self.tables.pt, self.tables.cslot);
        let mut b = s.launch_builder(&self.apply_fn);
        b.arg(&ptp)
            .arg(&cp)
            .arg(&pt_dev)
            .arg(&nu)
            .arg(&sl_dev)
            .arg(&ns);
        // SAFETY: the kernel's parameters match `akv_apply` in lookup.cu; every LID was
        // checked against the table's length (mirror.rs).
        cuda(unsafe { b.launch(LaunchConfig::for_num_elems(n)) })?;
        let ev = cuda(s.record_event(None))?;
        // The temporary arrays must outlive the kernel.
        cuda(s.synchronize())?;
        *self.last_update.lock().unwrap_or_else(|e| e.into_inner()) = Some(ev);
        Ok(())
    }

    fn lookup(&self, stream: usize, b: &Batch, f: &mut dyn FnMut(&[u8])) -> Result<(), GpuError> {
        cuda(self.ctx.bind_to_thread())?;
        let mut lane = self.lanes[stream].lock().unwrap_or_else(|e| e.into_inner());
        let lane = &mut *lane;
        let s = lane.stream.clone();
        let reqs = b.req_bytes();
        if lane.reqs.len() < reqs.len() {
            lane.reqs = cuda(s.alloc_zeros::<u8>(reqs.len().next_power_of_two()))?;
        }
        if lane.keys.len() < b.keys.len().max(1) {
            lane.keys = cuda(s.alloc_zeros::<u8>(b.keys.len().next_power_of_two()))?;
        }
        if lane.out.len < b.out_len {
            lane.out = Pinned::new(b.out_len.next_power_of_two())?;
        }
        cuda(s.memcpy_htod(reqs, &mut lane.reqs.slice_mut(0..reqs.len())))?;
        if !b.keys.is_empty() {
            cuda(s.memcpy_htod(b.keys.as_slice(), &mut lane.keys.slice_mut(0..b.keys.len())))?;
        }
        if let Some(ev) = self
            .last_update
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            cuda(s.wait(ev))?;
        }
        let nreq = b.reqs.len() as u32;
        let block = 64u32;
        let threads = nreq * GROUP;
        let cfg = LaunchConfig {
            grid_dim: (threads.div_ceil(block), 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: (block / GROUP) * self.tables.stage,
        };
        let out = lane.out.dev;
        let tables = self.tables;
        let mut l = s.launch_builder(&self.lookup);
        l.arg(&tables)
            .arg(&lane.reqs)
            .arg(&lane.keys)
            .arg(&nreq)
            .arg(&out);
        // SAFETY: parameters match `akv_lookup`; the output area holds `out_len` bytes, which
        // covers every request's area; the caller holds an epoch that keeps every buffer a
        // request can reach allocated until this returns (after the stream synchronises).
        cuda(unsafe { l.launch(cfg) })?;
        cuda(s.synchronize())?;
        // SAFETY: the kernel finished (stream synchronised); the pinned buffer holds
        // `out_len` bytes it wrote (layout.rs: every area starts with a header it writes).
        let bytes = unsafe { std::slice::from_raw_parts(lane.out.host, b.out_len) };
        f(bytes);
        Ok(())
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

impl Drop for CudaExec {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        let _ = self.ctx.synchronize();
        for &base in self
            .registered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            // SAFETY: registered in `map_chunks`; no kernel runs any more (synchronised).
            unsafe { sys::cuMemHostUnregister(base as *mut std::ffi::c_void) };
        }
    }
}

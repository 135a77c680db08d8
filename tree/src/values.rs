//! Values too large to store inline, kept out of line in heap memory and referenced from
//! items by `{ handle | len }` (the persistent form, extension pages, comes with durability).
//!
//! A value's memory is owned by the items that reference it: it is freed when the last
//! buffer holding a reference is reclaimed (the tree retires it with that buffer).

use accelkv_node::ValueRef;

/// Copies `bytes` out of line; the returned reference owns the copy until [`free`].
pub fn alloc(bytes: &[u8]) -> ValueRef<'static> {
    let b: Box<[u8]> = bytes.into();
    let len = b.len() as u32;
    let handle = Box::into_raw(b) as *mut u8 as u64;
    ValueRef::out_of_line(handle, len)
}

/// Keeps `bytes` out of line as they are (no copy); the returned reference owns them until
/// [`free`], as one from [`alloc`] does.
pub fn adopt(bytes: Box<[u8]>) -> ValueRef<'static> {
    let len = bytes.len() as u32;
    let handle = Box::into_raw(bytes) as *mut u8 as u64;
    ValueRef::out_of_line(handle, len)
}

/// The bytes of an out-of-line value.
///
/// # Safety
/// `handle`/`len` must come from [`alloc`] or [`adopt`] and not have been freed, and the memory must stay
/// unfreed for `'a` (the caller holds an epoch pin that protects it).
pub unsafe fn bytes<'a>(handle: u64, len: u32) -> &'a [u8] {
    // SAFETY: per the function contract the allocation is live and `len` bytes long.
    unsafe { std::slice::from_raw_parts(handle as *const u8, len as usize) }
}

/// Frees an out-of-line value.
///
/// # Safety
/// `handle`/`len` must come from [`alloc`] or [`adopt`], be freed once, and be unreachable by readers.
pub unsafe fn free(handle: u64, len: u32) {
    let p = std::ptr::slice_from_raw_parts_mut(handle as *mut u8, len as usize);
    if cfg!(feature = "poison") {
        // SAFETY: the allocation is live (contract); poison it and keep it (quarantine).
        unsafe { (*p).fill(0xA5) };
        return;
    }
    // SAFETY: the allocation came from a `Box<[u8]>` of `len` bytes (`alloc` or `adopt`)
    // and is freed once.
    drop(unsafe { Box::from_raw(p) });
}

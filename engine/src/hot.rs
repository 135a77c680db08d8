//! The hot-key cache: one flat array of 64-byte buckets (KV-Direct's hash index), each
//! holding one item, small items inline and larger values by reference, with an auxiliary
//! hash per slot so a lookup rejects a foreign item without reading its key. A key lives in
//! one of two buckets (primary and secondary hash, as the RISC-V NIC accelerator does).
//!
//! Software decides what is cached (manager.rs); GETs look here first. Writers keep it exact:
//! before a write is released, the store's write observer updates (or clears) the key's
//! entry and stamps it with the write version, so a reader at read version `rv` trusts an
//! entry only when its version is <= `rv`, and falls through to the tree otherwise.
//!
//! Bucket layout (8 little-endian u64 words, all accessed atomically):
//! ```text
//! w0: seq u32 | aux u16 | key_len u8 | val_len u8 (255 = value by reference)
//! w1: version (u64): the entry is the key's value for read versions >= this
//! w2..w7: 48 bytes: key, then the value (inline) or an 8-byte pointer to a boxed Vec<u8>
//! ```
//! `seq` is a sequence lock: odd while a writer changes the bucket. Readers never wait: a
//! bucket being written, or changed under them, is a miss.
//!
//! Thread safety: lookups are wait-free; writers and the manager lock a bucket by CAS on w0.
//!
//! Invariants:
//! 1. Every write to a key locks (and so bumps `seq` of) both of the key's buckets before it
//!    is released, updating the entry if the key is cached.
//! 2. The manager installs an entry only if neither bucket's `seq` moved since before it
//!    read the value, and it reads the value at a read version that includes every write
//!    whose version was handed out before that point; the entry's version is that read
//!    version.
//! 3. A boxed value is freed through the store's reclamation after it is unlinked, so a
//!    reader holding an engine epoch can still copy it.
//! 4. No entry holds a value with an expiry deadline or client flags (writers clear the
//!    entry, the manager installs only values without either), so a cached value never
//!    expires, a lookup needs no clock, and a hit's flags are 0.
//! 5. The cache is on only while the manager finds keys hot enough to pay for it. While it
//!    is off, writers skip it (no hash, no bucket locks) and readers do not look in it, so
//!    entries may go stale: a reader looks only if it finds the cache on *after* taking its
//!    read version (a writer that found it off released its write after the manager turned
//!    it off, so such a reader also finds it off), and the cache is emptied before it is
//!    turned on again. The manager installs an entry only if it finds the cache on after
//!    reading the buckets' words and before reading the versions it waits for: a writer
//!    that skipped the buckets since took its version after a turn-off that followed, so
//!    either the entry is installed while the cache is off (and emptied by the next
//!    turn-on) or that turn-on emptied the buckets first, changing their words, and the
//!    install is refused.

use crate::hash::hash;
use accelkv_tree::{Store, WriteObserver};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

const DATA: usize = 48;
const BY_REF: u8 = 255;
/// Longest key that can be cached (with a value by reference: key + 8-byte pointer).
pub const MAX_CACHED_KEY: usize = DATA - 8;

#[repr(C, align(64))]
struct Bucket {
    w: [AtomicU64; 8],
}

impl Bucket {
    /// The 48 data bytes (relaxed loads: callers order them with the sequence word).
    fn data(&self) -> [u8; DATA] {
        let mut data = [0u8; DATA];
        for (i, chunk) in data.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&self.w[2 + i].load(Ordering::Relaxed).to_le_bytes());
        }
        data
    }

    fn store_data(&self, data: &[u8; DATA]) {
        for (i, chunk) in data.chunks_exact(8).enumerate() {
            let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
            self.w[2 + i].store(word, Ordering::Relaxed);
        }
    }
}

/// The pointer to the boxed value of an entry held by reference.
fn boxed_ptr(m: Meta, data: &[u8; DATA]) -> u64 {
    let k = usize::from(m.klen);
    let mut p = [0u8; 8];
    p.copy_from_slice(&data[k..k + 8]);
    u64::from_le_bytes(p)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Meta {
    seq: u32,
    aux: u16,
    klen: u8,
    vlen: u8,
}

impl Meta {
    fn decode(w: u64) -> Meta {
        Meta {
            seq: w as u32,
            aux: (w >> 32) as u16,
            klen: (w >> 48) as u8,
            vlen: (w >> 56) as u8,
        }
    }
    fn encode(self) -> u64 {
        u64::from(self.seq)
            | (u64::from(self.aux) << 32)
            | (u64::from(self.klen) << 48)
            | (u64::from(self.vlen) << 56)
    }
    fn occupied(self) -> bool {
        self.klen > 0
    }
}

/// Cache counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HotCacheStats {
    /// Buckets (and so the most items) in the cache.
    pub buckets: usize,
    /// Items cached now.
    pub items: usize,
    /// Entries installed by the manager.
    pub installs: u64,
    /// Entries evicted for hotter keys.
    pub evictions: u64,
    /// Whether the cache is in use (on while keys are hot enough to pay for it).
    pub active: bool,
}

/// The hot-key cache; see the module docs.
pub struct HotCache {
    buckets: Box<[Bucket]>,
    mask: u64,
    store: Weak<Store>,
    pub(crate) installs: AtomicU64,
    pub(crate) evictions: AtomicU64,
    /// Whether the cache is in use (invariant 5; manager.rs decides).
    active: AtomicBool,
    /// Times the cache was emptied (the manager's record of what it installed holds only
    /// while this has not moved).
    emptied: AtomicU64,
}

/// Hash-derived coordinates of a key.
#[derive(Clone, Copy)]
pub(crate) struct Slots {
    b1: usize,
    b2: usize,
    aux: u16,
}

/// A cached value read by the manager (key, version).
pub(crate) struct Occupant {
    pub(crate) key: Vec<u8>,
}

impl HotCache {
    /// A cache of at least `buckets` buckets (rounded up to a power of two) for `store`, and
    /// registers it as one of the store's write observers. `None` if `buckets` is 0 or the
    /// store has no free observer slot.
    pub fn attach(store: &Arc<Store>, buckets: usize) -> Option<Arc<HotCache>> {
        if buckets == 0 {
            return None;
        }
        let n = buckets.next_power_of_two();
        let cache = Arc::new(HotCache {
            buckets: (0..n)
                .map(|_| Bucket {
                    w: Default::default(),
                })
                .collect(),
            mask: n as u64 - 1,
            store: Arc::downgrade(store),
            installs: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            active: AtomicBool::new(false),
            emptied: AtomicU64::new(0),
        });
        store.set_write_observer(cache.clone()).then_some(cache)
    }

    /// Whether the cache is in use: readers call this after taking their read version and
    /// look in the cache only if it is (invariant 5).
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Turns the cache on (manager.rs does when keys are hot; tests and tools may): empties
    /// it first, since writers did not keep its entries while it was off (invariant 5).
    pub fn activate(&self) {
        if !self.is_active() {
            self.clear_all();
            self.active.store(true, Ordering::SeqCst);
        }
    }

    /// A number that changes whenever the cache is emptied (before the buckets are), so an
    /// entry found or installed while it had one value may be gone once it has another.
    pub(crate) fn generation(&self) -> u64 {
        self.emptied.load(Ordering::SeqCst) + 1
    }

    /// Turns the cache off: readers stop looking in it and writers stop keeping it.
    pub fn deactivate(&self) {
        self.active.store(false, Ordering::SeqCst);
    }

    pub(crate) fn slots(&self, key: &[u8]) -> Slots {
        self.slots_of(hash(key))
    }

    /// The slots of a key whose [`hash`] is `h`.
    #[inline]
    fn slots_of(&self, h: u64) -> Slots {
        let b1 = (h & self.mask) as usize;
        let b2 = ((h >> 24) & self.mask) as usize;
        Slots {
            b1,
            b2,
            aux: ((h >> 48) as u16) | 1,
        }
    }

    /// Asks the memory system for `key`'s two buckets, so a lookup a little later does not
    /// wait for them (the inline reader prefetches a whole batch's buckets first).
    pub(crate) fn prefetch(&self, key: &[u8]) {
        self.prefetch_hashed(hash(key));
    }

    /// [`HotCache::prefetch`] of a key whose hash ([`HotCache::key_hash`]) is `h`.
    #[inline]
    pub(crate) fn prefetch_hashed(&self, h: u64) {
        let s = self.slots_of(h);
        for b in [s.b1, s.b2] {
            accelkv_tree::prefetch::prefetch((&self.buckets[b] as *const Bucket).cast(), 64);
        }
    }

    fn pair(s: Slots) -> impl Iterator<Item = usize> {
        std::iter::once(s.b1).chain((s.b2 != s.b1).then_some(s.b2))
    }

    /// Reads bucket `b` consistently: (meta, version, data), or `None` if a writer holds it or
    /// changed it meanwhile.
    fn read(&self, b: usize) -> Option<(Meta, u64, [u8; DATA])> {
        let bucket = &self.buckets[b];
        let w0 = bucket.w[0].load(Ordering::Acquire);
        let m = Meta::decode(w0);
        if m.seq & 1 == 1 {
            return None;
        }
        let version = bucket.w[1].load(Ordering::Relaxed);
        let data = bucket.data();
        fence(Ordering::Acquire);
        (bucket.w[0].load(Ordering::Relaxed) == w0).then_some((m, version, data))
    }

    /// The cached value of `key` for a reader at `rv`, or `None` (absent, newer than `rv`, or
    /// being written): the caller then reads the tree. The caller holds an engine epoch.
    pub(crate) fn lookup(&self, key: &[u8], rv: u64) -> Option<Vec<u8>> {
        self.lookup_with(key, rv, <[u8]>::to_vec)
    }

    /// [`HotCache::lookup`] handing the value to `f` instead of copying it.
    pub(crate) fn lookup_with<R>(
        &self,
        key: &[u8],
        rv: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        self.lookup_hashed(key, hash(key), rv, f)
    }

    /// The hash the cache places `key` by (a batch hashes each key once, to prefetch its
    /// buckets and then to look it up).
    #[inline]
    pub(crate) fn key_hash(key: &[u8]) -> u64 {
        hash(key)
    }

    /// [`HotCache::lookup_with`] of a key whose hash ([`HotCache::key_hash`]) is `h`.
    #[inline]
    pub(crate) fn lookup_hashed<R>(
        &self,
        key: &[u8],
        h: u64,
        rv: u64,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let s = self.slots_of(h);
        for b in Self::pair(s) {
            let m = Meta::decode(self.buckets[b].w[0].load(Ordering::Relaxed));
            if m.aux != s.aux || usize::from(m.klen) != key.len() {
                continue;
            }
            let Some((m, version, data)) = self.read(b) else {
                continue;
            };
            let k = usize::from(m.klen);
            if m.aux != s.aux || k != key.len() || !accelkv_tree::keys_eq(&data[..k], key) {
                continue;
            }
            if version > rv {
                return None;
            }
            return Some(if m.vlen == BY_REF {
                let p = boxed_ptr(m, &data) as *const Vec<u8>;
                // SAFETY: the pointer was current when the bucket was read consistently, and
                // boxed values are freed only through reclamation (invariant 3), which the
                // caller's engine epoch holds back.
                f(unsafe { &*p })
            } else {
                f(&data[k..k + usize::from(m.vlen)])
            });
        }
        None
    }

    fn lock(&self, b: usize) -> Meta {
        let w = &self.buckets[b].w[0];
        loop {
            let cur = w.load(Ordering::Relaxed);
            let m = Meta::decode(cur);
            if m.seq & 1 == 0 {
                let locked = Meta {
                    seq: m.seq.wrapping_add(1),
                    ..m
                };
                if w.compare_exchange_weak(
                    cur,
                    locked.encode(),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
                {
                    return m;
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Locks bucket `b` only if its word is still `expect` (an even sequence).
    fn lock_if(&self, b: usize, expect: u64) -> bool {
        let locked = Meta {
            seq: Meta::decode(expect).seq.wrapping_add(1),
            ..Meta::decode(expect)
        };
        self.buckets[b].w[0]
            .compare_exchange(
                expect,
                locked.encode(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    fn unlock(&self, b: usize, old: Meta, new: Meta) {
        let m = Meta {
            seq: old.seq.wrapping_add(2),
            ..new
        };
        self.buckets[b].w[0].store(m.encode(), Ordering::Release);
    }

    /// Writes an entry into bucket `b`, which the caller has locked; returns its meta and
    /// retires a replaced boxed value.
    fn fill(
        &self,
        b: usize,
        old: Meta,
        s: Slots,
        key: &[u8],
        value: Option<&[u8]>,
        version: u64,
    ) -> Meta {
        let bucket = &self.buckets[b];
        let old_box =
            (old.occupied() && old.vlen == BY_REF).then(|| boxed_ptr(old, &bucket.data()));
        let empty = Meta {
            seq: 0,
            aux: 0,
            klen: 0,
            vlen: 0,
        };
        let mut data = [0u8; DATA];
        let meta = match value {
            Some(v) if key.len() + v.len() <= DATA && v.len() < usize::from(BY_REF) => {
                data[..key.len()].copy_from_slice(key);
                data[key.len()..key.len() + v.len()].copy_from_slice(v);
                Meta {
                    seq: 0,
                    aux: s.aux,
                    klen: key.len() as u8,
                    vlen: v.len() as u8,
                }
            }
            Some(v) if key.len() <= MAX_CACHED_KEY => {
                let p = Box::into_raw(Box::new(v.to_vec())) as u64;
                data[..key.len()].copy_from_slice(key);
                data[key.len()..key.len() + 8].copy_from_slice(&p.to_le_bytes());
                Meta {
                    seq: 0,
                    aux: s.aux,
                    klen: key.len() as u8,
                    vlen: BY_REF,
                }
            }
            _ => empty,
        };
        bucket.w[1].store(version, Ordering::Relaxed);
        bucket.store_data(&data);
        if let Some(p) = old_box {
            self.retire_box(p);
        }
        meta
    }

    fn retire_box(&self, p: u64) {
        // SAFETY: `p` came from `Box::into_raw` in `fill` and was just unlinked from its
        // bucket; it is handed to reclamation exactly once.
        let b = unsafe { Box::from_raw(p as *mut Vec<u8>) };
        match self.store.upgrade() {
            Some(store) => store.raw().retire(b),
            // The store is gone: so are its readers.
            None => drop(b),
        }
    }

    fn holds(&self, b: usize, s: Slots, key: &[u8]) -> Option<Meta> {
        let m = Meta::decode(self.buckets[b].w[0].load(Ordering::Relaxed));
        if !m.occupied() || m.aux != s.aux || usize::from(m.klen) != key.len() {
            return None;
        }
        let k = usize::from(m.klen);
        let data = self.buckets[b].data();
        (&data[..k] == key).then_some(m)
    }

    /// The keys of the occupants of `key`'s two buckets, read consistently, with the bucket
    /// words seen (for [`HotCache::install`]); `None` if a bucket is being written.
    pub(crate) fn candidates(&self, key: &[u8]) -> Option<[(usize, u64, Option<Occupant>); 2]> {
        let s = self.slots(key);
        let one = |b: usize| -> Option<(usize, u64, Option<Occupant>)> {
            let w0 = self.buckets[b].w[0].load(Ordering::Acquire);
            let (m, _, data) = self.read(b)?;
            let occ = m.occupied().then(|| Occupant {
                key: data[..usize::from(m.klen)].to_vec(),
            });
            Some((b, w0, occ))
        };
        Some([one(s.b1)?, one(s.b2)?])
    }

    /// Installs `key` = `value`, valid from read version `version`, in bucket `b` if its word
    /// is still `seen` (no writer or other install touched it, invariant 2) and the key's other
    /// bucket is unchanged too. Returns whether it was installed.
    pub(crate) fn install(
        &self,
        b: usize,
        seen: [(usize, u64); 2],
        key: &[u8],
        value: &[u8],
        version: u64,
    ) -> bool {
        let s = self.slots(key);
        let other = seen.iter().find(|(ob, _)| *ob != b);
        if let Some((ob, w)) = other {
            if self.buckets[*ob].w[0].load(Ordering::Acquire) != *w {
                return false;
            }
        }
        let Some((_, expect)) = seen.iter().find(|(sb, _)| *sb == b) else {
            return false;
        };
        if !self.lock_if(b, *expect) {
            return false;
        }
        let old = Meta::decode(*expect);
        if old.occupied() {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
        let m = self.fill(b, old, s, key, Some(value), version);
        self.unlock(b, old, m);
        if m.occupied() {
            self.installs.fetch_add(1, Ordering::Relaxed);
        }
        m.occupied()
    }

    /// Whether `key` is cached.
    pub fn contains(&self, key: &[u8]) -> bool {
        let s = self.slots(key);
        Self::pair(s).any(|b| self.holds(b, s, key).is_some())
    }

    /// Counters and occupancy.
    pub fn stats(&self) -> HotCacheStats {
        HotCacheStats {
            buckets: self.buckets.len(),
            items: self
                .buckets
                .iter()
                .filter(|b| Meta::decode(b.w[0].load(Ordering::Relaxed)).occupied())
                .count(),
            installs: self.installs.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            active: self.is_active(),
        }
    }
}

impl WriteObserver for HotCache {
    /// Invariant 1: lock both buckets of the key (bumping their sequence), update the entry
    /// if the key is cached, unlock. Runs before the write is released. A value with an
    /// expiry deadline or client flags clears the entry: such items are never cached
    /// (invariant 4).
    fn on_write(&self, key: &[u8], value: Option<&[u8]>, deadline: u64, flags: u32, version: u64) {
        if !self.is_active() {
            return; // invariant 5
        }
        let value = if deadline == accelkv_tree::NO_DEADLINE && flags == 0 {
            value
        } else {
            None
        };
        let s = self.slots(key);
        for b in Self::pair(s) {
            let old = self.lock(b);
            let new = if self.holds(b, s, key).is_some() {
                self.fill(b, old, s, key, value, version)
            } else {
                old
            };
            self.unlock(b, old, new);
        }
    }

    fn on_clear(&self, _version: u64) {
        self.clear_all();
    }
}

impl HotCache {
    /// Empties every bucket (the store was cleared), each under its lock, so a lookup at a
    /// version before the clear misses and falls through to the tree, which still has it.
    fn clear_all(&self) {
        self.emptied.fetch_add(1, Ordering::SeqCst);
        for b in 0..self.buckets.len() {
            let old = self.lock(b);
            let new = if old.occupied() {
                self.fill(
                    b,
                    old,
                    Slots {
                        b1: b,
                        b2: b,
                        aux: 0,
                    },
                    &[],
                    None,
                    0,
                )
            } else {
                old
            };
            self.unlock(b, old, new);
        }
    }
}

impl Drop for HotCache {
    fn drop(&mut self) {
        for bucket in self.buckets.iter() {
            let m = Meta::decode(bucket.w[0].load(Ordering::Relaxed));
            if m.occupied() && m.vlen == BY_REF {
                let p = boxed_ptr(m, &bucket.data());
                // SAFETY: no reader is left (we are dropped); each box is freed once.
                drop(unsafe { Box::from_raw(p as *mut Vec<u8>) });
            }
        }
    }
}

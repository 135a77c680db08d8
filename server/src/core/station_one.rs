//! One command on one collection as one station operation (the RESP adapter's HSET, LPUSH,
//! ZADD… on their own, outside MULTI and scripts): the command owns its key's slot, reads
//! the tree's newest items with its own pending writes in their place, and writes what it
//! changed (the metadata item and the subkeys under it) as one atomic batch, released to
//! readers as one version. Kvrocks runs a collection command the same way: a WriteBatch
//! under the key's lock.
//!
//! It is the general transaction (`station_tx.rs`) cut to what one key needs: no global
//! transaction flag (commands on different keys run side by side on different threads), no
//! slot per subkey, no burst state per key, and no allocation per command once a
//! connection's buffers have grown ([`One`] keeps them).
//!
//! Isolation: a collection's subkeys are written only by commands that own its key's slot
//! first (this one, or a transaction that reads the metadata key through the station), so
//! while a command owns it nobody else changes the collection, and ordinary operations on
//! the key wait in the slot's queue and run on the command's result when it lets go.
//!
//! Deadlock freedom: the command owns one slot and waits for nothing while it owns it (the
//! tree's batch gate only orders it after batches that own what they need), so whoever
//! waits for its slot is let in.

use crate::core::station::Station;
use accelkv_tree::{Error, Store};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// Past this many pending writes a command finds them through a map, not a walk.
const LINEAR: usize = 16;
/// A connection keeps at most this many pending writes' buffers between commands, none
/// larger than [`KEEP_BYTES`]: what a big command grew is given back.
const KEEP: usize = 64;
const KEEP_BYTES: usize = 64 << 10;

/// A key's slot owned by one command: let go (what others queued meanwhile run, on the
/// command's result) when this drops, even when the command panics.
pub struct OneSlot<'a> {
    station: &'a Station,
    store: &'a Store,
    slot: usize,
}

impl Drop for OneSlot<'_> {
    fn drop(&mut self) {
        self.station.drain(self.store, self.slot, &mut []);
    }
}

impl Station {
    /// Owns `key`'s slot for one command (waiting until nobody else drains it).
    pub fn own_one<'a>(&'a self, store: &'a Store, key: &[u8]) -> OneSlot<'a> {
        let slot = self.slot_of(key);
        self.take_slot(slot);
        OneSlot {
            station: self,
            store,
            slot,
        }
    }
}

/// A write the command has not written back: the key, and its new value and client flags
/// (`present` false: removed). Kept between commands for its buffers.
#[derive(Default)]
struct Pending {
    key: Vec<u8>,
    value: Vec<u8>,
    present: bool,
    deadline: u64,
    flags: u32,
}

/// One command's view of its collection: the key it owns and the writes it has not
/// written back. A connection keeps one and reuses its memory.
#[derive(Default)]
pub struct One {
    /// The command's key (`None`: no command runs).
    key: Option<Vec<u8>>,
    /// The key's deadline as the command read it (kept by its metadata writes).
    deadline: u64,
    pending: Vec<Pending>,
    used: usize,
    /// Key → position in `pending`, once past [`LINEAR`].
    index: HashMap<Vec<u8>, usize>,
}

/// What writing a command's changes did.
#[derive(Debug)]
pub struct OneCommitted {
    /// Their version (0: nothing written).
    pub version: u64,
    /// The newest write version at the end: what an answer that wrote nothing rests on.
    pub seen: u64,
    /// The first error a write failed with (the others stand, as in a transaction).
    pub failed: Option<Error>,
}

impl One {
    /// Starts a command on `key` (whose slot the caller owns).
    pub fn start(&mut self, key: &[u8]) {
        let mut k = self.key.take().unwrap_or_default();
        k.clear();
        k.extend_from_slice(key);
        self.key = Some(k);
        self.deadline = 0;
        self.used = 0;
        self.index.clear();
    }

    /// Whether a command runs.
    pub fn active(&self) -> bool {
        self.key.is_some()
    }

    /// Whether `key` is the command's key or one of its collection's subkeys: the only
    /// keys it may touch.
    pub fn covers(&self, key: &[u8]) -> bool {
        match &self.key {
            Some(k) => {
                key == k.as_slice()
                    || accelkv_proto::collection::owner(key).is_some_and(|(o, _)| o == k.as_slice())
            }
            None => false,
        }
    }

    fn find(&self, key: &[u8]) -> Option<usize> {
        if self.used > LINEAR {
            return self.index.get(key).copied();
        }
        self.pending[..self.used].iter().position(|p| p.key == key)
    }

    /// Lends `f` `key`'s newest value, deadline and client flags (`None`: absent or
    /// expired), the command's own pending write in its place.
    pub fn read<R>(
        &mut self,
        store: &Store,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u64, u32)>) -> R,
    ) -> Result<R, Error> {
        if let Some(i) = self.find(key) {
            let p = &self.pending[i];
            return Ok(f(p.present.then_some((&p.value[..], p.deadline, p.flags))));
        }
        let mut f = Some(f);
        let got = store.get_latest_item_with(key, |v, d, fl| {
            let f = f.take().expect("called once");
            f(Some((v, d, fl)))
        })?;
        Ok(match got {
            Some(r) => r,
            None => (f.take().expect("not called"))(None),
        })
    }

    /// Lends `f` the command key's item (as [`One::read`]) and remembers its deadline,
    /// which the command's metadata writes keep.
    pub fn peek<R>(
        &mut self,
        store: &Store,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u32)>) -> R,
    ) -> Result<R, Error> {
        let mut deadline = 0;
        let r = self.read(store, key, |cur| {
            deadline = cur.map_or(0, |(_, d, _)| d);
            f(cur.map(|(v, _, fl)| (v, fl)))
        })?;
        if self.key.as_deref() == Some(key) {
            self.deadline = deadline;
        }
        Ok(r)
    }

    /// Sets `key` to `value` (`None`: removes it) with `flags`; the command's key keeps the
    /// deadline it was read with, a subkey has none.
    pub fn write(&mut self, key: &[u8], value: Option<&[u8]>, flags: u32) {
        let own = self.key.as_deref() == Some(key);
        if own && value.is_none() {
            self.deadline = 0; // a key removed and set again has no deadline
        }
        let deadline = if own { self.deadline } else { 0 };
        let i = match self.find(key) {
            Some(i) => i,
            None => self.add(key),
        };
        let p = &mut self.pending[i];
        p.value.clear();
        p.present = value.is_some();
        if let Some(v) = value {
            p.value.extend_from_slice(v);
        }
        p.deadline = if p.present { deadline } else { 0 };
        p.flags = flags;
    }

    fn add(&mut self, key: &[u8]) -> usize {
        let i = self.used;
        if i == self.pending.len() {
            self.pending.push(Pending::default());
        }
        let p = &mut self.pending[i];
        p.key.clear();
        p.key.extend_from_slice(key);
        self.used += 1;
        if self.used == LINEAR + 1 {
            let keys = self.pending[..self.used].iter().enumerate();
            self.index.extend(keys.map(|(j, p)| (p.key.clone(), j)));
        } else if self.used > LINEAR + 1 {
            self.index.insert(key.to_vec(), i);
        }
        i
    }

    /// The pending writes in `[lo, hi)`, in key order, each with its value (`None`:
    /// removed).
    fn pending_in(&self, lo: &[u8], hi: &[u8]) -> Vec<(&[u8], Option<&[u8]>)> {
        let mut v: Vec<_> = self.pending[..self.used]
            .iter()
            .filter(|p| p.key.as_slice() >= lo && p.key.as_slice() < hi)
            .map(|p| (p.key.as_slice(), p.present.then_some(p.value.as_slice())))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Lends `f` the items in `[lo, hi)`, ascending, at most `limit`: the tree's newest
    /// with the command's pending writes in their place.
    pub fn scan(
        &self,
        store: &Store,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        let pending = self.pending_in(range.0, range.1);
        crate::core::station_tx::scan_with_pending(store, &pending, range, limit, f)
    }

    /// [`One::scan`] from the highest key down.
    pub fn scan_rev(
        &self,
        store: &Store,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        let pending = self.pending_in(range.0, range.1);
        crate::core::station_tx::scan_rev_with_pending(store, &pending, range, limit, f)
    }

    /// Ends the command: writes its changes as one atomic batch (the caller still owns the
    /// slot), or drops them when `keep` is false.
    pub fn finish(&mut self, station: &Station, store: &Store, keep: bool) -> OneCommitted {
        self.key = None;
        let n = std::mem::take(&mut self.used);
        self.index.clear();
        let mut done = OneCommitted {
            version: 0,
            seen: 0,
            failed: None,
        };
        if keep && n > 0 {
            let items: smallvec::SmallVec<[accelkv_tree::BatchEntry<'_>; 8]> = self.pending[..n]
                .iter()
                .map(|p| {
                    let v = p.present.then_some((&p.value[..], p.deadline, p.flags));
                    (&p.key[..], v)
                })
                .collect();
            station.stats.ops.fetch_add(1, Ordering::Relaxed);
            station
                .stats
                .tree_writes
                .fetch_add(n as u64, Ordering::Relaxed);
            match store.write_batch_items_unwaited(&items) {
                Ok(b) => {
                    done.version = b.version;
                    done.failed = b.results.into_iter().find_map(Result::err);
                }
                Err(e) => done.failed = Some(e),
            }
        }
        done.seen = store.raw().last_write_version();
        self.pending.truncate(KEEP);
        for p in self.pending.iter_mut().take(n) {
            if p.value.capacity() > KEEP_BYTES {
                p.value = Vec::new();
            }
        }
        done
    }
}

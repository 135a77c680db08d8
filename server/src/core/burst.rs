//! Data forwarding for the reservation station: a burst runs operations on the latest value
//! of each key it touches (read from the tree once, then carried from operation to
//! operation), and writes each changed key back to the tree once at its end — one write at a
//! time for an ordinary burst, or all of them as one atomic batch for a transaction
//! (`station_tx.rs`).
//!
//! The caller must own the station slot of every key it runs here, from the first read to
//! the write-back: that is what makes the carried value the key's newest.

use crate::core::op::{Op, StationStats};
use crate::core::ops::item::Current;
use crate::core::ops::typed::is_typed;
use crate::core::ops::vector::Registry;
use crate::core::ops::write::fetch_add_bytes;
use crate::core::ops::{Effect, Outcome, Ttl, Write};
use accelkv_tree::{Error, Store};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// One key of a burst: its latest value (None: absent), deadline (0: none) and client flags,
/// whether it was read (or set) yet, whether the burst changed it, why reading it failed, if
/// it did, and the version of its write-back ahead of a versioned operation (0: none).
struct KeyState<'b> {
    key: Cow<'b, [u8]>,
    value: Option<Cow<'b, [u8]>>,
    deadline: u64,
    flags: u32,
    known: bool,
    dirty: bool,
    read_error: Option<Error>,
    flushed: u64,
    /// Where the key's write-back lands (station.rs `Op::hint`), from its first operation.
    hint: Option<accelkv_tree::WriteHint<'b>>,
}

/// One write of an atomic batch: the key and its new value, deadline and client flags
/// (`None`: removed).
type Item<'a> = accelkv_tree::BatchEntry<'a>;

/// Keys a burst looks up by comparing them all before it makes an index.
const LINEAR: usize = 8;

/// The keys of one burst, in order of first appearance.
#[derive(Default)]
pub struct Burst<'b> {
    keys: SmallVec<[KeyState<'b>; 2]>,
    /// Key → position in `keys`, made past [`LINEAR`] keys (a burst or transaction of a few
    /// keys finds them faster by comparing, and making a map costs a hasher seed).
    index: Option<HashMap<Vec<u8>, usize>>,
}

/// What one operation of a burst did: the position of its key, its outcome (`Err`: reading
/// the key failed), and whether it changed the value.
pub type Applied = (usize, Result<Outcome, Error>, bool);

impl<'b> Burst<'b> {
    /// The position of `key` if the burst has it.
    fn find(&self, key: &[u8]) -> Option<usize> {
        match &self.index {
            None => self.keys.iter().position(|k| k.key.as_ref() == key),
            Some(index) => index.get(key).copied(),
        }
    }

    /// The position of `key`, adding it: `keep` makes the burst's own key of it, called
    /// only when the burst does not have it yet (a transaction copies a borrowed key there
    /// once; an ordinary burst keeps the key as it came).
    pub fn slot<'k>(
        &mut self,
        key: Cow<'k, [u8]>,
        keep: impl FnOnce(Cow<'k, [u8]>) -> Cow<'b, [u8]>,
        hint: Option<accelkv_tree::WriteHint<'b>>,
        stats: &StationStats,
    ) -> usize {
        if let Some(i) = self.find(&key) {
            stats.forwarded.fetch_add(1, Ordering::Relaxed);
            return i;
        }
        self.add(keep(key), hint)
    }

    /// Adds `key`, which the burst does not have: its position.
    fn add(&mut self, key: Cow<'b, [u8]>, hint: Option<accelkv_tree::WriteHint<'b>>) -> usize {
        let n = self.keys.len();
        if n >= LINEAR {
            let index = self.index.get_or_insert_with(|| {
                let mut m = HashMap::with_capacity(2 * LINEAR);
                m.extend(
                    self.keys
                        .iter()
                        .enumerate()
                        .map(|(i, k)| (k.key.to_vec(), i)),
                );
                m
            });
            index.insert(key.to_vec(), n);
        }
        self.keys.push(KeyState {
            key,
            value: None,
            deadline: 0,
            flags: 0,
            known: false,
            dirty: false,
            read_error: None,
            flushed: 0,
            hint,
        });
        self.keys.len() - 1
    }

    /// Runs `op` on its key's latest value.
    pub fn apply(
        &mut self,
        store: &Store,
        registry: &Registry,
        stats: &StationStats,
        op: Op<'b>,
    ) -> Applied {
        let Op { key, write, hint } = op;
        let i = self.slot(key, |k| k, hint, stats);
        self.apply_at(store, registry, stats, i, write)
    }

    /// Reads the key at position `i` from the tree unless the burst knows its value.
    fn learn(&mut self, store: &Store, i: usize) {
        let k = &mut self.keys[i];
        if k.known {
            return;
        }
        // The newest value, visible or not: every write of this key came through its
        // slot, which the caller owns, so the newest is the one this operation follows.
        // An expired value reads as absent.
        match store.get_latest_item(&k.key) {
            Ok(Some((v, d, f))) => {
                (k.value, k.deadline, k.flags) = (Some(Cow::Owned(v)), d, f);
            }
            Ok(None) => (k.value, k.deadline, k.flags) = (None, 0, 0),
            Err(e) => k.read_error = Some(e),
        }
        k.known = true;
    }

    /// The latest value and client flags of the key at position `i` (`None`: absent),
    /// read from the tree unless the burst knows it, lent to `f` without a copy.
    pub fn peek<R>(
        &mut self,
        store: &Store,
        stats: &StationStats,
        i: usize,
        f: impl FnOnce(Option<(&[u8], u32)>) -> R,
    ) -> Result<R, Error> {
        stats.ops.fetch_add(1, Ordering::Relaxed);
        self.learn(store, i);
        let k = &self.keys[i];
        if let Some(e) = &k.read_error {
            return Err(e.clone());
        }
        Ok(f(k.value.as_deref().map(|v| (v, k.flags))))
    }

    /// Runs `write` on the latest value of the key at position `i`.
    pub fn apply_at(
        &mut self,
        store: &Store,
        registry: &Registry,
        stats: &StationStats,
        i: usize,
        write: Write<'b>,
    ) -> Applied {
        stats.ops.fetch_add(1, Ordering::Relaxed);
        let reads = write.reads();
        if reads {
            self.learn(store, i);
        }
        let k = &mut self.keys[i];
        if reads {
            if let Some(e) = &k.read_error {
                return (i, Err(e.clone()), false);
            }
        }
        // An item CAS compares (or a versioned read answers) the key's version in the
        // tree: a change this burst has not written back yet is written first, so the
        // version is the item's own.
        let mut version = 0;
        if matches!(&write, Write::Item(m) if m.needs_version()) {
            if k.dirty {
                if let Err(e) = flush(store, stats, k) {
                    return (i, Err(e), false);
                }
            }
            match store.key_version(&k.key) {
                Ok(v) => version = v,
                Err(e) => return (i, Err(e), false),
            }
        }
        // A fetch-and-add on 8 bytes the burst already owns (every increment after a key's
        // first in a burst) updates them in place: the same answer as the general path
        // below, without a new value's allocation and the old one's free per operation.
        if let (
            Write::FetchAdd {
                elem,
                overflow,
                delta,
            },
            Some(Cow::Owned(v)),
        ) = (&write, &mut k.value)
        {
            if !is_typed(k.flags) {
                if let Ok((old, new)) = fetch_add_bytes(Some(v), *elem, *overflow, *delta) {
                    v.copy_from_slice(&new);
                    k.dirty = true;
                    return (i, Ok(Outcome::Fetched(old)), true);
                }
            }
        }
        let cur = Current {
            value: if reads { k.value.as_deref() } else { None },
            deadline: k.deadline,
            flags: k.flags,
            version,
        };
        let was_typed = cur.value.is_some() && is_typed(cur.flags);
        let own = matches!(write, Write::Typed { value: Some(_), .. });
        let (effect, outcome) = write.apply_item(&cur, registry, store.config().max_value);
        let changed = !matches!(effect, Effect::Keep);
        if was_typed && !own && !matches!(effect, Effect::Keep | Effect::SetDeadline(_)) {
            stats.typed_dropped.fetch_add(1, Ordering::Relaxed);
        }
        match effect {
            Effect::Keep => {}
            Effect::Set(v, ttl) => {
                (k.value, k.known, k.dirty) = (Some(v), true, true);
                if let Ttl::Set(d) = ttl {
                    (k.deadline, k.flags) = (d, 0);
                }
            }
            Effect::SetItem(v, d, f) => {
                (k.value, k.deadline, k.flags) = (Some(v), d, f);
                (k.known, k.dirty) = (true, true);
            }
            Effect::SetDeadline(d) => (k.deadline, k.dirty) = (d, true),
            Effect::Remove => {
                (k.value, k.deadline, k.flags) = (None, 0, 0);
                (k.known, k.dirty) = (true, true);
            }
        }
        (i, Ok(outcome), changed)
    }

    /// The keys in `[lo, hi)` this burst changed and has not written back, each with its
    /// new value (`None`: removed), in key order.
    pub fn pending_in<'s>(&'s self, lo: &[u8], hi: &[u8]) -> Vec<(&'s [u8], Option<&'s [u8]>)> {
        let mut v: Vec<_> = self
            .keys
            .iter()
            .filter(|k| k.dirty && k.key.as_ref() >= lo && k.key.as_ref() < hi)
            .map(|k| (k.key.as_ref(), k.value.as_deref()))
            .collect();
        v.sort_unstable_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Writes each changed key back, one tree write each: per key, the write's version (0
    /// when unchanged) or its error. A value the burst owns whole (a streamed SET's, say)
    /// is moved into the store rather than copied: the burst's carried values end here.
    pub fn write_back(
        &mut self,
        store: &Store,
        stats: &StationStats,
    ) -> SmallVec<[Result<u64, Error>; 2]> {
        // Better moved than copied: owned, stored out of line, and exactly its
        // allocation's size (so the store keeps that memory as it is).
        let inline = store.config().max_inline_value;
        let movable = |v: &mut Cow<'_, [u8]>| matches!(v, Cow::Owned(b) if b.len() == b.capacity() && b.len() > inline);
        self.keys
            .iter_mut()
            .map(|k| {
                if !k.dirty {
                    return Ok(k.flushed);
                }
                match k.value.take_if(movable) {
                    Some(Cow::Owned(v)) => {
                        stats.tree_writes.fetch_add(1, Ordering::Relaxed);
                        store
                            .put_item_owned_hinted(
                                &k.key,
                                v.into_boxed_slice(),
                                k.deadline,
                                k.flags,
                                k.hint,
                            )
                            .map(|w| w.version)
                    }
                    _ => write_one(store, stats, k),
                }
            })
            .collect()
    }

    /// Writes every changed key back as one atomic batch (`Store::write_batch_unwaited`):
    /// per key, its error if its write failed; and the batch's version (0 when nothing
    /// changed).
    pub fn write_back_atomic(&self, store: &Store, stats: &StationStats) -> (Errors, u64) {
        // Positions of the changed keys and their writes, side by side (inline for the few
        // keys of one command: no allocation on that path).
        let mut at: SmallVec<[usize; 8]> = SmallVec::new();
        let mut items: SmallVec<[Item<'_>; 8]> = SmallVec::new();
        for (i, k) in self.keys.iter().enumerate().filter(|(_, k)| k.dirty) {
            at.push(i);
            items.push((
                k.key.as_ref(),
                k.value.as_deref().map(|v| (v, k.deadline, k.flags)),
            ));
        }
        let mut errors: Errors = smallvec::smallvec![None; self.keys.len()];
        if items.is_empty() {
            return (errors, 0);
        }
        stats
            .tree_writes
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        match store.write_batch_items_unwaited(&items) {
            Ok(b) => {
                for (&i, r) in at.iter().zip(b.results) {
                    errors[i] = r.err();
                }
                (errors, b.version)
            }
            Err(e) => {
                for &i in &at {
                    errors[i] = Some(e.clone());
                }
                (errors, 0)
            }
        }
    }
}

/// Per key of a burst, the error its write-back failed with, if it did.
pub type Errors = SmallVec<[Option<Error>; 8]>;

/// Writes `k`'s latest value back: its write version.
fn write_one(store: &Store, stats: &StationStats, k: &KeyState<'_>) -> Result<u64, Error> {
    stats.tree_writes.fetch_add(1, Ordering::Relaxed);
    match &k.value {
        Some(v) => store
            .put_item_hinted(&k.key, v, k.deadline, k.flags, k.hint)
            .map(|w| w.version),
        None => store.delete_unwaited(&k.key).map(|w| w.version),
    }
}

/// Writes a changed key back ahead of the burst's end (before a versioned operation); the
/// burst's own write-back then answers this version for it unless it changes again.
fn flush(store: &Store, stats: &StationStats, k: &mut KeyState<'_>) -> Result<(), Error> {
    k.flushed = write_one(store, stats, k)?;
    k.dirty = false;
    Ok(())
}

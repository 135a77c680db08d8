//! The background reclaim of subkeys no collection names any more: a collection deleted,
//! expired, overwritten or renamed leaves its subkeys behind (its metadata is gone or
//! carries another id), invisible to every command since they are reached only through
//! live metadata. On each tick of the sweep thread this walks the next `STEP` subkeys in
//! key order, looks up each owner's metadata once, and removes the subkeys of dead
//! collections through the reservation station. A pass over the whole reserved range
//! runs once at start (what a restart left) and again whenever a collection may have died
//! since the last pass began: the station counts typed values that a write other than
//! their own replaced or removed (DEL, SET over a collection, RENAME's source), and the
//! expiry sweep counts what it removes. Idle, a tick costs two counter reads.
//!
//! Safety against live data: a collection's subkeys and metadata are written in one atomic
//! batch, so a subkey the walk sees at its snapshot had its metadata then; the metadata is
//! then read at its newest, and a subkey is removed only when that names another id or
//! nothing. Ids are never reused for a key (`encoding::fresh_id`), so a collection created
//! meanwhile under the same key keeps its subkeys.

use crate::core::ops::Write;
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::commands::types::encoding::{owner, Meta, RESERVED};
use accelkv_proto::slot;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Subkeys examined per tick.
const STEP: usize = 4096;

/// The walk's position and what it reclaimed.
pub struct Reclaim {
    cursor: Vec<u8>,
    /// Whether a pass is under way.
    walking: bool,
    /// The drop and expiry counts when the last pass began (`None`: never).
    seen: Option<(u64, u64)>,
    /// Subkeys removed so far (INFO `reclaimed_subkeys`).
    removed: Arc<AtomicU64>,
}

impl Reclaim {
    /// A walk from the start, counting what it removes in `removed`.
    pub fn new(removed: Arc<AtomicU64>) -> Reclaim {
        Reclaim {
            cursor: Vec::new(),
            walking: false,
            seen: None,
            removed,
        }
    }

    /// Whether a pass should run now: one is under way, or none has run, or a collection
    /// may have died since the last began.
    fn due(&mut self, sh: &Shared) -> bool {
        if self.walking {
            return true;
        }
        let now = (
            sh.writes().stats().typed_dropped.load(Ordering::Relaxed),
            sh.expired_keys(),
        );
        if self.seen == Some(now) {
            return false;
        }
        self.seen = Some(now);
        self.walking = true;
        true
    }

    /// One step of the walk, when a pass is due.
    pub fn tick(&mut self, sh: &Shared) {
        if !self.due(sh) {
            return;
        }
        let from = if self.cursor.is_empty() {
            first_subkey(0)
        } else {
            std::mem::take(&mut self.cursor)
        };
        let Some((keys, next)) = page(sh, &from) else {
            self.cursor = from; // an evicted leaf that cannot be read back: next tick
            return;
        };
        let mut last: Option<(Vec<u8>, u64, bool)> = None;
        for k in &keys {
            let Some((key, id)) = owner(k) else {
                continue;
            };
            let live = match &last {
                Some((lk, lid, live)) if lk.as_slice() == key && *lid == id => *live,
                _ => {
                    let live = is_live(sh, key, id);
                    last = Some((key.to_vec(), id, live));
                    live
                }
            };
            if !live {
                sh.writes().run_one(Op::new(k, Write::Remove));
                self.removed.fetch_add(1, Ordering::Relaxed);
            }
        }
        match next {
            Some(c) => self.cursor = c,
            None => self.walking = false,
        }
    }
}

/// Slots whose subkeys one tick looks at, at most (slot mode).
const SLOTS_PER_TICK: u16 = 1024;

/// Where the subkeys begin: the reserved range, or in slot mode that of slot `slot`
/// (`slot | FF FF`, docs/FORMAT.md "Redis types").
fn first_subkey(slot: u16) -> Vec<u8> {
    let mut k = Vec::with_capacity(4);
    if slot::placed() {
        k.extend_from_slice(&slot::bound(slot));
    }
    k.extend_from_slice(&RESERVED);
    k
}

/// Subkeys, and where the walk goes on (`None`: the pass is over).
type Page = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// Up to [`STEP`] subkeys from `from`, and where the next tick goes on (`None`: the pass
/// is over); `None` when a read failed. In slot mode each slot's subkeys are their own
/// range, so the walk goes from slot to slot.
fn page(sh: &Shared, from: &[u8]) -> Option<Page> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let after = |k: &[u8]| {
        let mut c = k.to_vec();
        c.push(0);
        c
    };
    if !slot::placed() {
        sh.view()
            .scan_with(from, None, STEP, |k, _| keys.push(k.to_vec()))
            .ok()?;
        let next = (keys.len() == STEP).then(|| after(&keys[STEP - 1]));
        return Some((keys, next));
    }
    let mut from = from.to_vec();
    for _ in 0..SLOTS_PER_TICK {
        let s = slot::slot_of_stored(&from);
        if s >= slot::SLOTS {
            return Some((keys, None));
        }
        let hi = slot::bound(s + 1);
        let hi = (s + 1 < slot::SLOTS).then_some(&hi[..]);
        let room = STEP - keys.len();
        let before = keys.len();
        sh.view()
            .scan_with(&from, hi, room, |k, _| keys.push(k.to_vec()))
            .ok()?;
        if keys.len() - before == room {
            let next = after(&keys[keys.len() - 1]);
            return Some((keys, Some(next)));
        }
        if s + 1 >= slot::SLOTS {
            return Some((keys, None));
        }
        from = first_subkey(s + 1);
    }
    Some((keys, Some(from)))
}

/// Whether `key`'s newest metadata names collection `id`.
fn is_live(sh: &Shared, key: &[u8], id: u64) -> bool {
    match sh.view().get_latest_item(key) {
        Ok(Some((v, _, flags))) => Meta::decode(&v, flags).is_ok_and(|m| m.id == id),
        Ok(None) => false,
        // A key too long or a read that failed: leave it for another pass.
        Err(_) => true,
    }
}

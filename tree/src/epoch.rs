//! Epoch-based reclamation of retired buffers (Honeycomb §3.2's memory manager).
//!
//! Every reader — a CPU thread running one request, or an engine with many requests in
//! flight — owns a slot in which it publishes the epoch it entered with. Retiring garbage
//! advances the global epoch and tags the garbage with the epoch before the advance; garbage
//! is freed once every published epoch is newer than its tag. An engine with requests in
//! flight publishes the epoch of its oldest one (Honeycomb's S_old), which holds back
//! reclamation exactly as long as that request may still run.
//!
//! Thread safety: slots are single-writer atomics; the slot list is behind a mutex that only
//! registration and the reclaimer take.
//!
//! Invariants (the argument is spelled out in docs/ARCHITECTURE.md):
//! 1. A reader stores its slot (SeqCst) before it loads the global read version or any page
//!    table entry, and clears it only after its last access to node memory.
//! 2. Garbage is retired only after the write that unlinked it is visible to readers (the
//!    read version has reached it: `Tree::retire_at`).
//! 3. Garbage tagged `t` is freed only when every pinned slot holds an epoch > `t`.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Slot value of a reader that is not reading.
const IDLE: u64 = 0;

#[repr(align(64))]
struct Slot {
    epoch: AtomicU64,
    in_use: AtomicBool,
    /// Set when the registry is dropped, so thread-local caches can forget the slot.
    orphaned: AtomicBool,
}

/// The epoch registry of one store.
pub struct Epochs {
    id: u64,
    global: AtomicU64,
    slots: Mutex<Vec<Arc<Slot>>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

struct Local {
    id: u64,
    slot: Arc<Slot>,
    depth: u32,
}

impl Drop for Local {
    fn drop(&mut self) {
        // The thread is exiting (or the registry is gone): give the slot back.
        self.slot.epoch.store(IDLE, Ordering::Release);
        self.slot.in_use.store(false, Ordering::Release);
    }
}

thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}

impl Epochs {
    /// A registry with no readers, at epoch 1.
    pub fn new() -> Epochs {
        Epochs {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            global: AtomicU64::new(1),
            slots: Mutex::new(Vec::new()),
        }
    }

    fn new_slot(&self) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        for s in slots.iter() {
            if s.in_use
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return s.clone();
            }
        }
        let s = Arc::new(Slot {
            epoch: AtomicU64::new(IDLE),
            in_use: AtomicBool::new(true),
            orphaned: AtomicBool::new(false),
        });
        slots.push(s.clone());
        s
    }

    /// Enters a read-side critical section on this thread (re-entrant). Node memory reached
    /// while the returned guard lives is not freed.
    pub fn pin(&self) -> Pin<'_> {
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            let idx = match l.iter().position(|e| e.id == self.id) {
                Some(i) => i,
                None => {
                    l.retain(|e| !e.slot.orphaned.load(Ordering::Relaxed));
                    l.push(Local {
                        id: self.id,
                        slot: self.new_slot(),
                        depth: 0,
                    });
                    l.len() - 1
                }
            };
            let e = &mut l[idx];
            if e.depth == 0 {
                e.slot
                    .epoch
                    .store(self.global.load(Ordering::SeqCst), Ordering::SeqCst);
                fence(Ordering::SeqCst);
            }
            e.depth += 1;
        });
        Pin {
            epochs: self,
            _not_send: PhantomData,
        }
    }

    fn unpin(&self) {
        LOCAL.with(|l| {
            let mut l = l.borrow_mut();
            if let Some(e) = l.iter_mut().find(|e| e.id == self.id) {
                e.depth -= 1;
                if e.depth == 0 {
                    e.slot.epoch.store(IDLE, Ordering::Release);
                }
            }
        });
    }

    /// A slot owned by the caller rather than by the current thread: for snapshots and for
    /// engines whose requests outlive one call.
    pub fn register(self: &Arc<Self>) -> ReaderSlot {
        ReaderSlot {
            epochs: self.clone(),
            slot: self.new_slot(),
        }
    }

    /// The current global epoch.
    pub fn current(&self) -> u64 {
        self.global.load(Ordering::SeqCst)
    }

    /// Advances the global epoch; returns the tag for garbage retired now (invariant 2 is
    /// the caller's).
    pub fn retire_tag(&self) -> u64 {
        self.global.fetch_add(1, Ordering::SeqCst)
    }

    /// Garbage with a tag below this value is unreachable.
    pub fn safe_below(&self) -> u64 {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        let mut min = self.global.load(Ordering::SeqCst);
        for s in slots.iter() {
            let e = s.epoch.load(Ordering::SeqCst);
            if e != IDLE {
                min = min.min(e);
            }
        }
        min
    }
}

impl Default for Epochs {
    fn default() -> Self {
        Epochs::new()
    }
}

impl Drop for Epochs {
    fn drop(&mut self) {
        let slots = self.slots.get_mut().unwrap_or_else(|e| e.into_inner());
        for s in slots.iter() {
            s.orphaned.store(true, Ordering::Relaxed);
        }
    }
}

/// A thread's read-side critical section; see [`Epochs::pin`].
pub struct Pin<'a> {
    epochs: &'a Epochs,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.epochs.unpin();
    }
}

/// A reader slot owned by a snapshot or an engine (Honeycomb's S_old register).
pub struct ReaderSlot {
    epochs: Arc<Epochs>,
    slot: Arc<Slot>,
}

impl ReaderSlot {
    /// Publishes the current epoch and returns it: node memory reachable from now on is
    /// held until [`ReaderSlot::clear`] or a later `hold` with a newer epoch.
    pub fn enter(&self) -> u64 {
        let e = self.epochs.current();
        self.slot.epoch.store(e, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        e
    }

    /// Publishes `epoch` (obtained from [`ReaderSlot::enter`] or [`ReaderSlot::current`] before
    /// the oldest request still in flight started): memory retired after that epoch is held.
    /// An engine calls this as its oldest in-flight request changes.
    pub fn hold(&self, epoch: u64) {
        debug_assert!(epoch != IDLE);
        self.slot.epoch.store(epoch, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// Stops holding anything.
    pub fn clear(&self) {
        self.slot.epoch.store(IDLE, Ordering::Release);
    }

    /// The current global epoch (to tag requests at submission).
    pub fn current(&self) -> u64 {
        self.epochs.current()
    }
}

impl Drop for ReaderSlot {
    fn drop(&mut self) {
        self.slot.epoch.store(IDLE, Ordering::Release);
        self.slot.in_use.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_hold_back_reclamation() {
        let e = Arc::new(Epochs::new());
        let t0 = e.retire_tag();
        assert!(e.safe_below() > t0, "no readers: everything is safe");
        let p = e.pin();
        let t1 = e.retire_tag();
        assert!(e.safe_below() <= t1, "pinned before retire: held");
        {
            let _nested = e.pin();
        }
        assert!(e.safe_below() <= t1, "nested unpin keeps the outer pin");
        drop(p);
        assert!(e.safe_below() > t1);

        let slot = e.register();
        let h = slot.enter();
        let t2 = e.retire_tag();
        assert!(t2 >= h && e.safe_below() <= t2);
        slot.clear();
        assert!(e.safe_below() > t2);
    }

    #[test]
    fn slots_are_reused_across_threads() {
        let e = Arc::new(Epochs::new());
        for _ in 0..8 {
            let e2 = e.clone();
            std::thread::spawn(move || {
                let _p = e2.pin();
            })
            .join()
            .unwrap();
            let _s = e.register();
        }
        // Slots of exited threads and dropped registrations are reused.
        assert!(e.slots.lock().unwrap().len() <= 2);
    }
}

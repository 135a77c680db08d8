//! SCAN's cursors: each number a client holds names the key its next call starts from,
//! shared by every connection (as Redis's cursors are), at most [`MAX_CURSORS`] of them,
//! the oldest forgotten first.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Cursors kept at once (each holds one key).
pub const MAX_CURSORS: usize = 16_384;

/// SCAN's cursors: number → the key the next call starts from.
#[derive(Default)]
pub struct Cursors {
    inner: Mutex<CursorMap>,
}

#[derive(Default)]
struct CursorMap {
    next: u64,
    keys: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl Cursors {
    /// A new cursor resuming at `key`.
    pub fn save(&self, key: Vec<u8>) -> u64 {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.next += 1;
        let id = m.next;
        m.keys.insert(id, key);
        m.order.push_back(id);
        while m.order.len() > MAX_CURSORS {
            if let Some(old) = m.order.pop_front() {
                m.keys.remove(&old);
            }
        }
        id
    }

    /// Where cursor `id` resumes (0: the start).
    pub fn resume(&self, id: u64) -> Option<Vec<u8>> {
        if id == 0 {
            return Some(Vec::new());
        }
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.keys.get(&id).cloned()
    }
}

//! The database table that makes SWAPDB O(1) (the command is in `swapdb.rs`). Redis's
//! numbered databases are key prefixes here (`db.rs`); a client's database number
//! ("logical") reaches the prefix its keys carry ("physical") through one table, the
//! identity until a SWAPDB swaps two of its entries: nothing moves in the store.
//! A connection keeps its logical number and the physical one it maps to, and looks the
//! table up again when its epoch changed (`Session::refresh_db`), so every command of a run
//! uses one mapping.
//!
//! Durability: the table is an item of the store under a reserved key ([`MAP_KEY`]), written
//! through the reservation station like any write before the swap takes effect, so a crash
//! recovers the table and the keys as of one prefix of the writes (a write another
//! connection made to the old mapping while the swap ran is one that came before it: it
//! moves with its database). It is read back at the first command after start. FLUSHALL
//! removes it with everything else and the table is the identity again.

use crate::core::shared::Shared;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

/// Where the table is stored: in the collections' reserved range (`FF FF`), with a key
/// length of 0, which no collection has (the subkeys' reclaim skips it).
pub const MAP_KEY: &[u8] = b"\xFF\xFF\x00\x00dbmap";

/// The logical → physical database table.
#[derive(Default)]
pub struct DbMap {
    /// Bumped at every change; 0 until the table is read from the store.
    epoch: AtomicU64,
    /// `map[logical]` = physical; an absent entry is the identity.
    map: RwLock<Vec<u16>>,
    /// Serialises the changes (SWAPDB, FLUSHALL) with their writes.
    change: Mutex<()>,
}

impl DbMap {
    /// The current epoch (0: not read yet).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The physical database of `logical` and the epoch it belongs to, reading the table
    /// from the store first if this is the first use since start.
    pub fn physical(&self, sh: &Shared, logical: u16) -> (u16, u64) {
        self.load(sh);
        let epoch = self.epoch();
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        (
            map.get(usize::from(logical)).copied().unwrap_or(logical),
            epoch,
        )
    }

    /// The logical database whose keys carry `physical`'s prefix, if one does.
    pub fn logical(&self, physical: u16, databases: usize) -> Option<u16> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        match map.iter().position(|&p| p == physical) {
            Some(l) => Some(l as u16),
            None if usize::from(physical) >= map.len() => {
                (usize::from(physical) < databases).then_some(physical)
            }
            None => None,
        }
    }

    /// Reads the table from the store, the first time only.
    fn load(&self, sh: &Shared) {
        if self.epoch() != 0 {
            return;
        }
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch() != 0 {
            return;
        }
        if let Ok(Some(v)) = sh.view().get(MAP_KEY) {
            *self.map.write().unwrap_or_else(|e| e.into_inner()) = decode(&v);
        }
        self.epoch.store(1, Ordering::Release);
    }

    /// Clears the store (`clear`) and the table with it, as one change.
    pub fn cleared<T>(&self, clear: impl FnOnce() -> T) -> T {
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let done = clear();
        self.map.write().unwrap_or_else(|e| e.into_inner()).clear();
        self.epoch.fetch_add(1, Ordering::AcqRel);
        done
    }

    /// Swaps `a` and `b` in the table as stored (read first if need be): the new table is
    /// written (`write`, its version) before it takes effect.
    pub fn swap<E>(
        &self,
        sh: &Shared,
        a: u16,
        b: u16,
        write: impl FnOnce(&[u8]) -> Result<u64, E>,
    ) -> Result<u64, E> {
        self.load(sh);
        let _g = self.change.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = self.map.read().unwrap_or_else(|e| e.into_inner()).clone();
        let need = usize::from(a.max(b)) + 1;
        if next.len() < need {
            let from = next.len() as u16;
            next.extend(from..=a.max(b));
        }
        next.swap(usize::from(a), usize::from(b));
        let version = write(&encode(&next))?;
        *self.map.write().unwrap_or_else(|e| e.into_inner()) = next;
        self.epoch.fetch_add(1, Ordering::AcqRel);
        Ok(version)
    }
}

/// The table as stored: each entry a big-endian u16.
fn encode(map: &[u16]) -> Vec<u8> {
    map.iter().flat_map(|p| p.to_be_bytes()).collect()
}

/// A stored table; one that is not a permutation of its indices (a damaged item) is the
/// identity.
fn decode(v: &[u8]) -> Vec<u16> {
    let map: Vec<u16> = v
        .chunks_exact(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    let mut seen = vec![false; map.len()];
    for &p in &map {
        match seen.get_mut(usize::from(p)) {
            Some(s) if !*s => *s = true,
            _ => return Vec::new(),
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_table_round_trips_and_a_damaged_one_is_the_identity() {
        let t = vec![2u16, 1, 0, 3];
        assert_eq!(decode(&encode(&t)), t);
        assert!(decode(&encode(&[0, 0, 1])).is_empty());
        assert!(decode(&encode(&[0, 5])).is_empty());
        assert!(decode(b"\x00").is_empty());
    }
}

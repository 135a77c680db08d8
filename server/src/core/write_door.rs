//! The write door as the adapters hold it ([`Shared::writes`]): the reservation station
//! with the store it writes to, so a command runs an operation, a pipeline's batch or a
//! transaction (EXEC, a script, a multi-key command, FLUSHALL) without being handed either.
//! The adapters reach the station through nothing else (`server/tests/layers.rs` checks).

use crate::core::shared::Shared;
use crate::core::station::{Done, Op, Station, StationStats};
use crate::core::station_one::{One, OneCommitted, OneSlot};
use crate::core::station_tx::{Committed, Tx};
use accelkv_tree::{Error, Store};
use smallvec::SmallVec;

/// The station and its store, borrowed from [`Shared`].
pub struct WriteDoor<'a> {
    station: &'a Station,
    store: &'a Store,
}

impl Shared {
    /// The one write door.
    pub fn writes(&self) -> WriteDoor<'_> {
        WriteDoor {
            station: self.station(),
            store: self.store(),
        }
    }
}

impl<'s> WriteDoor<'s> {
    /// Runs `ops`, each answered once its effect is in the tree ([`Station::run`]).
    pub fn run<'a, A: smallvec::Array<Item = Done>>(
        &self,
        ops: impl IntoIterator<Item = Op<'a>>,
        done: &mut SmallVec<A>,
    ) {
        self.station.run(self.store, ops, done)
    }

    /// Runs one operation ([`Station::run_one`]).
    pub fn run_one(&self, op: Op<'_>) -> Done {
        self.station.run_one(self.store, op)
    }

    /// Runs `ops` one after another, their versions in that order
    /// ([`Station::run_in_order`]).
    pub fn run_in_order<'a, A: smallvec::Array<Item = Done>>(
        &self,
        ops: impl IntoIterator<Item = Op<'a>>,
        done: &mut SmallVec<A>,
    ) {
        self.station.run_in_order(self.store, ops, done)
    }

    /// Removes every key, owning every slot meanwhile: the version of the clear.
    pub fn clear(&self) -> Result<u64, Error> {
        self.station.clear(self.store)
    }

    /// The version of the last clear (0: none since start).
    pub fn last_clear(&self) -> u64 {
        self.station.last_clear()
    }

    /// Starts a transaction (one at a time).
    pub fn begin(&self) -> Tx {
        self.station.begin()
    }

    /// Makes `tx` own `key`'s slot until it ends.
    pub fn own(&self, tx: &mut Tx, key: &[u8]) {
        self.station.own(tx, key)
    }

    /// One operation inside `tx`.
    pub fn tx_run(&self, tx: &mut Tx, op: Op<'_>) -> Done {
        self.station.tx_run(self.store, tx, op)
    }

    /// `key`'s item as `tx` sees it, lent to `f`.
    pub fn tx_peek<R>(
        &self,
        tx: &mut Tx,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u32)>) -> R,
    ) -> Result<R, Error> {
        self.station.tx_peek(self.store, tx, key, f)
    }

    /// The items in `lo..hi` as `tx` sees them, lent to `f`.
    pub fn tx_scan(
        &self,
        tx: &Tx,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        self.station.tx_scan(self.store, tx, range, limit, f)
    }

    /// The items in `lo..hi` as `tx` sees them, from the highest down, lent to `f`.
    pub fn tx_scan_rev(
        &self,
        tx: &Tx,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        self.station.tx_scan_rev(self.store, tx, range, limit, f)
    }

    /// Commits `tx`: its writes released to readers as one version.
    pub fn commit(&self, tx: Tx) -> Committed {
        self.station.commit(self.store, tx)
    }

    /// Ends `tx` writing nothing.
    pub fn abort(&self, tx: Tx) {
        self.station.abort(self.store, tx)
    }

    /// Owns `key`'s slot for one command on its collection (`station_one.rs`) until the
    /// guard drops.
    pub fn own_one(&self, key: &[u8]) -> OneSlot<'s> {
        self.station.own_one(self.store, key)
    }

    /// `key`'s newest item as the command `one` sees it, lent to `f` (the command's key's
    /// deadline remembered for its metadata writes).
    pub fn one_peek<R>(
        &self,
        one: &mut One,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u32)>) -> R,
    ) -> Result<R, Error> {
        one.peek(self.store, key, f)
    }

    /// `key`'s newest value, deadline and flags as the command `one` sees it, lent to `f`.
    pub fn one_read<R>(
        &self,
        one: &mut One,
        key: &[u8],
        f: impl FnOnce(Option<(&[u8], u64, u32)>) -> R,
    ) -> Result<R, Error> {
        one.read(self.store, key, f)
    }

    /// The items in `lo..hi` as the command `one` sees them, lent to `f`.
    pub fn one_scan(
        &self,
        one: &One,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        one.scan(self.store, range, limit, f)
    }

    /// The items in `lo..hi` as the command `one` sees them, from the highest down.
    pub fn one_scan_rev(
        &self,
        one: &One,
        range: (&[u8], &[u8]),
        limit: usize,
        f: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), Error> {
        one.scan_rev(self.store, range, limit, f)
    }

    /// Ends the command `one`: its writes as one batch (`keep`), or none.
    pub fn one_finish(&self, one: &mut One, keep: bool) -> OneCommitted {
        one.finish(self.station, self.store, keep)
    }

    /// The station's counters (INFO, /metrics, CONFIG RESETSTAT).
    pub fn stats(&self) -> &'s StationStats {
        &self.station.stats
    }
}

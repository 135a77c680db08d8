//! A store whose reads go through a read engine: the in-process API of `accelkv_tree::Store`
//! with GET, SCAN and SCAN_FLOOR submitted to the engine and waited for, and writes applied
//! to the store directly (the CPU runs writes, as in Honeycomb).

use crate::request::{Reply, Request, Sink};
use crate::ReadEngine;
use accelkv_tree::{Error, Result, Store, Write};
use std::sync::Arc;
use std::time::Duration;

/// A store with its reads routed through `engine`.
pub struct EngineStore<E: ReadEngine> {
    store: Arc<Store>,
    engine: E,
}

thread_local! {
    static SINK: Arc<Sink> = Sink::new();
}

impl<E: ReadEngine> EngineStore<E> {
    /// Routes `store`'s reads through `engine` (which must read the same store).
    pub fn new(store: Arc<Store>, engine: E) -> Self {
        EngineStore { store, engine }
    }

    /// The engine.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The store (writes, stats, snapshots).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    fn one(&self, req: Request) -> Reply {
        SINK.with(|sink| {
            self.engine.submit(sink, vec![(0, req)]);
            let mut out = Vec::with_capacity(1);
            while sink.wait(&mut out, 1, Duration::from_secs(60)) == 0 {}
            out.pop().map_or(Reply::Value(None), |c| c.reply)
        })
    }

    /// GET through the engine.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.one(Request::get(key)) {
            Reply::Value(v) => Ok(v),
            Reply::Error(e) => Err(e),
            Reply::Items(_) => Err(Error::InvalidConfig(
                "engine answered GET with items".into(),
            )),
        }
    }

    /// SCAN of `[lo, hi)` through the engine.
    pub fn scan(&self, lo: &[u8], hi: Option<&[u8]>, limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.one(Request::scan(lo, hi, limit)) {
            Reply::Items(items) => items.to_vec(),
            _ => Vec::new(),
        }
    }

    /// SCAN_FLOOR through the engine.
    pub fn scan_floor(&self, kl: &[u8], ku: &[u8], limit: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        match self.one(Request::scan_floor(kl, ku, limit)) {
            Reply::Items(items) => items.to_vec(),
            _ => Vec::new(),
        }
    }

    /// PUT (on the CPU).
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.store.put(key, value)
    }

    /// UPDATE (on the CPU).
    pub fn update(&self, key: &[u8], value: &[u8]) -> Result<Write> {
        self.store.update(key, value)
    }

    /// DELETE (on the CPU).
    pub fn delete(&self, key: &[u8]) -> Result<Write> {
        self.store.delete(key)
    }
}

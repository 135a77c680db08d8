//! Options shared by the durability tests: 4 KiB nodes (splits and merges come quickly) and
//! 64 KiB values (small slabs, so crash images stay small); the write history a recovered
//! store is checked against. Each test binary uses part of it.

#![allow(dead_code)]

use accelkv_durable::{Options, SyncPolicy};
use accelkv_tree::Config;

pub fn test_options(sync: SyncPolicy) -> Options {
    Options {
        config: Config {
            node_size: 4096,
            chunk_size: 1 << 20,
            max_value: 64 << 10,
            ..Config::default()
        },
        sync,
        ..Options::default()
    }
}

use accelkv_durable::Store;
use std::collections::BTreeMap;

/// Writes a test made, with the versions the store gave them, to check a recovered store
/// against: it must equal the history replayed up to the version recovery reports.
#[derive(Default)]
pub struct History {
    ops: Vec<(u64, Vec<u8>, Option<Vec<u8>>)>,
}

impl History {
    /// A write at `version`: `key` set to `value`, or deleted (`None`).
    pub fn record(&mut self, version: u64, key: Vec<u8>, value: Option<Vec<u8>>) {
        self.ops.push((version, key, value));
    }

    /// Adds another writer's history.
    pub fn merge(&mut self, other: History) {
        self.ops.extend(other.ops);
    }

    /// The state after every write up to `version`.
    pub fn state_at(&self, version: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut ops: Vec<_> = self.ops.iter().filter(|o| o.0 <= version).collect();
        ops.sort_by_key(|o| o.0);
        let mut m = BTreeMap::new();
        for w in ops.windows(2) {
            assert_ne!(w[0].0, w[1].0, "two writes at one version");
        }
        for (_, k, v) in ops {
            match v {
                Some(v) => m.insert(k.clone(), v.clone()),
                None => m.remove(k),
            };
        }
        m
    }

    /// Panics unless a new write to `store` (just recovered) gets a version above every
    /// version in the history: a version a client saw before the crash is never issued
    /// again, even when the crash lost its write.
    pub fn check_next_version(&self, store: &Store, what: &str) {
        let newest = self.ops.iter().map(|o| o.0).max().unwrap_or(0);
        let w = store.put(b"\xffprobe", b"after the crash").unwrap();
        assert!(
            w.version > newest,
            "{what}: version {} issued again after recovery ({})",
            w.version,
            store.recovery()
        );
    }

    /// Panics unless `store` (just recovered) holds exactly the history up to the version
    /// its recovery reports, and that version is at least `durable`.
    pub fn check(&self, store: &Store, durable: u64, what: &str) {
        let r = store.recovery().version;
        let newest = self.ops.iter().map(|o| o.0).max().unwrap_or(0);
        assert!(
            r >= durable,
            "{what}: recovered version {r}, but {durable} was durable ({})",
            store.recovery()
        );
        assert!(
            r <= newest,
            "{what}: recovered version {r} is past every write ({newest})"
        );
        let want = self.state_at(r);
        let got: BTreeMap<Vec<u8>, Vec<u8>> =
            store.scan(b"", None, usize::MAX).into_iter().collect();
        if got != want {
            let diff: Vec<String> = want
                .keys()
                .chain(got.keys())
                .filter(|k| want.get(*k) != got.get(*k))
                .take(5)
                .map(|k| {
                    format!(
                        "{}: want {:?} bytes, got {:?}",
                        String::from_utf8_lossy(k),
                        want.get(k).map(Vec::len),
                        got.get(k).map(Vec::len)
                    )
                })
                .collect();
            panic!(
                "{what}: the recovered store is not the state at version {r} ({}): {}",
                store.recovery(),
                diff.join("; ")
            );
        }
    }
}

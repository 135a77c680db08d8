//! A fresh directory under the system's temporary directory for a target that keeps its
//! data on disk (accelkv-durable, RocksDB, LMDB), removed when the target is dropped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh, empty directory path, unique to this process and call; removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    /// `<tmp>/accelkv-bench-<kind>-<pid>-<n>`, with anything left there removed (the
    /// directory itself is created by whoever opens a store in it).
    pub fn new(kind: &str) -> Scratch {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "accelkv-bench-{kind}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

//! Writing the index at a clean close (index.rs): once the committer's last commit is
//! durable and nothing is left to persist, the live pages' metadata the committer keeps
//! (`Disk::meta`, `Disk::dmeta`) goes to `index.tmp`, which is synced and renamed over
//! `index`, the directory synced, and only then the page file's close record written and
//! synced. A crash anywhere in this sequence leaves no record naming a complete index, and
//! the next open scans.

use crate::commit::Core;
use crate::error::{disk, Result};
use crate::index::{encode, encode_close, Close, Index, CLOSE_AT, INDEX_FILE};
use crate::io::sync_dir;
use std::io::Write;
use std::path::Path;

impl Core {
    /// Writes the index into `dir` and the close record naming it; nothing when the store
    /// is failing or holds writes no commit persisted.
    pub(crate) fn write_index(&self, dir: &Path) -> Result<()> {
        let d = self.disk.lock().unwrap_or_else(|e| e.into_inner());
        if self.failed().is_some() || d.unsynced {
            return Ok(());
        }
        {
            let q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if !q.dirty.is_empty() || !q.whole.is_empty() {
                return Ok(());
            }
        }
        let mut leaves: Vec<_> = d.meta.values().cloned().collect();
        leaves.sort_by_key(|l| l.off);
        let mut deltas: Vec<_> = d.dmeta.values().copied().collect();
        deltas.sort_by_key(|l| l.off);
        let ix = Index {
            seq: d.seq,
            version: self.durable_version(),
            lease: d.lease,
            clock: d.clock,
            slab_size: d.slabs.slab_bytes(),
            slabs: (0..d.slabs.len())
                .filter_map(|i| d.slabs.class_of_slab(i).map(|c| (i, c)))
                .collect(),
            leaves,
            deltas,
        };
        let bytes = encode(&ix);
        let tmp = dir.join(format!("{INDEX_FILE}.tmp"));
        let what = |e: std::io::Error| disk("writing the index", e);
        {
            let mut f = std::fs::File::create(&tmp).map_err(what)?;
            f.write_all(&bytes).map_err(what)?;
            f.sync_all().map_err(what)?;
        }
        std::fs::rename(&tmp, dir.join(INDEX_FILE)).map_err(what)?;
        sync_dir(dir).map_err(what)?;
        let close = Close {
            seq: d.seq,
            len: bytes.len() as u64,
            crc: crc32c::crc32c(&bytes),
        };
        self.storage
            .write_at(&encode_close(&close), CLOSE_AT)
            .and_then(|()| self.storage.sync())
            .map_err(|e| disk("writing the close record", e))
    }
}

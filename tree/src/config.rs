//! Store configuration with documented defaults.

use crate::error::{Error, Result};
use accelkv_node::layout::MAX_KEY;
use accelkv_node::Geometry;

/// How a store is built. Every field has a default (`Config::default()`).
#[derive(Clone, Debug)]
pub struct Config {
    /// Node size in bytes, a power of two from 4096 to 65536. Default 8192.
    pub node_size: usize,
    /// Bytes of the shortcut block. Default 464.
    pub shortcut_size: usize,
    /// Log block size past which a leaf's log is merged into its sorted block. Default 1024.
    pub log_threshold: usize,
    /// Longest value stored inside a node; longer values are stored out of line. Default 469.
    pub max_inline_value: usize,
    /// Smallest segment the shortcut selection aims for. Default 256.
    pub min_segment: usize,
    /// Longest key accepted, at most 460. Default 460.
    pub max_key: usize,
    /// Largest value accepted. Default 1 MiB.
    pub max_value: usize,
    /// Bytes per arena chunk (a power of two, at least the node size). Default 64 MiB.
    pub chunk_size: usize,
    /// Most bytes of node memory and out-of-line values the store may hold; writes past it
    /// fail with `Error::OutOfMemory`. Default 64 GiB. With `evict` it is the budget of
    /// the mirror cache instead (see there).
    pub memory_limit: usize,
    /// `memory_limit` is the budget of a leaf cache over a page file (the durability layer
    /// sets this and attaches the pager, docs/ARCHITECTURE.md "Data larger than memory"):
    /// leaves beyond it are evicted once durable and read back when needed; writers may
    /// pass the budget by a quarter (plus 32 nodes) while the evictor catches up, reads of
    /// evicted leaves up to twice the budget plus 64 nodes, rounded up to whole chunks
    /// (past that a reader reads into a private copy). Default false.
    pub evict: bool,
    /// A node whose merged contents use less than this percentage of its capacity is merged
    /// with a sibling. Default 25.
    pub merge_below_pct: usize,
    /// How full bulk load fills nodes, in percent. Default 90.
    pub bulk_fill_pct: usize,
    /// Test knob: build new node versions without old-version pointers (Honeycomb's
    /// "MVCC off"), so old snapshots read newer state. Only for tests that show why MVCC is
    /// needed.
    #[doc(hidden)]
    pub debug_no_old_versions: bool,
}

impl Default for Config {
    fn default() -> Self {
        let g = Geometry::default();
        Config {
            node_size: g.node_size,
            shortcut_size: g.shortcut_size,
            log_threshold: g.log_threshold,
            max_inline_value: g.max_inline_value,
            min_segment: g.min_segment,
            max_key: MAX_KEY,
            max_value: 1 << 20,
            chunk_size: 64 << 20,
            memory_limit: 64 << 30,
            merge_below_pct: 25,
            bulk_fill_pct: 90,
            evict: false,
            debug_no_old_versions: false,
        }
    }
}

impl Config {
    /// The most bytes of node memory the arena may hold: the limit, or with `evict` the
    /// budget plus the margin the evictor works in.
    pub fn hard_memory_limit(&self) -> usize {
        if self.evict {
            self.memory_limit
                .saturating_mul(2)
                .saturating_add(64 * self.node_size)
        } else {
            self.memory_limit
        }
    }

    /// With `evict`, the node memory past which writers wait for the evictor: the budget
    /// plus a quarter and 32 nodes. (Loads may go up to [`Config::hard_memory_limit`],
    /// rounded up to whole chunks.)
    pub fn write_memory_limit(&self) -> usize {
        self.memory_limit
            .saturating_add(self.memory_limit / 4)
            .saturating_add(32 * self.node_size)
    }

    /// The node geometry this configuration describes.
    pub fn geometry(&self) -> Geometry {
        Geometry {
            node_size: self.node_size,
            shortcut_size: self.shortcut_size,
            log_threshold: self.log_threshold,
            max_inline_value: self.max_inline_value,
            min_segment: self.min_segment,
        }
    }

    /// Checks the configuration.
    pub fn validate(&self) -> Result<()> {
        self.geometry()
            .validate()
            .map_err(|e| Error::InvalidConfig(e.to_string()))?;
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if self.max_key == 0 || self.max_key > MAX_KEY {
            return bad(format!("max_key {} must be 1..={MAX_KEY}", self.max_key));
        }
        if self.max_value > u32::MAX as usize {
            return bad(format!("max_value {} exceeds 4 GiB", self.max_value));
        }
        if self.chunk_size < self.node_size || !self.chunk_size.is_power_of_two() {
            return bad(format!(
                "chunk_size {} must be a power of two and at least the node size {}",
                self.chunk_size, self.node_size
            ));
        }
        if self.memory_limit < 4 * self.node_size {
            return bad(format!("memory_limit {} is too small", self.memory_limit));
        }
        if self.merge_below_pct > 40 {
            return bad("merge_below_pct above 40 makes merges and splits chase each other".into());
        }
        if !(10..=100).contains(&self.bulk_fill_pct) {
            return bad(format!(
                "bulk_fill_pct {} must be 10..=100",
                self.bulk_fill_pct
            ));
        }
        Ok(())
    }
}

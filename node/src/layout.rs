//! Byte layout of a node: header offsets, the packed lock word, and the geometry a store
//! chooses at creation. See ../../docs/FORMAT.md for the diagrams.
//!
//! ```text
//!  0        8        16       24       32     38 39 40       44   46 47 48            sorted_start
//!  +--------+--------+--------+--------+------+--+--+--------+----+--+--+---------------+----
//!  |lock_   |left    |version |old     |link  |K |L |sorted_ |sort|SC|SZ| shortcut block| sorted block ... | log block ...
//!  |used    |sibling |        |version |(LID) |  |  |end     |strt|  |  |               |
//!  +--------+--------+--------+--------+------+--+--+--------+----+--+--+---------------+----
//!  |<-- atomics ---->|<------------------ immutable once published ------------------------------->
//! ```
//!
//! Bytes `[0, 16)` are the only bytes of a published node that change in place, and they are
//! only ever accessed atomically. Everything in `[16, used)` is immutable once published;
//! bytes at or past `used` are invisible to readers (the log block grows there).
//!
//! The node's last bytes are its *tail* (Retina's metadata region): a slot per sorted item
//! (the node offset of its key, and in a leaf a 1-byte fingerprint of the key) and a
//! trailer, written with the node; below them a leaf's log slots grow down, one per log
//! entry, published with the entry by the log count in the lock word:
//!
//! ```text
//!  used ... free ... tail_start               S                         node size - 4
//!  ---------------+-----------+--------------+-------------+-------------+---------+
//!                 | (log slot | log slots,   | leaf: item  | item slots  | trailer |
//!                 |  room)    | newest first | fingerprints| u16 each    |         |
//!  ---------------+-----------+--------------+-------------+-------------+---------+
//!                             S - 4c                                      (c: log count)
//! ```
//!
//! A reader sees `[S - 4c, node size)`, with `c` from the same acquire load as `used`; a
//! writer fills slot `c` at `S - 4(c + 1)` before the release store that makes it `c + 1`.

/// Size of the node header.
pub const HEADER_SIZE: usize = 48;
/// 64-bit word: lock word in the low 32 bits, bytes used in the high 32 bits. Atomic.
pub const OFF_LOCK_USED: usize = 0;
/// 64-bit word: LID of the left sibling leaf in the low 48 bits. Atomic; written only by
/// structural modifications, never read by readers.
pub const OFF_LEFT: usize = OFF_LOCK_USED + 8;
/// End of the atomically accessed part of the header.
pub const ATOMIC_END: usize = OFF_LEFT + 8;
/// u64: node version (write version of the operation that created this buffer).
pub const OFF_VERSION: usize = ATOMIC_END;
/// u64: arena offset of the buffer holding the previous version, or [`NO_BUFFER`].
pub const OFF_OLD: usize = OFF_VERSION + 8;
/// 6-byte LID: right sibling (leaf) or leftmost child (interior).
pub const OFF_LINK: usize = OFF_OLD + 8;
/// u8: node kind, [`KIND_LEAF`] or [`KIND_INTERIOR`].
pub const OFF_KIND: usize = OFF_LINK + LID_SIZE;
/// u8: level, 0 for leaves.
pub const OFF_LEVEL: usize = OFF_KIND + 1;
/// u32: offset of the end of the sorted block (start of the log block).
pub const OFF_SORTED_END: usize = OFF_LEVEL + 1;
/// u16: offset of the start of the sorted block (end of the shortcut block).
pub const OFF_SORTED_START: usize = OFF_SORTED_END + 4;
/// u8: number of shortcuts.
pub const OFF_SC_COUNT: usize = OFF_SORTED_START + 2;
/// u8: log2 of the node size.
pub const OFF_SIZE_LOG2: usize = OFF_SC_COUNT + 1;
const _: () = assert!(OFF_SIZE_LOG2 + 1 == HEADER_SIZE);

/// Bytes in a LID.
pub const LID_SIZE: usize = 6;
/// Largest LID that fits in 6 bytes.
pub const MAX_LID: u64 = (1 << 48) - 1;
/// The "no LID" value (no sibling, no child).
pub const NO_LID: u64 = 0;
/// The "no buffer" value for old-version pointers.
pub const NO_BUFFER: u64 = u64::MAX;

/// Kind byte of a leaf.
pub const KIND_LEAF: u8 = b'L';
/// Kind byte of an interior node.
pub const KIND_INTERIOR: u8 = b'I';

/// Longest key the format can hold (9 bits of the key header).
pub const MAX_KEY: usize = 460;
/// Mask of the length bits in a key header.
pub const KEY_LEN_MASK: u16 = 0x01FF;
/// Log key-header flag: the entry is a delete marker (no value follows).
pub const FLAG_TOMBSTONE: u16 = 0x8000;
/// Log key-header flag: a sorted-block item with the same key sits at the back pointer.
pub const FLAG_EQ: u16 = 0x4000;
/// Log key-header flag: the next log entry in key order has the same key (an older version).
pub const FLAG_DUP: u16 = 0x2000;

/// Value header flag: the value is stored out of line; the body is a [`OUT_OF_LINE_REF`]
/// byte reference `{ handle u64 | len u32 }`.
pub const VALUE_OUT_OF_LINE: u16 = 0x8000;
/// Value header flag: an expiry deadline (u64, milliseconds since the Unix epoch) follows
/// the header, before the body. The item is invisible to a reader whose clock is past it.
pub const VALUE_EXPIRES: u16 = 0x4000;
/// Size of the deadline that [`VALUE_EXPIRES`] announces.
pub const DEADLINE_SIZE: usize = 8;
/// Value header flag: the item's client flags (u32, memcached's opaque per-item word)
/// follow the header and the deadline, before the body. Absent means flags 0.
pub const VALUE_FLAGS: u16 = 0x2000;
/// Size of the client flags that [`VALUE_FLAGS`] announces.
pub const FLAGS_SIZE: usize = 4;
/// Mask of the inline length bits of a value header (inline values are at most 8,191 bytes).
pub const VALUE_LEN_MASK: u16 = 0x1FFF;
/// Header bits that send a reader off the common path (anything but a plain inline length).
pub const VALUE_ATTRS: u16 = VALUE_OUT_OF_LINE | VALUE_EXPIRES | VALUE_FLAGS;
/// A deadline of 0 means "never expires"; a clock of 0 means "expire nothing" (writers and
/// structural modifications read every item whatever its deadline).
pub const NO_DEADLINE: u64 = 0;
/// Size of an out-of-line value reference in a node.
pub const OUT_OF_LINE_REF: usize = 12;

/// Fixed header of a log entry: back pointer u16, order hint u8, version delta 5 bytes.
pub const LOG_ENTRY_HEADER: usize = 8;
/// Largest version delta a log entry can carry.
pub const MAX_VERSION_DELTA: u64 = (1 << 40) - 1;
/// Most log entries one leaf can hold (order hints are one byte).
pub const MAX_LOG_ENTRIES: usize = 255;

/// Lock bit in the lock word.
pub const LOCK_BIT: u32 = 1 << 31;
/// Position of a leaf's log count (published log entries and log slots) in the lock word.
pub const LOG_COUNT_SHIFT: u32 = 23;
/// Log count bits in the lock word (8 bits: at most 255 entries).
pub const LOG_COUNT_MASK: u32 = 0xFF << LOG_COUNT_SHIFT;
/// Sequence bits in the lock word.
pub const SEQ_MASK: u32 = (1 << LOG_COUNT_SHIFT) - 1;

/// Size of the trailer at the end of every node: `{ items u16 | log_slots u8 | tag u8 }`.
pub const TRAILER_SIZE: usize = 4;
/// Trailer tag of a leaf's tail: a slot of [`LEAF_SLOT_SIZE`] bytes per sorted item.
pub const TAIL_LEAF: u8 = 0xF1;
/// Trailer tag of an interior node's tail: a slot of [`INTERIOR_SLOT_SIZE`] bytes per item.
pub const TAIL_INTERIOR: u8 = 0xF2;
/// Tail bytes per sorted item of a leaf: its fingerprint and its key's node offset (u16).
pub const LEAF_SLOT_SIZE: usize = 3;
/// Tail bytes per sorted item of an interior node: its key's node offset (u16).
pub const INTERIOR_SLOT_SIZE: usize = 2;
/// Bytes of one log slot: `{ entry offset u16 | fingerprint u8 | zero u8 }`.
pub const LOG_SLOT_SIZE: usize = 4;
/// An interior node's trailer flag (in the byte a leaf's trailer gives its log slots):
/// the tail holds a heads block below the item slots (docs/FORMAT.md, "Heads").
pub const INTERIOR_HEADS: u8 = 0x01;
/// Bytes of one head: the 8 bytes of a separator after the node's common prefix, as a
/// big-endian integer (zero-padded), stored little-endian.
pub const HEAD_SIZE: usize = 8;
/// Bytes of one child in a heads block: its LID, as a little-endian u64.
pub const CHILD_SIZE: usize = 8;
/// Bytes of the heads block's own header `{ prefix_len u16 | zero u16 | zero u32 }`.
pub const HEADS_HEADER: usize = 8;
/// Bytes a heads block takes per separator: its head and its child.
pub const HEADS_PER_ITEM: usize = HEAD_SIZE + CHILD_SIZE;
/// Most bytes a heads block takes besides [`HEADS_PER_ITEM`] per separator: its header,
/// the leftmost child, and up to 7 bytes of padding that align it to 8 bytes.
pub const HEADS_FIXED: usize = HEADS_HEADER + CHILD_SIZE + 7;

/// Node offsets of an interior node's heads block with `n` separators: (its header, the
/// first head, the first child). The block ends at the item slots `S = size - 4 - 2n`
/// rounded down to 8, so each head and child lies in one cache line; its `n + 1` children
/// follow the `n` heads, the leftmost first.
#[inline]
pub fn heads_at(size: usize, n: usize) -> (usize, usize, usize) {
    let end = (size - TRAILER_SIZE - INTERIOR_SLOT_SIZE * n) & !7;
    let children = end - CHILD_SIZE * (n + 1);
    let heads = children - HEAD_SIZE * n;
    (heads - HEADS_HEADER, heads, children)
}

/// The head of `rest`, a key's bytes after a node's common prefix: its first 8 bytes as a
/// big-endian integer, zero-padded, so heads compare as the keys' bytes do except that a
/// tie needs the keys themselves.
#[inline(always)]
pub fn head_of(rest: &[u8]) -> u64 {
    match rest.first_chunk::<8>() {
        Some(w) => u64::from_be_bytes(*w),
        None => {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            u64::from_be_bytes(w)
        }
    }
}

/// Packs a lock word and the bytes used into the 64-bit header word.
pub fn pack_lock_used(lock: u32, used: u32) -> u64 {
    u64::from(lock) | (u64::from(used) << 32)
}

/// Lock word part of a packed header word.
pub fn lock_of(word: u64) -> u32 {
    word as u32
}

/// Bytes-used part of a packed header word.
pub fn used_of(word: u64) -> usize {
    (word >> 32) as usize
}

/// Whether the lock bit is set.
pub fn is_locked(word: u64) -> bool {
    lock_of(word) & LOCK_BIT != 0
}

/// The packed word with the lock bit set (sequence unchanged).
pub fn locked(word: u64) -> u64 {
    word | u64::from(LOCK_BIT)
}

/// Log entries (and log slots) a leaf's header word publishes.
#[inline]
pub fn log_count_of(word: u64) -> usize {
    ((lock_of(word) & LOG_COUNT_MASK) >> LOG_COUNT_SHIFT) as usize
}

/// The unlocked word that follows `word` after a write: sequence + 1 (23-bit wrap), new
/// size, log count unchanged.
pub fn unlocked_next(word: u64, used: usize) -> u64 {
    unlocked_append(word, used, log_count_of(word))
}

/// The unlocked word that publishes a log append: sequence + 1 (23-bit wrap), new size,
/// `count` log entries (at most 255).
#[inline]
pub fn unlocked_append(word: u64, used: usize, count: usize) -> u64 {
    debug_assert!(count <= MAX_LOG_ENTRIES);
    let seq = (lock_of(word).wrapping_add(1)) & SEQ_MASK;
    pack_lock_used(seq | ((count as u32) << LOG_COUNT_SHIFT), used as u32)
}

/// Node geometry, chosen at store creation and the same for every node of a store.
///
/// The default log threshold is 1,024 bytes (Honeycomb used 512 to bound what its
/// accelerator reads over PCIe): with fingerprints a point read does not read the log
/// entries it does not need, and a write path that merges half as often costs a quarter
/// less per put (docs/BENCHMARKS.md, "Fingerprints").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Node size in bytes: a power of two from 4 KiB to 64 KiB.
    pub node_size: usize,
    /// Bytes reserved for the shortcut block.
    pub shortcut_size: usize,
    /// Log block size past which a leaf is merged: entries are appended while the log is
    /// smaller than this and the entry fits in the node; 0 turns the log block off.
    pub log_threshold: usize,
    /// Longest value stored inline; longer values go out of line.
    pub max_inline_value: usize,
    /// Smallest sorted-block segment the shortcut selection aims for.
    pub min_segment: usize,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry {
            node_size: 8192,
            shortcut_size: 464,
            log_threshold: 1024,
            max_inline_value: 469,
            min_segment: 256,
        }
    }
}

/// A geometry that cannot hold the format's invariants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GeometryError(pub String);

impl std::fmt::Display for GeometryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid node geometry: {}", self.0)
    }
}

impl std::error::Error for GeometryError {}

impl Geometry {
    /// Offset of the sorted block.
    pub fn sorted_start(&self) -> usize {
        HEADER_SIZE + self.shortcut_size
    }

    /// Log slots a leaf reserves (0 without a log block): enough for a log of
    /// `log_threshold` bytes of 24-byte entries and one more, at most 255. A log whose slots
    /// are all taken is merged like one past its threshold.
    pub fn log_slots(&self) -> usize {
        if self.log_threshold == 0 {
            0
        } else {
            (self.log_threshold / 24 + 2).min(MAX_LOG_ENTRIES)
        }
    }

    /// Bytes a merge may give a leaf's items (sorted block plus their tail slots, as
    /// [`crate::leaf_item_size`] counts them), leaving room for half a log block and all its
    /// slots: a leaf that a merge filled is split after half a log of appends, one with room
    /// merges after a whole log.
    pub fn leaf_capacity(&self) -> usize {
        self.leaf_room() - self.log_threshold / 2 - LOG_SLOT_SIZE * self.log_slots()
    }

    /// Bytes of items a bulk load fills a leaf against (`bulk_fill_pct` of it): all of its
    /// room but the log slots, without [`Geometry::leaf_capacity`]'s half-log reserve, since
    /// the fill percentage leaves the log its room (10% of the leaf by default).
    pub fn bulk_leaf_capacity(&self) -> usize {
        self.leaf_room() - LOG_SLOT_SIZE * self.log_slots()
    }

    /// Bytes of a leaf past its shortcut block less the trailer: its items, its log block
    /// and its log slots share them.
    pub fn leaf_room(&self) -> usize {
        self.node_size - self.sorted_start() - TRAILER_SIZE
    }

    /// Bytes an interior node's items may take (sorted block plus their tail slots and
    /// heads, as [`crate::interior_item_size`] counts them), besides the heads block's own.
    pub fn interior_capacity(&self) -> usize {
        self.node_size - self.sorted_start() - TRAILER_SIZE - HEADS_FIXED
    }

    /// Largest item (with its tail slot) a leaf can hold.
    pub fn max_leaf_item(&self) -> usize {
        2 + MAX_KEY
            + 2
            + DEADLINE_SIZE
            + FLAGS_SIZE
            + self.max_inline_value.max(OUT_OF_LINE_REF)
            + LEAF_SLOT_SIZE
    }

    /// Largest item (with its tail slot) an interior node can hold.
    pub fn max_interior_item(&self) -> usize {
        2 + MAX_KEY + LID_SIZE + INTERIOR_SLOT_SIZE + HEADS_PER_ITEM
    }

    /// Checks the invariants the builders and the tree rely on.
    pub fn validate(&self) -> Result<(), GeometryError> {
        let err = |m: String| Err(GeometryError(m));
        if !self.node_size.is_power_of_two() || !(4096..=65536).contains(&self.node_size) {
            return err(format!(
                "node size {} is not a power of two from 4096 to 65536",
                self.node_size
            ));
        }
        if self.shortcut_size < MAX_KEY + 4 || self.shortcut_size > 255 * (MAX_KEY + 4) {
            return err(format!(
                "shortcut block of {} bytes must hold at least one {}-byte key (>= {})",
                self.shortcut_size,
                MAX_KEY,
                MAX_KEY + 4
            ));
        }
        if self.max_inline_value > usize::from(VALUE_LEN_MASK) {
            return err(format!(
                "inline value limit {} exceeds {}",
                self.max_inline_value, VALUE_LEN_MASK
            ));
        }
        if self.node_size
            < self.sorted_start()
                + TRAILER_SIZE
                + self.log_threshold
                + LOG_SLOT_SIZE * self.log_slots()
        {
            return err("node too small for its header, shortcut and log blocks".into());
        }
        if self.leaf_capacity() < 3 * self.max_leaf_item() {
            return err(format!(
                "leaf sorted block of {} bytes cannot hold three largest items ({} bytes each)",
                self.leaf_capacity(),
                self.max_leaf_item()
            ));
        }
        if self.interior_capacity() < 3 * self.max_interior_item() {
            return err("interior node cannot hold three largest separators".into());
        }
        if self.min_segment == 0 {
            return err("minimum segment size must be positive".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_word_round_trip() {
        let w = pack_lock_used(5, 1234);
        assert_eq!(lock_of(w), 5);
        assert_eq!(used_of(w), 1234);
        assert!(!is_locked(w));
        let l = locked(w);
        assert!(is_locked(l));
        assert_eq!(used_of(l), 1234);
        let n = unlocked_next(l, 2000);
        assert!(!is_locked(n));
        assert_eq!(lock_of(n), 6);
        assert_eq!(used_of(n), 2000);
        assert_eq!(log_count_of(n), 0);
        // An append publishes its log count with the size; later words keep it.
        let a = unlocked_append(locked(n), 2100, 255);
        assert_eq!(
            (log_count_of(a), used_of(a), lock_of(a) & SEQ_MASK),
            (255, 2100, 7)
        );
        assert!(!is_locked(a));
        assert_eq!(log_count_of(unlocked_next(locked(a), 2100)), 255);
        // The sequence wraps within 23 bits, never into the count or the lock bit.
        let top = pack_lock_used(SEQ_MASK | LOCK_BIT | (3 << LOG_COUNT_SHIFT), 10);
        let wrapped = unlocked_next(top, 10);
        assert_eq!(lock_of(wrapped) & SEQ_MASK, 0);
        assert_eq!(log_count_of(wrapped), 3);
        assert!(!is_locked(wrapped));
    }

    #[test]
    fn default_geometry_is_valid() {
        Geometry::default().validate().unwrap();
        for size in [4096, 8192, 16384, 32768, 65536] {
            let g = Geometry {
                node_size: size,
                ..Geometry::default()
            };
            g.validate().unwrap();
        }
    }

    #[test]
    fn bad_geometry_is_rejected() {
        for g in [
            Geometry {
                node_size: 3000,
                ..Geometry::default()
            },
            Geometry {
                node_size: 131072,
                ..Geometry::default()
            },
            Geometry {
                shortcut_size: 100,
                ..Geometry::default()
            },
            Geometry {
                log_threshold: 12000,
                ..Geometry::default()
            },
        ] {
            assert!(g.validate().is_err(), "{g:?}");
        }
    }
}

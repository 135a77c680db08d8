//! Builders: write a whole node (header, shortcut block, sorted block, tail) into a fresh
//! buffer, choosing shortcut keys as Honeycomb §3.4 describes; the tail gets a slot per item
//! (its key's offset and, in a leaf, its fingerprint), room for the log slots, and the
//! trailer.
//!
//! Calling order: size the items with [`leaf_item_size`] / [`interior_item_size`] to decide
//! splits, then call [`build_leaf`] or [`build_interior`] once per new buffer. The buffer is
//! not visible to anyone until the tree publishes it.

use crate::layout::*;
use crate::view::{write_lid, ValueData, ValueRef};

/// Header fields the caller chooses for a new node.
#[derive(Clone, Copy, Debug)]
pub struct NodeMeta {
    /// Node version (write version of the creating operation).
    pub version: u64,
    /// Arena offset of the previous version, or [`NO_BUFFER`].
    pub old: u64,
    /// Right sibling (leaf) or leftmost child (interior).
    pub link: u64,
    /// Left sibling (leaf only).
    pub left: u64,
    /// Level, 0 for leaves.
    pub level: u8,
    /// Initial lock word (the tree creates buffers locked and unlocks them on publication).
    pub lock: u32,
}

/// A node's items do not fit in its sorted block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overflow {
    /// Bytes the items need.
    pub needed: usize,
    /// Bytes available.
    pub capacity: usize,
}

impl std::fmt::Display for Overflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "items need {} bytes, node holds {}",
            self.needed, self.capacity
        )
    }
}

impl std::error::Error for Overflow {}

/// A leaf item as a merge copies it: its key, its value as encoded in a node (`vhdr`,
/// deadline, flags, body: the same bytes in a sorted item and a log entry) and its key's
/// fingerprint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawItem<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The encoded value ([`encode_value`]'s bytes).
    pub value: &'a [u8],
    /// The key's fingerprint.
    pub fp: u8,
}

impl<'a> RawItem<'a> {
    /// Bytes the item takes in a sorted block and its tail slot (upper bound, as
    /// [`leaf_item_size`]).
    #[inline]
    pub fn size(&self) -> usize {
        2 + self.key.len() + self.value.len() + LEAF_SLOT_SIZE
    }

    /// The value decoded.
    pub fn value_ref(&self) -> ValueRef<'a> {
        decode_value(self.value)
    }

    /// The out-of-line reference of the value, if it is stored out of line (read from its
    /// header and reference only).
    #[inline]
    pub fn out_of_line_ref(&self) -> Option<(u64, u32)> {
        let hdr = u16::from_le_bytes([self.value[0], self.value[1]]);
        if hdr & VALUE_OUT_OF_LINE == 0 {
            return None;
        }
        self.value_ref().out_of_line_ref()
    }
}

/// Decodes an encoded value (bytes [`encode_value`] wrote, exactly).
fn decode_value(b: &[u8]) -> ValueRef<'_> {
    let hdr = u16::from_le_bytes([b[0], b[1]]);
    let mut at = 2;
    let mut deadline = NO_DEADLINE;
    let mut flags = 0;
    if hdr & VALUE_EXPIRES != 0 {
        let mut d = [0u8; 8];
        d.copy_from_slice(&b[at..at + DEADLINE_SIZE]);
        deadline = u64::from_le_bytes(d);
        at += DEADLINE_SIZE;
    }
    if hdr & VALUE_FLAGS != 0 {
        let mut f = [0u8; 4];
        f.copy_from_slice(&b[at..at + FLAGS_SIZE]);
        flags = u32::from_le_bytes(f);
        at += FLAGS_SIZE;
    }
    let data = if hdr & VALUE_OUT_OF_LINE != 0 {
        let mut h = [0u8; 8];
        h.copy_from_slice(&b[at..at + 8]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&b[at + 8..at + 12]);
        ValueData::OutOfLine {
            handle: u64::from_le_bytes(h),
            len: u32::from_le_bytes(l),
        }
    } else {
        ValueData::Inline(&b[at..])
    };
    ValueRef {
        data,
        deadline,
        flags,
    }
}

/// Bytes a leaf item takes in a sorted block and its tail slot (upper bound: the first item
/// of a segment is smaller because its key lives in the shortcut block).
pub fn leaf_item_size(key_len: usize, value: &ValueRef<'_>) -> usize {
    2 + key_len + 2 + value.body_len() + LEAF_SLOT_SIZE
}

/// Bytes an interior item takes in a sorted block and its tail slot (upper bound, as for
/// leaves).
pub fn interior_item_size(key_len: usize) -> usize {
    2 + key_len + LID_SIZE + INTERIOR_SLOT_SIZE + HEADS_PER_ITEM
}

/// Encodes a value (header, deadline, flags, body) into `dst`; returns the bytes written.
pub fn encode_value(dst: &mut [u8], v: &ValueRef<'_>) -> usize {
    if let (ValueData::Inline(b), NO_DEADLINE, 0) = (v.data, v.deadline, v.flags) {
        // The common case: header = length, then the bytes.
        dst[0..2].copy_from_slice(&(b.len() as u16).to_le_bytes());
        put_bytes(dst, 2, b);
        return 2 + b.len();
    }
    let mut attrs = 0;
    let mut p = 2;
    if v.deadline != NO_DEADLINE {
        dst[p..p + DEADLINE_SIZE].copy_from_slice(&v.deadline.to_le_bytes());
        p += DEADLINE_SIZE;
        attrs |= VALUE_EXPIRES;
    }
    if v.flags != 0 {
        dst[p..p + FLAGS_SIZE].copy_from_slice(&v.flags.to_le_bytes());
        p += FLAGS_SIZE;
        attrs |= VALUE_FLAGS;
    }
    let hdr = match v.data {
        ValueData::Inline(b) => {
            dst[p..p + b.len()].copy_from_slice(b);
            p += b.len();
            b.len() as u16
        }
        ValueData::OutOfLine { handle, len } => {
            dst[p..p + 8].copy_from_slice(&handle.to_le_bytes());
            dst[p + 8..p + 12].copy_from_slice(&len.to_le_bytes());
            p += OUT_OF_LINE_REF;
            VALUE_OUT_OF_LINE
        }
    };
    dst[0..2].copy_from_slice(&(hdr | attrs).to_le_bytes());
    p
}

/// Builds a leaf holding `items` (strictly ascending keys) into `buf` (a whole node buffer).
/// Returns the bytes used.
pub fn build_leaf(
    buf: &mut [u8],
    geo: &Geometry,
    items: &[(&[u8], ValueRef<'_>)],
    meta: &NodeMeta,
) -> Result<usize, Overflow> {
    leaf_within(buf, geo, items, meta, geo.leaf_capacity(), geo.log_slots())
}

/// [`build_leaf`] allowing the items the whole node (no room kept for a log block): how a
/// leaf read back from a page file is rebuilt, since the leaf it images may have held its
/// items in a sorted block and a log block together. It keeps its log slots when they
/// still fit. Such a leaf's next write that does not fit merges it (and splits it when it
/// is over [`Geometry::leaf_capacity`]).
pub fn build_leaf_full(
    buf: &mut [u8],
    geo: &Geometry,
    items: &[(&[u8], ValueRef<'_>)],
    meta: &NodeMeta,
) -> Result<usize, Overflow> {
    let bytes = leaf_sorted_bytes(geo, items) + LEAF_SLOT_SIZE * items.len();
    let slots = if bytes + LOG_SLOT_SIZE * geo.log_slots() <= geo.leaf_room() {
        geo.log_slots()
    } else {
        0
    };
    let cap = geo.leaf_room() - LOG_SLOT_SIZE * slots;
    leaf_within(buf, geo, items, meta, cap, slots)
}

/// The bytes `items` (ascending keys) take in a leaf's sorted block, exactly as the builders
/// lay them out (the keys of shortcut starts live in the shortcut block, not counted here;
/// nor are the items' tail slots).
pub fn leaf_sorted_bytes(geo: &Geometry, items: &[(&[u8], ValueRef<'_>)]) -> usize {
    let key = |i: usize| items[i].0;
    let body = |i: usize| 2 + items[i].1.body_len();
    layout(geo, items.len(), &key, &body).0
}

/// Whether [`build_leaf_full`] can hold `items`.
pub fn leaf_fits_full(geo: &Geometry, items: &[(&[u8], ValueRef<'_>)]) -> bool {
    leaf_sorted_bytes(geo, items) + LEAF_SLOT_SIZE * items.len() <= geo.leaf_room()
}

/// [`build_leaf`] of items as a merge copies them: their encoded values are copied, not
/// encoded again, and their fingerprints are not computed again.
pub fn build_leaf_raw(
    buf: &mut [u8],
    geo: &Geometry,
    items: &[RawItem<'_>],
    meta: &NodeMeta,
) -> Result<usize, Overflow> {
    build(
        buf,
        geo,
        KIND_LEAF,
        meta,
        (geo.leaf_capacity(), geo.log_slots()),
        items.len(),
        |i| items[i].key,
        |i| items[i].value.len(),
        |i, dst| put_bytes(dst, 0, items[i].value),
        |i| items[i].fp,
        |_| 0,
    )
}

/// A leaf whose items (sorted block and slots) may take `cap` bytes, with room for `slots`
/// log slots.
fn leaf_within(
    buf: &mut [u8],
    geo: &Geometry,
    items: &[(&[u8], ValueRef<'_>)],
    meta: &NodeMeta,
    cap: usize,
    slots: usize,
) -> Result<usize, Overflow> {
    build(
        buf,
        geo,
        KIND_LEAF,
        meta,
        (cap, slots),
        items.len(),
        |i| items[i].0,
        |i| 2 + items[i].1.body_len(),
        |i, dst| {
            encode_value(dst, &items[i].1);
        },
        |i| crate::fingerprint(items[i].0),
        |_| 0,
    )
}

/// Builds an interior node with `leftmost` child and (separator, child) `entries` (strictly
/// ascending separators) into `buf`. Returns the bytes used.
pub fn build_interior(
    buf: &mut [u8],
    geo: &Geometry,
    entries: &[(&[u8], u64)],
    meta: &NodeMeta,
) -> Result<usize, Overflow> {
    build(
        buf,
        geo,
        KIND_INTERIOR,
        meta,
        (geo.interior_capacity(), 0),
        entries.len(),
        |i| entries[i].0,
        |_| LID_SIZE,
        |i, dst| write_lid(dst, entries[i].1),
        |_| 0,
        |i| entries[i].1,
    )
}

/// Shortcut selection (Honeycomb §3.4): which items start a segment. Aims for as many
/// segments as the shortcut block and the minimum segment size allow, of similar byte size,
/// deciding item by item from running totals, so a builder asks it in one pass to size the
/// node and again, with the same answers, while it writes.
#[derive(Clone, Copy)]
struct Shortcuts {
    shortcut_size: usize,
    target: usize,
    seg_bytes: usize,
    sc_used: usize,
    count: usize,
}

impl Shortcuts {
    /// The chooser for `n` items taking `total` bytes in all (`2 + key + body` each) with
    /// keys of `keys` bytes in all.
    fn new(geo: &Geometry, n: usize, total: usize, keys: usize) -> Shortcuts {
        let avg_key = keys / n.max(1);
        let by_space = geo.shortcut_size / (4 + avg_key);
        let by_min = total / geo.min_segment;
        let segments = by_space.min(by_min).clamp(1, 255);
        Shortcuts {
            shortcut_size: geo.shortcut_size,
            target: (total / segments).max(geo.min_segment),
            seg_bytes: 0,
            sc_used: 0,
            count: 0,
        }
    }

    /// Whether item `i` (key of `klen` bytes, body of `body`) starts a segment.
    #[inline]
    fn next(&mut self, i: usize, klen: usize, body: usize) -> bool {
        let fits = self.sc_used + 4 + klen <= self.shortcut_size && self.count < 255;
        if i == 0 || (self.seg_bytes >= self.target && fits) {
            self.sc_used += 4 + klen;
            self.count += 1;
            self.seg_bytes = body; // the boundary key lives in the shortcut block
            true
        } else {
            self.seg_bytes += 2 + klen + body;
            false
        }
    }
}

/// The bytes `n` items take in a sorted block as the builders lay them out (shortcut keys
/// not counted), and the shortcut chooser, fresh, that gives that layout.
fn layout<'k>(
    geo: &Geometry,
    n: usize,
    key: &impl Fn(usize) -> &'k [u8],
    body: &impl Fn(usize) -> usize,
) -> (usize, Shortcuts) {
    let (mut total, mut keys) = (0, 0);
    for i in 0..n {
        let k = key(i).len();
        total += 2 + k + body(i);
        keys += k;
    }
    let fresh = Shortcuts::new(geo, n, total, keys);
    let mut sc = fresh;
    // The shortcut block holds `4 + k` per start: `2 + k` of it would have been in the
    // sorted block.
    let mut moved = 0;
    for i in 0..n {
        let k = key(i).len();
        if sc.next(i, k, body(i)) {
            moved += 2 + k;
        }
    }
    (total - moved, fresh)
}

/// Copies `src` into `dst` at `at`: keys and values are short, and a call into `memcpy`
/// costs more than two overlapping word moves.
#[inline(always)]
pub(crate) fn put_bytes(dst: &mut [u8], at: usize, src: &[u8]) {
    let n = src.len();
    let d = &mut dst[at..at + n];
    if (16..=32).contains(&n) {
        d[..16].copy_from_slice(&src[..16]);
        d[n - 16..].copy_from_slice(&src[n - 16..]);
    } else if (8..16).contains(&n) {
        d[..8].copy_from_slice(&src[..8]);
        d[n - 8..].copy_from_slice(&src[n - 8..]);
    } else if (4..8).contains(&n) {
        d[..4].copy_from_slice(&src[..4]);
        d[n - 4..].copy_from_slice(&src[n - 4..]);
    } else {
        d.copy_from_slice(src);
    }
}

/// Writes a whole node: `room` is the bytes its items (sorted block and tail slots) may
/// take and the log slots to reserve below them.
#[allow(clippy::too_many_arguments)]
fn build<'k>(
    buf: &mut [u8],
    geo: &Geometry,
    kind: u8,
    meta: &NodeMeta,
    room: (usize, usize),
    n: usize,
    key: impl Fn(usize) -> &'k [u8],
    body: impl Fn(usize) -> usize,
    write_body: impl Fn(usize, &mut [u8]),
    fingerprint: impl Fn(usize) -> u8,
    child: impl Fn(usize) -> u64,
) -> Result<usize, Overflow> {
    let (capacity, log_slots) = room;
    debug_assert_eq!(buf.len(), geo.node_size);
    debug_assert!((1..n).all(|i| key(i - 1) < key(i)), "keys must ascend");
    let leaf = kind == KIND_LEAF;
    let slot = if leaf {
        LEAF_SLOT_SIZE
    } else {
        INTERIOR_SLOT_SIZE
    };
    let (sorted, mut shortcuts) = layout(geo, n, &key, &body);
    let heads = !leaf && n > 0;
    let needed = sorted + slot * n + if heads { HEADS_PER_ITEM * n } else { 0 };
    if needed > capacity || n > usize::from(u16::MAX) {
        return Err(Overflow { needed, capacity });
    }
    let size = geo.node_size;
    let s = size - TRAILER_SIZE - slot * n;
    let (fps, offs) = if leaf { (s, s + n) } else { (s, s) };
    let sorted_start = geo.sorted_start();
    let mut sc = HEADER_SIZE;
    let mut pos = sorted_start;
    let mut sc_count = 0;
    for i in 0..n {
        let k = key(i);
        let b = body(i);
        let start = shortcuts.next(i, k.len(), b);
        sc_count += usize::from(start);
        let key_header = if start {
            buf[sc..sc + 2].copy_from_slice(&((pos - sorted_start) as u16).to_le_bytes());
            buf[sc + 2..sc + 4].copy_from_slice(&(k.len() as u16).to_le_bytes());
            buf[sc + 4..sc + 4 + k.len()].copy_from_slice(k);
            sc += 4 + k.len();
            sc - k.len() - 2
        } else {
            buf[pos..pos + 2].copy_from_slice(&(k.len() as u16).to_le_bytes());
            put_bytes(buf, pos + 2, k);
            pos += 2 + k.len();
            pos - k.len() - 2
        };
        write_body(i, &mut buf[pos..pos + b]);
        pos += b;
        buf[offs + 2 * i..offs + 2 * i + 2].copy_from_slice(&(key_header as u16).to_le_bytes());
        if leaf {
            buf[fps + i] = fingerprint(i);
        }
    }
    let tail_start = if heads {
        write_heads(buf, n, &key, meta.link, &child)
    } else {
        s - LOG_SLOT_SIZE * log_slots
    };
    debug_assert!(pos <= tail_start, "items overlap the tail");
    buf[sc..sorted_start].fill(0);
    buf[size - TRAILER_SIZE..size - TRAILER_SIZE + 2].copy_from_slice(&(n as u16).to_le_bytes());
    buf[size - 2] = if heads {
        INTERIOR_HEADS
    } else {
        log_slots as u8
    };
    buf[size - 1] = if leaf { TAIL_LEAF } else { TAIL_INTERIOR };
    write_header(buf, geo, kind, meta, pos, sc_count);
    Ok(pos)
}

/// Writes an interior node's heads block for its `n` (> 0) separators: the length of their
/// common prefix, each one's head, then the children, `leftmost` first (docs/FORMAT.md,
/// "Heads"). Returns the node offset where the block starts (the start of the tail).
fn write_heads<'k>(
    buf: &mut [u8],
    n: usize,
    key: &impl Fn(usize) -> &'k [u8],
    leftmost: u64,
    child: &impl Fn(usize) -> u64,
) -> usize {
    let (first, last) = (key(0), key(n - 1));
    let p = first.iter().zip(last).take_while(|(a, b)| a == b).count();
    let (hdr, heads, children) = heads_at(buf.len(), n);
    buf[hdr..heads].fill(0);
    buf[hdr..hdr + 2].copy_from_slice(&(p as u16).to_le_bytes());
    for i in 0..n {
        let h = head_of(&key(i)[p..]);
        buf[heads + HEAD_SIZE * i..heads + HEAD_SIZE * (i + 1)].copy_from_slice(&h.to_le_bytes());
    }
    for i in 0..=n {
        let c = if i == 0 { leftmost } else { child(i - 1) };
        let at = children + CHILD_SIZE * i;
        buf[at..at + CHILD_SIZE].copy_from_slice(&c.to_le_bytes());
    }
    // The padding between the block and the item slots.
    let end = children + CHILD_SIZE * (n + 1);
    let slots = buf.len() - TRAILER_SIZE - INTERIOR_SLOT_SIZE * n;
    buf[end..slots].fill(0);
    hdr
}

fn write_header(
    buf: &mut [u8],
    geo: &Geometry,
    kind: u8,
    meta: &NodeMeta,
    used: usize,
    sc_count: usize,
) {
    let word = pack_lock_used(meta.lock, used as u32);
    buf[OFF_LOCK_USED..OFF_LOCK_USED + 8].copy_from_slice(&word.to_le_bytes());
    buf[OFF_LEFT..OFF_LEFT + 8].copy_from_slice(&meta.left.to_le_bytes());
    buf[OFF_VERSION..OFF_VERSION + 8].copy_from_slice(&meta.version.to_le_bytes());
    buf[OFF_OLD..OFF_OLD + 8].copy_from_slice(&meta.old.to_le_bytes());
    write_lid(&mut buf[OFF_LINK..], meta.link);
    buf[OFF_KIND] = kind;
    buf[OFF_LEVEL] = meta.level;
    buf[OFF_SORTED_END..OFF_SORTED_END + 4].copy_from_slice(&(used as u32).to_le_bytes());
    buf[OFF_SORTED_START..OFF_SORTED_START + 2]
        .copy_from_slice(&(geo.sorted_start() as u16).to_le_bytes());
    buf[OFF_SC_COUNT] = sc_count as u8;
    buf[OFF_SIZE_LOG2] = geo.node_size.trailing_zeros() as u8;
}

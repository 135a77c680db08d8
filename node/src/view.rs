//! Read-only accessors over the published bytes of one node: header fields, the shortcut
//! block, sorted-block items through their tail slots, and the binary search of a node for
//! a key (an interior node's child, a leaf's lower bound).
//!
//! A [`NodeView`] borrows bytes `[ATOMIC_END, used)` of a node and its published tail
//! `[S - 4c, node size)` (layout.rs), the parts that never change once published; the
//! atomic header words are read by the caller.

use crate::keys::cmp_keys;
use crate::layout::*;
use std::cmp::Ordering::{Equal, Greater, Less};

/// Where a value's bytes are: inline in the node, or kept out of line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueData<'a> {
    /// Bytes stored in the node.
    Inline(&'a [u8]),
    /// Bytes stored elsewhere; `handle` is owned by the tree (an address or a page number).
    OutOfLine {
        /// Opaque reference to the bytes.
        handle: u64,
        /// Length of the value.
        len: u32,
    },
}

/// A value as stored in an item: its bytes, its expiry deadline and its client flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRef<'a> {
    /// The bytes.
    pub data: ValueData<'a>,
    /// Milliseconds since the Unix epoch after which the item is gone; [`NO_DEADLINE`]
    /// (0) for an item that never expires.
    pub deadline: u64,
    /// The client's opaque per-item word (memcached's flags); 0 when none was given.
    pub flags: u32,
}

impl<'a> ValueRef<'a> {
    /// Inline bytes without a deadline.
    pub fn inline(bytes: &'a [u8]) -> Self {
        ValueRef {
            data: ValueData::Inline(bytes),
            deadline: NO_DEADLINE,
            flags: 0,
        }
    }

    /// An out-of-line reference without a deadline.
    pub fn out_of_line(handle: u64, len: u32) -> Self {
        ValueRef {
            data: ValueData::OutOfLine { handle, len },
            deadline: NO_DEADLINE,
            flags: 0,
        }
    }

    /// The same value with `deadline` ([`NO_DEADLINE`]: none).
    pub fn with_deadline(self, deadline: u64) -> Self {
        ValueRef { deadline, ..self }
    }

    /// The same value with client `flags` (0: none).
    pub fn with_flags(self, flags: u32) -> Self {
        ValueRef { flags, ..self }
    }

    /// Whether a reader whose clock reads `now` (ms since the Unix epoch) no longer sees the
    /// item: it has a deadline and `now` is past it (Redis's rule: a key with deadline `d`
    /// is still there at `d`, gone at `d + 1`). `now = 0` expires nothing.
    #[inline]
    pub fn is_expired(&self, now: u64) -> bool {
        self.deadline != NO_DEADLINE && now > self.deadline
    }

    /// Bytes this value occupies in a node after its 2-byte header (deadline included).
    #[inline]
    pub fn body_len(&self) -> usize {
        let d = if self.deadline != NO_DEADLINE {
            DEADLINE_SIZE
        } else {
            0
        };
        let f = if self.flags != 0 { FLAGS_SIZE } else { 0 };
        d + f
            + match self.data {
                ValueData::Inline(b) => b.len(),
                ValueData::OutOfLine { .. } => OUT_OF_LINE_REF,
            }
    }

    /// Length of the value itself.
    pub fn value_len(&self) -> usize {
        match self.data {
            ValueData::Inline(b) => b.len(),
            ValueData::OutOfLine { len, .. } => len as usize,
        }
    }

    /// The bytes of an inline value (empty for one stored out of line).
    pub fn data_bytes(&self) -> &'a [u8] {
        match self.data {
            ValueData::Inline(b) => b,
            ValueData::OutOfLine { .. } => &[],
        }
    }

    /// The out-of-line reference, if the value is stored out of line.
    pub fn out_of_line_ref(&self) -> Option<(u64, u32)> {
        match self.data {
            ValueData::OutOfLine { handle, len } => Some((handle, len)),
            ValueData::Inline(_) => None,
        }
    }
}

/// One item of a sorted block.
#[derive(Clone, Copy, Debug)]
pub struct SortedItem<'a> {
    /// Offset of the item relative to the start of the sorted block (what log entries' back
    /// pointers name).
    pub rel: usize,
    /// The key (from the shortcut block for the first item of a segment).
    pub key: &'a [u8],
    /// Node offset of the item body (value header for leaves, child LID for interior nodes).
    pub body: usize,
    /// Index of the item in key order (its slot).
    pub index: usize,
}

/// Read-only view of a published node.
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    /// Bytes `[ATOMIC_END, used)`.
    imm: &'a [u8],
    /// Bytes `[S - 4c, node size)`: the published log slots, the item slots, the trailer.
    tail: &'a [u8],
    /// Items in the sorted block (from the trailer).
    n: u32,
    /// Index in `tail` of `S` (4 × the log count).
    s: u32,
    /// Index in `tail` of the first item slot.
    slots: u32,
    /// Index in `tail` of an interior node's first head; 0 without heads (a heads block
    /// never starts the tail: its header does).
    heads: u32,
    /// Length of the prefix all of an interior node's separators share (with heads).
    pre: u16,
}

/// Where a node's tail parts are, from its trailer: what a view needs to read them.
#[derive(Clone, Copy, Debug)]
pub struct TailShape {
    /// Bytes of the tail a reader may see (0 for a trailer that is not one).
    pub len: usize,
    n: u32,
    s: u32,
    slots: u32,
    heads: u32,
}

impl TailShape {
    /// The shape of the tail of a node of `size` bytes whose trailer reads `trailer` and
    /// whose header word publishes `log_count` log entries.
    #[inline]
    pub fn of(trailer: [u8; TRAILER_SIZE], log_count: usize, size: usize) -> TailShape {
        let n = usize::from(u16::from_le_bytes([trailer[0], trailer[1]]));
        let none = TailShape {
            len: 0,
            n: 0,
            s: 0,
            slots: 0,
            heads: 0,
        };
        // Within the tail: `s` the first item slot (leaves: the first fingerprint), the
        // log slots below it.
        let (len, s, slots, heads) = match trailer[3] {
            TAIL_LEAF => {
                let len = TRAILER_SIZE + LEAF_SLOT_SIZE * n + LOG_SLOT_SIZE * log_count;
                if len > size {
                    return none;
                }
                let s = LOG_SLOT_SIZE * log_count;
                (len, s, s + n, 0)
            }
            TAIL_INTERIOR if trailer[2] == INTERIOR_HEADS && n > 0 => {
                // A trailer that counts more items than fit reads as no tail.
                if TRAILER_SIZE + (INTERIOR_SLOT_SIZE + HEADS_PER_ITEM) * n + HEADS_FIXED > size {
                    return none;
                }
                let len = size - heads_at(size, n).0;
                let s = len - TRAILER_SIZE - INTERIOR_SLOT_SIZE * n;
                (len, s, s, HEADS_HEADER)
            }
            TAIL_INTERIOR => {
                let len = TRAILER_SIZE + INTERIOR_SLOT_SIZE * n;
                if len > size {
                    return none;
                }
                (len, 0, 0, 0)
            }
            _ => return none,
        };
        TailShape {
            len,
            n: n as u32,
            s: s as u32,
            slots: slots as u32,
            heads: heads as u32,
        }
    }
}

/// Bytes of a node's tail that a reader may see: `[node size - tail_len, node size)` when
/// its trailer reads `trailer` and its header word publishes `log_count` log entries. 0
/// for a trailer that is not one (a reader that gets 0 sees an empty tail).
///
/// `size` is the node size: an interior node's heads block (docs/FORMAT.md, "Heads") is
/// placed relative to it.
#[inline]
pub fn tail_len(trailer: [u8; TRAILER_SIZE], log_count: usize, size: usize) -> usize {
    TailShape::of(trailer, log_count, size).len
}

impl<'a> NodeView<'a> {
    /// A view over `imm`, bytes `[ATOMIC_END, used)` of a node, and `tail`, its last
    /// [`tail_len`] bytes, written by the builders and the log appender of this crate (or
    /// checked by [`crate::validate::validate_node`]). The log count is the tail's own
    /// (its log slots are what precedes the item slots).
    #[inline]
    pub fn new(imm: &'a [u8], tail: &'a [u8]) -> Self {
        let t = tail.len().saturating_sub(TRAILER_SIZE);
        let Some(&[a, b, f, tag]) = tail.get(t..) else {
            return NodeView::with_shape(imm, tail, TailShape::of([0; 4], 0, 0));
        };
        let n = usize::from(u16::from_le_bytes([a, b]));
        let size = 1usize << imm.get(OFF_SIZE_LOG2 - ATOMIC_END).map_or(0, |x| x & 31);
        let log_count = if tag == TAIL_LEAF {
            t.saturating_sub(LEAF_SLOT_SIZE * n) / LOG_SLOT_SIZE
        } else {
            0
        };
        let shape = TailShape::of([a, b, f, tag], log_count, size);
        if shape.len != tail.len() {
            return NodeView::with_shape(imm, tail, TailShape::of([0; 4], 0, 0));
        }
        NodeView::with_shape(imm, tail, shape)
    }

    /// A view over `imm` (bytes `[ATOMIC_END, used)` of a node) and `tail` (its last
    /// `shape.len` bytes), the shape read from the node's trailer ([`TailShape::of`]).
    #[inline(always)]
    pub fn with_shape(imm: &'a [u8], tail: &'a [u8], shape: TailShape) -> Self {
        let pre = if shape.heads != 0 {
            tail.first_chunk::<2>()
                .map_or(0, |p| u16::from_le_bytes(*p))
        } else {
            0
        };
        NodeView {
            imm,
            tail,
            n: shape.n,
            s: shape.s,
            slots: shape.slots,
            heads: shape.heads,
            pre,
        }
    }

    /// A view over a whole node buffer that nobody writes meanwhile (its header word read
    /// plainly).
    pub fn from_node(node: &'a [u8]) -> Self {
        let mut w = [0u8; 8];
        w.copy_from_slice(&node[OFF_LOCK_USED..OFF_LOCK_USED + 8]);
        let word = u64::from_le_bytes(w);
        let mut t = [0u8; TRAILER_SIZE];
        t.copy_from_slice(&node[node.len() - TRAILER_SIZE..]);
        let tail = tail_len(t, log_count_of(word), node.len()).min(node.len());
        NodeView::new(&node[ATOMIC_END..used_of(word)], &node[node.len() - tail..])
    }

    #[inline]
    pub(crate) fn bytes(&self, off: usize, len: usize) -> &'a [u8] {
        &self.imm[off - ATOMIC_END..off - ATOMIC_END + len]
    }

    #[inline]
    pub(crate) fn u8_at(&self, off: usize) -> u8 {
        self.imm[off - ATOMIC_END]
    }

    #[inline]
    pub(crate) fn u16_at(&self, off: usize) -> u16 {
        let b = self.bytes(off, 2);
        u16::from_le_bytes([b[0], b[1]])
    }

    #[inline]
    pub(crate) fn u32_at(&self, off: usize) -> u32 {
        let b = self.bytes(off, 4);
        u32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }

    #[inline]
    pub(crate) fn u64_at(&self, off: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.bytes(off, 8));
        u64::from_le_bytes(a)
    }

    #[inline]
    pub(crate) fn lid_at(&self, off: usize) -> u64 {
        read_lid(self.bytes(off, LID_SIZE))
    }

    /// The published bytes `[16, used)` of the node (offset 16 first), for an engine that
    /// copies nodes into memory of its own (and reads no tail).
    #[inline]
    pub fn published(&self) -> &'a [u8] {
        self.imm
    }

    /// The published tail (its last [`tail_len`] bytes).
    #[inline]
    pub fn tail(&self) -> &'a [u8] {
        self.tail
    }

    /// Bytes published (the `used` the view was made with).
    #[inline]
    pub fn used(&self) -> usize {
        self.imm.len() + ATOMIC_END
    }
    /// Node version.
    #[inline]
    pub fn version(&self) -> u64 {
        self.u64_at(OFF_VERSION)
    }
    /// Arena offset of the previous version, or [`NO_BUFFER`].
    #[inline]
    pub fn old_version(&self) -> u64 {
        self.u64_at(OFF_OLD)
    }
    /// Right sibling (leaf) or leftmost child (interior).
    #[inline]
    pub fn link(&self) -> u64 {
        self.lid_at(OFF_LINK)
    }
    /// Kind byte.
    #[inline]
    pub fn kind(&self) -> u8 {
        self.u8_at(OFF_KIND)
    }
    /// Whether this is a leaf.
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.kind() == KIND_LEAF
    }
    /// Level (0 for leaves).
    #[inline]
    pub fn level(&self) -> u8 {
        self.u8_at(OFF_LEVEL)
    }
    /// Start of the sorted block.
    #[inline]
    pub fn sorted_start(&self) -> usize {
        usize::from(self.u16_at(OFF_SORTED_START))
    }
    /// End of the sorted block, start of the log block.
    #[inline]
    pub fn sorted_end(&self) -> usize {
        self.u32_at(OFF_SORTED_END) as usize
    }
    /// Length of the sorted block.
    #[inline]
    pub fn sorted_len(&self) -> usize {
        self.sorted_end() - self.sorted_start()
    }
    /// Bytes in the log block.
    #[inline]
    pub fn log_len(&self) -> usize {
        self.used() - self.sorted_end()
    }
    /// Number of shortcuts.
    #[inline]
    pub fn shortcut_count(&self) -> usize {
        usize::from(self.u8_at(OFF_SC_COUNT))
    }
    /// Node size.
    #[inline]
    pub fn node_size(&self) -> usize {
        1 << self.u8_at(OFF_SIZE_LOG2)
    }

    // Tail ----------------------------------------------------------------------------

    #[inline]
    fn trailer(&self) -> &'a [u8] {
        &self.tail[self.tail.len() - TRAILER_SIZE..]
    }

    /// Items in the sorted block (from the trailer).
    #[inline]
    pub fn item_count(&self) -> usize {
        self.n as usize
    }

    /// Log slots the leaf reserved when it was built (its log holds at most this many
    /// entries).
    #[inline]
    pub fn log_capacity(&self) -> usize {
        usize::from(self.trailer()[2])
    }

    /// Index in `tail` of `S`, the first item slot (leaves: the first fingerprint).
    #[inline]
    fn s_index(&self) -> usize {
        self.s as usize
    }

    /// Log entries published (the log count of the header word the view was made with).
    #[inline]
    pub fn log_count(&self) -> usize {
        self.s_index() / LOG_SLOT_SIZE
    }

    /// Node offset of the first byte of the tail the view holds (`S - 4c`).
    #[inline]
    pub fn tail_start(&self) -> usize {
        self.node_size() - self.tail.len()
    }

    /// Node offset where the next log slot goes (`S - 4(c + 1)`), and the lowest node
    /// offset the log block may reach (`S - 4 × log capacity`).
    #[inline]
    pub fn next_log_slot(&self) -> (usize, usize) {
        let s = self.tail_start() + self.s_index();
        let limit = s.saturating_sub(LOG_SLOT_SIZE * self.log_capacity());
        (self.tail_start().saturating_sub(LOG_SLOT_SIZE), limit)
    }

    /// Node offset and length of what a point lookup in this leaf reads of its tail: the
    /// published log slots and the item fingerprints (a prefetch span).
    #[inline]
    pub fn lookup_span(&self) -> (usize, usize) {
        (self.tail_start(), self.s_index() + self.item_count())
    }

    /// Node offset and length of what a search of this node reads of its tail: an interior
    /// node's heads block (heads and children), else its item slots.
    #[inline]
    pub fn search_span(&self) -> (usize, usize) {
        if self.heads != 0 {
            let n = self.item_count();
            return (
                self.tail_start() + self.heads as usize,
                HEAD_SIZE * n + CHILD_SIZE * (n + 1),
            );
        }
        self.item_slots_span()
    }

    /// Node offset and length of the item slots (what a binary search reads of the tail).
    #[inline]
    pub fn item_slots_span(&self) -> (usize, usize) {
        (
            self.tail_start() + self.slots as usize,
            2 * self.item_count(),
        )
    }

    /// The fingerprints of a leaf's sorted items, in key order.
    #[inline]
    pub fn item_fingerprints(&self) -> &'a [u8] {
        let s = self.s_index();
        &self.tail[s..s + self.item_count()]
    }

    /// The published log slots, newest first (`4 × log_count` bytes).
    #[inline]
    pub fn log_slots(&self) -> &'a [u8] {
        &self.tail[..self.s_index()]
    }

    /// Node offset of log entry `j` (0: the oldest) and its fingerprint.
    #[inline]
    pub fn log_slot(&self, j: usize) -> (usize, u8) {
        let at = LOG_SLOT_SIZE * (self.log_count() - 1 - j);
        let s = &self.tail[at..at + LOG_SLOT_SIZE];
        (usize::from(u16::from_le_bytes([s[0], s[1]])), s[2])
    }

    /// Node offset of the key header of sorted item `i` (its `key_len`, followed by the
    /// key): in the sorted block, or in the shortcut block for the first item of a segment.
    #[inline]
    pub(crate) fn key_header(&self, i: usize) -> usize {
        let at = self.slots as usize + 2 * i;
        usize::from(u16::from_le_bytes([self.tail[at], self.tail[at + 1]]))
    }

    /// The key of sorted item `i` and the node offset of its body.
    #[inline]
    pub fn item(&self, i: usize) -> (&'a [u8], usize) {
        let it = self.item_full(i);
        (it.key, it.body)
    }

    /// Sorted item `i`: where it starts, its key, its body.
    #[inline]
    pub fn item_full(&self, i: usize) -> SortedItem<'a> {
        let kh = self.key_header(i);
        let klen = usize::from(self.u16_at(kh));
        let key = self.bytes(kh + 2, klen);
        let ss = self.sorted_start();
        if kh < ss {
            // A shortcut entry `{ seg_off | key_len | key }`: the body starts the segment.
            let rel = usize::from(self.u16_at(kh - 2));
            SortedItem {
                rel,
                key,
                body: ss + rel,
                index: i,
            }
        } else {
            SortedItem {
                rel: kh - ss,
                key,
                body: kh + 2 + klen,
                index: i,
            }
        }
    }

    /// The key of sorted item `i`.
    #[inline]
    pub fn item_key(&self, i: usize) -> &'a [u8] {
        let kh = self.key_header(i);
        self.bytes(kh + 2, usize::from(self.u16_at(kh)))
    }

    /// Offset, relative to the sorted block, where sorted item `i` starts (the sorted
    /// block's length for `i` = the item count): what log back pointers name.
    #[inline]
    pub fn item_rel(&self, i: usize) -> usize {
        if i >= self.item_count() {
            return self.sorted_len();
        }
        let kh = self.key_header(i);
        if kh < self.sorted_start() {
            usize::from(self.u16_at(kh - 2))
        } else {
            kh - self.sorted_start()
        }
    }

    /// Index of the first sorted item whose key is >= `key` (> `key` when `after`).
    #[inline]
    pub fn search(&self, key: &[u8], after: bool) -> usize {
        if self.heads != 0 {
            return self.search_heads(key, after);
        }
        self.search_slots(key, after)
    }

    /// [`NodeView::search`] of an interior node by its heads (docs/FORMAT.md, "Heads"): a
    /// key outside the separators' common prefix is below or above all of them; inside it,
    /// a binary search compares 8-byte integers, and reads a separator's bytes only where
    /// its head ties with the key's.
    #[inline(always)]
    fn search_heads(&self, key: &[u8], after: bool) -> usize {
        let n = self.item_count();
        let p = usize::from(self.pre);
        // Below every separator when it sorts before the prefix (or is a proper prefix of
        // it), above them all when after it.
        match self.cmp_prefix(key, p) {
            Equal => {}
            Less => return 0,
            Greater => return n,
        }
        let hk = head_of(&key[p..]);
        let h = self.heads as usize;
        let heads = &self.tail[h..h + HEAD_SIZE * n];
        let head = |i: usize| {
            let mut w = [0u8; HEAD_SIZE];
            w.copy_from_slice(&heads[HEAD_SIZE * i..HEAD_SIZE * (i + 1)]);
            u64::from_le_bytes(w)
        };
        // The first head >= the key's, without branches (a conditional move per step: the
        // comparisons of a search are unpredictable).
        let (mut base, mut size) = (0, n);
        while size > 1 {
            let half = size / 2;
            let mid = base + half;
            base = std::hint::select_unpredictable(head(mid - 1) < hk, mid, base);
            size -= half;
        }
        base += usize::from(head(base) < hk);
        if base < n && head(base) == hk {
            return self.past_ties(key, after, base, hk, head);
        }
        base
    }

    /// Separators from `base` whose head ties with the key's (`hk`) may sort either side of
    /// it: the heads differ where the keys do, except where many separators share the bytes
    /// a head holds (keys such as `counter:…` next to `key:…` in one node). The ties ascend
    /// and are contiguous, so two binary searches bound the work: one by heads for the end
    /// of the ties, one by whole keys within them.
    #[cold]
    #[inline(never)]
    fn past_ties(
        &self,
        key: &[u8],
        after: bool,
        base: usize,
        hk: u64,
        head: impl Fn(usize) -> u64,
    ) -> usize {
        let (mut lo, mut hi) = (base, self.item_count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if head(mid) <= hk {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let (mut lo, mut hi) = (base, lo);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ord = cmp_keys(self.item_key(mid), key);
            if ord == Less || (ord == Equal && after) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Compares `key` with this interior node's heads prefix, the first `p` bytes of item
    /// 0's key (which starts the shortcut block: the builder's first segment): `Equal` when
    /// the key starts with it.
    #[inline(always)]
    fn cmp_prefix(&self, key: &[u8], p: usize) -> std::cmp::Ordering {
        const AT: usize = HEADER_SIZE + 4 - ATOMIC_END;
        let pre = self.imm.get(AT..AT + 8).and_then(|w| w.first_chunk::<8>());
        if let (true, Some(k), Some(w)) = (p <= 8, key.first_chunk::<8>(), pre) {
            // One comparison of the first p bytes as big-endian integers (the bytes of the
            // shortcut block past the prefix are masked off).
            let mask = (!0u64).checked_shl(64 - 8 * p as u32).unwrap_or(0);
            return (u64::from_be_bytes(*k) & mask).cmp(&(u64::from_be_bytes(*w) & mask));
        }
        self.cmp_long_prefix(key, p)
    }

    /// [`NodeView::cmp_prefix`] of a prefix longer than 8 bytes, or of a key shorter than 8.
    #[cold]
    #[inline(never)]
    fn cmp_long_prefix(&self, key: &[u8], p: usize) -> std::cmp::Ordering {
        let pre = self.bytes(HEADER_SIZE + 4, p);
        match key.get(..p) {
            Some(k) => crate::keys::cmp_same_len(k, pre),
            None => cmp_keys(key, pre),
        }
    }

    /// An interior node's heads prefix, the bytes all its separators start with (`None`
    /// without heads).
    pub fn heads_prefix(&self) -> Option<&'a [u8]> {
        (self.heads != 0).then(|| self.bytes(HEADER_SIZE + 4, usize::from(self.pre)))
    }

    /// [`NodeView::search`] through the item slots, comparing whole keys.
    #[inline]
    pub fn search_slots(&self, key: &[u8], after: bool) -> usize {
        let stop = if after { Greater } else { Equal };
        let (mut lo, mut hi) = (0, self.item_count());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let ord = cmp_keys(self.item_key(mid), key);
            if ord == Less || (ord == Equal && stop == Greater) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Index of the first sorted item whose key is >= `key`.
    #[inline]
    pub fn lower_bound(&self, key: &[u8]) -> usize {
        self.search(key, false)
    }

    /// Index of the sorted item whose key is `key`, found by its fingerprint.
    #[inline]
    pub fn find_item(&self, key: &[u8], fp: u8) -> Option<usize> {
        self.find_item_from(key, fp, 0)
    }

    /// [`NodeView::find_item`] among the items from `from` on.
    #[inline]
    pub fn find_item_from(&self, key: &[u8], fp: u8, from: usize) -> Option<usize> {
        let mut found = None;
        let fps = self.item_fingerprints();
        crate::fingerprint::find_fingerprint(fps.get(from..).unwrap_or(&[]), fp, |i| {
            if crate::keys::keys_eq(self.item_key(from + i), key) {
                found = Some(from + i);
                true
            } else {
                false
            }
        });
        found
    }

    // Shortcut block (read by engines that search as Honeycomb's does) ----------------

    /// Shortcut entry at node offset `pos`: (segment offset relative to the sorted block,
    /// key, offset of the next entry).
    #[inline]
    fn shortcut_at(&self, pos: usize) -> (usize, &'a [u8], usize) {
        let seg = usize::from(self.u16_at(pos));
        let klen = usize::from(self.u16_at(pos + 2));
        (seg, self.bytes(pos + 4, klen), pos + 4 + klen)
    }

    /// All shortcuts as (segment offset relative to the sorted block, boundary key).
    pub fn shortcuts(&self) -> Vec<(usize, &'a [u8])> {
        let mut out = Vec::with_capacity(self.shortcut_count());
        let mut pos = HEADER_SIZE;
        for _ in 0..self.shortcut_count() {
            let (seg, key, next) = self.shortcut_at(pos);
            out.push((seg, key));
            pos = next;
        }
        out
    }

    // Items ---------------------------------------------------------------------------

    /// Iterator over the sorted items from the first whose key is >= `key`.
    pub fn seek(&self, key: &[u8]) -> SortedIter<'a> {
        SortedIter::at(*self, self.lower_bound(key))
    }

    /// Iterator over every sorted-block item, in key order.
    pub fn sorted_items(&self) -> SortedIter<'a> {
        SortedIter::at(*self, 0)
    }

    /// The value of a leaf item whose body starts at node offset `body`, and the offset just
    /// past it.
    #[inline]
    pub fn value_at(&self, body: usize) -> (ValueRef<'a>, usize) {
        let hdr = self.u16_at(body);
        if hdr & VALUE_ATTRS == 0 {
            // The common case: inline, no deadline, no flags; the header is the length.
            let len = usize::from(hdr);
            let data = ValueData::Inline(self.bytes(body + 2, len));
            return (
                ValueRef {
                    data,
                    deadline: NO_DEADLINE,
                    flags: 0,
                },
                body + 2 + len,
            );
        }
        self.value_at_flagged(body, hdr)
    }

    /// [`NodeView::value_at`] of a value stored out of line, with a deadline or with flags.
    #[inline(never)]
    fn value_at_flagged(&self, body: usize, hdr: u16) -> (ValueRef<'a>, usize) {
        let (deadline, at) = if hdr & VALUE_EXPIRES != 0 {
            (self.u64_at(body + 2), body + 2 + DEADLINE_SIZE)
        } else {
            (NO_DEADLINE, body + 2)
        };
        let (flags, at) = if hdr & VALUE_FLAGS != 0 {
            (self.u32_at(at), at + FLAGS_SIZE)
        } else {
            (0, at)
        };
        if hdr & VALUE_OUT_OF_LINE != 0 {
            let handle = self.u64_at(at);
            let len = self.u32_at(at + 8);
            let data = ValueData::OutOfLine { handle, len };
            let v = ValueRef {
                data,
                deadline,
                flags,
            };
            (v, at + OUT_OF_LINE_REF)
        } else {
            let len = usize::from(hdr & VALUE_LEN_MASK);
            let data = ValueData::Inline(self.bytes(at, len));
            let v = ValueRef {
                data,
                deadline,
                flags,
            };
            (v, at + len)
        }
    }

    /// The offset just past a leaf item's value whose body starts at `body`.
    #[inline]
    pub fn value_end(&self, body: usize) -> usize {
        let hdr = self.u16_at(body);
        if hdr & VALUE_ATTRS == 0 {
            return body + 2 + usize::from(hdr);
        }
        let mut at = body + 2;
        if hdr & VALUE_EXPIRES != 0 {
            at += DEADLINE_SIZE;
        }
        if hdr & VALUE_FLAGS != 0 {
            at += FLAGS_SIZE;
        }
        if hdr & VALUE_OUT_OF_LINE != 0 {
            at + OUT_OF_LINE_REF
        } else {
            at + usize::from(hdr & VALUE_LEN_MASK)
        }
    }

    /// The child LID of an interior item whose body starts at node offset `body`.
    #[inline]
    pub fn child_at(&self, body: usize) -> u64 {
        self.lid_at(body)
    }

    /// Interior node: the child to follow for `key` (the child of the largest separator
    /// <= `key`, or the leftmost child).
    #[inline]
    pub fn child_for(&self, key: &[u8]) -> u64 {
        self.descend(key)
    }

    /// Interior node: the child whose subtree holds the keys just below `key` (the child of
    /// the largest separator < `key`), and that separator.
    #[inline]
    pub fn child_below(&self, key: &[u8]) -> (u64, Option<&'a [u8]>) {
        self.route(key, true)
    }

    /// Interior node: the child of the largest separator <= `key` (< `key` when `strict`)
    /// and that separator (`None` for the leftmost child).
    #[inline]
    pub fn route(&self, key: &[u8], strict: bool) -> (u64, Option<&'a [u8]>) {
        debug_assert!(!self.is_leaf());
        match self.search(key, !strict) {
            0 => (self.link(), None),
            i => {
                let (sep, body) = self.item(i - 1);
                (self.child_at(body), Some(sep))
            }
        }
    }

    /// Interior node: the child for `key` without its separator (what a descent needs):
    /// with heads, read from the heads block's children; else from the item's body.
    #[inline]
    pub fn descend(&self, key: &[u8]) -> u64 {
        debug_assert!(!self.is_leaf());
        let i = self.search(key, true);
        if self.heads != 0 {
            // The children follow the n heads, the leftmost first.
            let at = self.heads as usize + HEAD_SIZE * self.item_count() + CHILD_SIZE * i;
            let mut w = [0u8; CHILD_SIZE];
            w.copy_from_slice(&self.tail[at..at + CHILD_SIZE]);
            return u64::from_le_bytes(w);
        }
        match i {
            0 => self.link(),
            i => {
                let (_, body) = self.item(i - 1);
                self.child_at(body)
            }
        }
    }

    /// Interior node: the child for `key` (as [`NodeView::route`]) with its fences, the
    /// separators around it (`None`: the node's own bound).
    #[inline]
    pub fn route_fenced(&self, key: &[u8]) -> (u64, Option<&'a [u8]>, Option<&'a [u8]>) {
        let i = self.search(key, true);
        let high = (i < self.item_count()).then(|| self.item_key(i));
        match i {
            0 => (self.link(), None, high),
            i => {
                let (sep, body) = self.item(i - 1);
                (self.child_at(body), Some(sep), high)
            }
        }
    }

    /// Interior node: the leftmost child and every (separator, child) entry in order.
    #[inline]
    pub fn interior_entries(&self) -> (u64, Vec<(&'a [u8], u64)>) {
        let n = self.item_count();
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let (k, body) = self.item(i);
            out.push((k, self.child_at(body)));
        }
        (self.link(), out)
    }
}

/// An interior node's child for `key` from its bytes `node` = `[ATOMIC_END, node size)`:
/// what [`NodeView::descend`] gives, without a view. All of those bytes are immutable once
/// an interior node is published (it has no log block), so a walk may read them as one
/// slice, and routing needs only the trailer, the heads block and the prefix bytes at the
/// front of the shortcut block. `None` when the node is not an interior node with heads,
/// or the key's head ties with a separator's (the caller then routes through a view).
#[inline(always)]
pub fn route_heads(node: &[u8], key: &[u8]) -> Option<u64> {
    let size = node.len() + ATOMIC_END;
    let at = |off: usize| off - ATOMIC_END;
    let &[a, b, flags, tag] = node.last_chunk::<TRAILER_SIZE>()?;
    let n = usize::from(u16::from_le_bytes([a, b]));
    if tag != TAIL_INTERIOR
        || flags != INTERIOR_HEADS
        || n == 0
        || TRAILER_SIZE + (INTERIOR_SLOT_SIZE + HEADS_PER_ITEM) * n + HEADS_FIXED > size
    {
        return None;
    }
    let (hdr, heads, children) = heads_at(size, n);
    let p = usize::from(u16::from_le_bytes([node[at(hdr)], node[at(hdr) + 1]]));
    let pre = node.get(at(HEADER_SIZE + 4)..at(HEADER_SIZE + 4) + p)?;
    let rest = match key.get(..p) {
        Some(k) if crate::keys::keys_eq(k, pre) => &key[p..],
        // Below every separator, or above them all.
        _ if cmp_keys(key, pre) == Less => return child_at(node, at(children), 0),
        _ => return child_at(node, at(children), n),
    };
    let hk = head_of(rest);
    let heads = node.get(at(heads)..at(heads) + HEAD_SIZE * n)?;
    let head = |i: usize| {
        let mut w = [0u8; HEAD_SIZE];
        w.copy_from_slice(&heads[HEAD_SIZE * i..HEAD_SIZE * (i + 1)]);
        u64::from_le_bytes(w)
    };
    // The first head above the key's (the child of the last separator <= the key), a
    // conditional move per step.
    let (mut base, mut size) = (0, n);
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = std::hint::select_unpredictable(head(mid - 1) <= hk, mid, base);
        size -= half;
    }
    base += usize::from(head(base) <= hk);
    // A separator whose head is the key's may sort either side of it.
    if (base > 0 && head(base - 1) == hk) || (base < n && head(base) == hk) {
        return None;
    }
    child_at(node, at(children), base)
}

/// Child `i` (0: the leftmost) of a heads block whose children start at `children`.
#[inline(always)]
fn child_at(node: &[u8], children: usize, i: usize) -> Option<u64> {
    let c = node.get(children + CHILD_SIZE * i..children + CHILD_SIZE * (i + 1))?;
    let mut w = [0u8; CHILD_SIZE];
    w.copy_from_slice(c);
    Some(u64::from_le_bytes(w))
}

/// Reads a 6-byte little-endian LID.
#[inline(always)]
pub fn read_lid(b: &[u8]) -> u64 {
    let b = &b[..LID_SIZE];
    u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        | u64::from(u16::from_le_bytes([b[4], b[5]])) << 32
}

/// Writes a 6-byte little-endian LID.
pub fn write_lid(dst: &mut [u8], lid: u64) {
    debug_assert!(lid <= MAX_LID);
    dst[..LID_SIZE].copy_from_slice(&lid.to_le_bytes()[..LID_SIZE]);
}

/// Iterator over sorted-block items by slot, from some item to the last.
#[derive(Clone)]
pub struct SortedIter<'a> {
    view: NodeView<'a>,
    i: usize,
    n: usize,
}

impl<'a> SortedIter<'a> {
    /// An iterator from sorted item `i`.
    pub fn at_index(view: NodeView<'a>, i: usize) -> Self {
        SortedIter::at(view, i)
    }

    fn at(view: NodeView<'a>, i: usize) -> Self {
        SortedIter {
            view,
            i,
            n: view.item_count(),
        }
    }

    /// Index of the next item.
    pub fn index(&self) -> usize {
        self.i
    }

    /// Position (relative to the sorted block) of the next item; the sorted block's length
    /// at the end.
    #[inline]
    pub fn position(&self) -> usize {
        self.view.item_rel(self.i)
    }

    /// Whether every item has been returned.
    #[inline]
    pub fn at_end(&self) -> bool {
        self.i >= self.n
    }

    /// Items not returned yet.
    pub fn remaining(&self) -> usize {
        self.n.saturating_sub(self.i)
    }

    /// Next item of the sorted block.
    #[inline]
    pub fn next_item(&mut self) -> Option<SortedItem<'a>> {
        if self.i >= self.n {
            return None;
        }
        let item = self.view.item_full(self.i);
        self.i += 1;
        Some(item)
    }
}

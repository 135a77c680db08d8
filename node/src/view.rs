//! Read-only accessors over the published bytes of one node: header fields, the shortcut
//! block, sorted-block items, and the search of an interior node for a child.
//!
//! A [`NodeView`] borrows bytes `[ATOMIC_END, used)` of a node, the part that never changes
//! once published (layout.rs); the atomic header words are read by the caller.

use crate::keys::cmp_keys;
use crate::layout::*;
use std::cmp::Ordering::{Equal, Greater};

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
    /// Offset of the item relative to the start of the sorted block.
    pub rel: usize,
    /// The key (from the shortcut block for the first item of a segment).
    pub key: &'a [u8],
    /// Node offset of the item body (value header for leaves, child LID for interior nodes).
    pub body: usize,
}

/// Read-only view of a published node.
#[derive(Clone, Copy)]
pub struct NodeView<'a> {
    imm: &'a [u8],
}

impl<'a> NodeView<'a> {
    /// A view over `imm`, which must be bytes `[ATOMIC_END, used)` of a node written by the
    /// builders of this crate (or checked by [`crate::validate::validate_node`]).
    pub fn new(imm: &'a [u8]) -> Self {
        NodeView { imm }
    }

    /// A view over a whole node buffer of which `used` bytes are published.
    pub fn from_node(node: &'a [u8], used: usize) -> Self {
        NodeView::new(&node[ATOMIC_END..used])
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
    /// copies nodes into memory of its own.
    pub fn published(&self) -> &'a [u8] {
        self.imm
    }

    /// Bytes published (the `used` the view was made with).
    pub fn used(&self) -> usize {
        self.imm.len() + ATOMIC_END
    }
    /// Node version.
    pub fn version(&self) -> u64 {
        self.u64_at(OFF_VERSION)
    }
    /// Arena offset of the previous version, or [`NO_BUFFER`].
    pub fn old_version(&self) -> u64 {
        self.u64_at(OFF_OLD)
    }
    /// Right sibling (leaf) or leftmost child (interior).
    pub fn link(&self) -> u64 {
        self.lid_at(OFF_LINK)
    }
    /// Kind byte.
    pub fn kind(&self) -> u8 {
        self.u8_at(OFF_KIND)
    }
    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.kind() == KIND_LEAF
    }
    /// Level (0 for leaves).
    pub fn level(&self) -> u8 {
        self.u8_at(OFF_LEVEL)
    }
    /// Start of the sorted block.
    pub fn sorted_start(&self) -> usize {
        usize::from(self.u16_at(OFF_SORTED_START))
    }
    /// End of the sorted block, start of the log block.
    pub fn sorted_end(&self) -> usize {
        self.u32_at(OFF_SORTED_END) as usize
    }
    /// Length of the sorted block.
    pub fn sorted_len(&self) -> usize {
        self.sorted_end() - self.sorted_start()
    }
    /// Bytes in the log block.
    pub fn log_len(&self) -> usize {
        self.used() - self.sorted_end()
    }
    /// Number of shortcuts.
    pub fn shortcut_count(&self) -> usize {
        usize::from(self.u8_at(OFF_SC_COUNT))
    }
    /// Node size.
    pub fn node_size(&self) -> usize {
        1 << self.u8_at(OFF_SIZE_LOG2)
    }

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

    /// The segment to search for `key`: the last shortcut whose key is <= `key`. Returns an
    /// iterator over the sorted items from that segment's start, or from the first item when
    /// `key` is below every boundary key.
    pub fn seek_segment(&self, key: &[u8]) -> SortedIter<'a> {
        self.seek(key, false)
    }

    /// As [`NodeView::seek_segment`], but with `strict` the segment of the last boundary key
    /// strictly below `key`.
    pub fn seek(&self, key: &[u8], strict: bool) -> SortedIter<'a> {
        let n = self.shortcut_count();
        let mut pos = HEADER_SIZE;
        let mut chosen: Option<(usize, usize, usize)> = None; // (segment rel, entry pos, index)
        for i in 0..n {
            let (seg, k, next) = self.shortcut_at(pos);
            match cmp_keys(k, key) {
                Greater => break,
                Equal if strict => break,
                _ => {}
            }
            chosen = Some((seg, pos, i));
            pos = next;
        }
        match chosen {
            Some((seg, entry, i)) => SortedIter::at(*self, seg, entry, n - i),
            None => self.sorted_items(),
        }
    }

    /// Iterator over every sorted-block item, in key order.
    pub fn sorted_items(&self) -> SortedIter<'a> {
        SortedIter::at(*self, 0, HEADER_SIZE, self.shortcut_count())
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
    pub fn child_for(&self, key: &[u8]) -> u64 {
        self.route(key, false).0
    }

    /// Interior node: the child whose subtree holds the keys just below `key` (the child of
    /// the largest separator < `key`), and that separator.
    pub fn child_below(&self, key: &[u8]) -> (u64, Option<&'a [u8]>) {
        self.route(key, true)
    }

    /// Interior node: the child of the largest separator <= `key` (< `key` when `strict`)
    /// and that separator (`None` for the leftmost child).
    pub fn route(&self, key: &[u8], strict: bool) -> (u64, Option<&'a [u8]>) {
        self.route_from(self.seek(key, strict), key, strict)
    }

    /// [`NodeView::route`] continuing from the segment `it` that [`NodeView::seek`] chose
    /// for the same key and strictness (an engine searches the shortcut block and the
    /// segment in separate steps).
    pub fn route_from(
        &self,
        mut it: SortedIter<'a>,
        key: &[u8],
        strict: bool,
    ) -> (u64, Option<&'a [u8]>) {
        debug_assert!(!self.is_leaf());
        let seg_end = it.segment_end();
        let mut child = (self.link(), None);
        while let Some(item) = it.next_within(seg_end) {
            match cmp_keys(item.key, key) {
                Greater => break,
                Equal if strict => break,
                _ => {}
            }
            child = (self.child_at(item.body), Some(item.key));
        }
        child
    }

    /// Resumes a sorted-block iterator saved with [`SortedIter::cursor`] on this node.
    pub fn resume(&self, c: SegmentCursor) -> SortedIter<'a> {
        SortedIter::at(*self, c.pos, c.next_sc, c.sc_left)
    }

    /// Interior node: the leftmost child and every (separator, child) entry in order.
    pub fn interior_entries(&self) -> (u64, Vec<(&'a [u8], u64)>) {
        let mut out = Vec::new();
        let mut it = self.sorted_items();
        while let Some(item) = it.next_item() {
            out.push((item.key, self.child_at(item.body)));
        }
        (self.link(), out)
    }
}

/// Reads a 6-byte little-endian LID.
pub fn read_lid(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..LID_SIZE].copy_from_slice(&b[..LID_SIZE]);
    u64::from_le_bytes(a)
}

/// Writes a 6-byte little-endian LID.
pub fn write_lid(dst: &mut [u8], lid: u64) {
    debug_assert!(lid <= MAX_LID);
    dst[..LID_SIZE].copy_from_slice(&lid.to_le_bytes()[..LID_SIZE]);
}

/// A sorted-block position saved without borrowing the node (plain data), to resume with
/// [`NodeView::resume`] on the same immutable buffer.
#[derive(Clone, Copy, Debug)]
pub struct SegmentCursor {
    pos: usize,
    next_sc: usize,
    sc_left: usize,
}

/// Iterator over sorted-block items from some position to the end of the block.
#[derive(Clone)]
pub struct SortedIter<'a> {
    view: NodeView<'a>,
    /// Position relative to the sorted block start.
    pos: usize,
    /// Node offset of the next shortcut entry not yet passed, if any.
    next_sc: Option<usize>,
    sc_left: usize,
    /// Sorted block start and length, and the node kind, read once.
    base: usize,
    len: usize,
    leaf: bool,
}

impl<'a> SortedIter<'a> {
    fn at(view: NodeView<'a>, rel: usize, sc_entry: usize, sc_left: usize) -> Self {
        SortedIter {
            view,
            pos: rel,
            next_sc: (sc_left > 0).then_some(sc_entry),
            sc_left,
            base: view.sorted_start(),
            len: view.sorted_len(),
            leaf: view.is_leaf(),
        }
    }

    /// Position (relative to the sorted block) of the next item.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The position as plain data, to resume later with [`NodeView::resume`].
    pub fn cursor(&self) -> SegmentCursor {
        SegmentCursor {
            pos: self.pos,
            next_sc: self.next_sc.unwrap_or(0),
            sc_left: self.sc_left,
        }
    }

    /// Whether every item has been returned.
    pub fn at_end(&self) -> bool {
        self.pos >= self.len
    }

    /// End (relative) of the segment that contains the current position: the start of the
    /// next segment, or the end of the sorted block.
    pub fn segment_end(&self) -> usize {
        let mut p = self.next_sc;
        let mut left = self.sc_left;
        while let (Some(pos), true) = (p, left > 0) {
            let (seg, _, next) = self.view.shortcut_at(pos);
            if seg > self.pos {
                return seg;
            }
            p = Some(next);
            left -= 1;
        }
        self.view.sorted_len()
    }

    /// Next item if it starts before `end` (relative).
    pub fn next_within(&mut self, end: usize) -> Option<SortedItem<'a>> {
        if self.pos >= end {
            return None;
        }
        self.next_item()
    }

    /// Next item of the sorted block.
    #[inline]
    pub fn next_item(&mut self) -> Option<SortedItem<'a>> {
        if self.pos >= self.len {
            return None;
        }
        let v = self.view;
        let at = self.base + self.pos;
        let rel = self.pos;
        let (key, body) = match self.next_sc {
            Some(scp) if usize::from(v.u16_at(scp)) == rel => {
                let (_, k, next) = v.shortcut_at(scp);
                self.sc_left -= 1;
                self.next_sc = (self.sc_left > 0).then_some(next);
                (k, at)
            }
            _ => {
                let klen = usize::from(v.u16_at(at) & KEY_LEN_MASK);
                (v.bytes(at + 2, klen), at + 2 + klen)
            }
        };
        let end = if self.leaf {
            v.value_end(body)
        } else {
            body + LID_SIZE
        };
        self.pos = end - self.base;
        Some(SortedItem { rel, key, body })
    }
}

//! The leaf log block: entry encoding, the order-hint sort (Honeycomb §4.3, figures 7 and 8)
//! and the writer's plan for appending an entry.
//!
//! Format of one entry (see docs/FORMAT.md):
//! `{ back u16 | hint u8 | vdelta u40 | khdr u16 (flags | len) | key | [vhdr u16 | value] }`
//! where the value part is absent for a delete marker.

use crate::layout::*;
use crate::view::{NodeView, ValueRef};

/// One parsed log entry.
#[derive(Clone, Copy, Debug)]
pub struct LogEntry<'a> {
    /// Node offset of the entry.
    pub off: usize,
    /// Back pointer: offset, relative to the sorted block, of the first sorted item whose key
    /// is >= this entry's key (the sorted block's length when there is none).
    pub back: usize,
    /// Order hint: the number of log entries with a smaller key when this one was appended.
    pub hint: u8,
    /// Version of the entry: node version + delta.
    pub version: u64,
    /// `FLAG_*` bits.
    pub flags: u16,
    /// The key.
    pub key: &'a [u8],
    /// The value, `None` for a delete marker.
    pub value: Option<ValueRef<'a>>,
    /// Node offset just past the entry.
    pub end: usize,
}

impl LogEntry<'_> {
    /// Whether this entry is a delete marker.
    pub fn is_tombstone(&self) -> bool {
        self.flags & FLAG_TOMBSTONE != 0
    }
}

/// Reads a 5-byte little-endian version delta.
fn read_delta(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a[..5].copy_from_slice(&b[..5]);
    u64::from_le_bytes(a)
}

impl<'a> NodeView<'a> {
    /// The log entry at node offset `off`.
    #[inline]
    pub fn log_entry(&self, off: usize) -> LogEntry<'a> {
        let back = usize::from(self.u16_at(off));
        let hint = self.u8_at(off + 2);
        let delta = read_delta(self.bytes(off + 3, 5));
        let khdr = self.u16_at(off + LOG_ENTRY_HEADER);
        let klen = usize::from(khdr & KEY_LEN_MASK);
        let kpos = off + LOG_ENTRY_HEADER + 2;
        let key = self.bytes(kpos, klen);
        let flags = khdr & !KEY_LEN_MASK;
        let (value, end) = if flags & FLAG_TOMBSTONE != 0 {
            (None, kpos + klen)
        } else {
            let (v, end) = self.value_at(kpos + klen);
            (Some(v), end)
        };
        LogEntry {
            off,
            back,
            hint,
            version: self.version().wrapping_add(delta),
            flags,
            key,
            value,
            end,
        }
    }

    /// Log entries in the order they were appended.
    pub fn log_entries(&self) -> LogEntries<'a> {
        LogEntries {
            view: *self,
            pos: self.sorted_end(),
        }
    }

    /// The log entries in key order, newest first among equal keys, computed from the order
    /// hints alone: no key comparisons, one insertion into the indirection array per entry.
    pub fn log_order(&self) -> LogOrder {
        let mut order = LogOrder { offs: Vec::new() };
        if self.log_len() > 0 {
            order.offs.reserve(32);
            for e in self.log_entries() {
                order.insert(usize::from(e.hint), e.off as u16);
            }
        }
        order
    }
}

/// Iterator over log entries in storage (append) order.
pub struct LogEntries<'a> {
    view: NodeView<'a>,
    pos: usize,
}

impl<'a> Iterator for LogEntries<'a> {
    type Item = LogEntry<'a>;
    fn next(&mut self) -> Option<LogEntry<'a>> {
        if self.pos >= self.view.used() {
            return None;
        }
        let e = self.view.log_entry(self.pos);
        self.pos = e.end;
        Some(e)
    }
}

/// The indirection array of Honeycomb figure 8: offsets of log entries in key order.
/// (Allocated only for a non-empty log.)
#[derive(Clone, Default)]
pub struct LogOrder {
    offs: Vec<u16>,
}

impl LogOrder {
    /// Inserts the entry at `off` at position `hint`, shifting later positions right (the
    /// shift register of the hardware sorter).
    fn insert(&mut self, hint: usize, off: u16) {
        if self.offs.len() < MAX_LOG_ENTRIES {
            self.offs.insert(hint.min(self.offs.len()), off);
        }
    }

    /// Entry offsets in key order.
    pub fn as_slice(&self) -> &[u16] {
        &self.offs
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.offs.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.offs.is_empty()
    }
}

/// What the writer learns from a leaf before appending an entry for `key`.
#[derive(Clone, Copy, Debug)]
pub struct AppendPlan<'a> {
    /// Back pointer for the new entry.
    pub back: usize,
    /// Order hint for the new entry.
    pub hint: u8,
    /// `FLAG_EQ` / `FLAG_DUP` for the new entry.
    pub flags: u16,
    /// The newest value of `key` in the leaf, `None` when absent or deleted.
    pub current: Option<ValueRef<'a>>,
    /// Number of log entries already in the leaf.
    pub log_entries: usize,
}

/// Plans the append of an entry for `key` to a leaf (writers only; uses key comparisons).
pub fn plan_append<'a>(view: &NodeView<'a>, key: &[u8]) -> AppendPlan<'a> {
    // Back pointer: first sorted item with key >= `key`.
    let mut it = view.seek_segment(key);
    let mut back = view.sorted_len();
    let mut eq_value = None;
    while let Some(item) = it.next_item() {
        let ord = crate::keys::cmp_keys(item.key, key);
        if ord.is_ge() {
            back = item.rel;
            if ord.is_eq() {
                eq_value = Some(view.value_at(item.body).0);
            }
            break;
        }
    }
    let mut hint = 0usize;
    let mut newest_same: Option<LogEntry<'a>> = None;
    let mut count = 0;
    for e in view.log_entries() {
        count += 1;
        match crate::keys::cmp_keys(e.key, key) {
            std::cmp::Ordering::Less => hint += 1,
            std::cmp::Ordering::Equal => newest_same = Some(e),
            std::cmp::Ordering::Greater => {}
        }
    }
    let mut flags = 0;
    if eq_value.is_some() {
        flags |= FLAG_EQ;
    }
    let current = match newest_same {
        Some(e) => {
            flags |= FLAG_DUP;
            e.value
        }
        None => eq_value,
    };
    AppendPlan {
        back,
        hint: hint.min(254) as u8,
        flags,
        current,
        log_entries: count,
    }
}

/// Bytes an entry for `key` with `value` (`None` for a delete marker) takes in the log.
pub fn log_entry_len(key_len: usize, value: Option<&ValueRef<'_>>) -> usize {
    LOG_ENTRY_HEADER + 2 + key_len + value.map_or(0, |v| 2 + v.body_len())
}

/// Writes a log entry into `dst` (which must be exactly [`log_entry_len`] bytes), with a zero
/// version delta; [`set_log_delta`] fills it in once the writer holds its write version.
pub fn encode_log_entry(
    dst: &mut [u8],
    plan: &AppendPlan<'_>,
    key: &[u8],
    value: Option<&ValueRef<'_>>,
) {
    dst[0..2].copy_from_slice(&(plan.back as u16).to_le_bytes());
    dst[2] = plan.hint;
    dst[3..8].fill(0);
    let mut flags = plan.flags;
    if value.is_none() {
        flags |= FLAG_TOMBSTONE;
    }
    let khdr = flags | key.len() as u16;
    let mut p = LOG_ENTRY_HEADER;
    dst[p..p + 2].copy_from_slice(&khdr.to_le_bytes());
    p += 2;
    dst[p..p + key.len()].copy_from_slice(key);
    p += key.len();
    if let Some(v) = value {
        p += crate::builder::encode_value(&mut dst[p..], v);
    }
    debug_assert_eq!(p, dst.len());
}

/// Sets the version delta of an encoded log entry.
pub fn set_log_delta(dst: &mut [u8], delta: u64) {
    debug_assert!(delta <= MAX_VERSION_DELTA);
    dst[3..8].copy_from_slice(&delta.to_le_bytes()[..5]);
}

//! The leaf log block: entry encoding, the order-hint sort (Honeycomb §4.3, figures 7 and 8)
//! and the writer's plan for appending an entry.
//!
//! Format of one entry (see docs/FORMAT.md):
//! `{ back u16 | hint u8 | vdelta u40 | khdr u16 (flags | len) | key | [vhdr u16 | value] }`
//! where the value part is absent for a delete marker. Each entry has a log slot in the
//! node's tail, `{ entry offset u16 | fingerprint u8 | 0 u8 }`, written with the entry and
//! published with it by the log count in the header word.

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

    /// The back pointer of the log entry at node offset `off`.
    #[inline]
    pub fn log_back(&self, off: usize) -> usize {
        usize::from(self.u16_at(off))
    }

    /// The key and version of the log entry at node offset `off` (its value not decoded).
    #[inline]
    pub fn log_key(&self, off: usize) -> (&'a [u8], u64) {
        let delta = read_delta(self.bytes(off + 3, 5));
        let klen = usize::from(self.u16_at(off + LOG_ENTRY_HEADER) & KEY_LEN_MASK);
        let key = self.bytes(off + LOG_ENTRY_HEADER + 2, klen);
        (key, self.version().wrapping_add(delta))
    }

    /// Log entries in the order they were appended (oldest first), found by their slots.
    pub fn log_entries(&self) -> LogEntries<'a> {
        LogEntries {
            view: *self,
            next: 0,
            count: self.log_count(),
        }
    }

    /// The log entries in key order, newest first among equal keys, computed from the order
    /// hints alone: no key comparisons, one insertion into the indirection array per entry.
    pub fn log_order(&self) -> LogOrder {
        let mut order = LogOrder { offs: Vec::new() };
        let c = self.log_count();
        if c > 0 {
            order.offs.reserve(c);
            for j in 0..c {
                let off = self.log_slot(j).0;
                order.insert(usize::from(self.u8_at(off + 2)), off as u16);
            }
        }
        order
    }
}

/// Iterator over log entries in storage (append) order.
pub struct LogEntries<'a> {
    view: NodeView<'a>,
    next: usize,
    count: usize,
}

impl<'a> Iterator for LogEntries<'a> {
    type Item = LogEntry<'a>;
    fn next(&mut self) -> Option<LogEntry<'a>> {
        if self.next >= self.count {
            return None;
        }
        let e = self.view.log_entry(self.view.log_slot(self.next).0);
        self.next += 1;
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
    /// The key's fingerprint, for its log slot.
    pub fp: u8,
}

/// Plans the append of an entry for `key` to a leaf (writers only).
pub fn plan_append<'a>(view: &NodeView<'a>, key: &[u8]) -> AppendPlan<'a> {
    plan_append_fp(view, key, crate::fingerprint(key))
}

/// [`plan_append`] with the key's fingerprint computed by the caller (for the slot). The
/// first sorted item >= the key is found by binary search (it is the key's own item, or the
/// back pointer of a new key: one search for both, where a fingerprint search would need a
/// second one for every new key); the order hint counts log entries by their back pointers,
/// comparing keys only with the entries that share the new entry's back pointer (a smaller
/// back pointer means a smaller key, a larger one a larger key).
pub fn plan_append_fp<'a>(view: &NodeView<'a>, key: &[u8], fp: u8) -> AppendPlan<'a> {
    let i = view.lower_bound(key);
    let (back, eq_value) = if i < view.item_count() {
        let item = view.item_full(i);
        let eq = (item.key == key).then(|| view.value_at(item.body).0);
        (item.rel, eq)
    } else {
        (view.sorted_len(), None)
    };
    let count = view.log_count();
    let mut hint = 0usize;
    let mut newest_same = None;
    // The slots are newest first: the first entry found with the key is the newest.
    for slot in view.log_slots().chunks_exact(LOG_SLOT_SIZE) {
        let off = usize::from(u16::from_le_bytes([slot[0], slot[1]]));
        let eback = view.log_back(off);
        if eback < back {
            hint += 1;
        } else if eback == back {
            match crate::keys::cmp_keys(view.log_key(off).0, key) {
                std::cmp::Ordering::Less => hint += 1,
                std::cmp::Ordering::Equal if newest_same.is_none() => newest_same = Some(off),
                _ => {}
            }
        }
    }
    let mut flags = 0;
    if eq_value.is_some() {
        flags |= FLAG_EQ;
    }
    let current = match newest_same {
        Some(off) => {
            flags |= FLAG_DUP;
            view.log_entry(off).value
        }
        None => eq_value,
    };
    AppendPlan {
        back,
        hint: hint.min(254) as u8,
        flags,
        current,
        log_entries: count,
        fp,
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
    crate::builder::put_bytes(dst, p, key);
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

/// Writes the log slot `{ entry offset u16 | fingerprint u8 | 0 u8 }` of an entry at node
/// offset `entry` into `dst` (4 bytes).
pub fn encode_log_slot(dst: &mut [u8], entry: usize, fp: u8) {
    dst[0..2].copy_from_slice(&(entry as u16).to_le_bytes());
    dst[2] = fp;
    dst[3] = 0;
}

/// Appends a log entry for `key` with `value` (`None`: a delete marker) at `version` to the
/// leaf in `buf`, a whole node that nobody else reads or writes meanwhile, as the tree's
/// fast path appends to a shared one (for tests and tools). Returns false, changing
/// nothing, when the entry or its slot does not fit, every log slot is taken, or `version`
/// is not above the node version by at most [`MAX_VERSION_DELTA`]. The log threshold is
/// the caller's business.
pub fn append_owned(
    buf: &mut [u8],
    key: &[u8],
    value: Option<&ValueRef<'_>>,
    version: u64,
) -> bool {
    let mut w = [0u8; 8];
    w.copy_from_slice(&buf[OFF_LOCK_USED..OFF_LOCK_USED + 8]);
    let word = u64::from_le_bytes(w);
    let used = used_of(word);
    let len = log_entry_len(key.len(), value);
    let (entry, slot_at, plan) = {
        let view = NodeView::from_node(buf);
        let plan = plan_append(&view, key);
        let (slot_at, limit) = view.next_log_slot();
        let delta = version.wrapping_sub(view.version());
        if used + len > limit
            || plan.log_entries >= view.log_capacity()
            || version <= view.version()
            || delta > MAX_VERSION_DELTA
        {
            return false;
        }
        let mut entry = vec![0u8; len];
        encode_log_entry(&mut entry, &plan, key, value);
        set_log_delta(&mut entry, delta);
        (entry, slot_at, (plan.log_entries, plan.fp))
    };
    buf[used..used + len].copy_from_slice(&entry);
    encode_log_slot(&mut buf[slot_at..slot_at + LOG_SLOT_SIZE], used, plan.1);
    let next = unlocked_append(word, used + len, plan.0 + 1);
    buf[OFF_LOCK_USED..OFF_LOCK_USED + 8].copy_from_slice(&next.to_le_bytes());
    true
}

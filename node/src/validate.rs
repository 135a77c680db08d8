//! Structural check of a node buffer from an untrusted source (a page read from disk, a fuzz
//! input). Never panics; a node it accepts can be read with [`crate::NodeView`] without
//! panicking.

use crate::layout::*;

/// What is wrong with a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corrupt(pub String);

impl std::fmt::Display for Corrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "corrupt node: {}", self.0)
    }
}

impl std::error::Error for Corrupt {}

fn bad<T>(msg: impl Into<String>) -> Result<T, Corrupt> {
    Err(Corrupt(msg.into()))
}

struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn slice(&self, off: usize, len: usize) -> Result<&'a [u8], Corrupt> {
        off.checked_add(len)
            .and_then(|end| self.0.get(off..end))
            .map_or_else(|| bad(format!("{len} bytes at {off} out of bounds")), Ok)
    }
    fn u8(&self, off: usize) -> Result<u8, Corrupt> {
        Ok(self.slice(off, 1)?[0])
    }
    fn u16(&self, off: usize) -> Result<u16, Corrupt> {
        let b = self.slice(off, 2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, off: usize) -> Result<u32, Corrupt> {
        let b = self.slice(off, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&self, off: usize) -> Result<u64, Corrupt> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.slice(off, 8)?);
        Ok(u64::from_le_bytes(a))
    }
}

/// Checks a whole node buffer (`node.len()` must be the node size).
#[allow(clippy::indexing_slicing)]
pub fn validate_node(node: &[u8]) -> Result<(), Corrupt> {
    let b = Bytes(node);
    let word = b.u64(OFF_LOCK_USED)?;
    let used = used_of(word);
    let log2 = b.u8(OFF_SIZE_LOG2)?;
    if !(12..=16).contains(&log2) || 1usize << log2 != node.len() {
        return bad(format!(
            "size log2 {log2} does not match buffer of {}",
            node.len()
        ));
    }
    if used > node.len() || used < HEADER_SIZE {
        return bad(format!("bytes used {used} out of range"));
    }
    let b = Bytes(&node[..used]);
    let kind = b.u8(OFF_KIND)?;
    let level = b.u8(OFF_LEVEL)?;
    let leaf = match kind {
        KIND_LEAF if level == 0 => true,
        KIND_INTERIOR if level > 0 => false,
        _ => return bad(format!("kind {kind:#x} at level {level}")),
    };
    let sorted_start = usize::from(b.u16(OFF_SORTED_START)?);
    let sorted_end = b.u32(OFF_SORTED_END)? as usize;
    if sorted_start < HEADER_SIZE || sorted_start > sorted_end || sorted_end > used {
        return bad(format!(
            "blocks out of order: sorted {sorted_start}..{sorted_end}, used {used}"
        ));
    }
    if !leaf && sorted_end != used {
        return bad("interior node with a log block");
    }
    // Shortcut block.
    let n_sc = usize::from(b.u8(OFF_SC_COUNT)?);
    let mut shortcuts: Vec<(usize, &[u8], usize)> = Vec::with_capacity(n_sc);
    let mut p = HEADER_SIZE;
    for _ in 0..n_sc {
        let seg = usize::from(b.u16(p)?);
        let klen = usize::from(b.u16(p + 2)?);
        if klen == 0 || klen > MAX_KEY {
            return bad(format!("shortcut key of {klen} bytes"));
        }
        let key = b.slice(p + 4, klen)?;
        if let Some((ps, pk, _)) = shortcuts.last() {
            if seg <= *ps || key <= *pk {
                return bad("shortcuts not ascending");
            }
        }
        shortcuts.push((seg, key, p + 2));
        p += 4 + klen;
    }
    if p > sorted_start {
        return bad("shortcut block overflows");
    }
    let sorted_len = sorted_end - sorted_start;
    if (sorted_len > 0) != shortcuts.first().is_some_and(|s| s.0 == 0) {
        return bad("first segment does not start the sorted block");
    }
    // Sorted block.
    let mut items: Vec<(usize, &[u8])> = Vec::new(); // (rel offset, key)
    let mut key_headers: Vec<usize> = Vec::new();
    // An interior node's children, the leftmost first.
    let mut children: Vec<u64> = vec![crate::view::read_lid(b.slice(OFF_LINK, LID_SIZE)?)];
    let mut sc = shortcuts.iter().peekable();
    let mut rel = 0;
    while rel < sorted_len {
        let at = sorted_start + rel;
        let (key, body) = match sc.peek() {
            Some((seg, k, kh)) if *seg == rel => {
                key_headers.push(*kh);
                sc.next();
                (*k, at)
            }
            Some((seg, _, _)) if *seg < rel => return bad("shortcut inside an item"),
            _ => {
                let klen = usize::from(b.u16(at)?);
                if klen == 0 || klen > MAX_KEY {
                    return bad(format!("item key of {klen} bytes"));
                }
                key_headers.push(at);
                (b.slice(at + 2, klen)?, at + 2 + klen)
            }
        };
        if items.last().is_some_and(|(_, pk)| *pk >= key) {
            return bad("sorted keys not ascending");
        }
        let end = if leaf {
            value_end(&b, body)?
        } else {
            let lid = b.slice(body, LID_SIZE)?;
            if lid.iter().all(|x| *x == 0) {
                return bad("interior item without a child");
            }
            children.push(crate::view::read_lid(lid));
            body + LID_SIZE
        };
        if end > sorted_end {
            return bad("sorted item crosses the end of the sorted block");
        }
        items.push((rel, key));
        rel = end - sorted_start;
    }
    if sc.next().is_some() {
        return bad("shortcut past the last item");
    }
    // Log block.
    let mut p = sorted_end;
    let mut count = 0;
    let mut entries: Vec<(usize, &[u8])> = Vec::new(); // (offset, key)
    while p < used {
        if count == MAX_LOG_ENTRIES {
            return bad("more than 255 log entries");
        }
        let back = usize::from(b.u16(p)?);
        let hint = usize::from(b.u8(p + 2)?);
        if hint > count {
            return bad(format!("order hint {hint} of entry {count}"));
        }
        let khdr = b.u16(p + LOG_ENTRY_HEADER)?;
        let klen = usize::from(khdr & KEY_LEN_MASK);
        if klen == 0 || klen > MAX_KEY || khdr & !(KEY_LEN_MASK | 0xE000) != 0 {
            return bad(format!("log key header {khdr:#x}"));
        }
        let kpos = p + LOG_ENTRY_HEADER + 2;
        let key = b.slice(kpos, klen)?;
        let at_back = items.iter().find(|(r, _)| *r == back);
        if back != sorted_len && at_back.is_none() {
            return bad(format!("back pointer {back} is not an item boundary"));
        }
        if (khdr & FLAG_EQ != 0) != at_back.is_some_and(|(_, k)| *k == key) {
            return bad("FLAG_EQ does not match the sorted item");
        }
        entries.push((p, key));
        p = if khdr & FLAG_TOMBSTONE != 0 {
            kpos + klen
        } else {
            value_end(&b, kpos + klen)?
        };
        count += 1;
    }
    if p != used {
        return bad("log block does not end at bytes used");
    }
    let keys: Vec<&[u8]> = items.iter().map(|(_, k)| *k).collect();
    let tail = Tail {
        key_headers: &key_headers,
        keys: &keys,
        entries: &entries,
        children: &children,
    };
    validate_tail(node, word, leaf, &tail)
}

/// Checks the tail: the trailer, a slot per sorted item (its key header, its fingerprint)
/// and a log slot per published log entry, all below `used`'s reach.
#[allow(clippy::indexing_slicing)]
/// What the tail must name: the sorted items' key headers and keys, the log entries
/// (offset, key), an interior node's children (the leftmost first).
struct Tail<'t> {
    key_headers: &'t [usize],
    keys: &'t [&'t [u8]],
    entries: &'t [(usize, &'t [u8])],
    children: &'t [u64],
}

fn validate_tail(node: &[u8], word: u64, leaf: bool, t: &Tail<'_>) -> Result<(), Corrupt> {
    let Tail {
        key_headers,
        keys,
        entries,
        children,
    } = *t;
    let b = Bytes(node);
    let size = node.len();
    let trailer = b.slice(size - TRAILER_SIZE, TRAILER_SIZE)?;
    let n = usize::from(u16::from_le_bytes([trailer[0], trailer[1]]));
    let log_slots = usize::from(trailer[2]);
    let (tag, per) = if leaf {
        (TAIL_LEAF, LEAF_SLOT_SIZE)
    } else {
        (TAIL_INTERIOR, INTERIOR_SLOT_SIZE)
    };
    if trailer[3] != tag {
        return bad(format!("tail tag {:#x}", trailer[3]));
    }
    if n != keys.len() {
        return bad(format!(
            "trailer counts {n} items, the sorted block has {}",
            keys.len()
        ));
    }
    let heads = !leaf && log_slots == usize::from(INTERIOR_HEADS) && n > 0;
    if !leaf && log_slots != 0 && !heads {
        return bad("interior node with log slots");
    }
    let Some(s) = size.checked_sub(TRAILER_SIZE + per * n) else {
        return bad(format!("{n} item slots do not fit the node"));
    };
    let tail_start = if heads {
        validate_heads(&b, size, keys, children)?
    } else {
        s.checked_sub(LOG_SLOT_SIZE * log_slots)
    };
    if tail_start.is_none_or(|t| t < used_of(word)) {
        return bad("tail overlaps the bytes used");
    }
    let c = log_count_of(word);
    if c != entries.len() || c > log_slots {
        return bad(format!(
            "log count {c} for {} entries and {log_slots} slots",
            entries.len()
        ));
    }
    let offs = if leaf { s + n } else { s };
    for (i, kh) in key_headers.iter().enumerate() {
        if usize::from(b.u16(offs + 2 * i)?) != *kh {
            return bad(format!("slot of item {i} does not point at its key"));
        }
        if leaf && b.u8(s + i)? != crate::fingerprint(keys[i]) {
            return bad(format!("fingerprint of item {i}"));
        }
    }
    for (j, (off, key)) in entries.iter().enumerate() {
        let at = s - LOG_SLOT_SIZE * (j + 1);
        let slot = b.slice(at, LOG_SLOT_SIZE)?;
        if usize::from(u16::from_le_bytes([slot[0], slot[1]])) != *off
            || slot[2] != crate::fingerprint(key)
            || slot[3] != 0
        {
            return bad(format!("log slot {j}"));
        }
    }
    Ok(())
}

/// Checks an interior node's heads block (docs/FORMAT.md, "Heads") for its separators
/// `keys` (at least one) and their `children`, the leftmost first: every separator starts
/// with the prefix whose length it gives, each head is its separator's and each child the
/// sorted block's. Returns where the block starts (`None`: it does not fit).
fn validate_heads(
    b: &Bytes<'_>,
    size: usize,
    keys: &[&[u8]],
    children: &[u64],
) -> Result<Option<usize>, Corrupt> {
    let n = keys.len();
    if TRAILER_SIZE + (INTERIOR_SLOT_SIZE + HEADS_PER_ITEM) * n + HEADS_FIXED > size {
        return Ok(None);
    }
    let (hdr, heads, at) = heads_at(size, n);
    let p = usize::from(b.u16(hdr)?);
    if b.slice(hdr + 2, HEADS_HEADER - 2)?.iter().any(|x| *x != 0) {
        return bad("heads header with nonzero reserved bytes");
    }
    let pre = keys[0]
        .get(..p)
        .map_or_else(|| bad("heads prefix longer than a key"), Ok)?;
    for (i, k) in keys.iter().enumerate() {
        if !k.starts_with(pre) {
            return bad(format!(
                "separator {i} does not start with the heads prefix"
            ));
        }
        if b.u64(heads + HEAD_SIZE * i)? != head_of(&k[p..]) {
            return bad(format!("head of separator {i}"));
        }
    }
    for (i, c) in children.iter().enumerate() {
        if b.u64(at + CHILD_SIZE * i)? != *c {
            return bad(format!("heads block child {i}"));
        }
    }
    Ok(Some(hdr))
}

fn value_end(b: &Bytes<'_>, body: usize) -> Result<usize, Corrupt> {
    let hdr = b.u16(body)?;
    let at = if hdr & VALUE_EXPIRES != 0 {
        if b.u64(body + 2)? == NO_DEADLINE {
            return bad("expiring value with a zero deadline");
        }
        body + 2 + DEADLINE_SIZE
    } else {
        body + 2
    };
    let at = if hdr & VALUE_FLAGS != 0 {
        if b.u32(at)? == 0 {
            return bad("flagged value with zero flags");
        }
        at + FLAGS_SIZE
    } else {
        at
    };
    let len = if hdr & VALUE_OUT_OF_LINE != 0 {
        if hdr & !(VALUE_EXPIRES | VALUE_FLAGS) != VALUE_OUT_OF_LINE {
            return bad("out-of-line value header with length bits");
        }
        OUT_OF_LINE_REF
    } else {
        usize::from(hdr & VALUE_LEN_MASK)
    };
    b.slice(at, len)?;
    Ok(at + len)
}

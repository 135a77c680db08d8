//! Opening from the index (index.rs): the close record is read and cleared, the index
//! checked against it and against the superblock, and turned into what recovery's first
//! pass would have found (pass1.rs `Found`), with the cover rebuilt from the live pages in
//! commit order. Anything that does not check means a scan, as without an index.

use crate::cover::Cover;
use crate::error::{disk, Result};
use crate::format::{slot_bytes, Super, BLOCK};
use crate::index::{decode, decode_close, Index, CLOSE_AT, CLOSE_LEN};
use crate::io::Storage;
use crate::pass1::Found;
use crate::recovery::{Parts, RecoveryReport};
use crate::slab::Slabs;

/// Reads the page file's close record and clears it (synced) if there is one, so that no
/// later open can take the index for the state once a page has been written; returns the
/// index if the record names `index` (its commit, length and CRC-32C).
pub(crate) fn closed_index(
    storage: &dyn Storage,
    sup: &Super,
    len: u64,
    index: Option<&[u8]>,
) -> Result<Option<Index>> {
    if len < CLOSE_AT + CLOSE_LEN as u64 {
        return Ok(None);
    }
    let mut b = vec![0u8; CLOSE_LEN];
    storage
        .read_at(&mut b, CLOSE_AT)
        .map_err(|e| disk("reading the close record", e))?;
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    storage
        .write_at(&[0u8; CLOSE_LEN], CLOSE_AT)
        .and_then(|()| storage.sync())
        .map_err(|e| disk("clearing the close record", e))?;
    let (Some(close), Some(bytes)) = (decode_close(&b), index) else {
        return Ok(None);
    };
    if close.len != bytes.len() as u64 || close.crc != crc32c::crc32c(bytes) {
        return Ok(None);
    }
    Ok(decode(bytes)
        .ok()
        .filter(|ix| ix.seq == close.seq && ix.slab_size == sup.slab_size))
}

/// Whether `off` is a slot of a slab the index describes, and a page of `len` bytes fits it.
fn fits(slabs: &Slabs, off: u64, len: u32) -> bool {
    let Some(size) = slabs.class_of(off).and_then(slot_bytes) else {
        return false;
    };
    let index = (off - BLOCK) / slabs.slab_bytes();
    let first = slabs.base(index) + BLOCK;
    off >= first
        && (off - first).is_multiple_of(size)
        && off + size <= slabs.base(index) + slabs.slab_bytes()
        && u64::from(len) <= size
}

/// What the first pass would have found, from `ix` (for a page file of `len` bytes); `None`
/// when the index does not hold together (a slab past the file, a page outside the slabs
/// it names, or one its own cover shadows).
pub(crate) fn parts(sup: &Super, len: u64, ix: Index, rep: &mut RecoveryReport) -> Option<Parts> {
    let mut slabs = Slabs::new(sup.slab_size);
    let in_file = len.saturating_sub(BLOCK).div_ceil(sup.slab_size);
    for &(i, class) in &ix.slabs {
        slot_bytes(class)?;
        if class > slabs.max_class() || i >= in_file {
            return None;
        }
        slabs.describe(i, class);
    }
    if !ix.leaves.iter().all(|l| fits(&slabs, l.off, l.len))
        || !ix.deltas.iter().all(|d| fits(&slabs, d.off, d.len))
    {
        return None;
    }
    let (mut leaves, deltas) = (ix.leaves, ix.deltas);
    if ix.clock.is_some_and(|c| !fits(&slabs, c, 0)) {
        return None;
    }
    leaves.sort_by_key(|l| (l.commit.seq, l.version, l.off));
    // Every page the index names is live. Most often their ranges are disjoint, and the
    // cover is built in one sorted pass; a page a newer one shadows in part is inserted in
    // commit order, as the committer did.
    let disjoint = Cover::disjoint(
        leaves
            .iter()
            .map(|l| (l.low.clone(), l.high.clone(), l.off)),
    );
    let cover = match disjoint {
        Some(c) => c,
        None => {
            let mut cover = Cover::new();
            for l in &leaves {
                cover.insert(l.low.as_deref(), l.high.as_deref(), l.off);
            }
            // None shadowed everywhere by the others.
            if cover.live_pages() != leaves.len() {
                return None;
            }
            cover
        }
    };
    rep.commit = ix.seq;
    rep.slabs = ix.slabs.len() as u64;
    rep.leaf_pages = leaves.len() as u64;
    rep.delta_pages = deltas.len() as u64;
    let clock = ix.clock.map(|off| (ix.lease, off));
    let found = Found::indexed(leaves, deltas, ix.seq, clock);
    Some((slabs, found, cover, 0))
}

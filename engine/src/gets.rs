//! The point reads of an inline batch (inline.rs), walked lean: a GET's upper interior
//! levels straight at admission (they stay in the processor's caches, where a suspension
//! costs more than it hides), then, interleaved with the other GETs' stages: the level
//! above the leaves when it is staged too (its header and trailer, then its heads block,
//! then the leaf's page-table entry), and the leaf in two stages: the header and the tail
//! fetched together (the fingerprints and log slots are in the tail), then the one key the
//! fingerprints pick, from which the lookup goes on without searching again. A GET in
//! flight is its index in the batch (its key is read from there, never copied), a buffer
//! and where the lookup stands: a few words, so the window is a small array.
//!
//! The traversal is the reference reader's (tree.rs): the same routing, old-version chains
//! and in-node functions, so the answers are the same (engine/tests/differential.rs).
//! Scans, and GETs when more than one interior level is staged, go through the general
//! state machine (amac.rs).

use crate::request::Reply;
use accelkv_tree::prefetch::prefetch;
use accelkv_tree::{fingerprint, Candidate, Error, Raw};

/// Bytes of a node's header fetched.
const HEAD_BYTES: usize = 64;
/// Bytes of a leaf's end fetched with its header: the trailer, item slots, fingerprints
/// and log slots of a leaf of up to about 100 items and 20 log entries (more is read as
/// the search needs it).
const LEAF_TAIL_BYTES: usize = 512;
/// Bytes prefetched at a GET's candidate key: its header, key and a small value.
const CANDIDATE_BYTES: usize = 64;
/// `old_version` of a buffer with no older version.
const NO_BUFFER: u64 = u64::MAX;

/// Where a GET in flight stands.
#[derive(Clone, Copy)]
enum At {
    /// The interior node above the leaves (buffer), its header and trailer being fetched.
    Parent(u64),
    /// That node, its heads block being fetched.
    Heads(u64),
    /// The leaf's LID, its page-table entry being fetched (the table of a store whose
    /// upper levels are staged does not stay in the caches either).
    Page(u64),
    /// Its leaf's buffer, header and tail being fetched.
    Leaf(u64),
    /// Its leaf's buffer, the candidate key being fetched, the candidate and the key's
    /// fingerprint.
    Key(u64, Candidate, u8),
}

/// A GET in flight: its index in the batch and where it stands.
#[derive(Clone, Copy)]
pub(crate) struct Get {
    pub(crate) tag: usize,
    at: At,
}

/// What admitting or stepping a GET gave.
pub(crate) enum Got<'s> {
    /// In flight (push it to the window).
    Flying(Get),
    /// Its answer: the value borrowed from node memory and its client flags.
    Value(Option<&'s [u8]>, u32),
    /// Its answer as a reply (an error, or the reference reader's value).
    Reply(Reply),
    /// Its leaf lives only in the page file (deferring): LID to read back.
    Missed(u64),
}

/// Prefetches a leaf's header and tail.
fn fetch_leaf(raw: Raw<'_>, off: u64) {
    let base = raw.node_addr(off);
    let tail = LEAF_TAIL_BYTES.min(raw.node_size());
    prefetch(base, HEAD_BYTES);
    prefetch(base.wrapping_add(raw.node_size() - tail), tail);
}

/// Prefetches an interior node's header and trailer.
fn fetch_parent(raw: Raw<'_>, off: u64) {
    let base = raw.node_addr(off);
    prefetch(base, HEAD_BYTES);
    prefetch(base.wrapping_add(raw.node_size() - HEAD_BYTES), HEAD_BYTES);
}

/// The buffer of `lid`, read back or not (`defer`) when it lives only in the page file
/// (only leaves do); the GET's answer when it cannot be read.
///
/// # Safety
/// As for [`admit`].
#[inline(always)]
unsafe fn page<'s>(
    raw: Raw<'s>,
    lid: u64,
    key: &[u8],
    rv: u64,
    now: u64,
    defer: bool,
) -> Result<u64, Got<'s>> {
    let page = if defer {
        match raw.resident(lid) {
            Some(off) => Ok(off),
            None => return Err(Got::Missed(lid)),
        }
    } else {
        raw.page(lid)
    };
    match page {
        Ok(off) => Ok(off),
        // SAFETY: as above.
        Err(e) => Err(unsafe { unpaged(raw, e, key, rv, now) }),
    }
}

/// The answer of a GET whose leaf could not be read: with no room to read an evicted leaf
/// back, the reference reader's (it reads it into a private copy); else the error.
///
/// # Safety
/// As for [`admit`].
#[cold]
#[inline(never)]
unsafe fn unpaged<'s>(raw: Raw<'s>, e: Error, key: &[u8], rv: u64, now: u64) -> Got<'s> {
    match e {
        // SAFETY: the caller's epoch protects the walk (contract).
        Error::OutOfMemory { .. } => match unsafe { raw.reference_get(key, rv, now) } {
            Ok(v) => Got::Reply(Reply::Value(v)),
            Err(e) => Got::Reply(Reply::Error(e)),
        },
        // A leaf evicted to the page file that could not be read back.
        e => Got::Reply(Reply::Error(e)),
    }
}

/// Admits GET `tag` of `key` at `rv`: walks its interior levels straight down to the
/// `staged` (0 or 1) levels above the leaves and fetches the node it reached. With `defer`,
/// a leaf that lives only in the page file is not read.
///
/// # Safety
/// The caller holds an epoch published before `rv` was taken (inline.rs invariant 1).
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn admit<'s>(
    raw: Raw<'s>,
    tag: usize,
    key: &[u8],
    rv: u64,
    now: u64,
    staged: u8,
    defer: bool,
) -> Got<'s> {
    // SAFETY: the caller's epoch protects the walk (contract).
    let lid = match unsafe { raw.lid_at_level(key, rv, staged) } {
        Ok(lid) => lid,
        Err(e) => return Got::Reply(Reply::Error(e)),
    };
    // SAFETY: as above.
    let off = match unsafe { page(raw, lid, key, rv, now, defer) } {
        Ok(off) => off,
        Err(got) => return got,
    };
    // With `staged` 1 the node reached is the leaves' parent, unless the tree is short:
    // the parent stage finds out from its header.
    let at = if staged > 0 {
        fetch_parent(raw, off);
        At::Parent(off)
    } else {
        fetch_leaf(raw, off);
        At::Leaf(off)
    };
    Got::Flying(Get { tag, at })
}

impl Get {
    /// Runs this GET's next stage for `key` (its key in the batch) at `rv` and clock `now`.
    ///
    /// # Safety
    /// As for [`admit`].
    #[inline]
    pub(crate) unsafe fn step<'s>(
        mut self,
        raw: Raw<'s>,
        key: &[u8],
        rv: u64,
        now: u64,
        defer: bool,
    ) -> Got<'s> {
        match self.at {
            At::Parent(off) => {
                // SAFETY: reached by this request's walk under the caller's epoch.
                let v = unsafe { raw.view(off) };
                if v.version() > rv {
                    let old = v.old_version();
                    if old != NO_BUFFER {
                        fetch_parent(raw, old);
                        self.at = At::Parent(old);
                        return Got::Flying(self);
                    }
                }
                if v.is_leaf() {
                    // The tree is a leaf high: this is the GET's leaf.
                    fetch_leaf(raw, off);
                    self.at = At::Leaf(off);
                    return Got::Flying(self);
                }
                let (at, len) = v.search_span();
                prefetch(raw.node_addr(off).wrapping_add(at), len);
                self.at = At::Heads(off);
                Got::Flying(self)
            }
            At::Heads(off) => {
                // SAFETY: as above.
                let lid = unsafe { raw.view(off) }.descend(key);
                prefetch(raw.page_entry_addr(lid), 8);
                self.at = At::Page(lid);
                Got::Flying(self)
            }
            At::Page(lid) => {
                // SAFETY: as above.
                match unsafe { page(raw, lid, key, rv, now, defer) } {
                    Ok(leaf) => {
                        fetch_leaf(raw, leaf);
                        self.at = At::Leaf(leaf);
                        Got::Flying(self)
                    }
                    Err(got) => got,
                }
            }
            At::Leaf(off) => {
                // SAFETY: reached by this request's walk under the caller's epoch.
                let v = unsafe { raw.view(off) };
                if v.version() > rv {
                    let old = v.old_version();
                    if old != NO_BUFFER {
                        fetch_leaf(raw, old);
                        self.at = At::Leaf(old);
                        return Got::Flying(self);
                    }
                }
                let fp = fingerprint(key);
                let Some((cand, at)) = v.get_candidate(fp) else {
                    raw.leaf_visit();
                    return Got::Value(None, 0);
                };
                prefetch(raw.node_addr(off).wrapping_add(at), CANDIDATE_BYTES);
                self.at = At::Key(off, cand, fp);
                Got::Flying(self)
            }
            At::Key(off, cand, fp) => {
                // SAFETY: as above.
                let v = unsafe { raw.view(off) };
                raw.leaf_visit();
                match v.leaf_get_from(key, fp, rv, now, cand) {
                    // SAFETY: a value of a node read under the caller's epoch.
                    Some(x) => Got::Value(Some(unsafe { raw.value(x) }), x.flags),
                    None => Got::Value(None, 0),
                }
            }
        }
    }
}

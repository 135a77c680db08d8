//! One request as an explicit state machine (AMAC, asynchronous memory access chaining).
//! Each `step` does the work for one memory access whose bytes were prefetched by the step
//! before, issues the prefetch for the next access, and returns, so the engine thread can
//! run the other requests in its window while the memory system fetches.
//!
//! Stages mirror Honeycomb's accelerator: `Page` reads the page-table entry (the memory
//! subsystem) and fetches the node's header and trailer, `Node` checks the version and
//! fetches what the search reads of the tail (an interior node's heads; a leaf's item slots
//! for a range), `Search` searches (the key search and range scan units). The traversal is
//! the reference reader's (tree.rs): same routing, same old-version chains, same
//! right-sibling links, the same in-node functions, so the answers are the same.
//!
//! Interleaving pays only where an access misses the caches (Jonathan et al., VLDB'18):
//! a suspension costs its bookkeeping even when the line is there. So a GET or a scan walks
//! the upper levels straight, in its first step, without suspending (`Stage::Start`:
//! every lookup shares them, and they stay in the processor's caches), and is staged only
//! from `staged` levels above the leaves down (0 by default: the leaf alone; the rule and
//! its measurement are in docs/ARCHITECTURE.md, "The CPU engine"). A GET's leaf is two
//! suspensions: one for its header and tail (fetched together: the fingerprints and log
//! slots are in the tail), one for the key its fingerprints pick, from which the lookup
//! goes on without searching again.

use crate::request::{Items, ReadRef, Reply, Request};
use accelkv_tree::prefetch::prefetch;
use accelkv_tree::{Candidate, Error, NodeView, Raw, ValueRef, ROOT_LID};
use std::ops::Bound;

/// Bytes of a node's header fetched first (and as many of its end: the trailer).
const HEAD_BYTES: usize = 64;

/// Bytes prefetched at a GET's candidate key: its header, key and a small value.
const CANDIDATE_BYTES: usize = 64;

/// Bytes of a leaf's end fetched with its header when a GET reaches it: the trailer, item
/// slots, fingerprints and log slots of a leaf of up to about 100 items and 20 log entries
/// (more is read as the search needs it).
const LEAF_TAIL_BYTES: usize = 512;

/// `staged` for a walk staged from the root (every level interleaved).
pub(crate) const ALL_LEVELS: u8 = u8::MAX;
/// `old_version` of a buffer with no older version.
const NO_BUFFER: u64 = u64::MAX;
const NO_LID: u64 = 0;

enum Kind {
    Get(Vec<u8>),
    Scan {
        lo: Vec<u8>,
        hi: Bound<Vec<u8>>,
        limit: usize,
        items: Items,
    },
    /// Looking for the largest key <= `probe` (< `probe` when `strict`).
    Floor {
        probe: Vec<u8>,
        strict: bool,
        fence: Option<Vec<u8>>,
        /// The request's `kl` once `probe` became a fence (strict), else empty.
        origin: Vec<u8>,
        ku: Vec<u8>,
        limit: usize,
    },
}

#[derive(Clone, Copy)]
enum Stage {
    /// The walk above the staged levels, run straight in the first step.
    Start,
    Page(u64),
    Node(u64),
    /// Buffer offset of the version to search.
    Search(u64),
    /// A GET's leaf (buffer offset) whose first candidate key was prefetched, the
    /// candidate and the key's fingerprint.
    Item(u64, Candidate, u8),
}

/// A request in flight.
pub(crate) struct Flight {
    pub(crate) tag: u64,
    pub(crate) rv: u64,
    /// The reader's clock (ms since the Unix epoch), taken after `rv`: items whose deadline
    /// is before it are absent.
    pub(crate) now: u64,
    pub(crate) batch: u64,
    pub(crate) sink: usize,
    kind: Kind,
    stage: Stage,
    /// Levels above the leaves walked staged ([`ALL_LEVELS`]: every level).
    staged: u8,
}

/// What one stage left: more to do, a finished reply, or (GET) the value found, borrowed
/// from node memory, which the caller copies where it is needed while its epoch holds.
pub(crate) enum Step<'s> {
    Pending,
    Done(Reply),
    /// A GET's value and its client flags (0 when absent).
    Value(Option<&'s [u8]>, u32),
    /// (Only when stepping with `defer`.) The walk reached leaf LID, which lives only in
    /// the page file: nothing was read; the request is answered by a later run, once the
    /// leaf is read back.
    Missed(u64),
}

impl Step<'_> {
    /// The finished reply (a GET's value copied out), or `None` while pending.
    pub(crate) fn into_reply(self) -> Option<Reply> {
        match self {
            // Engine threads step without `defer`, so they never see `Missed`.
            Step::Pending | Step::Missed(_) => None,
            Step::Done(r) => Some(r),
            Step::Value(v, _) => Some(Reply::Value(v.map(<[u8]>::to_vec))),
        }
    }
}

impl Flight {
    /// A request entering the window; prefetches the root's page-table entry.
    pub(crate) fn new(
        raw: Raw<'_>,
        tag: u64,
        rv: u64,
        now: u64,
        batch: u64,
        sink: usize,
        req: Request,
    ) -> Flight {
        let kind = match req {
            Request::Get { key } => Kind::Get(key),
            Request::Scan { lo, hi, limit } => Kind::Scan {
                lo,
                hi: hi.map_or(Bound::Unbounded, Bound::Excluded),
                limit,
                items: Items::default(),
            },
            Request::ScanFloor { kl, ku, limit } => Kind::Floor {
                probe: kl,
                strict: false,
                fence: None,
                origin: Vec::new(),
                ku,
                limit,
            },
        };
        prefetch(raw.page_entry_addr(ROOT_LID), 8);
        Flight {
            tag,
            rv,
            now,
            batch,
            sink,
            kind,
            stage: Stage::Page(ROOT_LID),
            staged: ALL_LEVELS,
        }
    }

    /// This flight walking the levels above `staged` levels over the leaves straight
    /// (GETs and scans; [`ALL_LEVELS`]: every level staged).
    pub(crate) fn staged(mut self, staged: u8) -> Flight {
        self.staged = staged;
        self.stage = self.first_stage();
        self
    }

    fn first_stage(&self) -> Stage {
        match self.kind {
            Kind::Get(_) | Kind::Scan { .. } if self.staged != ALL_LEVELS => Stage::Start,
            _ => Stage::Page(ROOT_LID),
        }
    }

    /// Reuses this finished flight for `req`, keeping its key buffer (no allocation for a
    /// GET whose key fits); prefetches the root's page-table entry.
    pub(crate) fn renew(
        &mut self,
        raw: Raw<'_>,
        tag: u64,
        rv: u64,
        now: u64,
        req: &ReadRef<'_>,
        staged: u8,
    ) {
        self.staged = staged;
        match (req, &mut self.kind) {
            (ReadRef::Get(key), Kind::Get(buf)) => {
                buf.clear();
                buf.extend_from_slice(key);
            }
            _ => self.kind = Flight::new(raw, 0, 0, 0, 0, 0, req.to_request()).kind,
        }
        (self.tag, self.rv, self.now) = (tag, rv, now);
        self.stage = self.first_stage();
        if let Stage::Page(root) = self.stage {
            prefetch(raw.page_entry_addr(root), 8);
        }
    }

    fn key(&self) -> (&[u8], bool) {
        match &self.kind {
            Kind::Get(k) => (k, false),
            Kind::Scan { lo, .. } => (lo, false),
            Kind::Floor { probe, strict, .. } => (probe, *strict),
        }
    }

    fn goto_page(&mut self, raw: Raw<'_>, lid: u64) {
        prefetch(raw.page_entry_addr(lid), 8);
        self.stage = Stage::Page(lid);
    }

    /// Runs one stage. With `defer`, a leaf that lives only in the page file is not read:
    /// the step answers [`Step::Missed`] instead of blocking on the read.
    ///
    /// # Safety
    /// The engine holds an epoch published before this request's read version was taken.
    pub(crate) unsafe fn step<'s>(&mut self, raw: Raw<'s>, defer: bool) -> Step<'s> {
        match self.stage {
            Stage::Start => {
                let level = self.staged;
                // SAFETY: the engine's epoch protects this request (contract).
                match unsafe { raw.lid_at_level(self.key().0, self.rv, level) } {
                    Ok(lid) if level == 0 => {
                        // The leaf: its page-table entry now, its bytes fetched while the
                        // other requests run.
                        self.stage = Stage::Page(lid);
                        // SAFETY: as above.
                        unsafe { self.step(raw, defer) }
                    }
                    Ok(lid) => {
                        self.goto_page(raw, lid);
                        Step::Pending
                    }
                    Err(e) => Step::Done(Reply::Error(e)),
                }
            }
            Stage::Page(lid) => {
                let page = if defer {
                    match raw.resident(lid) {
                        Some(off) => Ok(off),
                        None => return Step::Missed(lid),
                    }
                } else {
                    raw.page(lid)
                };
                let off = match page {
                    Ok(off) => off,
                    // No room to read an evicted leaf back: the reference reader answers
                    // the whole request, reading it into a private copy.
                    Err(Error::OutOfMemory { .. }) => {
                        // SAFETY: the engine's epoch still protects this request (contract).
                        return Step::Done(unsafe { self.by_reference(raw) });
                    }
                    // A leaf evicted to the page file that could not be read back.
                    Err(e) => return Step::Done(Reply::Error(e)),
                };
                self.fetch_head(raw, off);
                self.stage = Stage::Node(off);
                Step::Pending
            }
            Stage::Node(off) => {
                // SAFETY: reached by this request's walk under the engine's epoch (contract).
                let v = unsafe { raw.view(off) };
                if v.version() > self.rv {
                    let old = v.old_version();
                    if old != NO_BUFFER {
                        self.fetch_head(raw, old);
                        self.stage = Stage::Node(old);
                        return Step::Pending;
                    }
                }
                if let (Kind::Get(key), true) = (&self.kind, v.is_leaf()) {
                    // The tail came with the header: search the fingerprints now and fetch
                    // the one key they pick.
                    let fp = accelkv_tree::fingerprint(key);
                    let Some((cand, at)) = v.get_candidate(fp) else {
                        raw.leaf_visit();
                        return Step::Value(None, 0);
                    };
                    prefetch(raw.node_addr(off).wrapping_add(at), CANDIDATE_BYTES);
                    self.stage = Stage::Item(off, cand, fp);
                    return Step::Pending;
                }
                // Fetch what the search reads of the tail.
                let (at, len) = v.search_span();
                prefetch(raw.node_addr(off).wrapping_add(at), len);
                self.stage = Stage::Search(off);
                Step::Pending
            }
            Stage::Search(off) => {
                // SAFETY: as above.
                let v = unsafe { raw.view(off) };
                if v.is_leaf() {
                    raw.leaf_visit();
                    // SAFETY: as above.
                    unsafe { self.at_leaf(raw, v) }
                } else {
                    let child = match &mut self.kind {
                        Kind::Floor {
                            probe,
                            strict,
                            fence,
                            ..
                        } => {
                            let (child, sep) = v.route(probe, *strict);
                            if let Some(s) = sep {
                                *fence = Some(s.to_vec());
                            }
                            child
                        }
                        _ => v.child_for(self.key().0),
                    };
                    self.goto_page(raw, child);
                    Step::Pending
                }
            }
            Stage::Item(off, cand, fp) => {
                // SAFETY: as above.
                let v = unsafe { raw.view(off) };
                raw.leaf_visit();
                let Kind::Get(key) = &self.kind else {
                    unreachable!("only GETs have candidates");
                };
                match v.leaf_get_from(key, fp, self.rv, self.now, cand) {
                    // SAFETY: values of a node read under the engine's epoch (contract).
                    Some(x) => Step::Value(Some(unsafe { raw.value(x) }), x.flags),
                    None => Step::Value(None, 0),
                }
            }
        }
    }

    /// Prefetches the header and the trailer of the buffer at `off` (a GET: the end of the
    /// node where a leaf's fingerprints and log slots are, too).
    fn fetch_head(&self, raw: Raw<'_>, off: u64) {
        let base = raw.node_addr(off);
        let tail = match self.kind {
            Kind::Get(_) => LEAF_TAIL_BYTES.min(raw.node_size()),
            _ => HEAD_BYTES,
        };
        prefetch(base, HEAD_BYTES);
        prefetch(base.wrapping_add(raw.node_size() - tail), tail);
    }

    /// The reference reader's answer to this request at its read version and clock (from
    /// scratch: whatever it collected is dropped).
    ///
    /// # Safety
    /// As for [`Flight::step`].
    unsafe fn by_reference(&mut self, raw: Raw<'_>) -> Reply {
        let (rv, now) = (self.rv, self.now);
        let mut items = Items::default();
        // SAFETY: the caller's epoch protects everything reachable at `rv` (contract).
        let r = unsafe {
            match &self.kind {
                Kind::Get(key) => {
                    return match raw.reference_get(key, rv, now) {
                        Ok(v) => Reply::Value(v),
                        Err(e) => Reply::Error(e),
                    }
                }
                Kind::Scan { lo, hi, limit, .. } => match hi {
                    // A scan from a floor key through `ku`: the floor of `lo` is `lo`
                    // itself (found at `rv`), or the first key when `lo` is empty.
                    Bound::Included(ku) => {
                        raw.reference_scan_floor(lo, ku, *limit, rv, now, |k, v| items.push(k, v))
                    }
                    Bound::Excluded(h) => {
                        raw.reference_scan(lo, Some(h), *limit, rv, now, |k, v| items.push(k, v))
                    }
                    Bound::Unbounded => {
                        raw.reference_scan(lo, None, *limit, rv, now, |k, v| items.push(k, v))
                    }
                },
                Kind::Floor {
                    probe,
                    strict,
                    origin,
                    ku,
                    limit,
                    ..
                } => {
                    // A strict probe is the lower fence of the leaf for `kl` that held no
                    // key <= `kl`: the floor of `kl` is the floor below it, as here.
                    let kl = if *strict { origin } else { probe };
                    raw.reference_scan_floor(kl, ku, *limit, rv, now, |k, v| items.push(k, v))
                }
            }
        };
        match r {
            Ok(()) => Reply::Items(items),
            Err(e) => Reply::Error(e),
        }
    }

    /// # Safety
    /// As for [`Flight::step`].
    unsafe fn at_leaf<'s>(&mut self, raw: Raw<'s>, v: NodeView<'s>) -> Step<'s> {
        let (rv, now) = (self.rv, self.now);
        fn bytes<'v>(raw: Raw<'_>, x: ValueRef<'v>) -> &'v [u8] {
            // SAFETY: values of a node read under the engine's epoch (the caller's contract).
            unsafe { raw.value(x) }
        }
        match &mut self.kind {
            Kind::Get(key) => match v.leaf_get(key, rv, now) {
                Some(x) => Step::Value(Some(bytes(raw, x)), x.flags),
                None => Step::Value(None, 0),
            },
            Kind::Scan {
                lo,
                hi,
                limit,
                items,
            } => {
                if items.len() < *limit {
                    for (k, val) in v.leaf_lower_bound(lo, rv, now) {
                        let beyond = match hi {
                            Bound::Included(h) => k > h.as_slice(),
                            Bound::Excluded(h) => k >= h.as_slice(),
                            Bound::Unbounded => false,
                        };
                        if beyond {
                            return Step::Done(Reply::Items(std::mem::take(items)));
                        }
                        items.push(k, bytes(raw, val));
                        if items.len() == *limit {
                            break;
                        }
                    }
                }
                let next = v.link();
                if items.len() == *limit || next == NO_LID {
                    return Step::Done(Reply::Items(std::mem::take(items)));
                }
                self.goto_page(raw, next);
                Step::Pending
            }
            Kind::Floor {
                probe,
                strict,
                fence,
                origin,
                ku,
                limit,
            } => {
                let found = if *strict {
                    v.leaf_iter(rv, now)
                        .map(|(k, _)| k)
                        .take_while(|k| *k < probe.as_slice())
                        .last()
                } else {
                    v.leaf_floor(probe, rv, now)
                };
                let (ku, limit) = (std::mem::take(ku), *limit);
                match (found, fence.take()) {
                    (Some(start), _) => {
                        // The floor key is in this leaf: scan from it, here.
                        self.kind = Kind::Scan {
                            lo: start.to_vec(),
                            hi: Bound::Included(ku),
                            limit,
                            items: Items::default(),
                        };
                        if limit == 0 {
                            return Step::Done(Reply::Items(Items::default()));
                        }
                        // SAFETY: as above. The scan starts at the floor key.
                        unsafe { self.at_leaf(raw, v) }
                    }
                    (None, Some(f)) => {
                        // Keys just below this leaf's lower fence: descend again.
                        let origin = if *strict {
                            std::mem::take(origin)
                        } else {
                            std::mem::take(probe)
                        };
                        self.kind = Kind::Floor {
                            probe: f,
                            strict: true,
                            fence: None,
                            origin,
                            ku,
                            limit,
                        };
                        self.goto_page(raw, ROOT_LID);
                        Step::Pending
                    }
                    (None, None) => {
                        // No key <= kl: scan from the first key.
                        self.kind = Kind::Scan {
                            lo: Vec::new(),
                            hi: Bound::Included(ku),
                            limit,
                            items: Items::default(),
                        };
                        if limit == 0 {
                            return Step::Done(Reply::Items(Items::default()));
                        }
                        self.goto_page(raw, ROOT_LID);
                        Step::Pending
                    }
                }
            }
        }
    }
}

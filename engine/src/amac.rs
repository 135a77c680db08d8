//! One request as an explicit state machine (AMAC, asynchronous memory access chaining).
//! Each `step` does the work for one memory access whose bytes were prefetched by the step
//! before, issues the prefetch for the next access, and returns, so the engine thread can
//! run the other requests in its window while the memory system fetches.
//!
//! Stages mirror Honeycomb's accelerator: `Page` reads the page-table entry (the memory
//! subsystem) and fetches the node's header and trailer, `Node` checks the version and
//! fetches what the search reads of the tail (an interior node's item slots; a leaf's log
//! slots and fingerprints for a GET, its item slots for a range), `Search` searches (the
//! key search and range scan units). The traversal is the reference reader's (tree.rs):
//! same routing, same old-version chains, same right-sibling links, the same in-node
//! functions, so the answers are the same.

use crate::request::{Items, ReadRef, Reply, Request};
use accelkv_tree::prefetch::prefetch;
use accelkv_tree::{Error, NodeView, Raw, ValueRef, ROOT_LID};
use std::ops::Bound;

/// Bytes of a node's header fetched first (and as many of its end: the trailer).
const HEAD_BYTES: usize = 64;

/// Bytes prefetched at a GET's candidate key: its header, key and a small value.
const CANDIDATE_BYTES: usize = 64;
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
    Page(u64),
    Node(u64),
    /// Buffer offset of the version to search.
    Search(u64),
    /// A GET's leaf (buffer offset) whose first candidate key was prefetched.
    Item(u64),
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
        }
    }

    /// Reuses this finished flight for `req`, keeping its key buffer (no allocation for a
    /// GET whose key fits); prefetches the root's page-table entry.
    pub(crate) fn renew(&mut self, raw: Raw<'_>, tag: u64, rv: u64, now: u64, req: &ReadRef<'_>) {
        match (req, &mut self.kind) {
            (ReadRef::Get(key), Kind::Get(buf)) => {
                buf.clear();
                buf.extend_from_slice(key);
            }
            _ => self.kind = Flight::new(raw, 0, 0, 0, 0, 0, req.to_request()).kind,
        }
        prefetch(raw.page_entry_addr(ROOT_LID), 8);
        (self.tag, self.rv, self.now) = (tag, rv, now);
        self.stage = Stage::Page(ROOT_LID);
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
                let old = v.old_version();
                if v.version() > self.rv && old != NO_BUFFER {
                    self.fetch_head(raw, old);
                    self.stage = Stage::Node(old);
                    return Step::Pending;
                }
                // Fetch what the search reads of the tail.
                let (at, len) = match (&self.kind, v.is_leaf()) {
                    (Kind::Get(_), true) => v.lookup_span(),
                    _ => v.item_slots_span(),
                };
                prefetch(raw.node_addr(off).wrapping_add(at), len);
                self.stage = Stage::Search(off);
                Step::Pending
            }
            Stage::Search(off) => {
                // SAFETY: as above.
                let v = unsafe { raw.view(off) };
                if v.is_leaf() {
                    // A GET reads one key the fingerprints picked: fetch it first, as the
                    // walk fetches each node before reading it.
                    if let Kind::Get(key) = &self.kind {
                        if let Some(at) = v.get_candidate(accelkv_tree::fingerprint(key)) {
                            prefetch(raw.node_addr(off).wrapping_add(at), CANDIDATE_BYTES);
                            self.stage = Stage::Item(off);
                            return Step::Pending;
                        }
                    }
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
            Stage::Item(off) => {
                // SAFETY: as above.
                let v = unsafe { raw.view(off) };
                raw.leaf_visit();
                // SAFETY: as above.
                unsafe { self.at_leaf(raw, v) }
            }
        }
    }

    /// Prefetches the header and the trailer of the buffer at `off`.
    fn fetch_head(&self, raw: Raw<'_>, off: u64) {
        let base = raw.node_addr(off);
        prefetch(base, HEAD_BYTES);
        prefetch(base.wrapping_add(raw.node_size() - HEAD_BYTES), HEAD_BYTES);
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

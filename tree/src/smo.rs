//! Structural modifications (Honeycomb §3.4–3.5): merge of a leaf's sorted and log blocks
//! into a new buffer, split with the atomic subtree swap through the page table, node merge
//! below an occupancy threshold, root growth and shrink.
//!
//! Every changed node gets a new buffer (copy on write) at the operation's write version,
//! whose old-version pointer names the buffer it replaces, so readers at older versions keep
//! seeing the old subtree. A leaf split keeps the LID for the left half and gives the right
//! half a new LID; the parent (the root of the split, or every node up to it when splits
//! propagate) is rebuilt to route to both. The root's LID never changes: growth and shrink
//! replace its buffer.
//!
//! Thread safety: structural modifications are serialised by `Tree::smo` (a fast-path
//! append runs concurrently on other leaves, and waits for nothing). Interior nodes change
//! only here, so they are stable while the mutex is held; leaves are locked by CAS.
//!
//! Invariants:
//! 1. New buffers are built completely, created locked, published through the page table,
//!    and unlocked last, after every superseded buffer has been locked for good.
//! 2. Superseded buffers, retired LIDs and values no longer referenced are retired only
//!    after the write version is released.
//! 3. Right-sibling links are immutable (they live in a new buffer); only left-sibling words
//!    change in place, and readers never follow them.

use crate::backoff::Backoff;
use crate::tree::{Garbage, SmoCounters, Tree, ROOT};
use crate::values;
use crate::write::{Op, Outcome};
use accelkv_node::layout::*;
use accelkv_node::{build_interior, build_leaf_raw, interior_item_size, RawItem};
use accelkv_node::{NodeMeta, NodeView, ValueRef};
use smallvec::SmallVec;
use std::sync::atomic::Ordering;

/// A leaf's items as a merge copies them (encoded values, fingerprints).
type Items<'a> = Vec<RawItem<'a>>;
type Entries<'a> = Vec<(&'a [u8], u64)>;

enum Content<'a> {
    Leaf(Items<'a>),
    Interior(Entries<'a>),
}

/// A node to build at the operation's write version.
struct NewNode<'a> {
    lid: u64,
    content: Content<'a>,
    /// Buffer this one replaces (old-version pointer).
    old: u64,
    /// Left sibling (leaves).
    left: u64,
    /// Right sibling (leaf) or leftmost child (interior).
    link: u64,
    level: u8,
    off: u64,
}

impl<'a> NewNode<'a> {
    /// A leaf to build; its buffer is allocated by `add_node`.
    fn leaf(lid: u64, items: Items<'a>, old: u64, left: u64, right: u64) -> NewNode<'a> {
        NewNode {
            lid,
            content: Content::Leaf(items),
            old,
            left,
            link: right,
            level: 0,
            off: NO_BUFFER,
        }
    }

    /// An interior node to build.
    fn interior(lid: u64, entries: Entries<'a>, old: u64, leftmost: u64, level: u8) -> NewNode<'a> {
        NewNode {
            lid,
            content: Content::Interior(entries),
            old,
            left: NO_LID,
            link: leftmost,
            level,
            off: NO_BUFFER,
        }
    }
}

/// Change the level below asks of its parent.
enum Edit<'a> {
    None,
    /// Insert a separator and the new right node.
    Split(&'a [u8], u64),
    /// Remove the entry of a node merged into its left sibling.
    Remove(u64),
}

/// What a structural modification builds and retires. Inline room for what a merge or a
/// split of a few levels needs, so the common ones allocate nothing here.
#[derive(Default)]
struct Plan<'a> {
    nodes: SmallVec<[NewNode<'a>; 4]>,
    superseded: SmallVec<[u64; 8]>,
    /// Superseded interior buffers, locked for good on publication.
    mark: SmallVec<[u64; 4]>,
    /// Leaf buffers this operation locked, with their words before locking.
    locked: SmallVec<[(u64, u64); 4]>,
    retired_lids: SmallVec<[u64; 4]>,
    new_lids: SmallVec<[u64; 4]>,
    /// (neighbour LID, new left sibling) for left-sibling words.
    left_updates: SmallVec<[(u64, u64); 4]>,
}

fn leaf_bytes(items: &Items<'_>) -> usize {
    items.iter().map(RawItem::size).sum()
}

fn interior_bytes(entries: &Entries<'_>) -> usize {
    entries
        .iter()
        .map(|(k, _)| interior_item_size(k.len()))
        .sum()
}

/// Index at which to split `sizes` so both halves fit `cap`, as close to even as possible.
fn split_point(sizes: &[usize], cap: usize) -> usize {
    let total: usize = sizes.iter().sum();
    let mut best = (usize::MAX, 1);
    let mut prefix = 0;
    for (i, s) in sizes.iter().enumerate().skip(1) {
        prefix += sizes[i - 1];
        let _ = s;
        if prefix <= cap && total - prefix <= cap {
            let dist = prefix.abs_diff(total - prefix);
            if dist < best.0 {
                best = (dist, i);
            }
        }
    }
    best.1
}

/// The siblings under the same parent to merge `child` with, each with whether `child` is
/// the left of the pair: first its right neighbour (its left one when `child` is the last
/// child), then its left neighbour when it has both. The parent has at least two children.
fn merge_partners(parent: &NodeView<'_>, child: u64) -> ((u64, bool), Option<(u64, bool)>) {
    let (leftmost, entries) = parent.interior_entries();
    let children: Vec<u64> = std::iter::once(leftmost)
        .chain(entries.iter().map(|e| e.1))
        .collect();
    let idx = children
        .iter()
        .position(|&c| c == child)
        .expect("child of parent");
    if idx + 1 < children.len() {
        let left = idx.checked_sub(1).map(|i| (children[i], false));
        ((children[idx + 1], true), left)
    } else {
        ((children[idx - 1], false), None)
    }
}

impl Tree {
    /// Locks a leaf buffer that cannot be superseded meanwhile (the caller holds the SMO
    /// mutex), waiting out fast-path writers. Returns the word before locking.
    fn lock_spin(&self, off: u64) -> u64 {
        let word = self.word(off);
        let mut backoff = Backoff::new();
        loop {
            let w = word.load(Ordering::Acquire);
            if !is_locked(w)
                && word
                    .compare_exchange(w, locked(w), Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return w;
            }
            backoff.snooze();
        }
    }

    /// Whether a structural write that may grow the tree must be refused to keep the room a
    /// delete's restructuring needs (a merge, and a rebuild of every level of a tree of
    /// `depth` levels): at the memory limit, deletes still make room.
    fn growth_refused(&self, depth: usize) -> bool {
        if self.cfg.evict {
            return false;
        }
        let reserve = 2 * depth + 2;
        let over =
            || (self.arena.live_buffers() + reserve) * self.geo.node_size > self.cfg.memory_limit;
        if !over() {
            return false;
        }
        self.reclaim();
        over()
    }

    fn new_lid(&self, plan: &mut Plan<'_>) -> Result<u64, crate::Error> {
        let lid = self.pt.alloc_lid().ok_or(crate::Error::OutOfMemory {
            limit: self.cfg.memory_limit,
        })?;
        plan.new_lids.push(lid);
        if let Some(m) = self.mirror.get() {
            m.arrived(lid);
        }
        Ok(lid)
    }

    /// The write path for anything the fast path cannot append. Owns `value`: stores it or
    /// frees it.
    pub(crate) fn smo_write<'a>(
        &self,
        key: &'a [u8],
        op: Op<'a>,
        value: Option<ValueRef<'a>>,
    ) -> Result<(Outcome, u64), crate::Error> {
        let free_value = || {
            if let Some((handle, len)) = value.and_then(|v| v.out_of_line_ref()) {
                self.ool_bytes.fetch_sub(u64::from(len), Ordering::Relaxed);
                // SAFETY: never published.
                unsafe { values::free(handle, len) };
            }
        };
        let _smo = self.smo.lock().unwrap_or_else(|e| e.into_inner());
        let pin_guard = self.epochs.pin();
        let pin = &pin_guard;
        let mut path: SmallVec<[(u64, u64); 8]> = SmallVec::new();
        let mut lid = ROOT;
        loop {
            let off = match self.page(lid) {
                Ok(off) => off,
                Err(e) => {
                    free_value();
                    return Err(e);
                }
            };
            path.push((lid, off));
            let v = self.view(off, pin);
            if v.is_leaf() {
                break;
            }
            lid = v.child_for(key);
        }
        if op.value().is_some() && self.growth_refused(path.len()) {
            free_value();
            return Err(crate::Error::OutOfMemory {
                limit: self.cfg.memory_limit,
            });
        }
        // The written value as a node holds it.
        let encoded: SmallVec<[u8; 96]> = match &value {
            Some(v) => {
                let mut b = SmallVec::from_elem(0u8, 2 + v.body_len());
                accelkv_node::builder::encode_value(&mut b, v);
                b
            }
            None => SmallVec::new(),
        };
        let leaf_off = path[path.len() - 1].1;
        let mut plan = Plan::default();
        plan.locked.push((leaf_off, self.lock_spin(leaf_off)));
        let lv = self.view(leaf_off, pin);
        let written = |key: &'a [u8]| RawItem {
            key,
            value: &encoded,
            fp: accelkv_node::fingerprint(key),
        };
        // Every item, expired ones included (clock 0): an expired item is removed by a
        // write, never dropped on the side.
        let mut items: Items<'_> = scratch::take();
        lv.merge_items(&mut items);
        let pos = items.binary_search_by(|it| it.key.cmp(key));
        let current = pos.ok().map(|i| items[i].value_ref());
        let outcome = match (op.outcome(current.as_ref()), pos, value) {
            (Some(o @ (Outcome::Replaced | Outcome::Revived)), Ok(i), Some(_)) => {
                items[i] = written(key);
                o
            }
            (Some(o @ Outcome::Inserted), Err(i), Some(_)) => {
                items.insert(i, written(key));
                o
            }
            (Some(o @ (Outcome::Deleted | Outcome::Purged)), Ok(i), None) => {
                items.remove(i);
                o
            }
            _ => {
                self.abort(&mut plan);
                free_value();
                return Ok((Outcome::Absent, self.versions.read_version()));
            }
        };
        if let Err(e) = self.restructure(&path, lv, items, &mut plan, pin) {
            self.abort(&mut plan);
            free_value();
            return Err(e);
        }
        SmoCounters::bump(&self.counters.log_merges);
        let wv = self.versions.begin_write();
        self.publish(&mut plan, wv);
        self.observe(key, &op, wv);
        self.complete(key, wv);
        self.count(outcome, current.map(|v| v.deadline), &op);
        // Values referenced by superseded leaves but by no new leaf are dropped with them.
        let mut before = Vec::new();
        let any_out_of_line = self.ool_bytes.load(Ordering::Relaxed) > 0;
        for &off in plan.superseded.iter().filter(|_| any_out_of_line) {
            let v = self.view(off, pin);
            if v.is_leaf() {
                Tree::ool_refs(&v, &mut before);
            }
        }
        let mut after = Vec::new();
        for n in &plan.nodes {
            if let Content::Leaf(items) = &n.content {
                after.extend(items.iter().filter_map(RawItem::out_of_line_ref));
            }
        }
        after.sort_unstable();
        before.sort_unstable();
        before.dedup();
        let dropped = before
            .into_iter()
            .filter(|r| after.binary_search(r).is_err())
            .map(|(h, l)| Garbage::Value(h, l));
        let garbage = plan
            .superseded
            .iter()
            .map(|&off| Garbage::Buffer(off))
            .chain(plan.retired_lids.iter().map(|&l| Garbage::Lid(l)))
            .chain(dropped);
        self.retire_at(wv, garbage);
        // The leaf's item list goes back for the thread's next merge.
        for n in plan.nodes.drain(..) {
            if let Content::Leaf(items) = n.content {
                scratch::give(items);
            }
        }
        drop(plan);
        drop(pin_guard);
        self.reclaim();
        Ok((outcome, wv))
    }

    /// Removes every item as one write (FLUSHALL): the root becomes an empty leaf at a new
    /// version whose old-version pointer is the old root, so a reader at an older version
    /// still reads the whole old tree; every buffer, LID and out-of-line value of the old
    /// tree is retired at that version (freed once no reader can reach it). New writers wait
    /// at the batch gate; fast-path writers already past it are waited out by locking every
    /// leaf, and superseded leaves stay locked, so one that reaches them retries from the
    /// new root. Returns the write version and how many items were removed.
    pub(crate) fn clear(&self) -> Result<(u64, u64), crate::Error> {
        let _serial = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        self.gate.store(true, Ordering::SeqCst);
        let r = self.clear_gated();
        self.gate.store(false, Ordering::SeqCst);
        self.reclaim();
        r
    }

    fn clear_gated(&self) -> Result<(u64, u64), crate::Error> {
        let _smo = self.smo.lock().unwrap_or_else(|e| e.into_inner());
        let pin_guard = self.epochs.pin();
        let pin = &pin_guard;
        let (mut leaves, mut interiors, mut lids) = (Vec::new(), Vec::new(), Vec::new());
        let mut stack = vec![ROOT];
        while let Some(lid) = stack.pop() {
            let off = self.pt.get(lid);
            if lid != ROOT {
                lids.push(lid);
            }
            if crate::mirror::is_evicted(off) {
                // Only in the page file: its stub is retired with its LID (mirror.rs 3).
                self.retire_stub(off);
                continue;
            }
            let v = self.view(off, pin);
            if v.is_leaf() {
                leaves.push(off);
            } else {
                interiors.push(off);
                let (leftmost, entries) = v.interior_entries();
                stack.push(leftmost);
                stack.extend(entries.iter().map(|e| e.1));
            }
        }
        let mut plan = Plan::default();
        for &off in &leaves {
            plan.locked.push((off, self.lock_spin(off)));
        }
        let root_off = self.pt.get(ROOT);
        let root = NewNode::leaf(ROOT, Vec::new(), root_off, NO_LID, NO_LID);
        if let Err(e) = self.add_node(&mut plan, root) {
            self.abort(&mut plan);
            return Err(e);
        }
        let mut values = Vec::new();
        for &off in &leaves {
            Tree::ool_refs(&self.view(off, pin), &mut values);
        }
        values.sort_unstable();
        values.dedup();
        plan.superseded = leaves.iter().chain(&interiors).copied().collect();
        plan.mark = interiors.into();
        plan.retired_lids = lids.into();
        let wv = self.versions.begin_write();
        self.publish(&mut plan, wv);
        let removed = self.items.swap(0, Ordering::Relaxed).max(0) as u64;
        self.expiring.store(0, Ordering::Relaxed);
        self.observe_clear(wv);
        self.complete(&[], wv);
        let garbage: Vec<Garbage> = plan
            .superseded
            .iter()
            .map(|&off| Garbage::Buffer(off))
            .chain(plan.retired_lids.iter().map(|&l| Garbage::Lid(l)))
            .chain(values.into_iter().map(|(h, l)| Garbage::Value(h, l)))
            .collect();
        self.retire_at(wv, garbage);
        Ok((wv, removed))
    }

    /// Undoes a plan that was not published: unlock leaves, free buffers and LIDs.
    fn abort(&self, plan: &mut Plan<'_>) {
        for n in &plan.nodes {
            if n.off != NO_BUFFER {
                self.arena.free(n.off);
            }
        }
        for &lid in &plan.new_lids {
            self.pt.free_lid(lid);
        }
        for &(off, w) in &plan.locked {
            self.word(off).store(w, Ordering::Release);
        }
    }

    fn add_node<'a>(&self, plan: &mut Plan<'a>, mut n: NewNode<'a>) -> Result<(), crate::Error> {
        n.off = NO_BUFFER;
        let off = self.alloc_buffer();
        plan.nodes.push(n);
        let last = plan.nodes.len() - 1;
        plan.nodes[last].off = off?;
        Ok(())
    }

    /// Decides the new nodes for the change of the leaf at the end of `path`.
    fn restructure<'a>(
        &'a self,
        path: &[(u64, u64)],
        lv: NodeView<'a>,
        items: Items<'a>,
        plan: &mut Plan<'a>,
        pin: &'a crate::epoch::Pin<'_>,
    ) -> Result<(), crate::Error> {
        let cap = self.geo.leaf_capacity();
        let depth = path.len() - 1;
        let (leaf_lid, leaf_off) = path[depth];
        plan.superseded.push(leaf_off);
        let size = leaf_bytes(&items);
        let leaf = NewNode::leaf;
        if depth == 0 {
            if size > cap {
                SmoCounters::bump(&self.counters.root_splits);
                self.grow_root_leaf(items, leaf_off, plan)?;
            } else {
                self.add_node(plan, leaf(ROOT, items, leaf_off, NO_LID, NO_LID))?;
            }
            return Ok(());
        }
        let left = self.left_word(leaf_off).load(Ordering::Acquire);
        let right = lv.link();
        let merge_below = cap * self.cfg.merge_below_pct / 100;
        let parent = self.view(path[depth - 1].1, pin);
        let edit = if size > cap {
            let sizes: Vec<usize> = items.iter().map(RawItem::size).collect();
            let at = split_point(&sizes, cap);
            let mut l = items;
            let r = l.split_off(at);
            let sep = r[0].key;
            let r2 = self.new_lid(plan)?;
            SmoCounters::bump(&self.counters.splits);
            self.add_node(plan, leaf(leaf_lid, l, leaf_off, left, r2))?;
            self.add_node(plan, leaf(r2, r, leaf_off, leaf_lid, right))?;
            if right != NO_LID {
                plan.left_updates.push((right, r2));
            }
            Edit::Split(sep, r2)
        } else if size < merge_below && parent.sorted_len() > 0 {
            let (first, second) = merge_partners(&parent, leaf_lid);
            let mut merged: Result<Edit<'a>, Items<'a>> = Err(items);
            // An emptied leaf that its first partner cannot take tries the other side.
            for sib in std::iter::once(first).chain(second.filter(|_| size == 0)) {
                let Err(items) = merged else { break };
                merged = self.try_merge(plan, pin, (leaf_lid, leaf_off, right), items, sib)?;
            }
            match merged {
                Ok(e) => e,
                Err(items) => {
                    self.add_node(plan, leaf(leaf_lid, items, leaf_off, left, right))?;
                    Edit::None
                }
            }
        } else {
            self.add_node(plan, leaf(leaf_lid, items, leaf_off, left, right))?;
            Edit::None
        };
        self.propagate(path, depth - 1, edit, plan, pin)
    }

    /// Merges the leaf `leaf_lid` (at `leaf_off`, right link `right`, its new `items`)
    /// with the sibling `sib_lid` (`ours_left`: the leaf is the left of the pair) when
    /// their items fit comfortably in one (7/8 of a leaf, so the merged leaf does not split
    /// again at once) or, for an emptied leaf, at all: the parent's edit, or `items` back
    /// when they do not fit. An emptied leaf goes whenever it can: left behind next to a
    /// nearly full sibling, a run of empty leaves grew at the front of a queue (ZPOPMIN,
    /// LPOP), and every scan from there walked it.
    fn try_merge<'a>(
        &'a self,
        plan: &mut Plan<'a>,
        pin: &'a crate::epoch::Pin<'_>,
        (leaf_lid, leaf_off, right): (u64, u64, u64),
        items: Items<'a>,
        (sib_lid, ours_left): (u64, bool),
    ) -> Result<Result<Edit<'a>, Items<'a>>, crate::Error> {
        let cap = self.geo.leaf_capacity();
        let sib_off = self.page(sib_lid)?;
        let sib_word = self.lock_spin(sib_off);
        let sv = self.view(sib_off, pin);
        let mut sib_items: Items<'a> = Vec::new();
        sv.merge_items(&mut sib_items);
        let (size, sib_size) = (leaf_bytes(&items), leaf_bytes(&sib_items));
        if size + sib_size > cap * 7 / 8 && !(items.is_empty() && sib_size <= cap) {
            self.word(sib_off).store(sib_word, Ordering::Release);
            return Ok(Err(items));
        }
        plan.locked.push((sib_off, sib_word));
        plan.superseded.push(sib_off);
        let (l_lid, l_off, mut merged, r_lid, r_link, rest) = if ours_left {
            (leaf_lid, leaf_off, items, sib_lid, sv.link(), sib_items)
        } else {
            (sib_lid, sib_off, sib_items, leaf_lid, right, items)
        };
        merged.extend(rest);
        let l_left = self.left_word(l_off).load(Ordering::Acquire);
        self.add_node(plan, NewNode::leaf(l_lid, merged, l_off, l_left, r_link))?;
        if r_link != NO_LID {
            plan.left_updates.push((r_link, l_lid));
        }
        plan.retired_lids.push(r_lid);
        SmoCounters::bump(&self.counters.node_merges);
        Ok(Ok(Edit::Remove(r_lid)))
    }

    /// Root leaf too big: two new leaves under a new interior root buffer (same LID).
    fn grow_root_leaf<'a>(
        &self,
        items: Items<'a>,
        root_off: u64,
        plan: &mut Plan<'a>,
    ) -> Result<(), crate::Error> {
        let sizes: Vec<usize> = items.iter().map(RawItem::size).collect();
        let at = split_point(&sizes, self.geo.leaf_capacity());
        let mut l = items;
        let r = l.split_off(at);
        let sep = r[0].key;
        let a = self.new_lid(plan)?;
        let b = self.new_lid(plan)?;
        for (lid, content, left, link) in [(a, l, NO_LID, b), (b, r, a, NO_LID)] {
            self.add_node(plan, NewNode::leaf(lid, content, root_off, left, link))?;
        }
        self.add_node(
            plan,
            NewNode::interior(ROOT, vec![(sep, b)], root_off, a, 1),
        )
    }

    /// Applies `edit` to the interior node at `path[d]` and on up while nodes split or merge.
    fn propagate<'a>(
        &'a self,
        path: &[(u64, u64)],
        mut d: usize,
        mut edit: Edit<'a>,
        plan: &mut Plan<'a>,
        pin: &'a crate::epoch::Pin<'_>,
    ) -> Result<(), crate::Error> {
        let icap = self.geo.interior_capacity();
        loop {
            if matches!(edit, Edit::None) {
                return Ok(());
            }
            let (lid, off) = path[d];
            let v = self.view(off, pin);
            let level = v.level();
            let (leftmost, mut entries) = v.interior_entries();
            match edit {
                Edit::None => return Ok(()),
                Edit::Split(sep, new) => {
                    let i = entries.partition_point(|(k, _)| *k < sep);
                    entries.insert(i, (sep, new));
                }
                Edit::Remove(gone) => {
                    let i = entries
                        .iter()
                        .position(|e| e.1 == gone)
                        .expect("merged node has an entry");
                    entries.remove(i);
                }
            }
            plan.superseded.push(off);
            plan.mark.push(off);
            let interior = NewNode::interior;
            let size = interior_bytes(&entries);
            let split = |entries: Entries<'a>| {
                let sizes: Vec<usize> = entries
                    .iter()
                    .map(|(k, _)| interior_item_size(k.len()))
                    .collect();
                let mid = split_point(&sizes, icap).min(entries.len() - 1);
                let mut l = entries;
                let mut r = l.split_off(mid);
                let (sep, r_leftmost) = r.remove(0);
                (l, sep, r_leftmost, r)
            };
            if d == 0 {
                if size > icap {
                    SmoCounters::bump(&self.counters.root_splits);
                    let (l, sep, r_leftmost, r) = split(entries);
                    let a = self.new_lid(plan)?;
                    let b = self.new_lid(plan)?;
                    self.add_node(plan, interior(a, l, off, leftmost, level))?;
                    self.add_node(plan, interior(b, r, off, r_leftmost, level))?;
                    self.add_node(plan, interior(ROOT, vec![(sep, b)], off, a, level + 1))?;
                } else if entries.is_empty() {
                    // Root shrink: the only child's new contents become the root's.
                    SmoCounters::bump(&self.counters.root_shrinks);
                    let i = plan
                        .nodes
                        .iter()
                        .position(|n| n.lid == leftmost)
                        .expect("the only child was just rebuilt");
                    let n = &mut plan.nodes[i];
                    n.lid = ROOT;
                    n.old = off;
                    if matches!(n.content, Content::Leaf(_)) {
                        n.left = NO_LID;
                        n.link = NO_LID;
                    }
                    plan.retired_lids.push(leftmost);
                } else {
                    self.add_node(plan, interior(ROOT, entries, off, leftmost, level))?;
                }
                return Ok(());
            }
            edit = if size > icap {
                let (l, sep, r_leftmost, r) = split(entries);
                let p2 = self.new_lid(plan)?;
                SmoCounters::bump(&self.counters.splits);
                self.add_node(plan, interior(lid, l, off, leftmost, level))?;
                self.add_node(plan, interior(p2, r, off, r_leftmost, level))?;
                Edit::Split(sep, p2)
            } else if size < icap * self.cfg.merge_below_pct / 100 {
                self.merge_interior(path, d, lid, off, leftmost, entries, level, plan, pin)?
            } else {
                self.add_node(plan, interior(lid, entries, off, leftmost, level))?;
                Edit::None
            };
            d -= 1;
        }
    }

    /// Merges an underfull interior node with a sibling under the same parent when the
    /// result fits; otherwise rebuilds it alone.
    #[allow(clippy::too_many_arguments)]
    fn merge_interior<'a>(
        &'a self,
        path: &[(u64, u64)],
        d: usize,
        lid: u64,
        off: u64,
        leftmost: u64,
        entries: Entries<'a>,
        level: u8,
        plan: &mut Plan<'a>,
        pin: &'a crate::epoch::Pin<'_>,
    ) -> Result<Edit<'a>, crate::Error> {
        let icap = self.geo.interior_capacity();
        let gv = self.view(path[d - 1].1, pin);
        let (_, g_entries) = gv.interior_entries();
        let node =
            |lid, entries, old, leftmost| NewNode::interior(lid, entries, old, leftmost, level);
        if g_entries.is_empty() {
            self.add_node(plan, node(lid, entries, off, leftmost))?;
            return Ok(Edit::None);
        }
        let (sib_lid, ours_left) = merge_partners(&gv, lid).0;
        let sib_off = self.pt.get(sib_lid);
        let sv = self.view(sib_off, pin);
        let (s_leftmost, s_entries) = sv.interior_entries();
        let (l_lid, l_off, l_leftmost, mut l_entries, r_lid, r_leftmost, r_entries) = if ours_left {
            (lid, off, leftmost, entries, sib_lid, s_leftmost, s_entries)
        } else {
            (
                sib_lid, sib_off, s_leftmost, s_entries, lid, leftmost, entries,
            )
        };
        let sep = g_entries
            .iter()
            .find(|e| e.1 == r_lid)
            .expect("right node has a separator")
            .0;
        let combined =
            interior_bytes(&l_entries) + interior_item_size(sep.len()) + interior_bytes(&r_entries);
        if combined > icap * 7 / 8 {
            let (entries, leftmost) = if ours_left {
                (l_entries, l_leftmost)
            } else {
                (r_entries, r_leftmost)
            };
            self.add_node(plan, node(lid, entries, off, leftmost))?;
            return Ok(Edit::None);
        }
        l_entries.push((sep, r_leftmost));
        l_entries.extend(r_entries);
        plan.superseded.push(sib_off);
        plan.mark.push(sib_off);
        self.add_node(plan, node(l_lid, l_entries, l_off, l_leftmost))?;
        plan.retired_lids.push(r_lid);
        SmoCounters::bump(&self.counters.node_merges);
        Ok(Edit::Remove(r_lid))
    }

    /// Builds every new buffer at `wv` and publishes the plan (invariant 1).
    fn publish(&self, plan: &mut Plan<'_>, wv: u64) {
        let mut used: SmallVec<[usize; 4]> = SmallVec::with_capacity(plan.nodes.len());
        for n in &plan.nodes {
            let meta = NodeMeta {
                version: wv,
                old: if self.cfg.debug_no_old_versions {
                    NO_BUFFER
                } else {
                    n.old
                },
                link: n.link,
                left: n.left,
                level: n.level,
                lock: LOCK_BIT,
            };
            // SAFETY: the buffer was allocated for this plan and is unpublished.
            let buf = unsafe { self.buf_mut(n.off) };
            let u = match &n.content {
                Content::Leaf(items) => build_leaf_raw(buf, &self.geo, items, &meta),
                Content::Interior(entries) => build_interior(buf, &self.geo, entries, &meta),
            }
            .expect("contents sized to fit");
            used.push(u);
        }
        for &off in &plan.mark {
            let w = self.word(off);
            w.store(locked(w.load(Ordering::Acquire)), Ordering::Release);
        }
        for n in &plan.nodes {
            self.pt.set(n.lid, n.off);
        }
        // remap.rs invariant 1: after the entries are set, before `wv` is released. LIDs
        // this modification removes (merges, root shrink) are announced as unmapped.
        self.arena.feeds.remapped(
            plan.nodes
                .iter()
                .map(|n| (n.lid, n.off))
                .chain(plan.retired_lids.iter().map(|&l| (l, NO_BUFFER)))
                .map(|(lid, off)| crate::remap::Remap {
                    lid,
                    off,
                    version: wv,
                }),
        );
        for &(neighbour, left) in &plan.left_updates {
            self.set_left(neighbour, left);
        }
        for (n, u) in plan.nodes.iter().zip(used) {
            self.word(n.off)
                .store(pack_lock_used(1, u as u32), Ordering::Release);
        }
    }
}

/// A thread's item list, kept between merges so a merge allocates none. The list is empty
/// whenever it is kept, and lifetimes do not change a `Vec`'s layout, so it can carry the
/// items of any merge.
mod scratch {
    use accelkv_node::RawItem;
    use std::cell::RefCell;

    thread_local! {
        static ITEMS: RefCell<Vec<RawItem<'static>>> = const { RefCell::new(Vec::new()) };
    }

    /// The thread's empty list (a new one if it is out).
    pub(super) fn take<'a>() -> Vec<RawItem<'a>> {
        let v = ITEMS.with(|s| std::mem::take(&mut *s.borrow_mut()));
        debug_assert!(v.is_empty());
        // SAFETY: the vector is empty, so no item of the old lifetime is in it, and
        // `RawItem<'static>` and `RawItem<'a>` have the same layout.
        unsafe { std::mem::transmute::<Vec<RawItem<'static>>, Vec<RawItem<'a>>>(v) }
    }

    /// Keeps `v`'s allocation for the thread's next merge (emptied first; one of at most
    /// 64 KiB, a big merge's, is let go).
    pub(super) fn give(mut v: Vec<RawItem<'_>>) {
        v.clear();
        if v.capacity() * std::mem::size_of::<RawItem<'_>>() > 64 << 10 {
            return;
        }
        // SAFETY: as in `take`: empty, same layout.
        let v = unsafe { std::mem::transmute::<Vec<RawItem<'_>>, Vec<RawItem<'static>>>(v) };
        ITEMS.with(|s| {
            let mut s = s.borrow_mut();
            if s.capacity() < v.capacity() {
                *s = v;
            }
        });
    }
}

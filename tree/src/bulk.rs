//! Bulk load of a fresh tree from a sorted iterator: leaves filled to a configurable
//! fraction and linked as siblings, then interior levels built bottom-up until one node is
//! left, which becomes the root.

use crate::tree::{Tree, ROOT};
use crate::values;
use crate::Error;
use accelkv_node::layout::*;
use accelkv_node::{build_interior, build_leaf_full, interior_item_size, leaf_item_size};
use accelkv_node::{NodeMeta, ValueRef};
use std::sync::atomic::Ordering;

/// A value as a bulk load keeps it until its leaf is built: bytes or an out-of-line
/// reference, with the item's deadline and client flags.
enum Stored {
    Inline(Vec<u8>, u64, u32),
    OutOfLine(u64, u32, u64, u32),
}

impl Stored {
    fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Stored::Inline(v, d, f) => ValueRef::inline(v).with_deadline(*d).with_flags(*f),
            Stored::OutOfLine(handle, len, d, f) => ValueRef::out_of_line(*handle, *len)
                .with_deadline(*d)
                .with_flags(*f),
        }
    }
}

/// (first key, LID, buffer offset) of a node built on the level below.
type Built = (Vec<u8>, u64, u64);

impl Tree {
    /// Loads `items` (strictly ascending keys, each with its deadline and client flags) into
    /// this tree, which must be empty and not yet shared. On error the tree is left empty.
    pub(crate) fn bulk_load<K, V>(
        &self,
        items: impl IntoIterator<Item = (K, V, u64, u32)>,
        check: impl Fn(&[u8], &[u8]) -> Result<(), Error>,
    ) -> Result<u64, Error>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let mut ool: Vec<(u64, u32)> = Vec::new();
        let r = self.bulk_load_inner(items, &check, &mut ool);
        if r.is_err() {
            for (h, l) in ool {
                self.ool_bytes.fetch_sub(u64::from(l), Ordering::Relaxed);
                // SAFETY: the values were never published (the root is unchanged).
                unsafe { values::free(h, l) };
            }
        }
        r
    }

    fn bulk_load_inner<K, V>(
        &self,
        items: impl IntoIterator<Item = (K, V, u64, u32)>,
        check: &impl Fn(&[u8], &[u8]) -> Result<(), Error>,
        ool: &mut Vec<(u64, u32)>,
    ) -> Result<u64, Error>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let fill = self.geo.bulk_leaf_capacity() * self.cfg.bulk_fill_pct / 100;
        let mut level: Vec<Built> = Vec::new();
        let mut cur: Vec<(Vec<u8>, Stored)> = Vec::new();
        let mut cur_bytes = 0;
        let mut cur_lid = self.lid()?;
        let mut prev_lid = NO_LID;
        let mut count = 0u64;
        let mut expiring = 0i64;
        let mut last_key: Vec<u8> = Vec::new();
        for (i, (k, v, d, f)) in items.into_iter().enumerate() {
            let (k, v) = (k.as_ref(), v.as_ref());
            check(k, v)?;
            if i > 0 && last_key.as_slice() >= k {
                return Err(Error::Unsorted { index: i });
            }
            last_key.clear();
            last_key.extend_from_slice(k);
            let stored = if v.len() > self.geo.max_inline_value {
                let Some((handle, len)) = values::alloc(v).out_of_line_ref() else {
                    unreachable!("alloc returns an out-of-line reference")
                };
                self.ool_bytes.fetch_add(u64::from(len), Ordering::Relaxed);
                ool.push((handle, len));
                Stored::OutOfLine(handle, len, d, f)
            } else {
                Stored::Inline(v.to_vec(), d, f)
            };
            expiring += i64::from(d != NO_DEADLINE);
            let size = leaf_item_size(k.len(), &stored.as_ref());
            if !cur.is_empty() && cur_bytes + size > fill {
                let next = self.lid()?;
                level.push(self.flush_leaf(&cur, cur_lid, prev_lid, next)?);
                prev_lid = cur_lid;
                cur_lid = next;
                cur.clear();
                cur_bytes = 0;
            }
            cur.push((k.to_vec(), stored));
            cur_bytes += size;
            count += 1;
        }
        if cur.is_empty() && level.is_empty() {
            self.pt.free_lid(cur_lid);
            return Ok(0);
        }
        level.push(self.flush_leaf(&cur, cur_lid, prev_lid, NO_LID)?);
        let mut height = 0u8;
        while level.len() > 1 {
            height += 1;
            level = self.build_level(&level, height)?;
        }
        let (_, lid, off) = &level[0];
        if *lid != ROOT {
            // A single leaf: it becomes the root.
            let empty_root = self.pt.get(ROOT);
            self.pt.set(ROOT, *off);
            self.pt.free_lid(*lid);
            self.arena.free(empty_root);
        }
        self.items.store(count as i64, Ordering::Relaxed);
        self.expiring.store(expiring, Ordering::Relaxed);
        if expiring > 0 {
            self.deadlines_seen.store(true, Ordering::Release);
        }
        Ok(count)
    }

    fn lid(&self) -> Result<u64, Error> {
        self.pt.alloc_lid().ok_or(Error::OutOfMemory {
            limit: self.cfg.memory_limit,
        })
    }

    fn flush_leaf(
        &self,
        items: &[(Vec<u8>, Stored)],
        lid: u64,
        left: u64,
        right: u64,
    ) -> Result<Built, Error> {
        let off = self.alloc_buffer()?;
        let refs: Vec<(&[u8], ValueRef<'_>)> = items
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_ref()))
            .collect();
        let meta = NodeMeta {
            version: 0,
            old: NO_BUFFER,
            link: right,
            left,
            level: 0,
            lock: 0,
        };
        // Filled against `bulk_leaf_capacity`: the fill percentage, not the half-log reserve
        // of a merged leaf, leaves the log its room.
        // SAFETY: fresh, unpublished buffer.
        build_leaf_full(unsafe { self.buf_mut(off) }, &self.geo, &refs, &meta)
            .expect("leaf filled below capacity");
        self.pt.set(lid, off);
        let first = items.first().map(|(k, _)| k.clone()).unwrap_or_default();
        Ok((first, lid, off))
    }

    /// Builds the interior level above `below`; a level of one node is the root.
    fn build_level(&self, below: &[Built], height: u8) -> Result<Vec<Built>, Error> {
        let fill = self.geo.interior_capacity() * self.cfg.bulk_fill_pct / 100;
        // Group children: each group is [first child, entries...].
        let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
        let mut start = 0;
        let mut bytes = 0;
        for (i, (k, _, _)) in below.iter().enumerate().skip(1) {
            let size = interior_item_size(k.len());
            if bytes + size > fill && i > start + 1 {
                groups.push(start..i);
                start = i;
                bytes = 0;
                continue;
            }
            bytes += size;
        }
        groups.push(start..below.len());
        let single = groups.len() == 1;
        let mut out = Vec::with_capacity(groups.len());
        for g in groups {
            let lid = if single { ROOT } else { self.lid()? };
            let off = if single {
                // Replace the empty root leaf's buffer.
                self.pt.get(ROOT)
            } else {
                self.alloc_buffer()?
            };
            let entries: Vec<(&[u8], u64)> = below[g.start + 1..g.end]
                .iter()
                .map(|(k, lid, _)| (k.as_slice(), *lid))
                .collect();
            let meta = NodeMeta {
                version: 0,
                old: NO_BUFFER,
                link: below[g.start].1,
                left: NO_LID,
                level: height,
                lock: 0,
            };
            // SAFETY: the buffer is fresh, or is the unshared empty root of a tree nobody
            // else can see yet.
            build_interior(unsafe { self.buf_mut(off) }, &self.geo, &entries, &meta)
                .expect("interior filled below capacity");
            self.pt.set(lid, off);
            out.push((below[g.start].0.clone(), lid, off));
        }
        Ok(out)
    }
}

/// One piece of a tree rebuilt from a page file with a memory budget, in key order
/// ([`crate::Store::recovered`]).
pub enum Recovered<K, V> {
    /// An item that goes into a resident leaf (packed with its neighbours): key, value,
    /// deadline (0: none), client flags (0: none).
    Item(K, V, u64, u32),
    /// A leaf that stays in the page file: the page that images exactly its range, its
    /// lower fence (`None` only for the first leaf) and how many items it holds, with how
    /// many of them have a deadline.
    Page {
        /// The page (the pager's name for it).
        page: u64,
        /// Lower fence.
        low: Option<Vec<u8>>,
        /// Items in the page.
        items: u64,
        /// Items in the page with a deadline.
        expiring: u64,
    },
}

/// A leaf of a recovered tree before LIDs are given out.
enum Spec {
    Items(Vec<(Vec<u8>, Stored)>),
    Page {
        page: u64,
        low: Vec<u8>,
        items: u64,
        expiring: u64,
    },
}

impl Tree {
    /// Builds this empty, unshared tree (with its pager attached) from `pieces`; returns the
    /// items loaded and (LID, page) of every leaf left in the page file.
    pub(crate) fn bulk_load_recovered<K, V>(
        &self,
        pieces: impl IntoIterator<Item = Recovered<K, V>>,
        check: impl Fn(&[u8], &[u8]) -> Result<(), Error>,
    ) -> Result<(u64, Vec<(u64, u64)>), Error>
    where
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let fill = self.geo.bulk_leaf_capacity() * self.cfg.bulk_fill_pct / 100;
        let mut specs: Vec<Spec> = Vec::new();
        let mut cur: Vec<(Vec<u8>, Stored)> = Vec::new();
        let mut cur_bytes = 0;
        let (mut count, mut expiring) = (0u64, 0i64);
        for p in pieces {
            match p {
                Recovered::Item(k, v, d, f) => {
                    let (k, v) = (k.as_ref(), v.as_ref());
                    check(k, v)?;
                    let stored = if v.len() > self.geo.max_inline_value {
                        let Some((handle, len)) = values::alloc(v).out_of_line_ref() else {
                            unreachable!("alloc returns an out-of-line reference")
                        };
                        self.ool_bytes.fetch_add(u64::from(len), Ordering::Relaxed);
                        Stored::OutOfLine(handle, len, d, f)
                    } else {
                        Stored::Inline(v.to_vec(), d, f)
                    };
                    let size = leaf_item_size(k.len(), &stored.as_ref());
                    if !cur.is_empty() && cur_bytes + size > fill {
                        specs.push(Spec::Items(std::mem::take(&mut cur)));
                        cur_bytes = 0;
                    }
                    cur.push((k.to_vec(), stored));
                    cur_bytes += size;
                    count += 1;
                    expiring += i64::from(d != NO_DEADLINE);
                }
                Recovered::Page {
                    page,
                    low,
                    items,
                    expiring: e,
                } => {
                    if !cur.is_empty() {
                        specs.push(Spec::Items(std::mem::take(&mut cur)));
                        cur_bytes = 0;
                    }
                    specs.push(Spec::Page {
                        page,
                        low: low.unwrap_or_default(),
                        items,
                        expiring: e,
                    });
                    count += items;
                    expiring += e as i64;
                }
            }
        }
        if !cur.is_empty() {
            specs.push(Spec::Items(cur));
        }
        if let [Spec::Page { page, .. }] = specs.as_slice() {
            // A tree of one leaf: the root, which is always resident.
            let page = *page;
            let mirror = self.mirror.get().ok_or(Error::InvalidConfig(
                "a recovered tree with evicted leaves needs a pager".into(),
            ))?;
            let mut items = Vec::new();
            mirror
                .read_page(page, &mut |page_items| {
                    items.extend(
                        page_items
                            .iter()
                            .map(|&(k, v, d, f)| (k.to_vec(), v.to_vec(), d, f)),
                    )
                })
                .map_err(Error::PageRead)?;
            self.bulk_load(items, |_, _| Ok(()))?;
            return Ok((self.items.load(Ordering::Relaxed) as u64, Vec::new()));
        }
        if specs.is_empty() {
            return Ok((0, Vec::new()));
        }
        let lids: Vec<u64> = (0..specs.len())
            .map(|_| self.lid())
            .collect::<Result<_, _>>()?;
        let mut level: Vec<Built> = Vec::with_capacity(specs.len());
        let mut stubs = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let left = if i == 0 { NO_LID } else { lids[i - 1] };
            let right = lids.get(i + 1).copied().unwrap_or(NO_LID);
            match spec {
                Spec::Items(items) => {
                    level.push(self.flush_leaf(&items, lids[i], left, right)?);
                    if let Some(m) = self.mirror.get() {
                        m.arrived(lids[i]);
                    }
                }
                Spec::Page {
                    page,
                    low,
                    items,
                    expiring,
                } => {
                    let spec = crate::mirror::StubSpec {
                        lid: lids[i],
                        page,
                        link: right,
                        left,
                        items: items as i64,
                        expiring: expiring as i64,
                    };
                    let entry = self.install_stub(spec)?;
                    stubs.push((lids[i], page));
                    level.push((low, lids[i], entry));
                }
            }
        }
        let mut height = 0u8;
        while level.len() > 1 {
            height += 1;
            level = self.build_level(&level, height)?;
        }
        self.items.store(count as i64, Ordering::Relaxed);
        self.expiring.store(expiring, Ordering::Relaxed);
        if expiring > 0 {
            self.deadlines_seen.store(true, Ordering::Release);
        }
        Ok((count, stubs))
    }
}

//! Tests of the mirror cache's loads against an in-memory pager that, like the durability
//! layer's, reads a leaf's newest image, and that can hold a read until the test lets it go:
//! interleavings the stress tests only hit by chance, made certain.

use super::*;
use crate::{Config, Store};
use std::sync::{Barrier, Condvar};

type Items = Vec<(Vec<u8>, Vec<u8>, u64)>;

/// Leaf images by LID (the newest one, as the durability layer's pager reads), and one read
/// that waits at a gate.
#[derive(Default)]
struct MemPager {
    images: Mutex<HashMap<u64, Items>>,
    /// The next read of this LID stops at the gate (reached, then released).
    hold: Mutex<Option<u64>>,
    gate: Mutex<(bool, bool)>,
    moved: Condvar,
}

impl MemPager {
    fn wait_reached(&self) {
        let mut g = lock(&self.gate);
        while !g.0 {
            g = self.moved.wait(g).unwrap();
        }
    }

    fn release(&self) {
        lock(&self.gate).1 = true;
        self.moved.notify_all();
    }
}

impl Pager for MemPager {
    fn read(&self, lid: u64, _page: u64, items: &mut ItemSink<'_>) -> Result<(), String> {
        if lock(&self.hold).take_if(|l| *l == lid).is_some() {
            let mut g = lock(&self.gate);
            g.0 = true;
            self.moved.notify_all();
            while !g.1 {
                g = self.moved.wait(g).unwrap();
            }
        }
        // The image is looked up after the wait: the newest by then.
        let images = lock(&self.images);
        let image = images.get(&lid).ok_or(format!("leaf {lid} has no image"))?;
        let all: Vec<PageItem<'_>> = image
            .iter()
            .map(|(k, v, d)| (k.as_slice(), v.as_slice(), *d, 0))
            .collect();
        items(&all);
        Ok(())
    }

    fn pressure(&self) {}
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A store of `n` keys over several 4 KiB leaves, with the pager attached.
fn store(n: u32) -> (Store, Arc<MemPager>) {
    let s = Store::new(Config {
        node_size: 4096,
        chunk_size: 64 << 10,
        memory_limit: 4 << 20,
        evict: true,
        ..Config::default()
    })
    .unwrap();
    let pager = Arc::new(MemPager::default());
    assert!(s.attach_pager(pager.clone()));
    for i in 0..n {
        s.put(&key(i), &[b'v'; 60]).unwrap();
    }
    (s, pager)
}

/// Images every leaf at the current version (what a commit does for the dirty ones);
/// returns (LID, items) per leaf, in key order.
fn image_all(s: &Store, pager: &MemPager) -> Vec<(u64, Items)> {
    let snap = s.snapshot();
    let mut leaves = Vec::new();
    let mut at = Vec::new();
    loop {
        let (lid, items, high) = snap
            .leaf(&at, |l| {
                let items: Items = l
                    .items
                    .iter()
                    .map(|(k, v, d, _)| (k.to_vec(), v.to_vec(), *d))
                    .collect();
                (l.lid, items, l.high.map(<[u8]>::to_vec))
            })
            .unwrap();
        lock(&pager.images).insert(lid, items.clone());
        leaves.push((lid, items));
        match high {
            Some(h) => at = h,
            None => return leaves,
        }
    }
}

/// Evicts every leaf that has an image (a few rounds: S3-FIFO keeps recently used leaves
/// a while, and the first round has no safe version yet).
fn evict_all(s: &Store, pager: &MemPager, leaves: usize) {
    for _ in 0..20 {
        s.evict(0, &mut |lid, _, _| {
            lock(&pager.images).contains_key(&lid).then_some(lid)
        });
        if s.mirror_stats().evicted_leaves as usize == leaves {
            return;
        }
    }
    panic!("not every leaf was evicted: {:?}", s.mirror_stats());
}

/// A reader that must read a leaf into a private copy (the arena is full) takes the leaf's
/// stub, and while its page read is in flight another thread loads the leaf, writes to it
/// and has it imaged again. The pager then hands the reader the newer image; the reader must
/// not use it (it holds a write newer than the reader's version, and after a split or merge
/// a different key range), but look again and read the leaf at its own version.
#[test]
fn a_private_load_overtaken_by_a_load_and_a_write_reads_its_own_version() {
    let (s, pager) = store(600);
    let leaves = image_all(&s, &pager);
    assert!(leaves.len() >= 4, "{} leaves", leaves.len());
    evict_all(&s, &pager, leaves.len());
    let (lid, before) = leaves[leaves.len() / 2].clone();
    let mut newer = before[0].0.clone();
    newer.push(b'a');
    *lock(&pager.hold) = Some(lid);
    let t = s.inner();
    let reached = Barrier::new(2);
    std::thread::scope(|sc| {
        let reader = sc.spawn(|| {
            let pin = t.epochs.pin();
            let rv = t.versions.read_version();
            reached.wait();
            let v = t.load_private(lid, rv, &pin).unwrap();
            v.leaf_iter(rv, NO_DEADLINE)
                .map(|(k, val)| {
                    (
                        String::from_utf8_lossy(k).into_owned(),
                        t.value_bytes(val).len(),
                    )
                })
                .collect::<Vec<_>>()
        });
        reached.wait();
        pager.wait_reached();
        // Loads the leaf (this read is not held), appends a newer item, images it again.
        s.put(&newer, b"newer").unwrap();
        let again = image_all(&s, &pager);
        assert!(again
            .iter()
            .any(|(l, items)| *l == lid && items.iter().any(|i| i.0 == newer)));
        pager.release();
        let seen = reader.join().unwrap();
        let want: Vec<_> = before
            .iter()
            .map(|(k, v, _)| (String::from_utf8_lossy(k).into_owned(), v.len()))
            .collect();
        assert_eq!(seen, want, "the reader sees the leaf at its version");
    });
    assert_eq!(s.get(&newer).unwrap(), Some(b"newer".to_vec()));
}

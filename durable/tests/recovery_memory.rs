//! Recovery in bounded memory (issue 42, item 3): reopening a store allocates the tree it
//! rebuilds and little else — not the page file's live bytes, which recovery streams one
//! page at a time (replay.rs). A counting allocator measures the heap's peak during the
//! open; the tree's own memory (its arena and values) is subtracted.

use accelkv_durable::{Deltas, Options, Store, SyncPolicy};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

mod common;

struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the counters only add
// and subtract the sizes it was asked for.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = CURRENT.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc::alloc requires.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Reopens `N` items written with `deltas`, committed every `every` puts; returns the bytes
/// recovery held beyond what the open keeps, the items' bytes and the report.
///
/// Commits come only from `flush` (an hour-long interval, a lease larger than the
/// writes), so how many older page versions the file holds is the same on every run:
/// scrambled keys make every commit rewrite most leaves, and a slot is reused only once
/// the pages that shadow it are written, so about as many older versions as live pages
/// are left beside them, more as the leaves split.
fn reopen(deltas: Deltas, every: u32) -> (u64, u64, accelkv_durable::RecoveryReport) {
    let dir = std::env::temp_dir().join(format!(
        "accelkv-recovery-mem-{}-{}-{every}",
        std::process::id(),
        deltas.on()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let crash = dir.with_extension("crash");
    let _ = std::fs::remove_dir_all(&crash);
    let opts = Options {
        deltas,
        version_lease: 1 << 30,
        ..common::test_options(SyncPolicy::Interval(std::time::Duration::from_secs(3600)))
    };
    const N: u32 = 200_000;
    {
        let s = Store::open_with(&dir, opts.clone()).unwrap();
        for i in 0..N {
            // Scrambled order, 16-byte keys and 24-byte values: many leaves.
            let k = format!("{:016x}", u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            s.tree()
                .put(k.as_bytes(), format!("value {i:017}").as_bytes())
                .unwrap();
            if (i + 1) % every == 0 {
                s.flush().unwrap();
            }
        }
        s.flush().unwrap();
        // The scan's memory is measured, of what a crash now leaves: a clean close would
        // write an index and fold the delta entries into whole images.
        std::fs::create_dir_all(&crash).unwrap();
        let page_file = accelkv_durable::PAGE_FILE;
        std::fs::copy(dir.join(page_file), crash.join(page_file)).unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let dir = crash;
    let item_bytes = u64::from(N) * (16 + 24);
    let before = CURRENT.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let s = Store::open_with(&dir, opts).unwrap();
    let peak = PEAK.load(Ordering::SeqCst) - before;
    let after = CURRENT.load(Ordering::SeqCst) - before;
    let rep = s.recovery().clone();
    assert_eq!(rep.items, u64::from(N), "{rep}");
    assert!(rep.leaf_pages > 1000, "{rep}");
    let transient = (peak - after) as u64;
    eprintln!("peak {peak}, kept {after}, transient {transient}, items {item_bytes}: {rep}");
    drop(s);
    std::fs::remove_dir_all(&dir).unwrap();
    (transient, item_bytes, rep)
}

#[test]
fn reopening_holds_the_tree_and_one_page_not_the_page_file() {
    // Beyond what the open keeps (the tree, the page file's live map): metadata of the
    // live pages, one slab buffer, one page; not the older page versions, however many
    // there are. Holding the live pages' bytes would take more than the items' bytes.
    for every in [2_000, 20_000] {
        let (transient, items, rep) = reopen(Deltas::OFF, every);
        assert!(
            rep.versions_discarded >= rep.live_pages,
            "the file should hold at least as many older versions as live pages: {rep}"
        );
        assert!(
            transient < items / 4,
            "recovery held {transient} bytes beyond what it kept (items: {items} bytes): {rep}"
        );
    }
    // With delta pages it also holds their entries, the newest per key (delta space is at
    // most a quarter of the leaf pages'): about four times their encoded bytes, never the
    // leaf pages'.
    let (transient, items, rep) = reopen(Deltas::default(), 2_000);
    assert!(rep.delta_keys > 0, "{rep}");
    assert!(
        transient < items / 4 + 4 * rep.delta_bytes,
        "recovery held {transient} bytes beyond what it kept (items: {items} bytes, delta pages {} bytes): {rep}",
        rep.delta_bytes
    );
}

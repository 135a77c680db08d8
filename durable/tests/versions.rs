//! Versions after a crash: a durable store leases versions with clock pages (format 5), so
//! versions continue above every version ever issued, whatever a crash lost. The crash
//! tests (crash.rs) check that after every crash point; these check the lease itself: it
//! is renewed as versions are used, the read version never passes it, one clock page is
//! live at a time, and a device failing during a renewal holds writes back until it heals.

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::format::{decode_page, Page, BLOCK};
use accelkv_durable::{Options, Store, SyncPolicy, MIN_LEASE};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

fn options(policy: SyncPolicy) -> Options {
    Options {
        version_lease: MIN_LEASE,
        ..common::test_options(policy)
    }
}

/// The leases recorded by the intact clock pages of a page file image.
fn clock_pages(img: &[u8]) -> Vec<u64> {
    let mut found = Vec::new();
    let mut off = BLOCK as usize;
    // Under `none` a slab is a hole after its descriptor: the image may end mid-slot. Every
    // slot starts at a multiple of 128 bytes (format.rs `SMALL_SLOTS`).
    while off < img.len() {
        let slot = &img[off..(off + BLOCK as usize).min(img.len())];
        if let Ok(Page::Clock(lease)) = decode_page(slot, off as u64) {
            found.push(lease);
        }
        off += 128;
    }
    found
}

/// Writes `batches` atomic batches of 16,384 updates of 500 keys (16,385 versions each).
fn write_batches(store: &Store, batches: usize) -> u64 {
    let keys: Vec<Vec<u8>> = (0..500).map(|i| format!("k{i:04}").into_bytes()).collect();
    let mut last = 0;
    for b in 0..batches {
        let v = format!("round {b}");
        let items: Vec<(&[u8], Option<&[u8]>)> = (0..accelkv_tree::MAX_BATCH)
            .map(|i| (keys[i % keys.len()].as_slice(), Some(v.as_bytes())))
            .collect();
        last = store.tree().write_batch(&items).unwrap().version;
    }
    last
}

#[test]
fn the_lease_is_renewed_as_versions_are_used_and_never_passed() {
    let dev = Arc::new(FaultStorage::new());
    let store = Arc::new(Store::open_storage(dev.clone(), options(SyncPolicy::None)).unwrap());
    assert_eq!(
        store.stats().leases,
        1,
        "a lease is taken when the store opens"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut looks = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let (read, lease) = (store.tree().read_version(), store.tree().version_lease());
                assert!(read <= lease, "read version {read} past the lease {lease}");
                looks += 1;
            }
            looks
        })
    };
    let last = write_batches(&store, 40);
    stop.store(true, Ordering::SeqCst);
    assert!(watcher.join().unwrap() > 0);
    store.flush().unwrap();
    let stats = store.stats();
    assert!(last > 2 * MIN_LEASE, "{last}");
    // One at open, then one per 131,072 versions or a little more (the committer looks
    // once per commit, a batch takes 16,385).
    assert!(
        stats.leases >= 3,
        "{} leases for {last} versions",
        stats.leases
    );
    assert!(stats.version_lease >= last, "{stats:?}");
    assert_eq!(stats.failed, None);
    // Older clock pages' slots are free (their bytes stay until reused): the newest lease
    // is the largest on the device.
    let leases = clock_pages(&dev.written_image());
    assert!(
        leases.iter().max() >= Some(&stats.version_lease),
        "{leases:?}"
    );
    assert!(leases.len() as u64 <= stats.leases + 1);
    drop(store);
    let reopened = Store::open_storage(
        Arc::new(FaultStorage::from_image(dev.durable_image())),
        options(SyncPolicy::None),
    )
    .unwrap();
    // (The committer may have renewed once more before the close.)
    let found = reopened.recovery().lease;
    assert!(found >= stats.version_lease, "{}", reopened.recovery());
    let w = reopened.put(b"after", b"reopen").unwrap();
    assert!(w.version > found, "{}", w.version);
}

/// Versions a reader saw under `none` before a process crash lost their writes are not
/// issued again: the next write after recovery is above all of them.
#[test]
fn versions_seen_before_a_relaxed_crash_are_not_issued_again() {
    let dev = Arc::new(FaultStorage::new());
    let store = Store::open_storage(dev.clone(), options(SyncPolicy::None)).unwrap();
    let mut seen = 0;
    for i in 0..2000u32 {
        seen = store.put(format!("k{i}").as_bytes(), b"v").unwrap().version;
    }
    // What a power loss now leaves: the clock page was synced, the leaf pages were not.
    let img = dev.durable_image();
    drop(store);
    let r = Store::open_storage(
        Arc::new(FaultStorage::from_image(img)),
        options(SyncPolicy::None),
    )
    .unwrap();
    assert!(
        r.recovery().version < seen,
        "the crash lost writes (else this proves nothing): {}",
        r.recovery()
    );
    let w = r.put(b"next", b"write").unwrap();
    assert!(
        w.version > seen,
        "{} <= {seen}: {}",
        w.version,
        r.recovery()
    );
}

/// A device that fails while the lease must be renewed: the store reports the failure,
/// a write past the lease is applied but not visible (the read version stops at the
/// lease), and it becomes visible once the device heals and the lease is renewed.
#[test]
fn a_failing_device_holds_writes_at_the_lease_until_it_heals() {
    let dev = Arc::new(FaultStorage::new());
    let store = Arc::new(Store::open_storage(dev.clone(), options(SyncPolicy::None)).unwrap());
    let lease = store.stats().version_lease;
    dev.set_error(Some(libc::EIO));
    // Single writes straight to the tree (the durable store's own `put` refuses writes
    // while the device fails): each waits until visible.
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            loop {
                let w = store.tree().put(format!("k{}", i % 1000).as_bytes(), b"v");
                let v = w.unwrap().version;
                if v > lease {
                    return v;
                }
                i += 1;
            }
        })
    };
    let mut waited = 0;
    while store.tree().last_write_version() <= lease && waited < 60_000 {
        std::thread::sleep(Duration::from_millis(1));
        waited += 1;
    }
    std::thread::sleep(Duration::from_millis(100));
    assert!(store.stats().failed.is_some(), "{:?}", store.stats());
    assert_eq!(store.tree().last_write_version(), lease + 1);
    assert_eq!(
        store.tree().read_version(),
        lease,
        "a version the device never leased became visible"
    );
    assert!(!writer.is_finished());
    assert_eq!(store.stats().version_lease, lease);
    dev.set_error(None);
    assert_eq!(writer.join().unwrap(), lease + 1);
    assert!(store.stats().version_lease > lease, "{:?}", store.stats());
    assert_eq!(store.tree().read_version(), lease + 1);
}

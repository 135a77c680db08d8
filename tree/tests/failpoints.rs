//! Races held open at a failpoint (feature `failpoints`: `cargo test -p accelkv-tree
//! --features failpoints --test failpoints`). One test per race; they share the global hook,
//! so each takes `SERIAL` first.
//!
//! `a_write_straddling_clear_is_not_counted_twice`: a fast-path write used to change the
//! item count after it unlocked its leaf. A `Store::clear` (FLUSHALL) that ran between the
//! unlock and the count zeroed the count without that item, removed the item with the old
//! tree, and then the late count added it back: DBSIZE was one more than the keys a scan
//! finds (`clear_is_linearizable_with_writes_and_snapshots` in tests/clear.rs saw it about
//! one run in thirty). The fix counts under the leaf lock, which the clear takes.

use accelkv_tree::{failpoint, Config, Store};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Holds the thread named `who` at `point` once: tells `reached`, then waits for `go`.
fn hold_at(point: &'static str, who: &'static str) -> (mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (reached_tx, reached) = mpsc::channel();
    let (go, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(Some(go_rx));
    let reached_tx = Mutex::new(reached_tx);
    failpoint::set(move |p| {
        if p != point || std::thread::current().name() != Some(who) {
            return;
        }
        let Some(rx) = go_rx.lock().unwrap().take() else {
            return;
        };
        reached_tx.lock().unwrap().send(()).unwrap();
        rx.recv().unwrap();
    });
    (reached, go)
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_write_straddling_clear_is_not_counted_twice() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let s = Arc::new(Store::new(Config::default()).unwrap());
    for i in 0..1_000u32 {
        s.put(format!("k{i:04}").as_bytes(), b"v").unwrap();
    }
    let (reached, go) = hold_at(failpoint::WRITE_UNLOCKED, "straddler");
    let writer = {
        let s = s.clone();
        std::thread::Builder::new()
            .name("straddler".into())
            .spawn(move || s.put(b"k-straddle", b"v").unwrap().version)
            .unwrap()
    };
    // The write is appended and its leaf unlocked, its version not yet complete.
    reached.recv_timeout(Duration::from_secs(20)).unwrap();
    let clearer = {
        let s = s.clone();
        std::thread::spawn(move || s.clear().unwrap())
    };
    // The clear has locked every leaf and zeroed the count; it waits for its version to
    // become visible, which needs the held write's version completed first.
    wait_until("the clear zeroed the count", || s.is_empty());
    go.send(()).unwrap();
    let written = writer.join().unwrap();
    let (cleared, removed) = clearer.join().unwrap();
    failpoint::clear();
    assert!(
        written < cleared.version,
        "the write is older than the clear"
    );
    assert_eq!(
        removed, 1_001,
        "the clear removed the held write's item too"
    );
    assert_eq!(s.get(b"k-straddle").unwrap(), None);
    assert_eq!(s.scan(b"", None, usize::MAX).len(), 0);
    assert_eq!(
        s.len(),
        0,
        "the item count after a clear that removed every item"
    );
    s.put(b"after", b"v").unwrap();
    assert_eq!(s.len(), 1);
}

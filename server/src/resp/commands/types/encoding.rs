//! Redis's collection types on the ordered store: the byte format is
//! `accelkv_proto::collection` (docs/FORMAT.md, "Redis types"); this adds what the server
//! alone decides, the ids of new collections.

pub use accelkv_proto::collection::*;
use std::sync::atomic::{AtomicU64, Ordering};

static LAST_ID: AtomicU64 = AtomicU64::new(0);

/// A collection id no earlier collection of this process had, and (the clock moving
/// forward) none of an earlier process: microseconds since the epoch, bumped past the last.
pub fn fresh_id() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0);
    let mut last = LAST_ID.load(Ordering::Relaxed);
    loop {
        let id = now.max(last + 1);
        match LAST_ID.compare_exchange_weak(last, id, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return id,
            Err(seen) => last = seen,
        }
    }
}

/// A new, empty collection of `kind` under a fresh id.
pub fn new_meta(kind: Kind) -> Meta {
    Meta::empty(kind, fresh_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_only_grow() {
        let a = fresh_id();
        let b = fresh_id();
        assert!(b > a);
        assert_ne!(new_meta(Kind::Hash).id, new_meta(Kind::Hash).id);
    }
}

//! The active expiry sweep, as Redis's active expire cycle: an expired key is invisible at
//! once to every read (the store hides it), and this thread reclaims its memory. Ten times
//! a second it walks the next stretch of the keyspace in key order, `STEP` items at a time,
//! and removes the expired ones with `Store::purge_expired` (which checks again under the
//! leaf lock, so a key written meanwhile is left alone). Each tick walks for `SLICE` (about
//! a million items a second, 2% of a core), and on while a step finds more than a quarter
//! of what it examined expired, for at most `BUDGET`; a store without deadlines costs one
//! counter read per tick. Adapters may hang periodic work of their own on the same tick
//! ([`Tick`]).

use crate::core::shared::Shared;
use accelkv_tree::now_ms;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between ticks (Redis's `hz 10`).
const TICK: Duration = Duration::from_millis(100);
/// Items examined per step.
const STEP: usize = 2048;
/// Time every tick walks for.
const SLICE: Duration = Duration::from_millis(2);
/// Most time one tick spends (while steps keep finding many expired keys).
const BUDGET: Duration = Duration::from_millis(25);

/// Work an adapter asks to run on every tick (memcached's delayed `flush_all`).
pub type Tick = Box<dyn FnMut(&Shared) + Send>;

/// What an adapter asks to hear of each key the sweep removed (RESP's `expired`
/// keyspace event), the key as the store keeps it.
pub type Expired = Box<dyn FnMut(&Shared, &[u8]) + Send>;

/// Runs the sweep, and `ticks` before each of its steps, until `stop`; `heard` hears of
/// every key it removes.
pub fn run(sh: Arc<Shared>, stop: Arc<AtomicBool>, mut ticks: Vec<Tick>, mut heard: Expired) {
    let mut cursor: Vec<u8> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TICK);
        if sh.cron_paused() {
            continue;
        }
        for t in &mut ticks {
            t(&sh);
        }
        if sh.store().expiring_len() == 0 || !sh.active_expire() {
            cursor.clear();
            continue;
        }
        let start = Instant::now();
        loop {
            let now = now_ms();
            // An evicted leaf that cannot be read back ends this tick's sweep.
            let Ok((expired, next)) = sh.store().expired_keys(&cursor, STEP, now) else {
                break;
            };
            for k in &expired {
                if sh.store().purge_expired(k, now).unwrap_or(false) {
                    sh.count_expired(1);
                    heard(&sh, k);
                }
            }
            cursor = next.unwrap_or_default();
            let dense = expired.len() * 4 > STEP;
            let spent = start.elapsed();
            if cursor.is_empty() || spent > BUDGET || (!dense && spent > SLICE) {
                break;
            }
        }
    }
}

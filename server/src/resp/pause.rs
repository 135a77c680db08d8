//! CLIENT PAUSE and UNPAUSE, as Redis 7 has them: until a time, clients' commands wait
//! (`ALL`), or only those that write or would be replicated (`WRITE`; which ones is
//! `pause_rules.rs`). A paused command is parked as a blocking command is
//! (core/blocked.rs, on a key of its own, until the pause's end) and runs from the top
//! when woken: by UNPAUSE, or at the end, when the gate looks again (a longer pause given
//! meanwhile parks it again). Paused connections count as blocked clients, as in Redis; a
//! command that is refused (arity, syntax) is answered at once. Only RESP clients pause
//! (memcached and the binary protocol do not). Cost while no pause is set: one relaxed
//! load per command.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The key paused connections park on (in the collections' reserved range, which no
/// client's key reaches).
pub const PAUSE_KEY: &[u8] = b"\xFF\xFF\x00\x00pause";

/// The server's pause: its end (Unix milliseconds; 0: none) and whether it holds every
/// command.
#[derive(Default)]
pub struct Pause {
    end: AtomicU64,
    all: AtomicBool,
}

impl Pause {
    /// CLIENT PAUSE: until `end`, or a later end already set; `all` stays once set until
    /// the pause is over (the most restrictive pause wins, as in Redis).
    pub fn pause(&self, end: u64, all: bool) {
        let now = accelkv_tree::now_ms();
        let old = self.end.load(Ordering::Acquire);
        let live = old > now;
        self.all.store(
            all || (live && self.all.load(Ordering::Acquire)),
            Ordering::Release,
        );
        self.end
            .store(if live { old.max(end) } else { end }, Ordering::Release);
    }

    /// The pause's end (Unix milliseconds; 0: none).
    pub fn end(&self) -> u64 {
        self.end.load(Ordering::Acquire)
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        self.end.store(0, Ordering::Release);
        self.all.store(false, Ordering::Release);
    }

    /// The pause now, if one is set and not over: its end (Unix milliseconds) and whether
    /// it holds every command (`pause_rules.rs` decides which commands it holds).
    pub fn active(&self) -> Option<(u64, bool)> {
        let end = self.end.load(Ordering::Acquire);
        if end == 0 {
            return None;
        }
        if end <= accelkv_tree::now_ms() {
            // Over: the next command takes the cheap path again.
            let _ = self
                .end
                .compare_exchange(end, 0, Ordering::AcqRel, Ordering::Relaxed);
            return None;
        }
        Some((end, self.all.load(Ordering::Acquire)))
    }
}

#[cfg(test)]
mod tests {
    use super::Pause;
    use accelkv_tree::now_ms;
    use std::sync::atomic::Ordering;

    #[test]
    fn the_longer_end_and_the_stricter_mode_win() {
        let p = Pause::default();
        let now = now_ms();
        p.pause(now + 10_000, true);
        p.pause(now + 100, false);
        assert_eq!(p.end.load(Ordering::Relaxed), now + 10_000);
        assert!(
            p.all.load(Ordering::Relaxed),
            "ALL stays while its pause lasts"
        );
        p.unpause();
        p.pause(now + 100, false);
        assert!(!p.all.load(Ordering::Relaxed));
        assert_eq!(p.end.load(Ordering::Relaxed), now + 100);
        // A pause that is over does not hold its mode or end over the next one.
        p.unpause();
        p.pause(now.saturating_sub(1), true);
        p.pause(now + 50, false);
        assert!(!p.all.load(Ordering::Relaxed));
    }
}

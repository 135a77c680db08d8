//! CLIENT PAUSE and UNPAUSE, as Redis 7 has them: until a time, clients' commands wait
//! (`ALL`), or only those that write or would be replicated (`WRITE`: writes, EXEC of a
//! transaction holding one, EVAL, EVALSHA and FCALL, PUBLISH, SPUBLISH, PFCOUNT). A paused
//! command is parked as a blocking command is (core/blocked.rs, on a key of its own, until
//! the pause's end) and runs from the top when woken: by UNPAUSE, or at the end, when the
//! gate looks again (a longer pause given meanwhile parks it again). Paused connections
//! count as blocked clients, as in Redis; a command that is refused (arity, syntax) is
//! answered at once. Only RESP clients pause (memcached and the binary protocol do not).
//! Cost while no pause is set: one relaxed load per command.

use crate::resp::call::flag::WRITE;
use crate::resp::call::Spec;
use crate::resp::session::Session;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The key paused connections park on (in the collections' reserved range, which no
/// client's key reaches).
pub const PAUSE_KEY: &[u8] = b"\xFF\xFF\x00\x00pause";

/// The commands that do not write but would be replicated (Redis's `may-replicate`).
const MAY_REPLICATE: &[&str] = &["EVAL", "EVALSHA", "FCALL", "PUBLISH", "SPUBLISH", "PFCOUNT"];

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

    /// When the pause holding command `spec` of `s` ends (Unix milliseconds), if one does.
    pub fn holds(&self, s: &Session, spec: &Spec, args: &[&[u8]]) -> Option<u64> {
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
        (self.all.load(Ordering::Acquire) || replicates(s, spec, args)).then_some(end)
    }
}

/// Whether command `args` (`spec`) writes or would be replicated: EXEC when its
/// transaction holds such a command; a script unless its shebang says `no-writes`.
fn replicates(s: &Session, spec: &Spec, args: &[&[u8]]) -> bool {
    let one = |spec: &Spec, args: &[&[u8]]| {
        if spec.has(WRITE) {
            return true;
        }
        match spec.name {
            "EVAL" | "EVALSHA" => !no_writes(s, spec, args),
            "FCALL" => !args
                .get(1)
                .is_some_and(|f| s.global.scripts.functions.no_writes(f)),
            n => MAY_REPLICATE.contains(&n),
        }
    };
    if spec.name == "EXEC" {
        return s.tx.queued.iter().flatten().any(|c| {
            let a: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            a.first()
                .and_then(|n| crate::resp::table::find(n))
                .is_some_and(|sp| one(sp, &a))
        });
    }
    one(spec, args)
}

/// Whether the script EVAL or EVALSHA runs declares `no-writes` in its shebang.
fn no_writes(s: &Session, spec: &Spec, args: &[&[u8]]) -> bool {
    let Some(arg) = args.get(1) else {
        return false;
    };
    let body = match spec.name {
        "EVAL" => Some(std::sync::Arc::new(arg.to_vec())),
        _ => {
            let sha = String::from_utf8_lossy(arg).to_ascii_lowercase();
            let bodies = s.global.scripts.bodies.lock();
            bodies.ok().and_then(|b| b.get(&sha).cloned())
        }
    };
    let flags = body.and_then(|b| crate::resp::commands::script::shebang(&b).ok().flatten());
    flags.is_some_and(|(f, _)| f.iter().any(|g| g == "no-writes"))
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

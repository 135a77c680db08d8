//! `client-output-buffer-limit`, Redis's three classes of connection (normal, replica,
//! pubsub), each with a hard limit, a soft limit and the seconds a connection may stay past
//! the soft one. A connection past its class's hard limit, or past the soft one for that
//! long, is closed without more replies, as Redis closes it. A connection's class is pubsub
//! while it holds a subscription, normal otherwise (accelkv has no Redis replicas: the
//! replica class is kept for CONFIG GET and SET only). Its output is what its loop has not
//! written yet plus the pub/sub messages queued for it; the loop checks once per turn
//! (`adapter.rs`), and a publisher checks a subscriber's queue against the pubsub hard
//! limit as it queues (`pubsub.rs`).

use crate::config::size::Size;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The pubsub class's hard limit by default (Redis's): a subscriber's queue limit.
pub const PUBSUB_HARD: usize = 32 << 20;

/// A class of connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    Normal = 0,
    Replica = 1,
    Pubsub = 2,
}

/// One class's limits (bytes; 0 is none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limit {
    pub hard: u64,
    pub soft: u64,
    pub soft_secs: u64,
}

impl Limit {
    /// Whether a connection holding `bytes` of output must be closed now; `since` is when
    /// it went past the soft limit (kept by the connection, cleared when it is back under).
    pub fn exceeded(&self, bytes: u64, since: &mut Option<Instant>, now: Instant) -> bool {
        if self.hard > 0 && bytes > self.hard {
            return true;
        }
        if self.soft == 0 || bytes <= self.soft {
            *since = None;
            return false;
        }
        let start = *since.get_or_insert(now);
        now.saturating_duration_since(start) >= Duration::from_secs(self.soft_secs)
    }
}

/// The three classes' limits, changed by CONFIG SET at run time.
pub struct OutputLimits {
    classes: [[AtomicU64; 3]; 3],
}

impl Default for OutputLimits {
    /// Redis's defaults: `normal 0 0 0 slave 256mb 64mb 60 pubsub 32mb 8mb 60`.
    fn default() -> Self {
        let class = |h: u64, s: u64, secs: u64| [h, s, secs].map(AtomicU64::new);
        OutputLimits {
            classes: [
                class(0, 0, 0),
                class(256 << 20, 64 << 20, 60),
                class(PUBSUB_HARD as u64, 8 << 20, 60),
            ],
        }
    }
}

/// The classes with the names CONFIG GET gives them, in its order.
const CLASSES: [(Class, &str); 3] = [
    (Class::Normal, "normal"),
    (Class::Replica, "slave"),
    (Class::Pubsub, "pubsub"),
];

impl OutputLimits {
    pub fn get(&self, c: Class) -> Limit {
        let [h, s, secs] = &self.classes[c as usize];
        Limit {
            hard: h.load(Ordering::Relaxed),
            soft: s.load(Ordering::Relaxed),
            soft_secs: secs.load(Ordering::Relaxed),
        }
    }

    /// CONFIG GET's value: `normal 0 0 0 slave 268435456 67108864 60 pubsub …`.
    pub fn text(&self) -> String {
        let parts: Vec<String> = CLASSES
            .iter()
            .map(|&(class, name)| {
                let l = self.get(class);
                format!("{name} {} {} {}", l.hard, l.soft, l.soft_secs)
            })
            .collect();
        parts.join(" ")
    }

    /// CONFIG SET's value: one or more `class hard soft seconds`, all read before any is
    /// set; returns the classes set, in order, or Redis's reason for refusing.
    pub fn set(&self, value: &[u8]) -> Result<Vec<(Class, Limit)>, &'static str> {
        let text = std::str::from_utf8(value).map_err(|_| WRONG_ARGS)?;
        let words: Vec<&str> = text.split_ascii_whitespace().collect();
        if words.is_empty() || !words.len().is_multiple_of(4) {
            return Err(WRONG_ARGS);
        }
        let mut read = Vec::new();
        for w in words.chunks(4) {
            let class = match w[0].to_ascii_lowercase().as_str() {
                "normal" => Class::Normal,
                "slave" | "replica" => Class::Replica,
                "pubsub" => Class::Pubsub,
                _ => return Err("Invalid client class specified in buffer limit configuration."),
            };
            let bytes = |t: &str| Size::parse_bytes(t.as_bytes()).map(|s| s.bytes() as u64);
            let (Some(hard), Some(soft), Ok(soft_secs)) = (bytes(w[1]), bytes(w[2]), w[3].parse())
            else {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
                );
            };
            read.push((
                class,
                Limit {
                    hard,
                    soft,
                    soft_secs,
                },
            ));
        }
        for (class, l) in &read {
            let [h, s, secs] = &self.classes[*class as usize];
            h.store(l.hard, Ordering::Relaxed);
            s.store(l.soft, Ordering::Relaxed);
            secs.store(l.soft_secs, Ordering::Relaxed);
        }
        Ok(read)
    }
}

const WRONG_ARGS: &str = "Wrong number of arguments in buffer limit configuration.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_defaults_read_back_and_set() {
        let o = OutputLimits::default();
        assert_eq!(
            o.text(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        o.set(b"normal 3mb 1mb 10").unwrap();
        assert_eq!(
            o.get(Class::Normal),
            Limit {
                hard: 3 << 20,
                soft: 1 << 20,
                soft_secs: 10
            }
        );
        assert!(o.set(b"normal 1 2").is_err());
        assert!(o.set(b"nobody 1 2 3").is_err());
        assert!(o.set(b"pubsub 1 2 x").is_err());
        // A refused value changes nothing, not even its classes that read well.
        assert!(o.set(b"pubsub 1 2 3 normal x 1 1").is_err());
        assert_eq!(o.get(Class::Pubsub).hard, 32 << 20);
    }

    #[test]
    fn hard_closes_at_once_and_soft_after_its_seconds() {
        let l = Limit {
            hard: 100,
            soft: 50,
            soft_secs: 2,
        };
        let t0 = Instant::now();
        let mut since = None;
        assert!(!l.exceeded(40, &mut since, t0));
        assert!(
            !l.exceeded(60, &mut since, t0),
            "past soft: the clock starts"
        );
        assert!(!l.exceeded(60, &mut since, t0 + Duration::from_secs(1)));
        assert!(l.exceeded(60, &mut since, t0 + Duration::from_secs(2)));
        let mut since = None;
        assert!(!l.exceeded(60, &mut since, t0));
        assert!(!l.exceeded(10, &mut since, t0 + Duration::from_secs(1)));
        assert_eq!(since, None, "back under: the clock stops");
        assert!(!l.exceeded(60, &mut since, t0 + Duration::from_secs(2)));
        assert!(l.exceeded(101, &mut None, t0), "past hard: at once");
        assert!(
            !Limit::default().exceeded(u64::MAX, &mut None, t0),
            "0 is no limit"
        );
    }
}

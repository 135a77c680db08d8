//! INFO's errorstats section and `total_error_replies`: every error reply counted under its
//! prefix (the text before the first space within its first 32 bytes, `ERR` when there is
//! none), as Redis's `afterErrorReply` counts them. Errors are off the hot path: one lock
//! per error reply. At most [`MAX_PREFIXES`] prefixes are kept, as Redis keeps 128; an error
//! of a new prefix past them counts in the total only.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Redis's `ERROR_STATS_NUMBER`.
const MAX_PREFIXES: usize = 128;

/// The error replies counted since the start or the last CONFIG RESETSTAT.
#[derive(Default)]
pub struct ErrorStats {
    by_prefix: Mutex<BTreeMap<Vec<u8>, u64>>,
    total: AtomicU64,
}

/// The prefix an error reply (`-…\r\n`) is counted under.
fn prefix(reply: &[u8]) -> &[u8] {
    let head = &reply[1.min(reply.len())..reply.len().min(32)];
    match head.iter().position(|&b| b == b' ') {
        Some(0) | None => b"ERR",
        Some(n) => &head[..n],
    }
}

impl ErrorStats {
    /// Counts the error reply `reply` (it starts with `-`).
    pub fn count(&self, reply: &[u8]) {
        self.total.fetch_add(1, Ordering::Relaxed);
        let p = prefix(reply);
        let mut m = self.by_prefix.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(p) {
            *n += 1;
        } else if m.len() < MAX_PREFIXES {
            m.insert(p.to_vec(), 1);
        }
    }

    /// Error replies in all (INFO stats' `total_error_replies`).
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// INFO's `# Errorstats` section.
    pub fn section(&self) -> String {
        let mut t = String::from("# Errorstats\r\n");
        let m = self.by_prefix.lock().unwrap_or_else(|e| e.into_inner());
        for (p, n) in m.iter() {
            t.push_str(&format!(
                "errorstat_{}:count={n}\r\n",
                String::from_utf8_lossy(p)
            ));
        }
        t
    }

    /// Forgets every count (CONFIG RESETSTAT).
    pub fn reset(&self) {
        self.by_prefix
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.total.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_count_under_their_prefix() {
        let e = ErrorStats::default();
        for r in [
            &b"-ERR unknown command\r\n"[..],
            b"-NOGROUP No such key\r\n",
            b"-ERR syntax error\r\n",
            b"-oddly\r\n",
            b"- leading space\r\n",
            b"-AVERYLONGPREFIXTHATGOESPASTTHIRTYTWOBYTES x\r\n",
        ] {
            e.count(r);
        }
        assert_eq!(e.total(), 6);
        assert_eq!(
            e.section(),
            "# Errorstats\r\nerrorstat_ERR:count=5\r\nerrorstat_NOGROUP:count=1\r\n"
        );
        for i in 0..200 {
            e.count(format!("-E{i} x\r\n").as_bytes());
        }
        assert_eq!(e.section().lines().count(), 1 + MAX_PREFIXES);
        e.reset();
        assert_eq!((e.total(), e.section().lines().count()), (0, 1));
    }
}

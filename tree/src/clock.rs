//! The clock expiry deadlines are measured against: wall-clock milliseconds since the Unix
//! epoch, as Redis's EXPIREAT/PXAT and TTL use. A reader takes its clock reading after its
//! read version, so a reader that sees a write also sees the time that write saw.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (at least 1: 0 means "expire nothing" to readers).
#[inline]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64)
        .max(1)
}

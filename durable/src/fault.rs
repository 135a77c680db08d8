//! A fault-injecting [`Storage`] for crash tests: it keeps apart the bytes a crash would
//! keep (synced) and the bytes only written, stops at a chosen write or sync (a failpoint),
//! builds the device image a crash at that moment could leave (each unsynced write kept,
//! lost or torn at sector granularity) or that a process crash leaves (every write kept:
//! the page cache survives), injects disk errors (full disk, I/O error) and slow syncs.
//!
//! Thread safety: one mutex around the state; it is a test device, not a fast one.

use crate::io::Storage;
use std::io;
use std::sync::Mutex;

/// Sector size for torn writes: a torn write keeps some of its sectors and loses others.
pub const SECTOR: usize = 512;

#[derive(Default)]
struct State {
    durable: Vec<u8>,
    written: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    error: Option<i32>,
    read_error: Option<i32>,
    sync_delay: std::time::Duration,
    read_delay: std::time::Duration,
    reads: u64,
    bytes_written: u64,
    syncs: u64,
}

/// In-memory device with failpoints; see the module docs.
#[derive(Default)]
pub struct FaultStorage {
    s: Mutex<State>,
}

impl FaultStorage {
    /// An empty device.
    pub fn new() -> FaultStorage {
        FaultStorage::default()
    }

    /// A device whose durable and written bytes are `image` (a crash image, to recover from).
    pub fn from_image(image: Vec<u8>) -> FaultStorage {
        FaultStorage {
            s: Mutex::new(State {
                written: image.clone(),
                durable: image,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.s.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Write and sync calls so far (failpoints count these).
    pub fn ops(&self) -> u64 {
        self.state().ops
    }

    /// The device crashes at its `n`-th write or sync call from its creation (0-based):
    /// that call and every later one fail, and nothing more reaches the device.
    pub fn crash_at(&self, n: u64) {
        self.state().crash_at = Some(n);
    }

    /// Whether the failpoint has fired.
    pub fn crashed(&self) -> bool {
        self.state().crashed
    }

    /// Every write and sync fails with OS error `errno` (e.g. `libc::ENOSPC`, `libc::EIO`)
    /// until called with `None`.
    pub fn set_error(&self, errno: Option<i32>) {
        self.state().error = errno;
    }

    /// Every read fails with OS error `errno` until called with `None` (a bad sector under
    /// a leaf the mirror cache evicted).
    pub fn set_read_error(&self, errno: Option<i32>) {
        self.state().read_error = errno;
    }

    /// Every later sync takes `d` longer (a slow device), without holding up reads and
    /// writes meanwhile.
    pub fn set_sync_delay(&self, d: std::time::Duration) {
        self.state().sync_delay = d;
    }

    /// Makes every read sleep for a pseudo-random time up to `max` first (a slow device:
    /// widens the window between a reader taking a page's name and reading it).
    pub fn set_read_delay(&self, max: std::time::Duration) {
        self.state().read_delay = max;
    }

    /// Bytes passed to `write_at` so far.
    pub fn bytes_written(&self) -> u64 {
        self.state().bytes_written
    }

    /// Sync calls so far.
    pub fn syncs(&self) -> u64 {
        self.state().syncs
    }

    /// The synced bytes only: what a crash that loses every unsynced write leaves.
    pub fn durable_image(&self) -> Vec<u8> {
        self.state().durable.clone()
    }

    /// Every byte written, synced or not: what a process crash (`kill -9`) leaves, the
    /// kernel's page cache surviving it.
    pub fn written_image(&self) -> Vec<u8> {
        self.state().written.clone()
    }

    /// A device image a crash now could leave: the synced bytes, then each unsynced write,
    /// in order, kept whole, lost, or torn (a random subset of its sectors kept), chosen by
    /// a generator seeded with `seed`.
    pub fn crash_image(&self, seed: u64) -> Vec<u8> {
        let s = self.state();
        let mut rng = SplitMix(seed);
        let mut img = s.durable.clone();
        for (off, data) in &s.pending {
            let off = *off as usize;
            match rng.next() % 3 {
                0 => continue,
                1 => put(&mut img, off, data),
                _ => {
                    for (i, sector) in data.chunks(SECTOR).enumerate() {
                        if rng.next().is_multiple_of(2) {
                            put(&mut img, off + i * SECTOR, sector);
                        }
                    }
                }
            }
        }
        img
    }

    fn fail(s: &mut State) -> Option<io::Error> {
        if let Some(n) = s.crash_at {
            if s.ops >= n {
                s.crashed = true;
            }
        }
        s.ops += 1;
        if s.crashed {
            return Some(io::Error::other("fault storage: crashed at failpoint"));
        }
        s.error.map(io::Error::from_raw_os_error)
    }
}

fn put(img: &mut Vec<u8>, off: usize, data: &[u8]) {
    if img.len() < off + data.len() {
        img.resize(off + data.len(), 0);
    }
    img[off..off + data.len()].copy_from_slice(data);
}

impl Storage for FaultStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.state().written.len() as u64)
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut s = self.state();
        if !s.read_delay.is_zero() {
            s.reads += 1;
            let max = s.read_delay.as_nanos() as u64;
            let ns = SplitMix(s.reads).next() % (max + 1);
            drop(s);
            std::thread::sleep(std::time::Duration::from_nanos(ns));
            s = self.state();
        }
        if let Some(e) = s.read_error {
            return Err(io::Error::from_raw_os_error(e));
        }
        let off = off as usize;
        buf.fill(0);
        if off < s.written.len() {
            let n = buf.len().min(s.written.len() - off);
            buf[..n].copy_from_slice(&s.written[off..off + n]);
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut s = self.state();
        if let Some(e) = FaultStorage::fail(&mut s) {
            return Err(e);
        }
        s.bytes_written += buf.len() as u64;
        put(&mut s.written, off as usize, buf);
        s.pending.push((off, buf.to_vec()));
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let delay = self.state().sync_delay;
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let mut s = self.state();
        if let Some(e) = FaultStorage::fail(&mut s) {
            return Err(e);
        }
        s.syncs += 1;
        let pending = std::mem::take(&mut s.pending);
        for (off, data) in pending {
            put(&mut s.durable, off as usize, &data);
        }
        Ok(())
    }
}

/// SplitMix64: a small deterministic generator (no dependency for a test device).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsynced_writes_are_not_durable_and_failpoints_stop_the_device() {
        let f = FaultStorage::new();
        f.write_at(b"aaaa", 0).unwrap();
        f.sync().unwrap();
        f.write_at(b"bb", 1).unwrap();
        assert_eq!(f.durable_image(), b"aaaa");
        let mut b = [0u8; 4];
        f.read_at(&mut b, 0).unwrap();
        assert_eq!(&b, b"abba");
        f.crash_at(3);
        assert!(f.write_at(b"c", 0).is_err());
        assert!(f.crashed());
        assert!(f.sync().is_err());
        assert_eq!(f.durable_image(), b"aaaa");
        // Every crash image holds the synced bytes, plus some of the unsynced ones.
        for seed in 0..20 {
            let img = f.crash_image(seed);
            assert!(img == b"aaaa" || img == b"abba", "{img:?}");
        }
    }

    #[test]
    fn injected_errors_fail_writes_until_cleared() {
        let f = FaultStorage::new();
        f.set_error(Some(libc::ENOSPC));
        let e = f.write_at(b"x", 0).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        f.set_error(None);
        f.write_at(b"x", 0).unwrap();
    }
}

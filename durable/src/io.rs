//! The I/O boundary (leveldb's `Env`, redb's `StorageBackend`): everything the durability
//! layer does to a device goes through [`Storage`], so tests swap the file for the
//! fault-injecting backend in `fault.rs`. Nothing else in accelkv touches files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// A byte-addressed device: positioned reads and writes, and a barrier that makes every
/// completed write durable.
///
/// Thread safety: implementations are shared between the committer and readers of the
/// recovery scan; calls may come from any thread.
pub trait Storage: Send + Sync {
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Whether the device holds no bytes.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
    /// Fills `buf` from `off`; bytes past the end read as zeros.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()>;
    /// Writes `buf` at `off`, growing the device as needed. Not durable until [`Storage::sync`].
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()>;
    /// Makes every completed write durable (`fdatasync`).
    fn sync(&self) -> io::Result<()>;
    /// Reads from now on come at random offsets (a leaf cache's misses): no read-ahead, so
    /// a miss does not fill the page cache with pages nobody asked for. A hint; the default
    /// does nothing.
    fn advise_random(&self) {}
    /// The page cache may drop `[off, off + len)` (`len` 0: to the end), which is clean
    /// (synced, or only read): the next small write there then dirties only the pages it
    /// covers, not a large folio that a big write or read-ahead left in the cache (whose
    /// whole span writeback would send to the device again). A hint; the default does
    /// nothing.
    fn drop_cached(&self, _off: u64, _len: u64) {}
}

/// [`Storage`] on a file.
pub struct FileStorage {
    file: File,
}

impl FileStorage {
    /// Opens (creating if needed) the file at `path` for reading and writing.
    pub fn open(path: &Path) -> io::Result<FileStorage> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Ok(FileStorage { file })
    }
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => {
                    buf[done..].fill(0);
                    return Ok(());
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.file.write_all_at(buf, off)
    }

    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    #[cfg(target_os = "linux")]
    fn advise_random(&self) {
        use std::os::unix::io::AsRawFd;
        // SAFETY: a valid open descriptor; the call only sets a read-ahead policy (its
        // result is a hint's: ignored).
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }

    #[cfg(target_os = "linux")]
    fn drop_cached(&self, off: u64, len: u64) {
        use std::os::unix::io::AsRawFd;
        let (off, len) = (off as libc::off_t, len as libc::off_t);
        // SAFETY: a valid open descriptor; the call only drops clean cached pages (its
        // result is a hint's: ignored).
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), off, len, libc::POSIX_FADV_DONTNEED) };
    }
}

/// Makes a directory entry durable (after creating a file in it).
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_reads_past_the_end_as_zeros() {
        let dir = std::env::temp_dir().join(format!("accelkv-io-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = FileStorage::open(&dir.join("f")).unwrap();
        s.write_at(b"hello", 10).unwrap();
        s.sync().unwrap();
        assert_eq!(s.len().unwrap(), 15);
        let mut b = [9u8; 8];
        s.read_at(&mut b, 12).unwrap();
        assert_eq!(&b, b"llo\0\0\0\0\0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

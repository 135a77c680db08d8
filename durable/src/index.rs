//! The index of the page file (issue 57, item 3): what recovery's scan would compute — the
//! slabs and their classes, the live leaf pages with their fences, commits and item counts,
//! the live delta pages, the clock page and the version lease — written at a clean close
//! (RocksDB's manifest, LMDB's and redb's instant open), so that an open reads the index
//! and the pages it names, not the whole file; with a leaf cache the leaves stay in the
//! page file and load on first touch.
//!
//! It lives in its own file beside the page file (`index`), and counts only while the page
//! file's **close record** (at [`CLOSE_AT`], a sector of the superblock's block that
//! nothing else uses) names it: its commit number, length and CRC-32C. The close sequence
//! is: write `index.tmp`, sync it, rename it over `index`, sync the directory, write the
//! close record, sync the page file. An open that finds a record naming the index it reads
//! uses it, and clears the record (and syncs) before any commit writes a page; anything
//! else (no record, an index that does not match it, a crash anywhere in the sequence,
//! an index left from an earlier close) recovers by the scan, as without an index. So a
//! stale index is never used: once a store has written a page after opening, its record
//! is gone. Format 7 marks files that may carry a record, so an older build, which would
//! write pages without clearing it, refuses them.
//!
//! Pure code: encode, decode (untrusted bytes: `fuzz/fuzz_targets/index_decode.rs`).

use crate::format::{CommitTag, FormatError};

/// Name of the index file inside a data directory.
pub const INDEX_FILE: &str = "index";
/// Where the close record sits in the page file (the superblock's block, second sector).
pub const CLOSE_AT: u64 = 512;
/// Bytes the close record takes (one sector: written atomically).
pub const CLOSE_LEN: usize = 512;
const CLOSE_MAGIC: [u8; 8] = *b"ACKVCLOS";
const MAGIC: [u8; 8] = *b"ACKVINDX";
const VERSION: u32 = 1;

/// A live leaf page, as recovery's first pass finds it (pass1.rs calls it `Leaf`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IndexedLeaf {
    pub off: u64,
    pub len: u32,
    pub version: u64,
    pub commit: CommitTag,
    /// Its items, and how many of them have a deadline.
    pub items: u32,
    pub expiring: u32,
    /// Whether any of its items' values is in an extension page.
    pub has_ext: bool,
    pub low: Option<Vec<u8>>,
    pub high: Option<Vec<u8>>,
}

/// A live delta page, as recovery's first pass finds it (pass1.rs calls it `DeltaFound`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexedDelta {
    pub off: u64,
    pub len: u32,
    pub version: u64,
    pub commit: CommitTag,
    pub has_ext: bool,
}

/// The index (see the module's comment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    /// The newest commit's number.
    pub seq: u64,
    /// The durable version at the close.
    pub version: u64,
    /// The version lease, and the clock page holding it.
    pub lease: u64,
    pub clock: Option<u64>,
    /// The page file's slab size, and its slabs: (index, class).
    pub slab_size: u64,
    pub slabs: Vec<(u64, u8)>,
    pub leaves: Vec<IndexedLeaf>,
    pub deltas: Vec<IndexedDelta>,
}

/// The close record naming an index: its commit number, length and CRC-32C.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Close {
    pub seq: u64,
    pub len: u64,
    pub crc: u32,
}

/// The close record's sector.
pub fn encode_close(c: &Close) -> Vec<u8> {
    let mut b = vec![0u8; CLOSE_LEN];
    b[0..8].copy_from_slice(&CLOSE_MAGIC);
    b[8..16].copy_from_slice(&c.seq.to_le_bytes());
    b[16..24].copy_from_slice(&c.len.to_le_bytes());
    b[24..28].copy_from_slice(&c.crc.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..28]);
    b[28..32].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The close record in `b` (the sector at [`CLOSE_AT`]), if there is an intact one.
pub fn decode_close(b: &[u8]) -> Option<Close> {
    let b = b.get(0..32)?;
    if b[0..8] != CLOSE_MAGIC || crc32c::crc32c(&b[0..28]) != u32_at(b, 28) {
        return None;
    }
    Some(Close {
        seq: u64_at(b, 8),
        len: u64_at(b, 16),
        crc: u32_at(b, 24),
    })
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

fn put_key(out: &mut Vec<u8>, k: &Option<Vec<u8>>) {
    match k {
        None => out.push(0),
        Some(k) => {
            out.push(1);
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k);
        }
    }
}

fn put_commit(out: &mut Vec<u8>, c: &CommitTag) {
    out.extend_from_slice(&c.seq.to_le_bytes());
    out.extend_from_slice(&c.pages.to_le_bytes());
}

/// Encodes the index, its CRC-32C last.
pub fn encode(ix: &Index) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + ix.slabs.len() * 9 + ix.leaves.len() * 96);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    for v in [ix.seq, ix.version, ix.lease, ix.clock.unwrap_or(u64::MAX)] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&ix.slab_size.to_le_bytes());
    out.extend_from_slice(&(ix.slabs.len() as u64).to_le_bytes());
    for (i, c) in &ix.slabs {
        out.extend_from_slice(&i.to_le_bytes());
        out.push(*c);
    }
    out.extend_from_slice(&(ix.leaves.len() as u64).to_le_bytes());
    for l in &ix.leaves {
        out.extend_from_slice(&l.off.to_le_bytes());
        out.extend_from_slice(&l.len.to_le_bytes());
        out.extend_from_slice(&l.version.to_le_bytes());
        put_commit(&mut out, &l.commit);
        out.extend_from_slice(&l.items.to_le_bytes());
        out.extend_from_slice(&l.expiring.to_le_bytes());
        out.push(u8::from(l.has_ext));
        put_key(&mut out, &l.low);
        put_key(&mut out, &l.high);
    }
    out.extend_from_slice(&(ix.deltas.len() as u64).to_le_bytes());
    for d in &ix.deltas {
        out.extend_from_slice(&d.off.to_le_bytes());
        out.extend_from_slice(&d.len.to_le_bytes());
        out.extend_from_slice(&d.version.to_le_bytes());
        put_commit(&mut out, &d.commit);
        out.push(u8::from(d.has_ext));
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A cursor over untrusted bytes.
struct Cur<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self.at.checked_add(n).ok_or(FormatError::Truncated)?;
        let s = self.b.get(self.at..end).ok_or(FormatError::Truncated)?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32_at(self.take(4)?, 0))
    }
    fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64_at(self.take(8)?, 0))
    }
    fn flag(&mut self) -> Result<bool, FormatError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(FormatError::Malformed("index flag")),
        }
    }
    fn key(&mut self) -> Result<Option<Vec<u8>>, FormatError> {
        if !self.flag()? {
            return Ok(None);
        }
        let n = self.u32()? as usize;
        Ok(Some(self.take(n)?.to_vec()))
    }
    fn commit(&mut self) -> Result<CommitTag, FormatError> {
        Ok(CommitTag {
            seq: self.u64()?,
            pages: self.u32()?,
        })
    }
    /// A count of entries of at least `each` bytes that the rest can hold.
    fn count(&mut self, each: usize) -> Result<usize, FormatError> {
        let n = self.u64()?;
        if n > (self.b.len() - self.at) as u64 / each as u64 {
            return Err(FormatError::Truncated);
        }
        Ok(n as usize)
    }
}

/// Decodes an index (untrusted bytes: an error, never a panic).
pub fn decode(b: &[u8]) -> Result<Index, FormatError> {
    if b.len() < 12 + 4 {
        return Err(FormatError::Truncated);
    }
    let (body, crc) = b.split_at(b.len() - 4);
    if body[0..8] != MAGIC {
        return Err(FormatError::BadMagic);
    }
    if crc32c::crc32c(body) != u32_at(crc, 0) {
        return Err(FormatError::BadChecksum);
    }
    let mut c = Cur { b: body, at: 8 };
    let version = c.u32()?;
    if version != VERSION {
        return Err(FormatError::Version(version));
    }
    let (seq, ver, lease, clock) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
    let slab_size = c.u64()?;
    let n = c.count(9)?;
    let mut slabs = Vec::with_capacity(n);
    for _ in 0..n {
        slabs.push((c.u64()?, c.u8()?));
    }
    let n = c.count(43)?;
    let mut leaves = Vec::with_capacity(n);
    for _ in 0..n {
        leaves.push(IndexedLeaf {
            off: c.u64()?,
            len: c.u32()?,
            version: c.u64()?,
            commit: c.commit()?,
            items: c.u32()?,
            expiring: c.u32()?,
            has_ext: c.flag()?,
            low: c.key()?,
            high: c.key()?,
        });
    }
    let n = c.count(33)?;
    let mut deltas = Vec::with_capacity(n);
    for _ in 0..n {
        deltas.push(IndexedDelta {
            off: c.u64()?,
            len: c.u32()?,
            version: c.u64()?,
            commit: c.commit()?,
            has_ext: c.flag()?,
        });
    }
    if c.at != body.len() {
        return Err(FormatError::Malformed("bytes after the index"));
    }
    Ok(Index {
        seq,
        version: ver,
        lease,
        clock: (clock != u64::MAX).then_some(clock),
        slab_size,
        slabs,
        leaves,
        deltas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        Index {
            seq: 42,
            version: 1 << 40,
            lease: 1 << 41,
            clock: Some(8192),
            slab_size: 1 << 20,
            slabs: vec![(0, 12), (1, 3), (3, 13)],
            leaves: vec![
                IndexedLeaf {
                    off: 4096 + 4096,
                    len: 3000,
                    version: 7,
                    commit: CommitTag { seq: 40, pages: 3 },
                    items: 12,
                    expiring: 2,
                    has_ext: true,
                    low: None,
                    high: Some(b"m".to_vec()),
                },
                IndexedLeaf {
                    low: Some(b"m".to_vec()),
                    high: None,
                    ..IndexedLeaf::default()
                },
            ],
            deltas: vec![IndexedDelta {
                off: 99,
                len: 512,
                version: 9,
                commit: CommitTag { seq: 41, pages: 1 },
                has_ext: false,
            }],
        }
    }

    #[test]
    fn round_trips_and_every_damage_is_an_error() {
        let ix = sample();
        let b = encode(&ix);
        assert_eq!(decode(&b), Ok(ix));
        for i in 0..b.len() {
            let mut x = b.clone();
            x[i] ^= 0x10;
            assert!(decode(&x).is_err(), "flipped byte {i}");
        }
        for n in 0..b.len() {
            assert!(decode(&b[..n]).is_err(), "cut at {n}");
        }
        assert_eq!(decode(&encode(&Index::default())), Ok(Index::default()));
    }

    #[test]
    fn the_close_record_round_trips_and_damage_reads_as_none() {
        let c = Close {
            seq: 5,
            len: 1234,
            crc: 0xdead_beef,
        };
        let b = encode_close(&c);
        assert_eq!(b.len(), CLOSE_LEN);
        assert_eq!(decode_close(&b), Some(c));
        for i in 0..32 {
            let mut x = b.clone();
            x[i] ^= 1;
            assert_eq!(decode_close(&x), None, "flipped byte {i}");
        }
        assert_eq!(decode_close(&[0u8; CLOSE_LEN]), None);
    }
}

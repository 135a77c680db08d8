//! The page file's byte format (docs/FORMAT.md, "Page file"): superblock, slab
//! descriptors, leaf pages and extension pages. Pure code: encode, decode, validate. Every
//! decoder takes untrusted bytes (a torn or corrupted device) and returns an error, never
//! panics; `fuzz/fuzz_targets/page_decode.rs` holds it to that.
//!
//! All integers are little-endian. A page's checksum is CRC-32C over its header (without
//! the checksum field) and body.

use std::fmt;

/// Alignment unit of the file: the superblock, slab descriptors and slabs.
pub const BLOCK: u64 = 4096;
/// Slot sizes of the small classes (format 6): class `c` in `1..=11` holds
/// `SMALL_SLOTS[c - 1]` bytes, so a page shorter than a block (an extension page of a 1 KiB
/// value, a delta page of a few keys) does not take a whole one. Slots share the device's
/// 512-byte sectors with their neighbours; a write never changes a neighbour's bytes, so a
/// torn sector holds the neighbour's old bytes either way.
pub const SMALL_SLOTS: [u64; 11] = [512, 640, 768, 896, 1024, 1152, 1280, 1536, 2048, 2560, 3072];
/// Classes from this one on hold `2^c` bytes (4 KiB and up).
pub const BLOCK_CLASS: u8 = 12;
/// The largest class a file may use (1 GiB slots).
pub const MAX_CLASS: u8 = 30;
/// Smallest slab (256 KiB): slabs are twice the largest page a store can write, at least this.
pub const MIN_SLAB: u64 = 256 << 10;
/// Fixed page header length.
pub const HEADER: usize = 64;
/// Superblock magic.
pub const SUPER_MAGIC: [u8; 8] = *b"ACKVPAGE";
/// Format version this code writes. Version 2 added commit numbers to page headers; files
/// of version 1 are read (their pages count as one finished commit, number 0). Version 3
/// added expiry deadlines to leaf items ([`TAG_EXPIRES`]); version 4 added client flags
/// ([`TAG_FLAGS`]); version 5 added clock pages ([`KIND_CLOCK`]); version 6 added delta
/// pages ([`KIND_DELTA`]); version 7 may hold a close record naming the index of a clean
/// close (index.rs), which an older build would leave in place while writing pages. Older
/// files are upgraded when opened (their items have no deadlines or flags, and they hold
/// no clock or delta page or close record), so an older build refuses them afterwards.
pub const FORMAT_VERSION: u32 = 7;
/// Oldest format version this code reads.
pub const OLDEST_FORMAT_VERSION: u32 = 1;
/// Slab descriptor magic.
pub const SLAB_MAGIC: [u8; 4] = *b"SLAB";
/// Page magic.
pub const PAGE_MAGIC: [u8; 4] = *b"AKVP";
/// Page kind: a leaf.
pub const KIND_LEAF: u8 = 1;
/// Page kind: an extension page (one large value).
pub const KIND_EXT: u8 = 2;
/// Page kind: a clock page (format 5), a header and nothing else, whose version field is
/// the version lease: no version above it has been issued. Recovery keeps the intact one
/// with the largest lease, and versions after it continue above that.
pub const KIND_CLOCK: u8 = 3;
/// Page kind: a delta page (format 6): the keys one commit changed in leaves it did not
/// image whole, each with its value at the commit's version or a deletion mark, in key
/// order. A key's state is its newest delta entry when that is newer than the leaf page
/// that covers the key, else that page's.
pub const KIND_DELTA: u8 = 4;
/// Page flag: the slot holds a page (a zeroed, never-written slot does not).
pub const ALIVE: u8 = 1;
/// Leaf item tag bit: a deadline (u64, ms since the Unix epoch, nonzero) follows the tag.
pub const TAG_EXPIRES: u8 = 0x80;
/// Leaf item tag bit: client flags (u32, nonzero) follow the tag (and the deadline).
pub const TAG_FLAGS: u8 = 0x40;
/// Item value tag (delta pages only): the key was deleted; no deadline, flags or value.
pub const TAG_DELETED: u8 = 2;

/// One leaf item: key, value, expiry deadline (ms since the Unix epoch; 0: none), client
/// flags (0: none).
pub type PageItem<'a> = (&'a [u8], PageValue<'a>, u64, u32);

/// Why bytes are not a valid page (or superblock, or descriptor).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormatError {
    /// All zeros or no alive flag: an empty slot, not damage.
    Empty,
    /// Wrong magic number.
    BadMagic,
    /// The checksum does not match: a torn or corrupted write.
    BadChecksum,
    /// The page claims more bytes than there are.
    Truncated,
    /// Checksummed but inconsistent (written by other software or a bug).
    Malformed(&'static str),
    /// A valid page found at another offset than the one it was written to.
    Misplaced {
        /// Offset recorded in the page.
        recorded: u64,
        /// Offset it was read from.
        found: u64,
    },
    /// A format version this build does not read.
    Version(u32),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Empty => write!(f, "empty slot"),
            FormatError::BadMagic => write!(f, "bad magic number"),
            FormatError::BadChecksum => write!(f, "checksum mismatch (torn or corrupted)"),
            FormatError::Truncated => write!(f, "truncated"),
            FormatError::Malformed(m) => write!(f, "malformed: {m}"),
            FormatError::Misplaced { recorded, found } => {
                write!(f, "page written at {recorded} found at {found}")
            }
            FormatError::Version(v) => {
                write!(
                    f,
                    "format version {v} (this build reads {OLDEST_FORMAT_VERSION} to {FORMAT_VERSION})"
                )
            }
        }
    }
}

type R<T> = Result<T, FormatError>;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

// ---------------------------------------------------------------------------------------
// Superblock and slab descriptors.

/// The superblock (offset 0, one block): what the rest of the file is cut into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Super {
    /// Bytes per slab (a power of two, at least [`MIN_SLAB`]).
    pub slab_size: u64,
    /// The format version the file was written with ([`encode_super`] writes
    /// [`FORMAT_VERSION`] whatever this says).
    pub version: u32,
}

/// Encodes the superblock into one block.
pub fn encode_super(s: &Super) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    b[0..8].copy_from_slice(&SUPER_MAGIC);
    b[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(BLOCK as u32).to_le_bytes());
    b[16..24].copy_from_slice(&s.slab_size.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a superblock.
pub fn decode_super(b: &[u8]) -> R<Super> {
    if b.len() < 28 {
        return Err(FormatError::Truncated);
    }
    if b[0..28].iter().all(|&x| x == 0) {
        return Err(FormatError::Empty);
    }
    if b[0..8] != SUPER_MAGIC {
        return Err(FormatError::BadMagic);
    }
    if crc32c::crc32c(&b[0..24]) != u32_at(b, 24) {
        return Err(FormatError::BadChecksum);
    }
    let version = u32_at(b, 8);
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(FormatError::Version(version));
    }
    if u32_at(b, 12) as u64 != BLOCK {
        return Err(FormatError::Malformed("block size"));
    }
    let slab_size = u64_at(b, 16);
    if !slab_size.is_power_of_two() || !(MIN_SLAB..=1 << (MAX_CLASS + 2)).contains(&slab_size) {
        return Err(FormatError::Malformed("slab size"));
    }
    Ok(Super { slab_size, version })
}

/// A slab descriptor (the first block of every slab): the slab's size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabDesc {
    /// The slab's index in the file.
    pub index: u64,
    /// log2 of its slots' size.
    pub class: u8,
}

/// Encodes a slab descriptor into one block.
pub fn encode_slab(d: &SlabDesc) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    b[0..4].copy_from_slice(&SLAB_MAGIC);
    b[4] = d.class;
    b[8..16].copy_from_slice(&d.index.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..16]);
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a slab descriptor.
pub fn decode_slab(b: &[u8]) -> R<SlabDesc> {
    if b.len() < 20 {
        return Err(FormatError::Truncated);
    }
    if b[0..20].iter().all(|&x| x == 0) {
        return Err(FormatError::Empty);
    }
    if b[0..4] != SLAB_MAGIC {
        return Err(FormatError::BadMagic);
    }
    if crc32c::crc32c(&b[0..16]) != u32_at(b, 16) {
        return Err(FormatError::BadChecksum);
    }
    let class = b[4];
    if slot_bytes(class).is_none() {
        return Err(FormatError::Malformed("size class"));
    }
    Ok(SlabDesc {
        index: u64_at(b, 8),
        class,
    })
}

// ---------------------------------------------------------------------------------------
// Pages.

/// Where a large value lives: an extension page, with the value's length and CRC-32C so a
/// leaf page can check that the extension it names is the one it was written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExtRef {
    /// File offset of the extension page.
    pub off: u64,
    /// Value length.
    pub len: u32,
    /// CRC-32C of the value bytes.
    pub crc: u32,
}

/// A leaf item's value in a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageValue<'a> {
    /// Stored in the leaf page.
    Inline(&'a [u8]),
    /// Stored in an extension page.
    Ext(ExtRef),
}

/// Which commit wrote a page. Recovery uses a commit only if every leaf page it wrote is
/// intact (a crash in the middle of a commit leaves some of its pages and not others).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CommitTag {
    /// The commit's number: one more than the previous commit's, whether that one succeeded
    /// or not. 0: written by format 1, before commits were numbered.
    pub seq: u64,
    /// Leaf and delta pages the commit wrote (in those pages; 0 in an extension page).
    pub pages: u32,
}

/// A leaf page: the items of key range `[low, high)` as of `version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeafPage<'a> {
    /// The leaf's LID when it was written.
    pub lid: u64,
    /// The version of the snapshot the page was taken at.
    pub version: u64,
    /// The commit that wrote it.
    pub commit: CommitTag,
    /// Lower fence (`None`: unbounded).
    pub low: Option<&'a [u8]>,
    /// Upper fence, exclusive (`None`: unbounded).
    pub high: Option<&'a [u8]>,
    /// Items in key order, with their deadlines.
    pub items: Vec<PageItem<'a>>,
}

/// An extension page: one large value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtPage<'a> {
    /// LID of the leaf that first referenced it.
    pub lid: u64,
    /// The version of the snapshot it was written for.
    pub version: u64,
    /// The commit that wrote it (`pages` is 0).
    pub commit: CommitTag,
    /// The key the value belongs to.
    pub key: &'a [u8],
    /// The lower fence (anchor key) of the leaf that first referenced it.
    pub anchor: Option<&'a [u8]>,
    /// The value.
    pub value: &'a [u8],
}

impl ExtPage<'_> {
    /// Whether this is the extension page `r` names for `key`: the key's, with the length
    /// and CRC-32C of the value the leaf page was written with.
    pub fn is_named_by(&self, r: &ExtRef, key: &[u8]) -> bool {
        self.key == key && self.value.len() == r.len as usize && crc32c::crc32c(self.value) == r.crc
    }
}

/// A delta entry: key, value (`None`: deleted), deadline, client flags.
pub type DeltaItem<'a> = (&'a [u8], Option<PageValue<'a>>, u64, u32);

/// A delta page: keys one commit changed, at its version, outside the leaves it imaged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeltaPage<'a> {
    /// The version of the commit's snapshot.
    pub version: u64,
    /// The commit that wrote it (`pages` counts its leaf and delta pages).
    pub commit: CommitTag,
    /// Entries in strictly increasing key order.
    pub items: Vec<DeltaItem<'a>>,
}

/// A decoded page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Page<'a> {
    /// A leaf page.
    Leaf(LeafPage<'a>),
    /// A delta page.
    Delta(DeltaPage<'a>),
    /// An extension page.
    Ext(ExtPage<'a>),
    /// A clock page: the version lease it records.
    Clock(u64),
}

/// The fixed header of a page, readable before the whole page is (it says how long it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// `KIND_LEAF` or `KIND_EXT`.
    pub kind: u8,
    /// log2 of the slot size the page was written into.
    pub class: u8,
    /// Page length in bytes, header included.
    pub len: u32,
    /// Offset the page was written at.
    pub offset: u64,
    /// LID (leaf) or parent LID (extension).
    pub lid: u64,
    /// Snapshot version.
    pub version: u64,
    /// The commit that wrote it.
    pub commit: CommitTag,
}

/// The smallest size class that holds `len` bytes.
pub fn class_for(len: usize) -> u8 {
    let len = len.max(1) as u64;
    if let Some(i) = SMALL_SLOTS.iter().position(|&s| s >= len) {
        return i as u8 + 1;
    }
    (len.next_power_of_two().trailing_zeros() as u8).max(BLOCK_CLASS)
}

/// The smallest class for a page of `len` bytes whose slots never straddle a 4 KiB device
/// page (512, 1,024, 2,048 bytes, then the block classes): a page synced on its own (a
/// commit's delta page) then costs the device one page, not two.
pub fn aligned_class_for(len: usize) -> u8 {
    match class_for(len) {
        c @ BLOCK_CLASS.. => c,
        c => [1u8, 5, 9]
            .into_iter()
            .find(|&a| slot_bytes(a).is_some_and(|b| b >= slot_bytes(c).unwrap_or(u64::MAX)))
            .unwrap_or(BLOCK_CLASS),
    }
}

/// Bytes in a slot of class `class`; `None` for a number that names no class.
pub fn slot_bytes(class: u8) -> Option<u64> {
    match class {
        1..=11 => Some(SMALL_SLOTS[class as usize - 1]),
        BLOCK_CLASS..=MAX_CLASS => Some(1 << class),
        _ => None,
    }
}

fn put_fence(out: &mut Vec<u8>, f: Option<&[u8]>) {
    match f {
        None => out.push(0),
        Some(k) => {
            out.push(1);
            out.extend_from_slice(&(k.len() as u16).to_le_bytes());
            out.extend_from_slice(k);
        }
    }
}

fn start(kind: u8, lid: u64, version: u64, count: u32, commit: CommitTag, offset: u64) -> Vec<u8> {
    let mut out = vec![0u8; HEADER];
    out[0..4].copy_from_slice(&PAGE_MAGIC);
    out[4] = kind;
    out[5] = ALIVE;
    out[16..24].copy_from_slice(&offset.to_le_bytes());
    out[24..32].copy_from_slice(&lid.to_le_bytes());
    out[32..40].copy_from_slice(&version.to_le_bytes());
    out[40..44].copy_from_slice(&count.to_le_bytes());
    out[44..48].copy_from_slice(&commit.pages.to_le_bytes());
    out[48..56].copy_from_slice(&commit.seq.to_le_bytes());
    out
}

fn seal(out: Vec<u8>) -> Vec<u8> {
    let class = class_for(out.len());
    seal_in(out, class)
}

/// Seals a page for a slot of `class` (at least the page's own).
fn seal_in(mut out: Vec<u8>, class: u8) -> Vec<u8> {
    let len = out.len() as u32;
    out[6] = class;
    out[12..16].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[0..8]), &out[12..]);
    out[8..12].copy_from_slice(&crc.to_le_bytes());
    out
}

fn item_len(k: &[u8], v: Option<&PageValue<'_>>, d: u64, f: u32) -> usize {
    2 + k.len()
        + 1
        + if d != 0 { 8 } else { 0 }
        + if f != 0 { 4 } else { 0 }
        + match v {
            Some(PageValue::Inline(b)) => 4 + b.len(),
            Some(PageValue::Ext(_)) => 16,
            None => 0,
        }
}

/// Appends one item (a deletion mark when `v` is `None`: delta pages only).
fn put_item(out: &mut Vec<u8>, k: &[u8], v: Option<&PageValue<'_>>, d: u64, f: u32) {
    out.extend_from_slice(&(k.len() as u16).to_le_bytes());
    out.extend_from_slice(k);
    let expires = if d != 0 { TAG_EXPIRES } else { 0 };
    let flagged = if f != 0 { TAG_FLAGS } else { 0 };
    let tag = match v {
        Some(PageValue::Inline(_)) => 0,
        Some(PageValue::Ext(_)) => 1,
        None => TAG_DELETED,
    };
    out.push(tag | expires | flagged);
    if d != 0 {
        out.extend_from_slice(&d.to_le_bytes());
    }
    if f != 0 {
        out.extend_from_slice(&f.to_le_bytes());
    }
    match v {
        Some(PageValue::Inline(b)) => {
            out.extend_from_slice(&(b.len() as u32).to_le_bytes());
            out.extend_from_slice(b);
        }
        Some(PageValue::Ext(r)) => {
            out.extend_from_slice(&r.off.to_le_bytes());
            out.extend_from_slice(&r.len.to_le_bytes());
            out.extend_from_slice(&r.crc.to_le_bytes());
        }
        None => {}
    }
}

/// Encoded length of a leaf page (to choose its slot before encoding it at that offset).
pub fn leaf_len(p: &LeafPage<'_>) -> usize {
    let fence = |f: Option<&[u8]>| 1 + f.map_or(0, |k| 2 + k.len());
    HEADER
        + fence(p.low)
        + fence(p.high)
        + p.items
            .iter()
            .map(|(k, v, d, f)| item_len(k, Some(v), *d, *f))
            .sum::<usize>()
}

/// Encodes a leaf page to be written at `offset`.
pub fn encode_leaf(p: &LeafPage<'_>, offset: u64) -> Vec<u8> {
    let mut out = start(
        KIND_LEAF,
        p.lid,
        p.version,
        p.items.len() as u32,
        p.commit,
        offset,
    );
    out.reserve(leaf_len(p) - HEADER);
    put_fence(&mut out, p.low);
    put_fence(&mut out, p.high);
    for (k, v, d, f) in &p.items {
        put_item(&mut out, k, Some(v), *d, *f);
    }
    seal(out)
}

/// Encoded length of one delta entry (to cut a commit's entries into pages).
pub fn delta_item_len(i: &DeltaItem<'_>) -> usize {
    item_len(i.0, i.1.as_ref(), i.2, i.3)
}

/// Encoded length of a delta page.
pub fn delta_len(p: &DeltaPage<'_>) -> usize {
    HEADER + p.items.iter().map(delta_item_len).sum::<usize>()
}

/// Encodes a delta page to be written at `offset`.
pub fn encode_delta(p: &DeltaPage<'_>, offset: u64) -> Vec<u8> {
    let class = class_for(delta_len(p));
    encode_delta_in(p, offset, class)
}

/// Encodes a delta page to be written at `offset`, in a slot of `class` (at least the
/// page's own class: [`aligned_class_for`] gives one that never straddles a device page).
pub fn encode_delta_in(p: &DeltaPage<'_>, offset: u64, class: u8) -> Vec<u8> {
    let mut out = start(
        KIND_DELTA,
        0,
        p.version,
        p.items.len() as u32,
        p.commit,
        offset,
    );
    out.reserve(delta_len(p) - HEADER);
    for (k, v, d, f) in &p.items {
        put_item(&mut out, k, v.as_ref(), *d, *f);
    }
    seal_in(out, class)
}

/// Encoded length of an extension page.
pub fn ext_len(p: &ExtPage<'_>) -> usize {
    HEADER + 2 + p.key.len() + 1 + p.anchor.map_or(0, |a| 2 + a.len()) + 4 + p.value.len()
}

/// Encodes an extension page to be written at `offset`.
pub fn encode_ext(p: &ExtPage<'_>, offset: u64) -> Vec<u8> {
    let mut out = start(KIND_EXT, p.lid, p.version, 0, p.commit, offset);
    out.reserve(ext_len(p) - HEADER);
    out.extend_from_slice(&(p.key.len() as u16).to_le_bytes());
    out.extend_from_slice(p.key);
    put_fence(&mut out, p.anchor);
    out.extend_from_slice(&(p.value.len() as u32).to_le_bytes());
    out.extend_from_slice(p.value);
    seal(out)
}

/// Encodes a clock page recording the version lease `lease`, to be written at `offset`.
pub fn encode_clock(lease: u64, offset: u64) -> Vec<u8> {
    seal(start(KIND_CLOCK, 0, lease, 0, CommitTag::default(), offset))
}

/// Decodes the header of the page at the start of `b` (at least [`HEADER`] bytes) without
/// checking its checksum (that needs the whole page: [`decode_page`]).
pub fn decode_header(b: &[u8]) -> R<Header> {
    if b.len() < HEADER {
        return Err(FormatError::Truncated);
    }
    if b[5] & ALIVE == 0 || b[0..HEADER].iter().all(|&x| x == 0) {
        return Err(FormatError::Empty);
    }
    if b[0..4] != PAGE_MAGIC {
        return Err(FormatError::BadMagic);
    }
    let h = Header {
        kind: b[4],
        class: b[6],
        len: u32_at(b, 12),
        offset: u64_at(b, 16),
        lid: u64_at(b, 24),
        version: u64_at(b, 32),
        commit: CommitTag {
            seq: u64_at(b, 48),
            pages: u32_at(b, 44),
        },
    };
    if (h.len as usize) < HEADER {
        return Err(FormatError::Malformed("length below the header"));
    }
    if slot_bytes(h.class).is_none_or(|n| u64::from(h.len) > n) {
        return Err(FormatError::Malformed("size class"));
    }
    Ok(h)
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or(FormatError::Malformed("field past the end"))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> R<u16> {
        Ok(u16_at(self.take(2)?, 0))
    }
    fn u32(&mut self) -> R<u32> {
        Ok(u32_at(self.take(4)?, 0))
    }
    fn u64(&mut self) -> R<u64> {
        Ok(u64_at(self.take(8)?, 0))
    }
    fn key(&mut self) -> R<&'a [u8]> {
        let n = self.u16()? as usize;
        if n == 0 {
            return Err(FormatError::Malformed("empty key"));
        }
        self.take(n)
    }
    /// One item, whose key must follow `prev` (which it then becomes); its value is `None`
    /// for a deletion mark (which has no deadline or flags).
    fn item(&mut self, prev: &mut Option<&'a [u8]>) -> R<DeltaItem<'a>> {
        let k = self.key()?;
        if prev.is_some_and(|p| p >= k) {
            return Err(FormatError::Malformed("items out of order"));
        }
        *prev = Some(k);
        let tag = self.u8()?;
        let deadline = if tag & TAG_EXPIRES != 0 {
            match self.u64()? {
                0 => return Err(FormatError::Malformed("zero deadline")),
                d => d,
            }
        } else {
            0
        };
        let flags = if tag & TAG_FLAGS != 0 {
            match self.u32()? {
                0 => return Err(FormatError::Malformed("zero flags")),
                f => f,
            }
        } else {
            0
        };
        let v = match tag & !(TAG_EXPIRES | TAG_FLAGS) {
            0 => {
                let n = self.u32()? as usize;
                Some(PageValue::Inline(self.take(n)?))
            }
            1 => Some(PageValue::Ext(ExtRef {
                off: self.u64()?,
                len: self.u32()?,
                crc: self.u32()?,
            })),
            TAG_DELETED if deadline == 0 && flags == 0 => None,
            _ => return Err(FormatError::Malformed("value tag")),
        };
        Ok((k, v, deadline, flags))
    }

    fn fence(&mut self) -> R<Option<&'a [u8]>> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.key()?)),
            _ => Err(FormatError::Malformed("fence flag")),
        }
    }
}

/// Decodes and checks the page at the start of `b`, read from file offset `found`.
pub fn decode_page(b: &[u8], found: u64) -> R<Page<'_>> {
    let h = decode_header(b)?;
    let len = h.len as usize;
    if b.len() < len {
        return Err(FormatError::Truncated);
    }
    let b = &b[..len];
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..8]), &b[12..]);
    if crc != u32_at(b, 8) {
        return Err(FormatError::BadChecksum);
    }
    if h.offset != found {
        return Err(FormatError::Misplaced {
            recorded: h.offset,
            found,
        });
    }
    let count = u32_at(b, 40) as usize;
    let mut c = Cursor { b, pos: HEADER };
    let page = match h.kind {
        KIND_LEAF => {
            let low = c.fence()?;
            let high = c.fence()?;
            if let (Some(l), Some(hi)) = (low, high) {
                if l >= hi {
                    return Err(FormatError::Malformed("fences out of order"));
                }
            }
            // Each item takes at least 8 bytes: do not trust `count` for an allocation.
            let mut items = Vec::with_capacity(count.min((len - c.pos) / 8));
            let mut prev: Option<&[u8]> = None;
            for _ in 0..count {
                let (k, v, deadline, flags) = c.item(&mut prev)?;
                if low.is_some_and(|l| k < l) || high.is_some_and(|hi| k >= hi) {
                    return Err(FormatError::Malformed("item outside the fences"));
                }
                let v = v.ok_or(FormatError::Malformed("deletion mark in a leaf page"))?;
                items.push((k, v, deadline, flags));
            }
            Page::Leaf(LeafPage {
                lid: h.lid,
                version: h.version,
                commit: h.commit,
                low,
                high,
                items,
            })
        }
        KIND_DELTA => {
            if h.lid != 0 || h.commit.pages == 0 {
                return Err(FormatError::Malformed("delta page with extension fields"));
            }
            // Each entry takes at least 4 bytes.
            let mut items = Vec::with_capacity(count.min((len - c.pos) / 4));
            let mut prev: Option<&[u8]> = None;
            for _ in 0..count {
                items.push(c.item(&mut prev)?);
            }
            Page::Delta(DeltaPage {
                version: h.version,
                commit: h.commit,
                items,
            })
        }
        KIND_EXT => {
            let key = c.key()?;
            let anchor = c.fence()?;
            let n = c.u32()? as usize;
            let value = c.take(n)?;
            if h.commit.pages != 0 {
                return Err(FormatError::Malformed("extension page with a page count"));
            }
            Page::Ext(ExtPage {
                lid: h.lid,
                version: h.version,
                commit: h.commit,
                key,
                anchor,
                value,
            })
        }
        KIND_CLOCK => {
            if count != 0 || h.lid != 0 || h.commit != CommitTag::default() {
                return Err(FormatError::Malformed("clock page with leaf fields"));
            }
            Page::Clock(h.version)
        }
        _ => return Err(FormatError::Malformed("page kind")),
    };
    if c.pos != len {
        return Err(FormatError::Malformed("trailing bytes"));
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_classes_never_straddle_a_device_page() {
        for len in [1, 512, 513, 1024, 1100, 2048, 2049, 3000, 4096, 5000] {
            let c = aligned_class_for(len);
            let b = slot_bytes(c).unwrap();
            assert!(
                b >= len as u64 && BLOCK.is_multiple_of(b.min(BLOCK)),
                "{len}: class {c}"
            );
            assert!(c >= class_for(len), "{len}");
        }
        assert_eq!(slot_bytes(aligned_class_for(2100)), Some(4096));
        assert_eq!(slot_bytes(aligned_class_for(600)), Some(1024));
        // A delta page in a larger slot names that slot's class and decodes.
        let p = DeltaPage {
            version: 3,
            commit: CommitTag { seq: 2, pages: 1 },
            items: vec![(b"k", Some(PageValue::Inline(&[7u8; 600])), 0, 0)],
        };
        let b = encode_delta_in(&p, 8192, aligned_class_for(delta_len(&p)));
        assert_eq!(decode_header(&b).unwrap().class, 5);
        assert_eq!(decode_page(&b, 8192), Ok(Page::Delta(p)));
    }

    fn leaf() -> LeafPage<'static> {
        LeafPage {
            lid: 7,
            version: 99,
            commit: CommitTag { seq: 5, pages: 3 },
            low: Some(b"b"),
            high: Some(b"m"),
            items: vec![
                (b"b", PageValue::Inline(b""), 0, 0),
                (b"cat", PageValue::Inline(b"meow"), 1_700_000_000_000, 0),
                (b"cow", PageValue::Inline(b"moo"), 0, 0xdead_beef),
                (b"cub", PageValue::Inline(b"grr"), 1_700_000_000_000, 7),
                (
                    b"dog",
                    PageValue::Ext(ExtRef {
                        off: 4096 * 3,
                        len: 5000,
                        crc: 42,
                    }),
                    77,
                    9,
                ),
            ],
        }
    }

    #[test]
    fn pages_round_trip() {
        let p = leaf();
        let b = encode_leaf(&p, 8192);
        assert_eq!(b.len(), leaf_len(&p));
        assert_eq!(decode_page(&b, 8192).unwrap(), Page::Leaf(p));
        let e = ExtPage {
            lid: 7,
            version: 99,
            commit: CommitTag { seq: 5, pages: 0 },
            key: b"dog",
            anchor: None,
            value: &[5u8; 5000],
        };
        let b = encode_ext(&e, 4096 * 3);
        assert_eq!(b.len(), ext_len(&e));
        assert_eq!(decode_header(&b).unwrap().class, 13);
        assert_eq!(decode_page(&b, 4096 * 3).unwrap(), Page::Ext(e));
        let b = encode_clock(1 << 40, 4096);
        assert_eq!(b.len(), HEADER);
        assert_eq!(decode_page(&b, 4096).unwrap(), Page::Clock(1 << 40));
        let s = Super {
            slab_size: 4 << 20,
            version: FORMAT_VERSION,
        };
        assert_eq!(decode_super(&encode_super(&s)).unwrap(), s);
        let d = SlabDesc {
            index: 3,
            class: 14,
        };
        assert_eq!(decode_slab(&encode_slab(&d)).unwrap(), d);
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_an_error() {
        let b = encode_leaf(&leaf(), 8192);
        for i in 0..b.len() * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert!(
                decode_page(&c, 8192).is_err(),
                "bit {i} flipped went unnoticed"
            );
        }
        for n in 0..b.len() {
            assert!(decode_page(&b[..n], 8192).is_err());
        }
        assert_eq!(decode_page(&[0u8; 4096], 0), Err(FormatError::Empty));
        assert!(matches!(
            decode_page(&b, 4096),
            Err(FormatError::Misplaced { .. })
        ));
    }

    fn delta() -> DeltaPage<'static> {
        DeltaPage {
            version: 120,
            commit: CommitTag { seq: 6, pages: 2 },
            items: vec![
                (b"a", Some(PageValue::Inline(b"1")), 0, 0),
                (b"cat", None, 0, 0),
                (
                    b"cow",
                    Some(PageValue::Inline(b"moo")),
                    1_700_000_000_000,
                    3,
                ),
                (
                    b"dog",
                    Some(PageValue::Ext(ExtRef {
                        off: 4096 * 5,
                        len: 9000,
                        crc: 7,
                    })),
                    0,
                    0,
                ),
                (b"zz", None, 0, 0),
            ],
        }
    }

    #[test]
    fn delta_pages_round_trip_and_every_damage_is_an_error() {
        let p = delta();
        let b = encode_delta(&p, 4096 * 2);
        assert_eq!(b.len(), delta_len(&p));
        assert_eq!(decode_page(&b, 4096 * 2).unwrap(), Page::Delta(p));
        for i in 0..b.len() * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert!(decode_page(&c, 4096 * 2).is_err(), "bit {i}");
        }
        for n in 0..b.len() {
            assert!(decode_page(&b[..n], 4096 * 2).is_err());
        }
    }

    #[test]
    fn a_deletion_mark_is_refused_in_a_leaf_and_unordered_deltas_are_refused() {
        // A leaf item with the deletion tag, checksummed as if written so.
        let mut l = leaf();
        l.items.truncate(1);
        let mut b = encode_leaf(&l, 0);
        let tag_at = b.len() - 4 - 1;
        b[tag_at] = TAG_DELETED;
        b.truncate(b.len() - 4);
        let n = b.len() as u32;
        b[12..16].copy_from_slice(&n.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..8]), &b[12..]);
        b[8..12].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode_page(&b, 0),
            Err(FormatError::Malformed("deletion mark in a leaf page"))
        );
        let mut d = delta();
        d.items.swap(0, 1);
        assert_eq!(
            decode_page(&encode_delta(&d, 0), 0),
            Err(FormatError::Malformed("items out of order"))
        );
    }

    #[test]
    fn a_damaged_clock_page_is_an_error() {
        let b = encode_clock(123_456, 8192);
        for i in 0..b.len() * 8 {
            let mut c = b.clone();
            c[i / 8] ^= 1 << (i % 8);
            assert!(decode_page(&c, 8192).is_err(), "bit {i}");
        }
        for n in 0..b.len() {
            assert!(decode_page(&b[..n], 8192).is_err());
        }
    }

    #[test]
    fn classes() {
        assert_eq!(class_for(1), 1);
        assert_eq!(class_for(512), 1);
        assert_eq!(class_for(513), 2);
        assert_eq!(class_for(1100), 6);
        assert_eq!(slot_bytes(6), Some(1152));
        assert_eq!(class_for(3072), 11);
        assert_eq!(class_for(3073), 12);
        assert_eq!(class_for(4096), 12);
        assert_eq!(class_for(4097), 13);
        assert_eq!(class_for(1 << 20), 20);
        // Every class holds what it is chosen for, and is the smallest that does.
        for len in 1..70_000usize {
            let c = class_for(len);
            assert!(slot_bytes(c).unwrap() >= len as u64);
            assert!(c == 1 || (1..c).filter_map(slot_bytes).all(|n| n < len as u64));
        }
        assert_eq!(slot_bytes(0), None);
        assert_eq!(slot_bytes(31), None);
    }
}

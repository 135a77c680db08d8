//! Streams in DUMP payloads (`rdbSaveObject` and `rdbLoadObject` for `OBJ_STREAM`): the
//! entries in listpack nodes, each keyed by its master id (`t_stream.c`'s node layout),
//! then the stream's counters, then each consumer group with its pending entries list and
//! its consumers. [`write`] writes `RDB_TYPE_STREAM_LISTPACKS_3` (Redis 7.2); reading takes
//! that, `_2` (Redis 7.0) and the first form (Redis 5 to 6.2), as Redis 7.2 does.
//!
//! Reading refuses what would leave an inconsistent stream: entries out of the last id's
//! range or repeated, a length that is not the entries', a pending entry owned by no
//! consumer or by two.

use super::listpack::{entries, Writer};
use super::read::Reader;
use super::{put_len, put_str, RdbError};
use crate::collection::StreamId;

/// A stream as DUMP carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stream {
    /// Entries in id order, each with its fields and values alternating.
    pub entries: Vec<(StreamId, Vec<Vec<u8>>)>,
    /// The greatest id the stream ever gave out.
    pub last_id: StreamId,
    /// The greatest id XDEL removed (0-0: none).
    pub max_deleted: StreamId,
    /// Entries ever added (at least the length).
    pub entries_added: u64,
    pub groups: Vec<Group>,
}

/// A consumer group.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    pub name: Vec<u8>,
    pub last_id: StreamId,
    /// Entries read (-1: unknown); `None`: the payload is older than Redis 7.0, whose
    /// loader estimates it from the stream.
    pub entries_read: Option<i64>,
    /// The pending entries list, in id order.
    pub pending: Vec<Pending>,
    pub consumers: Vec<Consumer>,
}

/// A pending entry: its id, last delivery time, delivery count and owner (an index into
/// its group's consumers).
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    pub id: StreamId,
    pub time: u64,
    pub count: u64,
    pub owner: usize,
}

/// A consumer: when it was last seen and last active (-1: never).
#[derive(Clone, Debug, PartialEq)]
pub struct Consumer {
    pub name: Vec<u8>,
    pub seen: u64,
    pub active: i64,
}

pub(crate) const T_STREAM: u8 = 15;
pub(crate) const T_STREAM_2: u8 = 19;
pub(crate) const T_STREAM_3: u8 = 21;

/// Entry flags in a node.
const DELETED: i64 = 1;
const SAME_FIELDS: i64 = 2;
/// Redis's `stream-node-max-entries` and `stream-node-max-bytes` defaults.
const NODE_ENTRIES: usize = 100;
const NODE_BYTES: usize = 4096;

fn bad<T>() -> Result<T, RdbError> {
    Err(RdbError::BadFormat)
}

fn put_id(out: &mut Vec<u8>, id: StreamId) {
    put_len(out, id.ms);
    put_len(out, id.seq);
}

/// Appends a stream's body (after its type byte).
pub(crate) fn write(out: &mut Vec<u8>, s: &Stream) {
    let nodes = nodes(&s.entries);
    put_len(out, nodes.len() as u64);
    for (master, lp) in &nodes {
        put_str(out, &master.to_bytes());
        put_compressed(out, lp);
    }
    put_len(out, s.entries.len() as u64);
    put_id(out, s.last_id);
    put_id(out, s.entries.first().map_or(StreamId::MIN, |e| e.0));
    put_id(out, s.max_deleted);
    put_len(out, s.entries_added);
    put_len(out, s.groups.len() as u64);
    for g in &s.groups {
        put_str(out, &g.name);
        put_id(out, g.last_id);
        put_len(out, g.entries_read.unwrap_or(-1) as u64);
        put_len(out, g.pending.len() as u64);
        for p in &g.pending {
            out.extend_from_slice(&p.id.to_bytes());
            out.extend_from_slice(&p.time.to_le_bytes());
            put_len(out, p.count);
        }
        put_len(out, g.consumers.len() as u64);
        for (i, c) in g.consumers.iter().enumerate() {
            put_str(out, &c.name);
            out.extend_from_slice(&c.seen.to_le_bytes());
            out.extend_from_slice(&c.active.to_le_bytes());
            let mine: Vec<_> = g.pending.iter().filter(|p| p.owner == i).collect();
            put_len(out, mine.len() as u64);
            for p in mine {
                out.extend_from_slice(&p.id.to_bytes());
            }
        }
    }
}

/// Appends a string LZF-compressed when that saves bytes, as Redis writes strings of more
/// than 20 bytes with `rdbcompression` on (its default).
fn put_compressed(out: &mut Vec<u8>, s: &[u8]) {
    if s.len() > 20 {
        if let Ok(c) = lzf::compress(s) {
            if c.len() + 4 < s.len() {
                out.push(0xC3);
                put_len(out, c.len() as u64);
                put_len(out, s.len() as u64);
                out.extend_from_slice(&c);
                return;
            }
        }
    }
    put_str(out, s)
}

/// The entries cut into nodes as Redis fills them, each node's master id and listpack.
fn nodes(entries: &[(StreamId, Vec<Vec<u8>>)]) -> Vec<(StreamId, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < entries.len() {
        let (master, first) = (&entries[at].0, &entries[at].1);
        let fields: Vec<&[u8]> = first.iter().step_by(2).map(|f| f.as_slice()).collect();
        // The node's entries come after its master entry, whose count is known only once
        // they are chosen: choose them by size first.
        let mut end = at;
        let mut bytes = 0;
        while end < entries.len() && end - at < NODE_ENTRIES && bytes < NODE_BYTES {
            bytes += entries[end].1.iter().map(|i| i.len() + 2).sum::<usize>() + 8;
            end += 1;
        }
        let mut lp = Writer::default();
        lp.int((end - at) as i64);
        lp.int(0);
        lp.int(fields.len() as i64);
        for f in &fields {
            lp.str(f);
        }
        lp.int(0);
        for (id, items) in &entries[at..end] {
            let same = items.len() == 2 * fields.len()
                && items.iter().step_by(2).zip(&fields).all(|(a, b)| a == b);
            lp.int(if same { SAME_FIELDS } else { 0 });
            lp.int(id.ms.wrapping_sub(master.ms) as i64);
            lp.int(id.seq.wrapping_sub(master.seq) as i64);
            let n = items.len() / 2;
            if same {
                items.iter().skip(1).step_by(2).for_each(|v| lp.str(v));
                lp.int(n as i64 + 3);
            } else {
                lp.int(n as i64);
                items.iter().for_each(|i| lp.str(i));
                lp.int(2 * n as i64 + 4);
            }
        }
        out.push((*master, lp.finish()));
        at = end;
    }
    out
}

/// Whether no name repeats (sorted, so a forged payload of many costs no more than
/// sorting them).
fn unique<'a>(names: impl Iterator<Item = &'a [u8]>) -> bool {
    let mut v: Vec<&[u8]> = names.collect();
    v.sort_unstable();
    v.windows(2).all(|w| w[0] != w[1])
}

/// The integers a node's listpack holds, read in order.
struct Node {
    items: std::vec::IntoIter<Vec<u8>>,
}

impl Node {
    fn next(&mut self) -> Result<Vec<u8>, RdbError> {
        self.items.next().ok_or(RdbError::BadFormat)
    }

    fn int(&mut self) -> Result<i64, RdbError> {
        let t = self.next()?;
        let t = std::str::from_utf8(&t).map_err(|_| RdbError::BadFormat)?;
        t.parse().map_err(|_| RdbError::BadFormat)
    }

    /// A count of items still to come.
    fn count(&mut self) -> Result<usize, RdbError> {
        match usize::try_from(self.int()?) {
            Ok(n) if n <= self.items.len() => Ok(n),
            _ => bad(),
        }
    }

    fn take(&mut self, n: usize) -> Result<Vec<Vec<u8>>, RdbError> {
        (0..n).map(|_| self.next()).collect()
    }
}

/// Appends the live entries of the node whose master id is `master`.
fn read_node(
    master: StreamId,
    lp: &[u8],
    out: &mut Vec<(StreamId, Vec<Vec<u8>>)>,
) -> Result<(), RdbError> {
    let mut n = Node {
        items: entries(lp)?.into_iter(),
    };
    let (live, deleted) = (n.count()?, n.count()?);
    let nf = n.count()?;
    let fields = n.take(nf)?;
    if n.int()? != 0 {
        return bad();
    }
    for _ in 0..live.saturating_add(deleted) {
        let flags = n.int()?;
        let id = StreamId {
            ms: master.ms.wrapping_add(n.int()? as u64),
            seq: master.seq.wrapping_add(n.int()? as u64),
        };
        let (items, want) = if flags & SAME_FIELDS != 0 {
            let values = n.take(nf)?;
            let items = fields.iter().cloned().zip(values).flat_map(|(f, v)| [f, v]);
            (items.collect::<Vec<_>>(), nf + 3)
        } else {
            let k = n.count()?;
            (n.take(2 * k)?, 2 * k + 4)
        };
        if usize::try_from(n.int()?) != Ok(want) {
            return bad();
        }
        if flags & DELETED == 0 {
            out.push((id, items));
        }
    }
    match n.items.len() {
        0 => Ok(()),
        _ => bad(),
    }
}

impl Reader<'_> {
    fn id(&mut self) -> Result<StreamId, RdbError> {
        Ok(StreamId {
            ms: self.len64()?,
            seq: self.len64()?,
        })
    }

    fn raw_id(&mut self) -> Result<StreamId, RdbError> {
        StreamId::from_bytes(self.take(16)?).ok_or(RdbError::BadFormat)
    }

    fn time(&mut self) -> Result<u64, RdbError> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes(
            b.try_into().map_err(|_| RdbError::BadFormat)?,
        ))
    }

    /// A stream of RDB type `t`.
    pub(crate) fn stream(&mut self, t: u8) -> Result<Stream, RdbError> {
        let mut s = Stream::default();
        for _ in 0..self.count(2)? {
            let master = StreamId::from_bytes(&self.string()?).ok_or(RdbError::BadFormat)?;
            read_node(master, &self.string()?, &mut s.entries)?;
        }
        s.entries.sort_by_key(|e| e.0);
        let length = self.len64()?;
        s.last_id = self.id()?;
        if t >= T_STREAM_2 {
            self.id()?; // the first id: the entries give it
            s.max_deleted = self.id()?;
            s.entries_added = self.len64()?;
        } else {
            s.entries_added = length;
        }
        let ordered = s.entries.windows(2).all(|w| w[0].0 < w[1].0);
        if !ordered
            || length != s.entries.len() as u64
            || s.entries.last().is_some_and(|e| e.0 > s.last_id)
            || s.entries_added < length
        {
            return bad();
        }
        for _ in 0..self.count(3)? {
            s.groups.push(self.group(t)?);
        }
        match unique(s.groups.iter().map(|g| g.name.as_slice())) {
            true => Ok(s),
            false => bad(),
        }
    }

    fn group(&mut self, t: u8) -> Result<Group, RdbError> {
        let name = self.string()?;
        let last_id = self.id()?;
        let entries_read = match t >= T_STREAM_2 {
            true => Some(self.len64()? as i64),
            false => None,
        };
        let mut pending = Vec::new();
        for _ in 0..self.count(25)? {
            let id = self.raw_id()?;
            let (time, count) = (self.time()?, self.len64()?);
            pending.push(Pending {
                id,
                time,
                count,
                owner: usize::MAX,
            });
        }
        pending.sort_by_key(|p| p.id);
        if pending.windows(2).any(|w| w[0].id == w[1].id) {
            return bad();
        }
        let mut consumers: Vec<Consumer> = Vec::new();
        for i in 0..self.count(10)? {
            let name = self.string()?;
            let seen = self.time()?;
            let active = match t >= T_STREAM_3 {
                true => self.time()? as i64,
                false => seen as i64,
            };
            for _ in 0..self.count(16)? {
                let id = self.raw_id()?;
                match pending.binary_search_by_key(&id, |p| p.id) {
                    Ok(at) if pending[at].owner == usize::MAX => pending[at].owner = i,
                    _ => return bad(),
                }
            }
            consumers.push(Consumer { name, seen, active });
        }
        let names = consumers.iter().map(|c| c.name.as_slice());
        if !unique(names) || pending.iter().any(|p| p.owner == usize::MAX) {
            return bad();
        }
        Ok(Group {
            name,
            last_id,
            entries_read,
            pending,
            consumers,
        })
    }
}

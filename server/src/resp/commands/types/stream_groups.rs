//! Stream consumer groups' records beside a stream's entries (docs/FORMAT.md, "Redis
//! types"): under the stream's prefix, part `i` holds the counters Redis 7 keeps besides the
//! length and last id, `g` + name a group, `c` + group + name a consumer, and `p` + group +
//! id an entry of a group's pending entries list (PEL). No part falls in the entries' range
//! (`f`), so XRANGE never sees them; RENAME, COPY, DEL and the reclaim of dead
//! collections treat them as any subkey. The commands are in `stream_xgroup.rs` (XGROUP,
//! XSETID, XINFO) and `stream_pel.rs` (XREADGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM).
//!
//! A consumer's own pending entries are the group's, filtered by owner: one record per
//! pending entry (Redis keeps a second index per consumer), so reading a consumer's history
//! costs its group's pending list.

use crate::core::shared::Shared;
use crate::resp::commands::types::access::{put, remove, Fail, Src};
use crate::resp::commands::types::encoding::{fields_range, Meta, StreamId};
use crate::resp::notify;
use crate::resp::session::Session;

/// Redis's `SCG_INVALID_ENTRIES_READ`: a group whose read counter is unknown.
pub(crate) const INVALID_READ: i64 = -1;

/// Milliseconds since the epoch, the clock of delivery and seen times.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

pub(crate) fn corrupt() -> Fail {
    Fail::Reply("ERR corrupt stream consumer group record".into())
}

fn part(p: &[u8], part: u8) -> Vec<u8> {
    let mut k = Vec::with_capacity(p.len() + 1);
    k.extend_from_slice(p);
    k.push(part);
    k
}

/// `p | part | group length u16 | group`: what every consumer or PEL record of a group
/// starts with.
fn scoped(p: &[u8], which: u8, group: &[u8]) -> Vec<u8> {
    let mut k = part(p, which);
    k.extend_from_slice(&(group.len() as u16).to_be_bytes());
    k.extend_from_slice(group);
    k
}

/// The first key after every key that starts with `k`.
fn past(k: &[u8]) -> Vec<u8> {
    let mut e = k.to_vec();
    while e.last() == Some(&0xFF) {
        e.pop();
    }
    if let Some(b) = e.last_mut() {
        *b += 1;
    }
    e
}

/// The subkey of group `name`.
pub(crate) fn group_key(p: &[u8], name: &[u8]) -> Vec<u8> {
    let mut k = part(p, b'g');
    k.extend_from_slice(name);
    k
}

/// The range of a stream's group records.
pub(crate) fn groups_range(p: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (part(p, b'g'), part(p, b'g' + 1))
}

/// The range of a group's consumer records, and where each name starts in a key.
pub(crate) fn consumers_range(p: &[u8], group: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let lo = scoped(p, b'c', group);
    let hi = past(&lo);
    (lo, hi)
}

pub(crate) fn consumer_key(p: &[u8], group: &[u8], name: &[u8]) -> Vec<u8> {
    let mut k = scoped(p, b'c', group);
    k.extend_from_slice(name);
    k
}

pub(crate) fn pel_key(p: &[u8], group: &[u8], id: StreamId) -> Vec<u8> {
    let mut k = scoped(p, b'p', group);
    k.extend_from_slice(&id.to_bytes());
    k
}

/// A stream's counters besides its length and last id: entries ever removed (so the
/// entries ever added are `len + removed`) and the greatest id XDEL removed. The record is
/// absent while both are zero, so a stream without deletions costs nothing more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Info {
    pub removed: u64,
    pub max_deleted: StreamId,
}

impl Default for Info {
    fn default() -> Info {
        Info {
            removed: 0,
            max_deleted: StreamId::MIN,
        }
    }
}

impl Info {
    pub fn load(sh: &Shared, s: &mut Session, src: &Src<'_>, p: &[u8]) -> Result<Info, Fail> {
        let Some(v) = src.get(sh, s, &part(p, b'i'))? else {
            return Ok(Info::default());
        };
        match (
            u64_at(&v, 0),
            StreamId::from_bytes(v.get(8..).unwrap_or_default()),
        ) {
            (Some(removed), Some(max_deleted)) => Ok(Info {
                removed,
                max_deleted,
            }),
            _ => Err(corrupt()),
        }
    }

    pub fn save(&self, sh: &Shared, s: &mut Session, p: &[u8]) -> Result<(), Fail> {
        if *self == Info::default() {
            return remove(sh, s, part(p, b'i'));
        }
        let mut v = self.removed.to_be_bytes().to_vec();
        v.extend_from_slice(&self.max_deleted.to_bytes());
        put(sh, s, part(p, b'i'), &v)
    }
}

/// What a group's lag and read counter need to know of its stream (Redis's `stream`
/// fields of the same names).
pub(crate) struct Shape {
    pub len: u64,
    pub last: StreamId,
    pub added: u64,
    pub max_deleted: StreamId,
    /// The first entry's id (0-0: empty).
    pub first: StreamId,
}

impl Shape {
    pub fn load(
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        key: &[u8],
        m: &Meta,
    ) -> Result<Shape, Fail> {
        Shape::load_for(sh, s, src, (key, m), None)
    }

    /// [`Shape::load`] for advancing `group` ([`Shape::advance`]): the first entry's id
    /// is looked up only when the advance can ask for it (an entry was ever deleted, or
    /// the group's read counter is unknown), a scan XREADGROUP otherwise saves.
    pub fn load_for(
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        (key, m): (&[u8], &Meta),
        group: Option<&Group>,
    ) -> Result<Shape, Fail> {
        let p = m.prefix(key);
        let info = Info::load(sh, s, src, &p)?;
        let needed = group
            .is_none_or(|g| info.max_deleted != StreamId::MIN || g.entries_read == INVALID_READ);
        let mut first = StreamId::MIN;
        if needed {
            let (lo, hi) = fields_range(&p);
            src.scan(sh, s, (&lo, &hi), 1, |k, _| {
                first = StreamId::from_bytes(&k[p.len() + 1..]).unwrap_or(StreamId::MIN)
            })?;
        }
        Ok(Shape {
            len: m.len,
            last: m.last_id(),
            added: m.len + info.removed,
            max_deleted: info.max_deleted,
            first,
        })
    }

    /// Whether a deleted entry may lie at or after `start` (Redis's
    /// `streamRangeHasTombstones` up to the end).
    pub fn tombstones_from(&self, start: StreamId) -> bool {
        if self.len == 0 || self.max_deleted == StreamId::MIN || self.first > self.max_deleted {
            return false;
        }
        start <= self.max_deleted
    }

    /// The number of entries added up to `id`, where it can be known (Redis's
    /// `streamEstimateDistanceFromFirstEverEntry`; [`INVALID_READ`]: it cannot).
    pub fn estimate(&self, id: StreamId) -> i64 {
        if self.added == 0 {
            return 0;
        }
        if self.len == 0 && id <= self.last {
            return self.added as i64;
        }
        match id.cmp(&self.last) {
            std::cmp::Ordering::Equal => return self.added as i64,
            std::cmp::Ordering::Greater => return INVALID_READ,
            std::cmp::Ordering::Less => {}
        }
        if self.max_deleted == StreamId::MIN || self.max_deleted < self.first {
            if id < self.first {
                return (self.added - self.len) as i64;
            }
            if id == self.first {
                return (self.added - self.len + 1) as i64;
            }
        }
        INVALID_READ
    }

    /// A group's lag (`None`: unknown, a null reply).
    pub fn lag(&self, g: &Group) -> Option<i64> {
        if self.added == 0 {
            return Some(0);
        }
        if g.entries_read != INVALID_READ && !self.tombstones_from(g.last) {
            return Some(self.added as i64 - g.entries_read);
        }
        let read = self.estimate(g.last);
        (read != INVALID_READ).then(|| self.added as i64 - read)
    }

    /// A group's counters after it is given the entry `id` (Redis's bookkeeping in
    /// `streamReplyWithRange`).
    pub fn advance(&self, g: &mut Group, id: StreamId) {
        if id <= g.last {
            return;
        }
        if g.entries_read != INVALID_READ && !self.tombstones_from(id) {
            g.entries_read += 1;
        } else if self.added > 0 {
            g.entries_read = self.estimate(id);
        }
        g.last = id;
    }
}

/// A consumer group: the last id delivered, entries read (for the lag), and how many
/// pending entries and consumers it has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    pub last: StreamId,
    pub entries_read: i64,
    pub pending: u64,
    pub consumers: u64,
}

impl Group {
    pub fn new(last: StreamId, entries_read: i64) -> Group {
        Group {
            last,
            entries_read,
            pending: 0,
            consumers: 0,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.last.to_bytes().to_vec();
        v.extend_from_slice(&self.entries_read.to_be_bytes());
        v.extend_from_slice(&self.pending.to_be_bytes());
        v.extend_from_slice(&self.consumers.to_be_bytes());
        v
    }

    pub fn decode(v: &[u8]) -> Result<Group, Fail> {
        let last = StreamId::from_bytes(v.get(..16).unwrap_or_default()).ok_or_else(corrupt)?;
        match (u64_at(v, 16), u64_at(v, 24), u64_at(v, 32), v.len()) {
            (Some(read), Some(pending), Some(consumers), 40) => Ok(Group {
                last,
                entries_read: read as i64,
                pending,
                consumers,
            }),
            _ => Err(corrupt()),
        }
    }
}

/// A consumer: when it last tried an operation, when it last read or claimed (`-1`:
/// never) and how many entries it holds pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Consumer {
    pub seen: u64,
    pub active: i64,
    pub pending: u64,
}

impl Consumer {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.seen.to_be_bytes().to_vec();
        v.extend_from_slice(&self.active.to_be_bytes());
        v.extend_from_slice(&self.pending.to_be_bytes());
        v
    }

    pub fn decode(v: &[u8]) -> Result<Consumer, Fail> {
        match (u64_at(v, 0), u64_at(v, 8), u64_at(v, 16), v.len()) {
            (Some(seen), Some(active), Some(pending), 24) => Ok(Consumer {
                seen,
                active: active as i64,
                pending,
            }),
            _ => Err(corrupt()),
        }
    }
}

/// A pending entry: when it was last delivered, how many times, and to whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nack {
    pub time: u64,
    pub count: u64,
    pub consumer: Vec<u8>,
}

impl Nack {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.time.to_be_bytes().to_vec();
        v.extend_from_slice(&self.count.to_be_bytes());
        v.extend_from_slice(&self.consumer);
        v
    }

    fn decode(v: &[u8]) -> Result<Nack, Fail> {
        match (u64_at(v, 0), u64_at(v, 8)) {
            (Some(time), Some(count)) => Ok(Nack {
                time,
                count,
                consumer: v[16..].to_vec(),
            }),
            _ => Err(corrupt()),
        }
    }
}

/// Pending entries read per scan while walking a PEL.
const CHUNK: usize = 256;

/// Calls `f` with each pending entry of group `group` whose id is in `[from, to]`, in id
/// order, until it answers `false`; `f` may change the PEL (each chunk is read first).
pub(crate) fn walk(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (p, group): (&[u8], &[u8]),
    (from, to): (StreamId, StreamId),
    mut f: impl FnMut(&mut Session, StreamId, Nack) -> Result<bool, Fail>,
) -> Result<(), Fail> {
    if from > to {
        return Ok(());
    }
    let mut lo = pel_key(p, group, from);
    let mut hi = pel_key(p, group, to);
    hi.push(0);
    let at = hi.len() - 17;
    loop {
        let mut batch = Vec::new();
        src.scan(sh, s, (&lo, &hi), CHUNK, |k, v| {
            batch.push((k.to_vec(), v.to_vec()))
        })?;
        let full = batch.len() == CHUNK;
        for (k, v) in &batch {
            let id = StreamId::from_bytes(&k[at..]).ok_or_else(corrupt)?;
            if !f(s, id, Nack::decode(v)?)? {
                return Ok(());
            }
        }
        match batch.last() {
            Some((k, _)) if full => {
                lo = k.clone();
                lo.push(0);
            }
            _ => return Ok(()),
        }
    }
}

/// A group opened by a command: its record and the consumers the command touched, written
/// back by [`Open::save`].
pub(crate) struct Open {
    pub p: Vec<u8>,
    pub name: Vec<u8>,
    pub g: Group,
    consumers: Vec<(Vec<u8>, Consumer)>,
    /// The stream's key, kept only while stream events are wanted (a consumer created
    /// is `xgroup-createconsumer`, notify.rs).
    key: Option<Vec<u8>>,
}

impl Open {
    /// Group `name` of the stream `m` at `key` (`None`: no such group).
    pub fn load(
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        (key, m): (&[u8], &Meta),
        name: &[u8],
    ) -> Result<Option<Open>, Fail> {
        let p = m.prefix(key);
        let Some(v) = src.get(sh, s, &group_key(&p, name))? else {
            return Ok(None);
        };
        Ok(Some(Open {
            g: Group::decode(&v)?,
            p,
            name: name.to_vec(),
            consumers: Vec::new(),
            key: notify::wants(s, notify::STREAM).then(|| key.to_vec()),
        }))
    }

    /// A new group (the caller checked there is none of that name).
    pub fn create(p: Vec<u8>, name: &[u8], g: Group) -> Open {
        Open {
            p,
            name: name.to_vec(),
            g,
            consumers: Vec::new(),
            key: None,
        }
    }

    /// Consumer `name`, loaded for a change (`None`: there is none).
    pub fn consumer(
        &mut self,
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        name: &[u8],
    ) -> Result<Option<&mut Consumer>, Fail> {
        if let Some(i) = self.consumers.iter().position(|(n, _)| n == name) {
            return Ok(Some(&mut self.consumers[i].1));
        }
        let Some(c) = self.find_consumer(sh, s, src, name)? else {
            return Ok(None);
        };
        self.consumers.push((name.to_vec(), c));
        Ok(self.consumers.last_mut().map(|(_, c)| c))
    }

    /// Consumer `name` as stored (`None`: there is none).
    pub fn find_consumer(
        &self,
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        name: &[u8],
    ) -> Result<Option<Consumer>, Fail> {
        let v = src.get(sh, s, &consumer_key(&self.p, &self.name, name))?;
        v.map(|v| Consumer::decode(&v)).transpose()
    }

    /// The first and last ids of the group's pending entries (`None`: none).
    pub fn pel_edges(
        &self,
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
    ) -> Result<Option<(StreamId, StreamId)>, Fail> {
        let lo = scoped(&self.p, b'p', &self.name);
        let hi = past(&lo);
        let at = lo.len();
        let (mut first, mut last) = (None, None);
        src.scan(sh, s, (&lo, &hi), 1, |k, _| {
            first = StreamId::from_bytes(&k[at..])
        })?;
        src.scan_rev(sh, s, (&lo, &hi), 1, |k, _| {
            last = StreamId::from_bytes(&k[at..])
        })?;
        Ok(first.zip(last))
    }

    /// Consumer `name`, created (seen now, never active) when there is none; whether it was.
    pub fn consumer_or_create(
        &mut self,
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        name: &[u8],
        now: u64,
    ) -> Result<(&mut Consumer, bool), Fail> {
        let created = self.consumer(sh, s, src, name)?.is_none();
        if created {
            self.g.consumers += 1;
            let c = Consumer {
                seen: now,
                active: -1,
                pending: 0,
            };
            self.consumers.push((name.to_vec(), c));
            if let Some(key) = &self.key {
                notify::event(s, notify::STREAM, "xgroup-createconsumer", key);
            }
        }
        let i = self.consumers.iter().position(|(n, _)| n == name);
        let c = i.map(|i| &mut self.consumers[i].1).ok_or_else(corrupt)?;
        Ok((c, created))
    }

    /// The pending entry `id`.
    pub fn nack(
        &self,
        sh: &Shared,
        s: &mut Session,
        src: &Src<'_>,
        id: StreamId,
    ) -> Result<Option<Nack>, Fail> {
        let v = src.get(sh, s, &pel_key(&self.p, &self.name, id))?;
        v.map(|v| Nack::decode(&v)).transpose()
    }

    /// Writes the pending entry `id` as `n` (its owner's count unchanged).
    pub fn set_nack(
        &self,
        sh: &Shared,
        s: &mut Session,
        id: StreamId,
        n: &Nack,
    ) -> Result<(), Fail> {
        put(sh, s, pel_key(&self.p, &self.name, id), &n.encode())
    }

    /// Gives the pending entry `id` (`old`: as it is now, `None`: not pending) to consumer
    /// `to` with its delivery time and count, counting it where it left and arrived.
    pub fn assign(
        &mut self,
        (sh, s, src): (&Shared, &mut Session, &Src<'_>),
        (id, old): (StreamId, Option<&Nack>),
        to: &[u8],
        (time, count): (u64, u64),
    ) -> Result<(), Fail> {
        match old {
            None => self.g.pending += 1,
            Some(o) if o.consumer == to => {}
            Some(o) => {
                if let Some(c) = self.consumer(sh, s, src, &o.consumer)? {
                    c.pending = c.pending.saturating_sub(1);
                }
            }
        }
        if old.is_none_or(|o| o.consumer != to) {
            let (c, _) = self.consumer_or_create(sh, s, src, to, time)?;
            c.pending += 1;
        }
        let n = Nack {
            time,
            count,
            consumer: to.to_vec(),
        };
        self.set_nack(sh, s, id, &n)
    }

    /// Removes the pending entry `id` (`n`: as it is now) from the group and its owner.
    pub fn ack(
        &mut self,
        (sh, s, src): (&Shared, &mut Session, &Src<'_>),
        id: StreamId,
        n: &Nack,
    ) -> Result<(), Fail> {
        remove(sh, s, pel_key(&self.p, &self.name, id))?;
        self.g.pending = self.g.pending.saturating_sub(1);
        if let Some(c) = self.consumer(sh, s, src, &n.consumer)? {
            c.pending = c.pending.saturating_sub(1);
        }
        Ok(())
    }

    /// Removes consumer `name` and its pending entries: how many it had (`None`: no such
    /// consumer).
    pub fn delete_consumer(
        &mut self,
        (sh, s, src): (&Shared, &mut Session, &Src<'_>),
        name: &[u8],
    ) -> Result<Option<u64>, Fail> {
        if self.consumer(sh, s, src, name)?.is_none() {
            return Ok(None);
        }
        let mut mine = Vec::new();
        let scope = (self.p.as_slice(), self.name.as_slice());
        walk(
            sh,
            s,
            src,
            scope,
            (StreamId::MIN, StreamId::MAX),
            |_, id, n| {
                if n.consumer == name {
                    mine.push(id);
                }
                Ok(true)
            },
        )?;
        for id in &mine {
            remove(sh, s, pel_key(&self.p, &self.name, *id))?;
        }
        self.g.pending = self.g.pending.saturating_sub(mine.len() as u64);
        self.g.consumers = self.g.consumers.saturating_sub(1);
        self.consumers.retain(|(n, _)| n != name);
        remove(sh, s, consumer_key(&self.p, &self.name, name))?;
        Ok(Some(mine.len() as u64))
    }

    /// Writes the group's record and every consumer the command loaded.
    pub fn save(self, sh: &Shared, s: &mut Session) -> Result<(), Fail> {
        put(sh, s, group_key(&self.p, &self.name), &self.g.encode())?;
        for (name, c) in &self.consumers {
            put(sh, s, consumer_key(&self.p, &self.name, name), &c.encode())?;
        }
        Ok(())
    }

    /// Removes the group, its consumers and its pending entries.
    pub fn destroy(self, sh: &Shared, s: &mut Session, src: &Src<'_>) -> Result<(), Fail> {
        let mut gone = Vec::new();
        for which in [b'c', b'p'] {
            let lo = scoped(&self.p, which, &self.name);
            let hi = past(&lo);
            src.scan(sh, s, (&lo, &hi), usize::MAX, |k, _| gone.push(k.to_vec()))?;
        }
        for k in gone {
            remove(sh, s, k)?;
        }
        remove(sh, s, group_key(&self.p, &self.name))
    }
}

/// Every group of the stream whose prefix is `p`, by name.
pub(crate) fn groups(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    p: &[u8],
) -> Result<Vec<(Vec<u8>, Group)>, Fail> {
    let (lo, hi) = groups_range(p);
    let mut raw = Vec::new();
    src.scan(sh, s, (&lo, &hi), usize::MAX, |k, v| {
        raw.push((k[lo.len()..].to_vec(), v.to_vec()))
    })?;
    raw.into_iter()
        .map(|(n, v)| Group::decode(&v).map(|g| (n, g)))
        .collect()
}

/// Every consumer of group `group`, by name.
pub(crate) fn consumers(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (p, group): (&[u8], &[u8]),
) -> Result<Vec<(Vec<u8>, Consumer)>, Fail> {
    let (lo, hi) = consumers_range(p, group);
    let mut raw = Vec::new();
    src.scan(sh, s, (&lo, &hi), usize::MAX, |k, v| {
        raw.push((k[lo.len()..].to_vec(), v.to_vec()))
    })?;
    raw.into_iter()
        .map(|(n, v)| Consumer::decode(&v).map(|c| (n, c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::commands::types::encoding::field_key;

    fn id(ms: u64, seq: u64) -> StreamId {
        StreamId { ms, seq }
    }

    #[test]
    fn records_round_trip() {
        let g = Group {
            last: id(5, 6),
            entries_read: INVALID_READ,
            pending: 3,
            consumers: 2,
        };
        assert_eq!(Group::decode(&g.encode()).unwrap(), g);
        let c = Consumer {
            seen: 9,
            active: -1,
            pending: 4,
        };
        assert_eq!(Consumer::decode(&c.encode()).unwrap(), c);
        let n = Nack {
            time: 1,
            count: 2,
            consumer: b"alice".to_vec(),
        };
        assert_eq!(Nack::decode(&n.encode()).unwrap(), n);
        assert!(Group::decode(&[0; 39]).is_err());
        assert!(Consumer::decode(&[0; 23]).is_err());
        assert!(Nack::decode(&[0; 15]).is_err());
    }

    #[test]
    fn parts_sort_apart_from_entries_and_groups_apart() {
        let p = b"\xFF\xFF\x00\x01k\x00\x00\x00\x00\x00\x00\x00\x01".to_vec();
        let (lo, hi) = fields_range(&p);
        assert!(field_key(&p, &StreamId::MAX.to_bytes()) < hi);
        for k in [
            group_key(&p, b"g"),
            consumer_key(&p, b"g", b"c"),
            pel_key(&p, b"g", StreamId::MIN),
            part(&p, b'i'),
        ] {
            assert!(k < lo || k >= hi, "{k:?} among the entries");
        }
        // Group "a"'s consumers never fall in group "ab"'s range, whatever their names.
        let (lo, hi) = consumers_range(&p, b"a");
        let other = consumer_key(&p, b"ab", b"");
        assert!(!(lo <= other && other < hi));
        let mine = consumer_key(&p, b"a", b"\xFF\xFF");
        assert!(lo <= mine && mine < hi);
    }

    #[test]
    fn estimates_follow_redis() {
        let shape = Shape {
            len: 3,
            last: id(3, 0),
            added: 5,
            max_deleted: StreamId::MIN,
            first: id(1, 0),
        };
        assert_eq!(shape.estimate(id(3, 0)), 5);
        assert_eq!(shape.estimate(id(1, 0)), 3);
        assert_eq!(shape.estimate(id(0, 5)), 2);
        assert_eq!(shape.estimate(id(2, 0)), INVALID_READ);
        assert_eq!(shape.estimate(id(4, 0)), INVALID_READ);
        let mut g = Group::new(StreamId::MIN, INVALID_READ);
        shape.advance(&mut g, id(1, 0));
        assert_eq!((g.last, g.entries_read), (id(1, 0), 3));
        shape.advance(&mut g, id(2, 0));
        assert_eq!(g.entries_read, 4);
        assert_eq!(shape.lag(&g), Some(1));
        let holed = Shape {
            max_deleted: id(2, 5),
            ..shape
        };
        assert!(holed.tombstones_from(id(1, 0)));
        assert!(!holed.tombstones_from(id(2, 6)));
        assert_eq!(holed.lag(&Group::new(id(1, 0), 3)), None);
    }
}

//! A stream as DUMP and RESTORE carry it (`accelkv_proto::rdb::Stream`): read from its
//! entries, its counter record and its groups' records (`stream_groups.rs`), and written
//! back as those records under a fresh collection id. A group from a payload older than
//! Redis 7.0 has no read counter; it is estimated from the stream as Redis 7.2's loader
//! does.

use crate::core::shared::Shared;
use crate::resp::commands::types::access::{check_field_len, put, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{
    decode_entry, encode_entry, new_meta, Kind, Meta, StreamId,
};
use crate::resp::commands::types::stream::entry_key;
use crate::resp::commands::types::stream_groups::{
    consumer_key, consumers, corrupt, group_key, groups, pel_key, walk, Consumer, Group, Info,
    Nack, Shape,
};
use crate::resp::session::Session;
use accelkv_proto::rdb;

/// The stream `m` at `key`, whole.
pub(crate) fn read(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
) -> Result<rdb::Stream, Fail> {
    let p = m.prefix(key);
    let mut entries = Vec::with_capacity(m.len as usize);
    for (f, v) in src.fields(sh, s, key, m)? {
        let id = StreamId::from_bytes(&f).ok_or_else(corrupt)?;
        let items = decode_entry(&v).ok_or_else(corrupt)?;
        entries.push((id, items.into_iter().map(<[u8]>::to_vec).collect()));
    }
    let info = Info::load(sh, s, src, &p)?;
    let mut out = Vec::new();
    for (name, g) in groups(sh, s, src, &p)? {
        out.push(read_group(sh, s, src, (&p, name), g)?);
    }
    Ok(rdb::Stream {
        entries,
        last_id: m.last_id(),
        max_deleted: info.max_deleted,
        entries_added: m.len + info.removed,
        groups: out,
    })
}

/// Group `name` with its consumers and pending entries.
fn read_group(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (p, name): (&[u8], Vec<u8>),
    g: Group,
) -> Result<rdb::Group, Fail> {
    // By name, as the scan gives them: an owner is found by binary search.
    let cs = consumers(sh, s, src, (p, &name))?;
    let mut pending = Vec::with_capacity(g.pending as usize);
    walk(
        sh,
        s,
        src,
        (p, &name),
        (StreamId::MIN, StreamId::MAX),
        |_, id, n| {
            let owner = cs
                .binary_search_by(|(c, _)| c.as_slice().cmp(&n.consumer))
                .map_err(|_| corrupt())?;
            pending.push(rdb::Pending {
                id,
                time: n.time,
                count: n.count,
                owner,
            });
            Ok(true)
        },
    )?;
    let consumers = cs.into_iter().map(|(name, c)| rdb::Consumer {
        name,
        seen: c.seen,
        active: c.active,
    });
    Ok(rdb::Group {
        name,
        last_id: g.last,
        entries_read: Some(g.entries_read),
        pending,
        consumers: consumers.collect(),
    })
}

/// Refuses a stream whose entries or names the store cannot hold, before anything is
/// written.
pub(crate) fn check(sh: &Shared, key: &[u8], v: &rdb::Stream) -> Result<(), Fail> {
    check_field_len(sh, key, 16)?;
    let max = sh.view().config().max_value;
    for (_, items) in &v.entries {
        if 4 + items.iter().map(|i| 4 + i.len()).sum::<usize>() > max {
            return Err(Fail::Reply(
                "ERR string exceeds maximum allowed size".into(),
            ));
        }
    }
    for g in &v.groups {
        // A pending entry's record: the group's name and an id; a consumer's: both names.
        let longest = g.consumers.iter().map(|c| c.name.len()).max().unwrap_or(0);
        check_field_len(sh, key, 2 + g.name.len() + longest.max(16))?;
    }
    Ok(())
}

/// Writes the stream `v` at `key` (inside the running transaction; the key is free).
pub(crate) fn write(sh: &Shared, s: &mut Session, key: &[u8], v: &rdb::Stream) -> Result<(), Fail> {
    let mut m = new_meta(Kind::Stream);
    let p = m.prefix(key);
    for (id, items) in &v.entries {
        put(sh, s, entry_key(&p, *id), &encode_entry(items))?;
    }
    m.len = v.entries.len() as u64;
    m.set_last_id(v.last_id);
    set_meta(sh, s, key, &m)?;
    let info = Info {
        removed: v.entries_added.saturating_sub(m.len),
        max_deleted: v.max_deleted,
    };
    info.save(sh, s, &p)?;
    let shape = Shape {
        len: m.len,
        last: v.last_id,
        added: v.entries_added,
        max_deleted: v.max_deleted,
        first: v.entries.first().map_or(StreamId::MIN, |e| e.0),
    };
    for g in &v.groups {
        write_group(sh, s, &p, g, &shape)?;
    }
    Ok(())
}

fn write_group(
    sh: &Shared,
    s: &mut Session,
    p: &[u8],
    g: &rdb::Group,
    shape: &Shape,
) -> Result<(), Fail> {
    let mut owned = vec![0u64; g.consumers.len()];
    for e in &g.pending {
        let owner = g.consumers.get(e.owner).ok_or_else(corrupt)?;
        owned[e.owner] += 1;
        let n = Nack {
            time: e.time,
            count: e.count,
            consumer: owner.name.clone(),
        };
        put(sh, s, pel_key(p, &g.name, e.id), &n.encode())?;
    }
    for (c, pending) in g.consumers.iter().zip(owned) {
        let r = Consumer {
            seen: c.seen,
            active: c.active,
            pending,
        };
        put(sh, s, consumer_key(p, &g.name, &c.name), &r.encode())?;
    }
    let r = Group {
        last: g.last_id,
        entries_read: g.entries_read.unwrap_or_else(|| shape.estimate(g.last_id)),
        pending: g.pending.len() as u64,
        consumers: g.consumers.len() as u64,
    };
    put(sh, s, group_key(p, &g.name), &r.encode())
}

//! Managing consumer groups and looking inside streams: XGROUP (CREATE, SETID, DESTROY,
//! CREATECONSUMER, DELCONSUMER), XSETID and XINFO (STREAM [FULL], GROUPS, CONSUMERS), with
//! Redis 7's replies and errors. The records are `stream_groups.rs`'s.

use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, set_meta, Fail, Src};
use crate::resp::commands::types::encoding::{new_meta, Meta, StreamId};
use crate::resp::commands::types::run::{int_arg, read, write_key};
use crate::resp::commands::types::stream::{entry_key, parse_id, X};
use crate::resp::commands::types::stream_groups::{
    self as groups, now_ms, Group, Info, Open, Shape, INVALID_READ,
};
use crate::resp::commands::types::stream_read::{entries, reply_entries, reply_entry, Entry};
use crate::resp::db::shown;
use crate::resp::notify::{event, STREAM};
use crate::resp::reply::{help, subcommand_ok};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

const XGROUP_SUBS: &[(&str, i32)] = &[
    ("CREATE", -5),
    ("SETID", -5),
    ("DESTROY", 4),
    ("CREATECONSUMER", 5),
    ("DELCONSUMER", 5),
    ("HELP", 2),
];

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

/// Redis's error for a command on a group that is not there.
pub(crate) fn no_group(key: &[u8], group: &[u8]) -> Fail {
    Fail::Reply(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(shown(key))
    ))
}

fn sub_syntax(cmd: &str, sub: &[u8]) -> Fail {
    Fail::Reply(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {cmd} HELP.",
        String::from_utf8_lossy(sub)
    ))
}

/// The id of the stream's last entry (`None`: empty).
pub(crate) fn last_entry(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
) -> Result<Option<Entry>, Fail> {
    let p = m.prefix(key);
    let (lo, mut hi) = (entry_key(&p, StreamId::MIN), entry_key(&p, StreamId::MAX));
    hi.push(0);
    let mut last = None;
    src.scan_rev(sh, s, (&lo, &hi), 1, |k, _| {
        last = StreamId::from_bytes(&k[p.len() + 1..])
    })?;
    match last {
        Some(id) => Ok(entries(sh, s, src, (key, m), (id, id), 1)?.pop()),
        None => Ok(None),
    }
}

/// XGROUP's options after its fixed arguments: MKSTREAM (CREATE) and ENTRIESREAD.
fn xgroup_opts(args: &[&[u8]], sub: &[u8]) -> Result<(bool, i64), Fail> {
    let (create, setid) = (sub == b"CREATE", sub == b"SETID");
    let (mut mk, mut read, mut i) = (false, INVALID_READ, 5);
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        if create && opt == b"MKSTREAM" {
            mk = true;
            i += 1;
        } else if (create || setid) && opt == b"ENTRIESREAD" && i + 1 < args.len() {
            read = int_arg(args[i + 1])?;
            if read < 0 && read != INVALID_READ {
                return Err(Fail::Reply(
                    "ERR value for ENTRIESREAD must be positive or -1".into(),
                ));
            }
            i += 2;
        } else {
            return Err(sub_syntax("XGROUP", args[1]));
        }
    }
    Ok((mk, read))
}

/// What an XGROUP subcommand answers.
enum Said {
    Ok,
    Int(i64),
}

/// `XGROUP <subcommand> key group …`.
pub fn xgroup(x: &mut Call<'_, '_>) {
    if !subcommand_ok(x.out, "XGROUP", XGROUP_SUBS, x.args) {
        return;
    }
    let sub = x.args[1].to_ascii_uppercase();
    if sub == b"HELP" {
        return help(x.out, "XGROUP", XGROUP_HELP);
    }
    let (mk, read_arg) = match xgroup_opts(x.args, &sub) {
        Ok(o) => o,
        Err(e) => return fail(x.out, &e),
    };
    let args = x.args;
    let (key, name) = (args[2], args[3]);
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let (m, fresh) = match src.meta(sh, s, key, X)? {
                Some(m) => (m, false),
                None if mk => (new_meta(X), true),
                None => return Err(Fail::Reply("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.".into())),
            };
            let open = Open::load(sh, s, src, (key, &m), name)?;
            if open.is_none() && sub != b"CREATE" && sub != b"DESTROY" {
                return Err(no_group(key, name));
            }
            let id_arg = |strict: bool| -> Result<StreamId, Fail> {
                match args[4] {
                    b"$" => Ok(m.last_id()),
                    b"-" if !strict => Ok(StreamId::MIN),
                    b"+" if !strict => Ok(StreamId::MAX),
                    a => parse_id(a, 0),
                }
            };
            match (sub.as_slice(), open) {
                (b"CREATE", _) if args.len() > 8 => Err(sub_syntax("XGROUP", args[1])),
                (b"CREATE", Some(_)) => Err(Fail::Reply(
                    "BUSYGROUP Consumer Group name already exists".into(),
                )),
                (b"CREATE", None) => {
                    let g = Group::new(id_arg(true)?, read_arg);
                    if fresh {
                        set_meta(sh, s, key, &m)?;
                    }
                    Open::create(m.prefix(key), name, g).save(sh, s)?;
                    event(s, STREAM, "xgroup-create", key);
                    Ok(Said::Ok)
                }
                (b"SETID", Some(mut o)) if args.len() == 5 || args.len() == 7 => {
                    (o.g.last, o.g.entries_read) = (id_arg(false)?, read_arg);
                    o.save(sh, s)?;
                    event(s, STREAM, "xgroup-setid", key);
                    Ok(Said::Ok)
                }
                (b"DESTROY", Some(o)) => {
                    o.destroy(sh, s, src)?;
                    s.block.wake.push(key);
                    event(s, STREAM, "xgroup-destroy", key);
                    Ok(Said::Int(1))
                }
                (b"DESTROY", None) => Ok(Said::Int(0)),
                (b"CREATECONSUMER", Some(mut o)) => {
                    let (_, created) = o.consumer_or_create(sh, s, src, args[4], now_ms())?;
                    o.save(sh, s)?;
                    Ok(Said::Int(created as i64))
                }
                (b"DELCONSUMER", Some(mut o)) => {
                    let n = o.delete_consumer((sh, s, src), args[4])?;
                    o.save(sh, s)?;
                    if n.is_some() {
                        event(s, STREAM, "xgroup-delconsumer", key);
                    }
                    Ok(Said::Int(n.unwrap_or(0) as i64))
                }
                _ => Err(sub_syntax("XGROUP", args[1])),
            }
        },
        |out, said, _| match said {
            Said::Ok => crate::resp::reply::ok(out),
            Said::Int(n) => resp::integer(out, n),
        },
    )
}

/// XSETID's options: ENTRIESADDED (`-1`: not given) and MAXDELETEDID.
fn xsetid_opts(args: &[&[u8]], id: StreamId) -> Result<(i64, StreamId), Fail> {
    let (mut added, mut max_del, mut i) = (-1, StreamId::MIN, 3);
    while i < args.len() {
        let opt = args[i].to_ascii_uppercase();
        let val = args.get(i + 1);
        match (opt.as_slice(), val) {
            (b"ENTRIESADDED", Some(v)) => {
                added = int_arg(v)?;
                if added < 0 {
                    return Err(Fail::Reply("ERR entries_added must be positive".into()));
                }
            }
            (b"MAXDELETEDID", Some(v)) => {
                max_del = parse_id(v, 0)?;
                if id < max_del {
                    return Err(Fail::Reply("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id".into()));
                }
            }
            _ => return Err(Fail::Reply("ERR syntax error".into())),
        }
        i += 2;
    }
    Ok((added, max_del))
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`.
pub fn xsetid(x: &mut Call<'_, '_>) {
    let parsed = parse_id(x.args[2], 0).and_then(|id| Ok((id, xsetid_opts(x.args, id)?)));
    let (id, (added, max_del)) = match parsed {
        Ok(p) => p,
        Err(e) => return fail(x.out, &e),
    };
    let key = x.args[1];
    x.sh.count(OpClass::Put);
    write_key(
        x,
        key,
        |sh, s, src| {
            let Some(mut m) = src.meta(sh, s, key, X)? else {
                return Err(Fail::Reply("ERR no such key".into()));
            };
            let p = m.prefix(key);
            let mut info = Info::load(sh, s, src, &p)?;
            if id < info.max_deleted {
                return Err(Fail::Reply(
                    "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
                        .into(),
                ));
            }
            if m.len > 0 {
                let top = last_entry(sh, s, src, (key, &m))?.map_or(StreamId::MIN, |e| e.0);
                if id < top {
                    return Err(Fail::Reply(
                        "ERR The ID specified in XSETID is smaller than the target stream top item"
                            .into(),
                    ));
                }
                if added != -1 && m.len > added as u64 {
                    return Err(Fail::Reply("ERR The entries_added specified in XSETID is smaller than the target stream length".into()));
                }
            }
            m.set_last_id(id);
            if added != -1 {
                info.removed = added as u64 - m.len;
            }
            if max_del != StreamId::MIN {
                info.max_deleted = max_del;
            }
            info.save(sh, s, &p)?;
            set_meta(sh, s, key, &m)?;
            event(s, STREAM, "xsetid", key);
            Ok(())
        },
        |out, (), _| crate::resp::reply::ok(out),
    )
}

const XINFO_SUBS: &[(&str, i32)] = &[("CONSUMERS", 4), ("GROUPS", 3), ("STREAM", -3), ("HELP", 2)];

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// `XINFO STREAM|GROUPS|CONSUMERS key …`.
pub fn xinfo(x: &mut Call<'_, '_>) {
    if !subcommand_ok(x.out, "XINFO", XINFO_SUBS, x.args) {
        return;
    }
    let sub = x.args[1].to_ascii_uppercase();
    if sub == b"HELP" {
        return help(x.out, "XINFO", XINFO_HELP);
    }
    let full = match (sub.as_slice(), &x.args[3..]) {
        (b"STREAM", []) => None,
        (b"STREAM", [f]) if f.eq_ignore_ascii_case(b"FULL") => Some(10),
        (b"STREAM", [f, c, n])
            if f.eq_ignore_ascii_case(b"FULL") && c.eq_ignore_ascii_case(b"COUNT") =>
        {
            match int_arg(n) {
                Ok(n) if n < 0 => Some(10),
                Ok(n) => Some(n as usize),
                Err(e) => return fail(x.out, &e),
            }
        }
        (b"STREAM", _) => return fail(x.out, &sub_syntax("XINFO", x.args[1])),
        _ => None,
    };
    let args = x.args;
    let key = args[2];
    x.sh.count(OpClass::Scan);
    read(
        x,
        |sh, s, src| {
            let Some(m) = src.meta(sh, s, key, X)? else {
                return Err(Fail::Reply("ERR no such key".into()));
            };
            let mut out = Vec::new();
            match sub.as_slice() {
                b"CONSUMERS" => info_consumers(sh, s, src, (key, &m), args[3], &mut out)?,
                b"GROUPS" => info_groups(sh, s, src, (key, &m), &mut out)?,
                _ => info_stream(sh, s, src, (key, &m), full, &mut out)?,
            }
            Ok(out)
        },
        |out, body, _| out.extend_from_slice(&body),
    )
}

fn field(out: &mut Vec<u8>, name: &str) {
    resp::bulk(out, Some(name.as_bytes()));
}

fn id_reply(out: &mut Vec<u8>, id: StreamId) {
    resp::bulk(out, Some(id.text().as_bytes()));
}

fn maybe_int(out: &mut Vec<u8>, n: Option<i64>, v: Version) {
    match n {
        Some(n) => resp::integer(out, n),
        None => resp::bulk_in(out, None, v),
    }
}

/// A group's last delivered id, entries read and lag (XINFO GROUPS and STREAM FULL).
fn progress(out: &mut Vec<u8>, g: &Group, shape: &Shape, v: Version) {
    field(out, "last-delivered-id");
    id_reply(out, g.last);
    field(out, "entries-read");
    let read = (g.entries_read != INVALID_READ).then_some(g.entries_read);
    maybe_int(out, read, v);
    field(out, "lag");
    maybe_int(out, shape.lag(g), v);
}

fn info_consumers(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    name: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let p = m.prefix(key);
    if Open::load(sh, s, src, (key, m), name)?.is_none() {
        return Err(no_group(key, name));
    }
    let (now, v) = (now_ms() as i64, s.proto);
    let cs = groups::consumers(sh, s, src, (&p, name))?;
    resp::array(out, cs.len());
    for (n, c) in cs {
        resp::map(out, 4, v);
        field(out, "name");
        resp::bulk(out, Some(&n));
        field(out, "pending");
        resp::integer(out, c.pending as i64);
        field(out, "idle");
        resp::integer(out, (now - c.seen as i64).max(0));
        field(out, "inactive");
        resp::integer(out, if c.active == -1 { -1 } else { now - c.active });
    }
    Ok(())
}

fn info_groups(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let p = m.prefix(key);
    let gs = groups::groups(sh, s, src, &p)?;
    let shape = Shape::load(sh, s, src, key, m)?;
    let v = s.proto;
    resp::array(out, gs.len());
    for (n, g) in gs {
        resp::map(out, 6, v);
        field(out, "name");
        resp::bulk(out, Some(&n));
        field(out, "consumers");
        resp::integer(out, g.consumers as i64);
        field(out, "pending");
        resp::integer(out, g.pending as i64);
        progress(out, &g, &shape, v);
    }
    Ok(())
}

/// XINFO STREAM, and with FULL (`Some(count)`: entries and pending entries shown per group
/// and consumer, 0: all) every group's pending entries and consumers.
fn info_stream(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    full: Option<usize>,
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let shape = Shape::load(sh, s, src, key, m)?;
    let v = s.proto;
    resp::map(out, if full.is_some() { 9 } else { 10 }, v);
    field(out, "length");
    resp::integer(out, m.len as i64);
    // One subkey per entry: the store's counterpart of Redis's radix tree keys and nodes.
    field(out, "radix-tree-keys");
    resp::integer(out, m.len as i64);
    field(out, "radix-tree-nodes");
    resp::integer(out, m.len as i64);
    field(out, "last-generated-id");
    id_reply(out, shape.last);
    field(out, "max-deleted-entry-id");
    id_reply(out, shape.max_deleted);
    field(out, "entries-added");
    resp::integer(out, shape.added as i64);
    field(out, "recorded-first-entry-id");
    id_reply(out, shape.first);
    let p = m.prefix(key);
    let gs = groups::groups(sh, s, src, &p)?;
    let Some(count) = full else {
        field(out, "groups");
        resp::integer(out, gs.len() as i64);
        let first = entries(sh, s, src, (key, m), (StreamId::MIN, StreamId::MAX), 1)?;
        field(out, "first-entry");
        match first.first() {
            Some(e) => reply_entry(out, e),
            None => resp::bulk_in(out, None, v),
        }
        field(out, "last-entry");
        match last_entry(sh, s, src, (key, m))? {
            Some(e) => reply_entry(out, &e),
            None => resp::bulk_in(out, None, v),
        }
        return Ok(());
    };
    let limit = if count == 0 { usize::MAX } else { count };
    field(out, "entries");
    reply_entries(
        out,
        &entries(sh, s, src, (key, m), (StreamId::MIN, StreamId::MAX), limit)?,
    );
    field(out, "groups");
    resp::array(out, gs.len());
    for (n, g) in gs {
        full_group(sh, s, src, (&p, &n, &g), (&shape, limit), out)?;
    }
    Ok(())
}

/// One group of XINFO STREAM FULL.
fn full_group(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (p, name, g): (&[u8], &[u8], &Group),
    (shape, limit): (&Shape, usize),
    out: &mut Vec<u8>,
) -> Result<(), Fail> {
    let v = s.proto;
    let cs = groups::consumers(sh, s, src, (p, name))?;
    let mut pel = Vec::new();
    let mut per: Vec<Vec<(StreamId, u64, u64)>> = vec![Vec::new(); cs.len()];
    groups::walk(
        sh,
        s,
        src,
        (p, name),
        (StreamId::MIN, StreamId::MAX),
        |_, id, n| {
            if let Ok(i) = cs.binary_search_by(|(c, _)| c.as_slice().cmp(&n.consumer)) {
                if per[i].len() < limit {
                    per[i].push((id, n.time, n.count));
                }
            }
            if pel.len() < limit {
                pel.push((id, n));
            }
            Ok(true)
        },
    )?;
    resp::map(out, 7, v);
    field(out, "name");
    resp::bulk(out, Some(name));
    progress(out, g, shape, v);
    field(out, "pel-count");
    resp::integer(out, g.pending as i64);
    field(out, "pending");
    resp::array(out, pel.len());
    for (id, n) in &pel {
        resp::array(out, 4);
        id_reply(out, *id);
        resp::bulk(out, Some(&n.consumer));
        resp::integer(out, n.time as i64);
        resp::integer(out, n.count as i64);
    }
    field(out, "consumers");
    resp::array(out, cs.len());
    for ((n, c), mine) in cs.iter().zip(&per) {
        resp::map(out, 5, v);
        field(out, "name");
        resp::bulk(out, Some(n));
        field(out, "seen-time");
        resp::integer(out, c.seen as i64);
        field(out, "active-time");
        resp::integer(out, c.active);
        field(out, "pel-count");
        resp::integer(out, c.pending as i64);
        field(out, "pending");
        resp::array(out, mine.len());
        for (id, t, k) in mine {
            resp::array(out, 3);
            id_reply(out, *id);
            resp::integer(out, *t as i64);
            resp::integer(out, *k as i64);
        }
    }
    Ok(())
}

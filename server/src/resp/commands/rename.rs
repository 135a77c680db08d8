//! RENAME, RENAMENX, COPY and MOVE: a key's value, whatever its type (a collection with
//! every field, copied under a fresh id), and its deadline, moved or copied in one
//! transaction (COPY … DB and MOVE to another database's prefix, resp/db.rs).

use crate::core::counters::OpClass;
use crate::core::ops::item::VersionedItem;
use crate::core::ops::typed::is_typed;
use crate::core::ops::{Outcome, Write};
use crate::core::shared::Shared;
use crate::core::station::Op;
use crate::resp::call::Call;
use crate::resp::commands::tx::{atomically, failed};
use crate::resp::commands::types::access::fail;
use crate::resp::commands::types::encoding::Meta;
use crate::resp::commands::types::keyspace::copy_collection;
use crate::resp::db::shown;
use crate::resp::notify::{event, GENERIC};
use crate::resp::session::Session;
use crate::resp::write_door::run_op;
use accelkv_proto::resp;
use std::borrow::Cow;

/// `RENAME src dst` (`nx`: RENAMENX): moves the value (a collection with every field)
/// and its deadline atomically; an error when `src` is absent; with `nx`, nothing (0) when
/// `dst` exists.
pub fn rename(sh: &Shared, s: &mut Session, c: &[&[u8]], nx: bool, out: &mut Vec<u8>) {
    let (src, dst) = (c[1], c[2]);
    atomically(sh, s, out, |sh, s, out| {
        let Some(item) = read_item(sh, s, src, out) else {
            return;
        };
        let Some(item) = item else {
            return resp::error(out, "ERR no such key");
        };
        if nx {
            match read_item(sh, s, dst, out) {
                None => return,
                Some(Some(_)) => return resp::integer(out, 0),
                Some(None) => {}
            }
        }
        if src != dst && !copy_item(sh, s, src, dst, &item, out) {
            return;
        }
        if src != dst {
            sh.count(OpClass::Delete);
            if failed(out, &run_op(sh, s, Op::new(src, Write::Remove))) {
                return;
            }
            event(s, GENERIC, "rename_from", src);
            event(s, GENERIC, "rename_to", dst);
        }
        if nx {
            resp::integer(out, 1)
        } else {
            resp::simple(out, "OK")
        }
    })
}

/// `COPY source destination [REPLACE]`: 1 when copied (a collection with every field, and
/// the deadline), 0 when `destination` exists and REPLACE was not given.
pub fn copy(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let src = c[1];
    let mut dst = Cow::Borrowed(c[2]);
    let mut replace = false;
    let mut i = 3;
    while let Some(opt) = c.get(i) {
        match opt.to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" => match c.get(i + 1).map(|n| db_arg(sh, s, n)) {
                Some(Ok(db)) => {
                    dst = Cow::Owned(crate::resp::db::to_store(db, shown(c[2])).into_owned());
                    i += 1;
                }
                Some(Err(e)) => return resp::error(out, e),
                None => return resp::error(out, "ERR syntax error"),
            },
            _ => return resp::error(out, "ERR syntax error"),
        }
        i += 1;
    }
    let dst: &[u8] = &dst;
    if src == dst {
        return resp::error(out, "ERR source and destination objects are the same");
    }
    atomically(sh, s, out, |sh, s, out| {
        let Some(item) = read_item(sh, s, src, out) else {
            return;
        };
        let Some(item) = item else {
            return resp::integer(out, 0);
        };
        if !replace {
            match read_item(sh, s, dst, out) {
                None => return,
                Some(Some(_)) => return resp::integer(out, 0),
                Some(None) => {}
            }
        }
        if copy_item(sh, s, src, dst, &item, out) {
            event(s, GENERIC, "copy_to", dst);
            resp::integer(out, 1)
        }
    })
}

/// A database number within `--databases`, as the key prefix it maps to (`dbmap.rs`), or
/// Redis's error: not a number, or out of range.
fn db_arg(sh: &Shared, s: &Session, a: &[u8]) -> Result<u16, &'static str> {
    let n =
        crate::resp::reply::parse_i64(a).ok_or("ERR value is not an integer or out of range")?;
    if n < 0 || n >= sh.settings().databases as i64 {
        return Err("ERR DB index is out of range");
    }
    Ok(s.global.dbs.physical(sh, n as u16).0)
}

/// `MOVE key db`: 1 when the key (any type, with its deadline) moved from the selected
/// database to `db`, 0 when it is absent here or present there.
pub fn move_key(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let db = match db_arg(sh, s, c[2]) {
        Ok(db) => db,
        Err(e) => return resp::error(out, e),
    };
    if db == s.db {
        return resp::error(out, "ERR source and destination objects are the same");
    }
    let src = c[1];
    let dst = crate::resp::db::to_store(db, shown(src)).into_owned();
    atomically(sh, s, out, |sh, s, out| {
        let Some(item) = read_item(sh, s, src, out) else {
            return;
        };
        let Some(item) = item else {
            return resp::integer(out, 0);
        };
        match read_item(sh, s, &dst, out) {
            None => return,
            Some(Some(_)) => return resp::integer(out, 0),
            Some(None) => {}
        }
        if !copy_item(sh, s, src, &dst, &item, out) {
            return;
        }
        sh.count(OpClass::Delete);
        if !failed(out, &run_op(sh, s, Op::new(src, Write::Remove))) {
            event(s, GENERIC, "move_from", src);
            event(s, GENERIC, "move_to", &dst);
            resp::integer(out, 1)
        }
    })
}

/// `key`'s item through the transaction (`Some(None)`: absent); `None` with the error
/// written.
fn read_item(
    sh: &Shared,
    s: &mut Session,
    key: &[u8],
    out: &mut Vec<u8>,
) -> Option<Option<VersionedItem>> {
    let d = run_op(sh, s, Op::new(key, Write::ReadItem));
    if failed(out, &d) {
        return None;
    }
    match d.outcome {
        Ok(Outcome::Item(i)) => Some(Some(*i)),
        _ => Some(None),
    }
}

/// Writes `item` (read from `src`) to `dst` with its deadline, replacing what `dst` held;
/// false with the error written.
fn copy_item(
    sh: &Shared,
    s: &mut Session,
    src: &[u8],
    dst: &[u8],
    item: &VersionedItem,
    out: &mut Vec<u8>,
) -> bool {
    sh.count(OpClass::Put);
    if failed(out, &run_op(sh, s, Op::new(dst, Write::Remove))) {
        return false;
    }
    if is_typed(item.flags) {
        let m = match Meta::decode(&item.value, item.flags) {
            Ok(m) => m,
            Err(e) => {
                fail(out, &e.into());
                return false;
            }
        };
        if let Err(e) = copy_collection(sh, s, src, dst, &m) {
            fail(out, &e);
            return false;
        }
        // A list, sorted set or stream arriving under `dst` wakes the connections blocked
        // on it once the command commits (dispatch.rs), as Redis's RENAME, COPY and MOVE
        // signal the key ready.
        s.block.wake.push(dst);
    } else {
        let put = Write::Put(Cow::Owned(item.value.clone()));
        if failed(out, &run_op(sh, s, Op::new(dst, put))) {
            return false;
        }
    }
    if item.deadline != 0 {
        let w = Write::Expire {
            deadline: item.deadline,
            cond: Default::default(),
        };
        if failed(out, &run_op(sh, s, Op::new(dst, w))) {
            return false;
        }
    }
    true
}

/// `RENAME key newkey`.
pub fn rename_cmd(x: &mut Call<'_, '_>) {
    rename(x.sh, x.s, x.args, false, x.out)
}

/// `RENAMENX key newkey`.
pub fn renamenx(x: &mut Call<'_, '_>) {
    rename(x.sh, x.s, x.args, true, x.out)
}

/// `COPY source destination [DB n] [REPLACE]`.
pub fn copy_cmd(x: &mut Call<'_, '_>) {
    copy(x.sh, x.s, x.args, x.out)
}

/// `MOVE key db`.
pub fn move_cmd(x: &mut Call<'_, '_>) {
    move_key(x.sh, x.s, x.args, x.out)
}

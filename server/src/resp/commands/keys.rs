//! The keyspace commands of RESP: `SCAN cursor [MATCH pattern] [COUNT n] [TYPE t]`, `KEYS`,
//! `RANDOMKEY`, and accelkv's ordered ranges `RANGE lo hi|+ [LIMIT n] [CURSOR]` and
//! `FLOOR kl ku|+ [LIMIT n] [CURSOR]`.
//!
//! SCAN walks the keys in order. Clients parse the cursor as a number (redis-py, go-redis),
//! so the server hands out numbers and keeps, for each, the key the next call starts from
//! ([`Cursors`](crate::resp::cursors::Cursors), shared by every connection as Redis's cursors are, at most
//! `MAX_CURSORS` of them, the oldest forgotten first). Because a cursor is a position in
//! key order, a scan never repeats a key and never skips one that exists throughout,
//! whatever is inserted or deleted meanwhile. A forgotten or unknown cursor gets an error
//! instead of a silent restart.

use crate::core::counters::OpClass;
use crate::core::glob;
use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::encoding::MAGIC;
use crate::resp::commands::types::keyspace::{item_now, type_name};
use crate::resp::cursors::Cursors;
use crate::resp::door::read_one;
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use accelkv_engine::{ReadRef, Reply};
use accelkv_proto::resp;

/// The smallest key after `k` in byte order.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

fn parse_u64(a: &[u8]) -> Option<u64> {
    std::str::from_utf8(a).ok()?.parse().ok()
}

/// The type of a key a scan found with value `v`: a value that starts like a collection's
/// metadata is confirmed by its flags.
fn type_of(sh: &Shared, k: &[u8], v: &[u8]) -> &'static str {
    if !v.starts_with(&MAGIC) {
        return "string";
    }
    match item_now(sh, k) {
        Ok(Some((v, f))) => type_name(&v, f),
        _ => "none",
    }
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]`: the user's keys (never the
/// collections' subkeys).
pub fn scan(
    sh: &Shared,
    (cursors, db): (&Cursors, u16),
    c: &[&[u8]],
    reads: &mut Reads,
    out: &mut Vec<u8>,
) {
    let Some(id) = parse_u64(c[1]) else {
        return resp::error(out, "ERR invalid cursor");
    };
    let (mut pattern, mut count, mut kind) = (None, 10usize, None);
    let mut i = 2;
    while i < c.len() {
        let opt = c[i].to_ascii_uppercase();
        if i + 1 >= c.len() {
            return resp::error(out, "ERR syntax error");
        }
        match opt.as_slice() {
            b"MATCH" => pattern = Some(c[i + 1]),
            b"COUNT" => match parse_u64(c[i + 1]) {
                Some(n) if n >= 1 => count = (n as usize).min(sh.settings().limits.max_scan_items),
                _ => return resp::error(out, "ERR value is not an integer or out of range"),
            },
            b"TYPE" => kind = Some(c[i + 1].to_ascii_lowercase()),
            _ => return resp::error(out, "ERR syntax error"),
        }
        i += 2;
    }
    let Some(from) = cursors.resume(id) else {
        return resp::error(
            out,
            "ERR invalid cursor (unknown, or forgotten: at most 16384 SCAN cursors are kept)",
        );
    };
    sh.count(OpClass::Scan);
    // The selected database's range (db.rs); a fresh cursor starts at its first key.
    let (db_lo, db_hi) = crate::resp::db::range(db);
    let from = if from < db_lo { db_lo } else { from };
    // One item more than asked for says whether the scan is over.
    let req = ReadRef::Scan {
        lo: &from,
        hi: Some(&db_hi),
        limit: count + 1,
    };
    let items = match read_one(sh, reads, req) {
        Reply::Items(items) => items,
        Reply::Error(e) => return err_store(out, &e),
        Reply::Value(_) => Default::default(),
    };
    let next = match (items.len() > count, items.iter().nth(count - 1)) {
        (true, Some((last, _))) => cursors.save(successor(last)),
        _ => 0,
    };
    let shown: Vec<&[u8]> = items
        .iter()
        .take(count)
        .filter(|(k, v)| {
            pattern.is_none_or(|p| glob::matches(p, crate::resp::db::shown(k)))
                && kind
                    .as_ref()
                    .is_none_or(|t| t.as_slice() == type_of(sh, k, v).as_bytes())
        })
        .map(|(k, _)| k)
        .collect();
    resp::array(out, 2);
    resp::bulk(out, Some(next.to_string().as_bytes()));
    resp::array(out, shown.len());
    for k in shown {
        resp::bulk(out, Some(crate::resp::db::shown(k)));
    }
}

/// RANGE and FLOOR from a connection: database 0 only (their bounds and answers are the
/// store's keys).
pub fn range_in(x: &mut crate::resp::call::Call<'_, '_>, floor: bool) {
    if x.s.db != 0 {
        return resp::error(x.out, "ERR RANGE and FLOOR read database 0 only");
    }
    range(x.sh, x.args, floor, x.reads, x.out)
}

/// `RANGE lo hi [LIMIT n] [CURSOR]` (keys in `[lo, hi)`; `+` for no upper bound) and
/// `FLOOR kl ku [LIMIT n]` (from the largest key ≤ kl through ku inclusive; `+` for no
/// upper bound), through the loop's read door. Never silently cut: a reply holds every item asked for, or at most
/// LIMIT; asking (without LIMIT, or with a LIMIT above `--max-scan-items`) for more than the
/// server sends at once is an error unless CURSOR asks for pages: then the reply is
/// `[next, [key, value, …]]`, `next` the key to continue with (`RANGE next hi …`), nil when
/// the range is done.
pub fn range(sh: &Shared, c: &[&[u8]], floor: bool, reads: &mut Reads, out: &mut Vec<u8>) {
    let cap = sh.settings().limits.max_scan_items;
    let (mut limit, mut paged) = (None, false);
    let mut i = 3;
    while i < c.len() {
        match c[i].to_ascii_uppercase().as_slice() {
            b"LIMIT" if i + 1 < c.len() => {
                match std::str::from_utf8(c[i + 1]).ok().and_then(|t| t.parse::<usize>().ok()) {
                    Some(n) => limit = Some(n),
                    None => return resp::error(out, "ERR LIMIT must be a non-negative integer"),
                }
                i += 2;
            }
            b"CURSOR" if !floor => {
                paged = true;
                i += 1;
            }
            b"CURSOR" => {
                return resp::error(
                    out,
                    "ERR CURSOR pages RANGE; continue a FLOOR with RANGE from the key after its last item",
                )
            }
            _ => return resp::error(out, "ERR syntax error (expected LIMIT n or CURSOR)"),
        }
    }
    let want = limit.unwrap_or(usize::MAX);
    let take = want.min(cap);
    let hi = (c[2] != b"+").then_some(c[2]);
    // FLOOR's upper key is inclusive: past every key, no key is longer than the limit.
    let past_all = vec![0xff; sh.view().config().max_key];
    // One item more than sent says whether the range goes on.
    let req = if floor {
        sh.count(OpClass::Floor);
        ReadRef::ScanFloor {
            kl: c[1],
            ku: hi.unwrap_or(&past_all),
            limit: take.saturating_add(1),
        }
    } else {
        sh.count(OpClass::Scan);
        ReadRef::Scan {
            lo: c[1],
            hi,
            limit: take.saturating_add(1),
        }
    };
    let items = match read_one(sh, reads, req) {
        Reply::Items(items) => items,
        Reply::Error(e) => return err_store(out, &e),
        Reply::Value(_) => Default::default(),
    };
    let more = items.len() > take;
    if more && !paged && take < want {
        return resp::error(
            out,
            &format!(
                "ERR the range holds more than {cap} items (--max-scan-items): read it in pages with LIMIT n CURSOR"
            ),
        );
    }
    let shown = items.len().min(take);
    if paged {
        resp::array(out, 2);
        let next = items
            .iter()
            .take(shown)
            .last()
            .filter(|_| more)
            .map(|(k, _)| successor(k));
        resp::bulk(out, next.as_deref());
    }
    resp::array(out, shown * 2);
    for (k, v) in items.iter().take(shown) {
        resp::bulk(out, Some(k));
        resp::bulk(out, Some(v));
    }
}

/// Walks database `db`'s keys in order, as clients name them, a page of 1,024 at a time,
/// until `f` answers false: KEYS, and the slot commands of an emulated cluster.
pub(crate) fn walk_keys(
    sh: &Shared,
    db: u16,
    f: impl FnMut(&[u8]) -> bool,
) -> Result<(), accelkv_tree::Error> {
    let (from, hi) = crate::resp::db::range(db);
    walk_range(sh, (from, hi), f)
}

/// Calls `f` with each key of the store's `[lo, hi)` as its client names it, in order,
/// until it answers false.
pub(crate) fn walk_range(
    sh: &Shared,
    (mut from, hi): (Vec<u8>, Vec<u8>),
    mut f: impl FnMut(&[u8]) -> bool,
) -> Result<(), accelkv_tree::Error> {
    loop {
        let page = sh.view().try_scan(&from, Some(&hi), 1024)?;
        let full = page.len() == 1024;
        if let Some((last, _)) = page.last() {
            from = successor(last);
        }
        for (k, _) in &page {
            if !f(crate::resp::db::shown(k)) {
                return Ok(());
            }
        }
        if !full {
            return Ok(());
        }
    }
}

/// `KEYS pattern`: every matching key, in order (a walk of the whole keyspace, as in
/// Redis; SCAN is the incremental way).
pub fn keys(sh: &Shared, db: u16, pattern: &[u8], out: &mut Vec<u8>) {
    let mut found: Vec<Vec<u8>> = Vec::new();
    let walked = walk_keys(sh, db, |k| {
        if glob::matches(pattern, k) {
            found.push(k.to_vec());
        }
        true
    });
    if let Err(e) = walked {
        return crate::resp::reply::err_store(out, &e);
    }
    resp::array(out, found.len());
    for k in &found {
        resp::bulk(out, Some(k));
    }
}

/// `RANDOMKEY`: the first key at or after a random position (nil when empty).
pub fn random_key(sh: &Shared, s: &Session, out: &mut Vec<u8>) {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut x = u64::from(nanos) ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    let (lo, hi) = crate::resp::db::range(s.db);
    let mut start = lo.clone();
    start.extend_from_slice(&x.to_be_bytes());
    let first = |from: &[u8]| sh.view().try_scan(from, Some(&hi), 1);
    let key = match first(&start).and_then(|a| Ok(a.into_iter().chain(first(&lo)?).next())) {
        Ok(k) => k.map(|(k, _)| k),
        Err(e) => return crate::resp::reply::err_store(out, &e),
    };
    resp::bulk_in(out, key.as_deref().map(crate::resp::db::shown), s.proto);
}

/// `SCAN cursor [MATCH p] [COUNT n] [TYPE t]`.
pub fn scan_cmd(x: &mut Call<'_, '_>) {
    scan(x.sh, (&x.s.global.cursors, x.s.db), x.args, x.reads, x.out)
}

/// `KEYS pattern`.
pub fn keys_cmd(x: &mut Call<'_, '_>) {
    keys(x.sh, x.s.db, x.args[1], x.out)
}

/// `RANDOMKEY`.
pub fn randomkey(x: &mut Call<'_, '_>) {
    random_key(x.sh, x.s, x.out)
}

/// `RANGE start end [LIMIT n]`.
pub fn range_cmd(x: &mut Call<'_, '_>) {
    range_in(x, false)
}

/// `FLOOR key end [LIMIT n]`.
pub fn floor(x: &mut Call<'_, '_>) {
    range_in(x, true)
}

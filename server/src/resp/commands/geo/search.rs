//! Redis's geo searches: GEOSEARCH and GEOSEARCHSTORE (FROMMEMBER or FROMLONLAT, BYRADIUS
//! or BYBOX), and the older GEORADIUS, GEORADIUSBYMEMBER and their `_RO` forms, parsed and
//! answered as Redis's `georadiusGeneric` does: the boxes of the search (`hash.rs`) are
//! read as score ranges of the sorted set, each member in them kept if its distance
//! passes, then sorted (ASC, DESC; COUNT alone sorts ASC), cut to COUNT (ANY stops the
//! reading at COUNT), and answered or stored (STORE, STOREDIST) in one transaction.

use super::hash::{self, Shape};
use super::{coord_reply, distance_reply, lon_lat, unit};
use crate::core::counters::OpClass;
use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{store_announced, Fail, Src};
use crate::resp::commands::types::encoding::{decode_score, scores_range, Meta};
use crate::resp::commands::types::run::{float_arg, int_arg, read, write};
use crate::resp::commands::types::zset::{score_of, store, Z};
use crate::resp::commands::types::zset_range::{score_keys, ScoreBound};
use crate::resp::notify;
use crate::resp::reply::upper;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// Which command parses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cmd {
    Radius { ro: bool },
    ByMember { ro: bool },
    Search,
    SearchStore,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sort {
    None,
    Asc,
    Desc,
}

/// A parsed search.
struct Query<'a> {
    center: (f64, f64),
    /// The shape in the user's unit, and the unit's meters.
    shape: Shape,
    to_meters: f64,
    with_dist: bool,
    with_hash: bool,
    with_coord: bool,
    any: bool,
    sort: Sort,
    count: usize,
    store: Option<&'a [u8]>,
    store_dist: bool,
}

impl Query<'_> {
    fn in_meters(&self) -> Shape {
        match self.shape {
            Shape::Radius(r) => Shape::Radius(r * self.to_meters),
            Shape::Box(w, h) => Shape::Box(w * self.to_meters, h * self.to_meters),
        }
    }
}

/// A member found: its name, score, distance (meters) and position.
struct Point {
    member: Vec<u8>,
    score: f64,
    dist: f64,
    pos: (f64, f64),
}

fn reply(t: &str) -> Fail {
    Fail::Reply(t.to_string())
}

fn radius_arg(a: &[u8], u: &[u8]) -> Result<(f64, f64), Fail> {
    let r = float_arg(a).map_err(|_| reply("ERR need numeric radius"))?;
    if r < 0.0 {
        return Err(reply("ERR radius cannot be negative"));
    }
    Ok((r, unit(u)?))
}

fn box_arg(w: &[u8], h: &[u8], u: &[u8]) -> Result<(f64, f64, f64), Fail> {
    let w = float_arg(w).map_err(|_| reply("ERR need numeric width"))?;
    let h = float_arg(h).map_err(|_| reply("ERR need numeric height"))?;
    if h < 0.0 || w < 0.0 {
        return Err(reply("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(u)?))
}

/// A member's position, or Redis's error when the set lacks it.
type MemberPos<'f> = dyn FnMut(&[u8]) -> Result<(f64, f64), Fail> + 'f;

/// Parses `args` as `cmd` (`member`: the source's member positions; `None`: the source is
/// absent, so members are not looked up, as Redis does).
fn parse<'a>(
    cmd: Cmd,
    args: &[&'a [u8]],
    mut member: Option<&mut MemberPos<'_>>,
) -> Result<Query<'a>, Fail> {
    let mut q = Query {
        center: (0.0, 0.0),
        shape: Shape::Radius(0.0),
        to_meters: 1.0,
        with_dist: false,
        with_hash: false,
        with_coord: false,
        any: false,
        sort: Sort::None,
        count: 0,
        store: None,
        store_dist: false,
    };
    let base = positional(cmd, args, &mut member, &mut q)?;
    let given = options(cmd, &args[base..], &mut member, &mut q)?;
    checked(cmd, args[0], q, given)
}

/// The arguments before the options (the center and radius of GEORADIUS and
/// GEORADIUSBYMEMBER, GEOSEARCHSTORE's destination): where the options start.
fn positional<'a>(
    cmd: Cmd,
    args: &[&'a [u8]],
    member: &mut Option<&mut MemberPos<'_>>,
    q: &mut Query<'a>,
) -> Result<usize, Fail> {
    Ok(match cmd {
        Cmd::Radius { .. } => {
            q.center = lon_lat(args[2], args[3])?;
            let (r, u) = radius_arg(args[4], args[5])?;
            (q.shape, q.to_meters) = (Shape::Radius(r), u);
            6
        }
        Cmd::ByMember { .. } => {
            if let Some(f) = member.as_mut() {
                q.center = f(args[2])?;
                let (r, u) = radius_arg(args[3], args[4])?;
                (q.shape, q.to_meters) = (Shape::Radius(r), u);
            }
            5
        }
        Cmd::Search => 2,
        Cmd::SearchStore => {
            q.store = Some(args[1]);
            3
        }
    })
}

/// Which of FROMMEMBER, FROMLONLAT, BYRADIUS and BYBOX the options gave.
#[derive(Default)]
struct Given {
    from_member: bool,
    from_loc: bool,
    by_radius: bool,
    by_box: bool,
}

/// Reads the options into `q`.
fn options<'a>(
    cmd: Cmd,
    rest: &[&'a [u8]],
    member: &mut Option<&mut MemberPos<'_>>,
    q: &mut Query<'a>,
) -> Result<Given, Fail> {
    let search = matches!(cmd, Cmd::Search | Cmd::SearchStore);
    let can_store = matches!(cmd, Cmd::Radius { ro: false } | Cmd::ByMember { ro: false });
    let mut g = Given::default();
    let mut i = 0;
    while i < rest.len() {
        let left = rest.len() - i - 1; // arguments after this one
        match upper(rest[i]).as_slice() {
            b"WITHDIST" => q.with_dist = true,
            b"WITHHASH" => q.with_hash = true,
            b"WITHCOORD" => q.with_coord = true,
            b"ANY" => q.any = true,
            b"ASC" => q.sort = Sort::Asc,
            b"DESC" => q.sort = Sort::Desc,
            b"COUNT" if left >= 1 => {
                let n = int_arg(rest[i + 1])?;
                if n <= 0 {
                    return Err(reply("ERR COUNT must be > 0"));
                }
                q.count = n as usize;
                i += 1;
            }
            b"STORE" if left >= 1 && can_store => {
                (q.store, q.store_dist) = (Some(rest[i + 1]), false);
                i += 1;
            }
            b"STOREDIST" if left >= 1 && can_store => {
                (q.store, q.store_dist) = (Some(rest[i + 1]), true);
                i += 1;
            }
            b"STOREDIST" if cmd == Cmd::SearchStore => q.store_dist = true,
            b"FROMMEMBER" if left >= 1 && search && !g.from_loc => {
                if let Some(f) = member.as_mut() {
                    q.center = f(rest[i + 1])?;
                }
                g.from_member = true;
                i += 1;
            }
            b"FROMLONLAT" if left >= 2 && search && !g.from_member => {
                q.center = lon_lat(rest[i + 1], rest[i + 2])?;
                g.from_loc = true;
                i += 2;
            }
            b"BYRADIUS" if left >= 2 && search && !g.by_box => {
                let (r, u) = radius_arg(rest[i + 1], rest[i + 2])?;
                (q.shape, q.to_meters) = (Shape::Radius(r), u);
                g.by_radius = true;
                i += 2;
            }
            b"BYBOX" if left >= 3 && search && !g.by_radius => {
                let (w, h, u) = box_arg(rest[i + 1], rest[i + 2], rest[i + 3])?;
                (q.shape, q.to_meters) = (Shape::Box(w, h), u);
                g.by_box = true;
                i += 3;
            }
            _ => return Err(reply("ERR syntax error")),
        }
        i += 1;
    }
    Ok(g)
}

/// The checks Redis makes once the options are read, and COUNT's default order.
fn checked<'a>(cmd: Cmd, name: &[u8], mut q: Query<'a>, g: Given) -> Result<Query<'a>, Fail> {
    let search = matches!(cmd, Cmd::Search | Cmd::SearchStore);
    if q.store.is_some() && (q.with_dist || q.with_hash || q.with_coord) {
        let who = match cmd {
            Cmd::SearchStore => "GEOSEARCHSTORE",
            _ => "STORE option in GEORADIUS",
        };
        return Err(Fail::Reply(format!(
            "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(name);
    if search && !(g.from_member || g.from_loc) {
        return Err(Fail::Reply(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if search && !(g.by_radius || g.by_box) {
        return Err(Fail::Reply(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if q.any && q.count == 0 {
        return Err(reply("ERR the ANY argument requires COUNT argument"));
    }
    if q.count != 0 && q.sort == Sort::None && !q.any {
        q.sort = Sort::Asc;
    }
    Ok(q)
}

/// The members inside the search, in the order Redis finds them (box by box, each by
/// score), stopping at `limit` (0: none).
fn find(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    q: &Query<'_>,
) -> Result<Vec<Point>, Fail> {
    let shape = q.in_meters();
    let limit = if q.any { q.count } else { 0 };
    let mut found = Vec::new();
    let p = m.prefix(key);
    let base = scores_range(&p).0;
    let box_keys = |(lo, hi): (u64, u64)| {
        let at = |value: u64, open| ScoreBound {
            value: value as f64,
            open,
        };
        score_keys(&p, at(lo, false), at(hi, true))
    };
    for b in hash::search_boxes(shape, q.center) {
        if limit > 0 && found.len() >= limit {
            break;
        }
        // The score index's entries with scores in [lo, hi), read in place: only a match
        // is copied out.
        let (klo, khi) = box_keys(b.score_range());
        let room = if limit > 0 {
            limit - found.len()
        } else {
            usize::MAX
        };
        let mut taken = 0;
        src.scan(sh, s, (&klo, &khi), usize::MAX, |k, _| {
            if taken >= room {
                return;
            }
            let rest = &k[base.len()..];
            let Some(score) = rest.get(..8).and_then(decode_score) else {
                return;
            };
            let pos = hash::position(score);
            if let Some(dist) = hash::within(shape, q.center, pos) {
                let member = rest[8..].to_vec();
                found.push(Point {
                    member,
                    score,
                    dist,
                    pos,
                });
                taken += 1;
            }
        })?;
    }
    match q.sort {
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
        Sort::None => {}
    }
    if q.count > 0 {
        found.truncate(q.count);
    }
    for p in &mut found {
        p.dist /= q.to_meters;
    }
    Ok(found)
}

/// What a search answers: the members found (with the options to show) or how many it
/// stored.
enum Found {
    Points(Vec<Point>, (bool, bool, bool)),
    Stored(usize),
}

/// Parses and runs a search on the source at `key`.
fn search(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    cmd: Cmd,
    key: &[u8],
    args: &[&[u8]],
) -> Result<Found, Fail> {
    let m = src.meta(sh, s, key, Z)?;
    let q = match &m {
        None => parse(cmd, args, None)?,
        Some(m) => {
            let mut pos = |mb: &[u8]| match score_of(sh, s, src, (key, m), mb)? {
                Some(sc) => Ok(hash::position(sc)),
                None => Err(reply("ERR could not decode requested zset member")),
            };
            parse(cmd, args, Some(&mut pos))?
        }
    };
    let found = match &m {
        None => Vec::new(),
        Some(m) => find(sh, s, src, (key, m), &q)?,
    };
    let Some(dest) = q.store else {
        return Ok(Found::Points(
            found,
            (q.with_dist, q.with_hash, q.with_coord),
        ));
    };
    let items: Vec<(Vec<u8>, f64)> = found
        .into_iter()
        .map(|p| (p.member, if q.store_dist { p.dist } else { p.score }))
        .collect();
    let name = match cmd {
        Cmd::SearchStore => "geosearchstore",
        _ => "georadiusstore",
    };
    store_announced((sh, s, src), (notify::ZSET, name, dest), |sh, s| {
        store(sh, s, dest, &items)
    })?;
    Ok(Found::Stored(items.len()))
}

fn answer(out: &mut Vec<u8>, f: Found, v: Version) {
    let (points, (dist, with_hash, coord)) = match f {
        Found::Stored(n) => return resp::integer(out, n as i64),
        Found::Points(p, o) => (p, o),
    };
    let extra = usize::from(dist) + usize::from(with_hash) + usize::from(coord);
    resp::array(out, points.len());
    for p in points {
        if extra > 0 {
            resp::array(out, extra + 1);
        }
        resp::bulk(out, Some(&p.member));
        if dist {
            distance_reply(out, p.dist);
        }
        if with_hash {
            resp::integer(out, p.score as i64);
        }
        if coord {
            resp::array(out, 2);
            coord_reply(out, p.pos.0, v);
            coord_reply(out, p.pos.1, v);
        }
    }
}

/// Whether a GEORADIUS-family command stores (STORE or STOREDIST among its options):
/// then it runs as a write.
fn stores(cmd: Cmd, args: &[&[u8]]) -> bool {
    let base = match cmd {
        Cmd::Radius { ro: false } => 6,
        Cmd::ByMember { ro: false } => 5,
        Cmd::SearchStore => return true,
        _ => return false,
    };
    let opts = args.get(base..).unwrap_or(&[]);
    let n = opts.len();
    opts.iter()
        .take(n.saturating_sub(1))
        .any(|a| a.eq_ignore_ascii_case(b"STORE") || a.eq_ignore_ascii_case(b"STOREDIST"))
}

fn run(x: &mut Call<'_, '_>, cmd: Cmd) {
    let key = if cmd == Cmd::SearchStore {
        x.args[2]
    } else {
        x.args[1]
    };
    let args = x.args;
    x.sh.count(OpClass::Scan);
    let f = move |sh: &Shared, s: &mut Session, src: &Src<'_>| search(sh, s, src, cmd, key, args);
    if stores(cmd, args) {
        write(x, f, answer)
    } else {
        read(x, f, answer)
    }
}

/// `GEOSEARCH key FROMMEMBER member|FROMLONLAT lon lat BYRADIUS r unit|BYBOX w h unit
/// [ASC|DESC] [COUNT n [ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]`.
pub fn geosearch(x: &mut Call<'_, '_>) {
    run(x, Cmd::Search)
}

/// `GEOSEARCHSTORE dest src … [STOREDIST]`: GEOSEARCH's members stored as a sorted set
/// (scores: their geohashes, or their distances with STOREDIST); how many.
pub fn geosearchstore(x: &mut Call<'_, '_>) {
    run(x, Cmd::SearchStore)
}

/// `GEORADIUS key lon lat radius unit [options] [STORE key|STOREDIST key]`.
pub fn georadius(x: &mut Call<'_, '_>) {
    run(x, Cmd::Radius { ro: false })
}

/// `GEORADIUS_RO`: GEORADIUS without STORE.
pub fn georadius_ro(x: &mut Call<'_, '_>) {
    run(x, Cmd::Radius { ro: true })
}

/// `GEORADIUSBYMEMBER key member radius unit [options] [STORE key|STOREDIST key]`.
pub fn georadiusbymember(x: &mut Call<'_, '_>) {
    run(x, Cmd::ByMember { ro: false })
}

/// `GEORADIUSBYMEMBER_RO`: GEORADIUSBYMEMBER without STORE.
pub fn georadiusbymember_ro(x: &mut Call<'_, '_>) {
    run(x, Cmd::ByMember { ro: true })
}

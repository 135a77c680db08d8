//! Redis's geo commands on sorted sets whose scores are 52-bit geohashes (`hash.rs`), as
//! Redis keeps them: GEOADD is ZADD with the positions turned into scores, so a geo set is
//! an ordinary sorted set (packed or not) and every sorted-set command works on it.
//! This file: GEOADD and the point reads (GEOPOS, GEODIST, GEOHASH); the searches
//! (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS and its kin) are in `search.rs`.

pub mod hash;
pub mod search;

use crate::core::counters::OpClass;
use crate::resp::call::Call;
use crate::resp::commands::types::access::Fail;
use crate::resp::commands::types::run::{float_arg, read};
use crate::resp::commands::types::zset::{scores, zadd};
use crate::resp::reply::upper;
use accelkv_proto::resp::{self, Version};

/// A coordinate as Redis prints it (`LD_STR_HUMAN`): 17 decimals, trailing zeros cut.
pub(crate) fn human(d: f64) -> String {
    let mut t = format!("{d:.17}");
    if t.contains('.') {
        let cut = t.trim_end_matches('0').trim_end_matches('.').len();
        t.truncate(cut);
    }
    if t == "-0" {
        t = "0".into();
    }
    t
}

/// Appends a coordinate: a bulk string in RESP2, a double in RESP3.
pub(crate) fn coord_reply(out: &mut Vec<u8>, d: f64, v: Version) {
    crate::resp::commands::types::zset::double_reply(out, &human(d), v)
}

/// Appends a distance: a bulk string of four decimals, in both protocols (as Redis).
pub(crate) fn distance_reply(out: &mut Vec<u8>, d: f64) {
    resp::bulk(out, Some(format!("{d:.4}").as_bytes()));
}

/// A unit's meters (`m`, `km`, `ft`, `mi`), or Redis's error.
pub(crate) fn unit(a: &[u8]) -> Result<f64, Fail> {
    match upper(a).as_slice() {
        b"M" => Ok(1.0),
        b"KM" => Ok(1000.0),
        b"FT" => Ok(0.3048),
        b"MI" => Ok(1609.34),
        _ => Err(Fail::Reply(
            "ERR unsupported unit provided. please use M, KM, FT, MI".into(),
        )),
    }
}

/// A longitude and latitude argument pair, checked against the ranges Redis indexes.
pub(crate) fn lon_lat(lon: &[u8], lat: &[u8]) -> Result<(f64, f64), Fail> {
    let (lon, lat) = (float_arg(lon)?, float_arg(lat)?);
    if !hash::valid(lon, lat) {
        return Err(Fail::Reply(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// `GEOADD key [NX|XX] [CH] longitude latitude member [...]`: ZADD of the members with
/// their positions' geohashes as scores.
pub fn geoadd(x: &mut Call<'_, '_>) {
    let mut at = 2;
    let (mut nx, mut xx) = (false, false);
    while let Some(a) = x.args.get(at) {
        match upper(a).as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"CH" => {}
            _ => break,
        }
        at += 1;
    }
    if !(x.args.len() - at).is_multiple_of(3) || (nx && xx) {
        return resp::error(x.out, "ERR syntax error");
    }
    let mut args: Vec<Vec<u8>> = x.args[..at].iter().map(|a| a.to_vec()).collect();
    args[0] = b"ZADD".to_vec();
    for t in x.args[at..].chunks(3) {
        let (lon, lat) = match lon_lat(t[0], t[1]) {
            Ok(p) => p,
            Err(e) => return crate::resp::commands::types::access::fail(x.out, &e),
        };
        let score = hash::score(lon, lat).unwrap_or(0);
        args.push(score.to_string().into_bytes());
        args.push(t[2].to_vec());
    }
    let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let mut z = Call {
        sh: x.sh,
        s: &mut *x.s,
        args: &args,
        reads: &mut *x.reads,
        out: &mut *x.out,
        dispatch: x.dispatch,
        value: None,
    };
    zadd(&mut z);
}

/// Reads the scores of `members` of the sorted set at `key` (ZMSCORE's read) and hands
/// them to `ok`.
fn member_scores(
    x: &mut Call<'_, '_>,
    key: &[u8],
    members: &[&[u8]],
    ok: impl FnOnce(&mut Vec<u8>, Vec<Option<f64>>, Version),
) {
    x.sh.count(OpClass::Get);
    read(x, |sh, s, src| scores(sh, s, src, key, members), ok)
}

/// `GEOPOS key [member ...]`: each member's longitude and latitude (null if absent).
pub fn geopos(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    member_scores(x, key, members, |out, scores, v| {
        resp::array(out, scores.len());
        for sc in scores {
            match sc {
                None => resp::null_array(out, v),
                Some(sc) => {
                    let (lon, lat) = hash::position(sc);
                    resp::array(out, 2);
                    coord_reply(out, lon, v);
                    coord_reply(out, lat, v);
                }
            }
        }
    })
}

/// `GEOHASH key [member ...]`: each member's 11-character geohash (null if absent).
pub fn geohash(x: &mut Call<'_, '_>) {
    let (key, members) = (x.args[1], &x.args[2..]);
    member_scores(x, key, members, |out, scores, v| {
        resp::array(out, scores.len());
        for sc in scores {
            let h = sc.map(hash::standard_geohash);
            resp::bulk_in(out, h.as_deref().map(str::as_bytes), v);
        }
    })
}

/// `GEODIST key member1 member2 [M|KM|FT|MI]`: their distance (null if one is absent).
pub fn geodist(x: &mut Call<'_, '_>) {
    let to_meters = match x.args.len() {
        4 => 1.0,
        5 => match unit(x.args[4]) {
            Ok(u) => u,
            Err(e) => return crate::resp::commands::types::access::fail(x.out, &e),
        },
        _ => return resp::error(x.out, "ERR syntax error"),
    };
    let (key, members) = (x.args[1], [x.args[2], x.args[3]]);
    member_scores(x, key, &members, |out, scores, v| {
        match (scores[0], scores[1]) {
            (Some(a), Some(b)) => {
                let ((lon1, lat1), (lon2, lat2)) = (hash::position(a), hash::position(b));
                distance_reply(out, hash::distance(lon1, lat1, lon2, lat2) / to_meters);
            }
            _ => resp::bulk_in(out, None, v),
        }
    })
}

//! Redis's geohash arithmetic (`geohash.c`, `geohash_helper.c`), so a member's score, its
//! decoded position, its GEOHASH string, distances and the boxes a search reads are the
//! numbers Redis computes: a position is 26 bits of longitude and 26 of latitude
//! interleaved into a 52-bit integer (the sorted-set score), over Web Mercator's latitude
//! range (±85.05112878); distances are haversine on a sphere of Redis's radius.

/// Bits per coordinate of a member's score.
pub const STEP_MAX: u8 = 26;
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
pub const LON_MIN: f64 = -180.0;
pub const LON_MAX: f64 = 180.0;
/// Redis's earth radius, in meters.
pub const EARTH_RADIUS: f64 = 6_372_797.560_856;
const MERCATOR_MAX: f64 = 20_037_726.37;
const D_R: f64 = std::f64::consts::PI / 180.0;

/// A geohash: `step` bits per coordinate, interleaved (latitude in the even bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Hash {
    pub bits: u64,
    pub step: u8,
}

impl Hash {
    fn is_zero(&self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The scores `[min, max)` of the members inside this box (`scoresOfGeoHashBox`).
    pub fn score_range(&self) -> (u64, u64) {
        let shift = 52 - u32::from(self.step) * 2;
        (self.bits << shift, (self.bits + 1) << shift)
    }
}

/// A box: its longitude and latitude ranges.
#[derive(Clone, Copy, Debug, Default)]
pub struct Area {
    pub lon: (f64, f64),
    pub lat: (f64, f64),
}

pub fn deg_rad(a: f64) -> f64 {
    a * D_R
}

fn rad_deg(a: f64) -> f64 {
    a / D_R
}

/// `x`'s bits in the even positions, `y`'s in the odd ones.
fn interleave(x: u32, y: u32) -> u64 {
    const B: [u64; 5] = [
        0x5555_5555_5555_5555,
        0x3333_3333_3333_3333,
        0x0F0F_0F0F_0F0F_0F0F,
        0x00FF_00FF_00FF_00FF,
        0x0000_FFFF_0000_FFFF,
    ];
    const S: [u32; 5] = [1, 2, 4, 8, 16];
    let spread = |v: u32| {
        let mut v = u64::from(v);
        for i in (0..5).rev() {
            v = (v | (v << S[i])) & B[i];
        }
        v
    };
    spread(x) | (spread(y) << 1)
}

/// The inverse: (even bits, odd bits).
fn deinterleave(v: u64) -> (u32, u32) {
    let squash = |mut v: u64| {
        v &= 0x5555_5555_5555_5555;
        v = (v | (v >> 1)) & 0x3333_3333_3333_3333;
        v = (v | (v >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
        v = (v | (v >> 4)) & 0x00FF_00FF_00FF_00FF;
        v = (v | (v >> 8)) & 0x0000_FFFF_0000_FFFF;
        v = (v | (v >> 16)) & 0x0000_0000_FFFF_FFFF;
        v as u32
    };
    (squash(v), squash(v >> 1))
}

/// Whether Redis indexes this position.
pub fn valid(lon: f64, lat: f64) -> bool {
    (LON_MIN..=LON_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// The geohash of a position at `step` bits over the given latitude range
/// (`geohashEncode`); `None` outside the ranges.
pub fn encode_in(lat_range: (f64, f64), lon: f64, lat: f64, step: u8) -> Option<Hash> {
    if !valid(lon, lat) || lat < lat_range.0 || lat > lat_range.1 {
        return None;
    }
    let scale = (1u64 << step) as f64;
    let lat_off = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * scale;
    let lon_off = (lon - LON_MIN) / (LON_MAX - LON_MIN) * scale;
    Some(Hash {
        bits: interleave(lat_off as u32, lon_off as u32),
        step,
    })
}

/// The geohash over Redis's (Mercator) latitude range.
pub fn encode(lon: f64, lat: f64, step: u8) -> Option<Hash> {
    encode_in((LAT_MIN, LAT_MAX), lon, lat, step)
}

/// A position's score: its 52-bit geohash.
pub fn score(lon: f64, lat: f64) -> Option<u64> {
    encode(lon, lat, STEP_MAX).map(|h| h.bits)
}

/// The box a geohash stands for (`geohashDecode`).
pub fn decode(h: Hash) -> Area {
    let (ilat, ilon) = deinterleave(h.bits);
    let scale = (1u64 << h.step) as f64;
    let (lat_span, lon_span) = (LAT_MAX - LAT_MIN, LON_MAX - LON_MIN);
    Area {
        lat: (
            LAT_MIN + (f64::from(ilat) / scale) * lat_span,
            LAT_MIN + ((f64::from(ilat) + 1.0) / scale) * lat_span,
        ),
        lon: (
            LON_MIN + (f64::from(ilon) / scale) * lon_span,
            LON_MIN + ((f64::from(ilon) + 1.0) / scale) * lon_span,
        ),
    }
}

/// The position a score stands for: its box's center, clamped to the valid ranges.
pub fn position(score: f64) -> (f64, f64) {
    let a = decode(Hash {
        bits: score as u64,
        step: STEP_MAX,
    });
    let lon = ((a.lon.0 + a.lon.1) / 2.0).clamp(LON_MIN, LON_MAX);
    let lat = ((a.lat.0 + a.lat.1) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// GEOHASH's 11-character standard geohash of a score (re-encoded over latitude ±90).
pub fn standard_geohash(score: f64) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = position(score);
    let bits = encode_in((-90.0, 90.0), lon, lat, STEP_MAX).map_or(0, |h| h.bits);
    (0..11)
        .map(|i| {
            let idx = if i == 10 {
                0
            } else {
                (bits >> (52 - (i + 1) * 5)) & 0x1f
            };
            ALPHABET[idx as usize] as char
        })
        .collect()
}

/// The distance in meters between two positions along the latitude only.
fn lat_distance(lat1: f64, lat2: f64) -> f64 {
    EARTH_RADIUS * (deg_rad(lat2) - deg_rad(lat1)).abs()
}

/// The haversine distance in meters between two positions (`geohashGetDistance`).
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return lat_distance(lat1, lat2);
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS * a.sqrt().asin()
}

/// What a search covers, in meters: a circle, or a box (width, height) around the center.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    Radius(f64),
    Box(f64, f64),
}

/// The distance from `center` to `p` if `p` is inside `shape` around it.
pub fn within(shape: Shape, center: (f64, f64), p: (f64, f64)) -> Option<f64> {
    match shape {
        Shape::Radius(r) => {
            let d = distance(center.0, center.1, p.0, p.1);
            (d <= r).then_some(d)
        }
        Shape::Box(w, h) => {
            if lat_distance(p.1, center.1) > h / 2.0 {
                return None;
            }
            if distance(p.0, p.1, center.0, p.1) > w / 2.0 {
                return None;
            }
            Some(distance(center.0, center.1, p.0, p.1))
        }
    }
}

/// How many bits a search box of this radius needs (`geohashEstimateStepsByRadius`).
fn steps_for(mut range: f64, lat: f64) -> u8 {
    if range == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range < MERCATOR_MAX {
        range *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u8
}

/// The longitude and latitude bounds of a shape around a center (`geohashBoundingBox`):
/// (min lon, min lat, max lon, max lat).
fn bounds(shape: Shape, (lon, lat): (f64, f64)) -> (f64, f64, f64, f64) {
    let (width, height) = match shape {
        Shape::Radius(r) => (r, r),
        Shape::Box(w, h) => (w / 2.0, h / 2.0),
    };
    let lat_delta = rad_deg(height / EARTH_RADIUS);
    let top = rad_deg(width / EARTH_RADIUS / deg_rad(lat + lat_delta).cos());
    let bottom = rad_deg(width / EARTH_RADIUS / deg_rad(lat - lat_delta).cos());
    let d = if lat < 0.0 { bottom } else { top };
    (lon - d, lat - lat_delta, lon + d, lat + lat_delta)
}

/// Moves a geohash one box along the coordinate whose bits are `mask`'s (the odd bits:
/// longitude, east for `d > 0`; the even bits: latitude, north), wrapping around
/// (`geohash_move_x` and `geohash_move_y`).
fn step(h: &mut Hash, d: i8, mask: u64) {
    let shift = 64 - u32::from(h.step) * 2;
    let (mine, other) = (h.bits & mask, h.bits & !mask);
    let zz = !mask >> shift;
    let moved = if d > 0 {
        mine.wrapping_add(zz + 1)
    } else {
        (mine | zz).wrapping_sub(zz + 1)
    };
    h.bits = (moved & (mask >> shift)) | other;
}

const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;
const EVEN: u64 = 0x5555_5555_5555_5555;

/// The eight neighbors, in Redis's search order after the center: north, south, east,
/// west, north-east, north-west, south-east, south-west.
fn neighbors(h: Hash) -> [Hash; 8] {
    let at = |dx: i8, dy: i8| {
        let mut n = h;
        if dx != 0 {
            step(&mut n, dx, ODD);
        }
        if dy != 0 {
            step(&mut n, dy, EVEN);
        }
        n
    };
    [
        at(0, 1),
        at(0, -1),
        at(1, 0),
        at(-1, 0),
        at(1, 1),
        at(-1, 1),
        at(1, -1),
        at(-1, -1),
    ]
}

/// The boxes a search of `shape` around `center` reads, in Redis's order, those that
/// cannot hold a match and repeats of the box before left out
/// (`geohashCalculateAreasByShapeWGS84` and `membersOfAllNeighbors`).
pub fn search_boxes(shape: Shape, center: (f64, f64)) -> Vec<Hash> {
    let (min_lon, min_lat, max_lon, max_lat) = bounds(shape, center);
    let radius = match shape {
        Shape::Radius(r) => r,
        Shape::Box(w, h) => ((w / 2.0) * (w / 2.0) + (h / 2.0) * (h / 2.0)).sqrt(),
    };
    let mut steps = steps_for(radius, center.1);
    let around = |steps: u8| {
        let h = encode(center.0, center.1, steps).unwrap_or_default();
        (h, neighbors(h), decode(h))
    };
    let (mut hash, mut n, mut area) = around(steps);
    let (north, south, east, west) = (decode(n[0]), decode(n[1]), decode(n[2]), decode(n[3]));
    let decrease = north.lat.1 < max_lat
        || south.lat.0 > min_lat
        || east.lon.1 < max_lon
        || west.lon.0 > min_lon;
    if steps > 1 && decrease {
        steps -= 1;
        (hash, n, area) = around(steps);
    }
    if steps >= 2 {
        let zero = Hash::default();
        if area.lat.0 < min_lat {
            (n[1], n[7], n[6]) = (zero, zero, zero); // south, south-west, south-east
        }
        if area.lat.1 > max_lat {
            (n[0], n[4], n[5]) = (zero, zero, zero); // north, north-east, north-west
        }
        if area.lon.0 < min_lon {
            (n[3], n[7], n[5]) = (zero, zero, zero); // west, south-west, north-west
        }
        if area.lon.1 > max_lon {
            (n[2], n[6], n[4]) = (zero, zero, zero); // east, south-east, north-east
        }
    }
    let all: Vec<Hash> = std::iter::once(hash).chain(n).collect();
    let mut out: Vec<Hash> = Vec::with_capacity(9);
    // Redis skips a box equal to the last one read after the center (`last_processed`).
    let mut last = 0;
    for (i, h) in all.iter().enumerate() {
        if h.is_zero() || (last != 0 && *h == all[last]) {
            continue;
        }
        out.push(*h);
        last = i;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaving_round_trips() {
        for (x, y) in [
            (0u32, 0u32),
            (1, 0),
            (0, 1),
            (0x3ff_ffff, 0x155_5555),
            (u32::MAX, 7),
        ] {
            assert_eq!(deinterleave(interleave(x, y)), (x, y));
        }
    }

    #[test]
    fn positions_decode_near_where_they_were_encoded() {
        // Palermo and Catania, Redis's documentation's example.
        let s = score(13.361389, 38.115556).unwrap();
        assert_eq!(s, 3_479_099_956_230_698);
        let (lon, lat) = position(s as f64);
        assert!((lon - 13.361389).abs() < 1e-5 && (lat - 38.115556).abs() < 1e-5);
        let c = score(15.087269, 37.502669).unwrap();
        let (clon, clat) = position(c as f64);
        let d = distance(lon, lat, clon, clat);
        assert!((d - 166_274.151_6).abs() < 0.01, "{d}");
        assert_eq!(standard_geohash(s as f64), "sqc8b49rny0");
        assert_eq!(score(181.0, 0.0), None);
        assert_eq!(score(0.0, 86.0), None);
    }

    #[test]
    fn the_boxes_of_a_search_cover_its_circle() {
        let center = (13.361389, 38.115556);
        let boxes = search_boxes(Shape::Radius(200_000.0), center);
        assert!(!boxes.is_empty() && boxes.len() <= 9);
        // Points around the center at up to the radius fall in one of the boxes.
        for i in 0..360 {
            let a = f64::from(i).to_radians();
            for r in [0.0, 0.5, 1.0] {
                let (lon, lat) = (center.0 + 2.2 * r * a.cos(), center.1 + 1.7 * r * a.sin());
                let p = position(score(lon, lat).unwrap() as f64);
                if within(Shape::Radius(200_000.0), center, p).is_none() {
                    continue;
                }
                let s = score(lon, lat).unwrap();
                assert!(
                    boxes.iter().any(|b| {
                        let (lo, hi) = b.score_range();
                        (lo..hi).contains(&s)
                    }),
                    "{lon},{lat} in no box"
                );
            }
        }
    }
}

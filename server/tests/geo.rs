//! Geo commands over RESP against the real server: one script of GEOADD, GEOPOS, GEODIST,
//! GEOHASH, GEOSEARCH (radius and box, from a member and from a position, sorted, counted,
//! with every WITH option), GEOSEARCHSTORE, GEORADIUS and its kin, and their errors gets,
//! reply for reply, what a real `redis-server` answers; then random points and searches
//! against both servers give the same members and distances.

mod common;

use common::commands_answer_as_redis_does;

const SCRIPT: &[&str] = &[
    "GEOADD Sicily 13.361389 38.115556 Palermo 15.087269 37.502669 Catania",
    "GEOADD Sicily NX 13.361389 38.115556 Palermo 14.0 37.0 Agrigento",
    "GEOADD Sicily XX CH 13.5 38.1 Palermo 12.0 37.8 Marsala",
    "GEOADD Sicily NX XX 13.361389 38.115556 Palermo",
    "GEOADD Sicily 13.361389 38.115556",
    "GEOADD Sicily 181 0 bad",
    "GEOADD Sicily 0 85.1 bad",
    "GEOADD Sicily x 0 bad",
    "ZRANGE Sicily 0 -1 WITHSCORES",
    "GEOPOS Sicily Palermo Catania NonExisting",
    "GEOPOS nokey a b",
    "GEOPOS Sicily",
    "GEODIST Sicily Palermo Catania",
    "GEODIST Sicily Palermo Catania km",
    "GEODIST Sicily Palermo Catania MI",
    "GEODIST Sicily Palermo Catania ft",
    "GEODIST Sicily Palermo Catania furlong",
    "GEODIST Sicily Palermo Catania km extra",
    "GEODIST Sicily Palermo nobody",
    "GEODIST nokey a b",
    "GEOHASH Sicily Palermo Catania nobody",
    "GEOHASH nokey a",
    "GEOADD Sicily 2.349014 48.864716 Paris -0.1275 51.507222 London",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km DESC WITHCOORD WITHDIST WITHHASH",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 2000 km ASC COUNT 3 WITHDIST",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYRADIUS 2000 km COUNT 2",
    "GEOSEARCH Sicily FROMMEMBER Palermo BYBOX 400 400 km ASC WITHDIST",
    "GEOSEARCH Sicily FROMLONLAT 10 45 BYBOX 3000 3000 km ASC WITHCOORD",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 20000 km COUNT 1 ANY",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 200 km ANY",
    "GEOSEARCH Sicily FROMMEMBER nobody BYRADIUS 200 km",
    "GEOSEARCH Sicily FROMMEMBER Palermo FROMLONLAT 1 2 BYRADIUS 200 km",
    "GEOSEARCH Sicily BYRADIUS 200 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS -1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS x km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYBOX 1 -1 km",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km COUNT 0",
    "GEOSEARCH Sicily FROMLONLAT 15 37 BYRADIUS 1 km STORE x",
    "GEOSEARCH nokey FROMLONLAT 15 37 BYRADIUS 200 km",
    "GEOSEARCH nokey FROMMEMBER m BYRADIUS 200 km",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km ASC",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km STOREDIST",
    "ZRANGE dst 0 -1 WITHSCORES",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 15 37 BYRADIUS 200 km WITHDIST",
    "GEOSEARCHSTORE dst Sicily FROMLONLAT 100 10 BYRADIUS 1 km",
    "EXISTS dst",
    "GEORADIUS Sicily 15 37 200 km WITHDIST WITHCOORD ASC",
    "GEORADIUS Sicily 15 37 200 km COUNT 1 DESC",
    "GEORADIUS Sicily 15 37 200 km STORE dst2",
    "ZRANGE dst2 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STOREDIST dst2",
    "ZRANGE dst2 0 -1 WITHSCORES",
    "GEORADIUS Sicily 15 37 200 km STORE dst2 WITHDIST",
    "GEORADIUS_RO Sicily 15 37 200 km ASC",
    "GEORADIUS_RO Sicily 15 37 200 km STORE dst2",
    "GEORADIUSBYMEMBER Sicily Palermo 200 km ASC WITHDIST",
    "GEORADIUSBYMEMBER Sicily nobody 200 km",
    "GEORADIUSBYMEMBER nokey nobody -5 km",
    "GEORADIUSBYMEMBER_RO Sicily Catania 100 mi ASC WITHHASH",
    "SET str x",
    "GEOADD str 1 1 a",
    "GEOPOS str a",
    "GEOSEARCH str FROMLONLAT 15 37 BYRADIUS 200 km",
];

#[test]
fn geo_commands_answer_as_redis_does() {
    let cmds: Vec<Vec<&str>> = SCRIPT.iter().map(|l| l.split(' ').collect()).collect();
    commands_answer_as_redis_does(&cmds);
}

/// A xorshift generator: the test's points, repeatable.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn random_searches_find_what_redis_finds() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut unit = move || (next(&mut rng) % 1_000_000) as f64 / 1_000_000.0;
    let mut script: Vec<Vec<String>> = Vec::new();
    // 400 points around (12, 42), some near the poles' limit and the date line.
    for chunk in 0..8 {
        let mut cmd = vec!["GEOADD".to_string(), "pts".to_string()];
        for i in 0..50 {
            let (lon, lat) = match chunk {
                6 => (179.0 + unit() * 2.0 - 1.0, unit() * 10.0),
                7 => (unit() * 20.0, 84.0 + unit()),
                _ => (12.0 + unit() * 6.0 - 3.0, 42.0 + unit() * 4.0 - 2.0),
            };
            let lon = lon.clamp(-180.0, 180.0);
            cmd.extend([
                format!("{lon:.6}"),
                format!("{lat:.6}"),
                format!("p{chunk}-{i}"),
            ]);
        }
        script.push(cmd);
    }
    for i in 0..60 {
        let (lon, lat) = match i % 3 {
            0 => (12.0 + unit() * 6.0 - 3.0, 42.0 + unit() * 4.0 - 2.0),
            1 => (179.5, unit() * 10.0),
            _ => (unit() * 20.0, 84.5),
        };
        let r = format!("{}", (unit() * 300.0).round() + 1.0);
        let from = vec![
            "FROMLONLAT".to_string(),
            format!("{lon:.6}"),
            format!("{lat:.6}"),
        ];
        let shape: Vec<String> = if i % 2 == 0 {
            vec!["BYRADIUS".into(), r, "km".into()]
        } else {
            vec![
                "BYBOX".into(),
                r.clone(),
                format!("{}", (unit() * 200.0).round() + 1.0),
                "km".into(),
            ]
        };
        let mut cmd = vec!["GEOSEARCH".to_string(), "pts".to_string()];
        cmd.extend(from);
        cmd.extend(shape);
        cmd.extend(["ASC", "WITHDIST", "WITHCOORD", "WITHHASH"].map(String::from));
        script.push(cmd);
    }
    let cmds: Vec<Vec<&str>> = script
        .iter()
        .map(|c| c.iter().map(String::as_str).collect())
        .collect();
    commands_answer_as_redis_does(&cmds);
}

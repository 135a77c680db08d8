//! Fixed work for instruction counts (`valgrind --tool=callgrind`): `put` loads 200,000
//! keys; `get` loads them and reads each 5 times; `scan` loads them and runs 20,000 scans
//! of 50 items. Subtract `put` from the others for the reads' own cost. Keys are written
//! into one reused buffer and a GET copies its value into another, as a server writes a
//! reply into its output buffer, so the count is the store's own (`format!` and a `Vec`
//! per GET cost about 1,000 instructions of their own). With a `-ttl`
//! suffix every key gets an expiry deadline (in the year 3000), so readers read the clock;
//! `sweep` loads keys that are expired already and removes them all as the server's active
//! sweep does (`expired_keys` + `purge_expired`).

use accelkv_tree::{Config, Store};

fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| "put".into());
    let (mode, deadline) = match arg.strip_suffix("-ttl") {
        Some(m) => (m.to_string(), 32_503_680_000_000u64),
        None if arg == "sweep" => (arg.clone(), 1_000),
        None if arg == "walk" => (arg.clone(), 32_503_680_000_000u64),
        None => (arg.clone(), 0),
    };
    let n = 200_000u64;
    let store = Store::new(Config::default()).expect("store");
    // "user" and 12 decimal digits of a scrambled index.
    let key = |i: u64| -> [u8; 16] {
        let mut buf = *b"user000000000000";
        let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_007;
        for d in buf[4..].iter_mut().rev() {
            *d = b'0' + (x % 10) as u8;
            x /= 10;
        }
        buf
    };
    for i in 0..n {
        store
            .put_expiring(&key(i), b"sixteen-byte-val", deadline)
            .expect("put");
    }
    let mut found = 0u64;
    let mut out = Vec::with_capacity(64);
    match mode.as_str() {
        "get" => {
            for r in 0..5 {
                for i in 0..n {
                    let hit = store
                        .get_with(&key((i + r) % n), |v| {
                            out.clear();
                            out.extend_from_slice(v);
                        })
                        .expect("get");
                    found += u64::from(hit.is_some());
                }
            }
        }
        "scan" => {
            for i in 0..20_000 {
                found += store.scan(&key(i), None, 50).len() as u64;
            }
        }
        "walk" => {
            // An expiry sweep's walk over keys none of which has expired.
            let t = std::time::Instant::now();
            let mut cursor = Vec::new();
            let now = accelkv_tree::now_ms();
            while let (_, Some(next)) = store.expired_keys(&cursor, 2048, now).expect("in memory") {
                cursor = next;
                found += 1;
            }
            eprintln!("walk of {n} keys: {:?}", t.elapsed());
        }
        "sweep" => {
            let now = accelkv_tree::now_ms();
            let mut cursor = Vec::new();
            loop {
                let (expired, next) = store.expired_keys(&cursor, 2048, now).expect("in memory");
                for k in &expired {
                    found += u64::from(store.purge_expired(k, now).expect("purge"));
                }
                match next {
                    Some(n) => cursor = n,
                    None => break,
                }
            }
            assert_eq!(store.len(), 0);
        }
        _ => {}
    }
    println!("{mode}: {found}");
}

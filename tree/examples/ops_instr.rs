//! Fixed work for instruction counts (`valgrind --tool=callgrind`): `put` loads 200,000
//! keys; `get` loads them and reads each 5 times; `scan` loads them and runs 20,000 scans
//! of 50 items. Subtract `put` from the others for the reads' own cost.

use accelkv_tree::{Config, Store};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "put".into());
    let n = 200_000u64;
    let store = Store::new(Config::default()).expect("store");
    let key = |i: u64| {
        format!(
            "user{:012}",
            i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_007
        )
    };
    for i in 0..n {
        store
            .put(key(i).as_bytes(), b"sixteen-byte-val")
            .expect("put");
    }
    let mut found = 0u64;
    match mode.as_str() {
        "get" => {
            for r in 0..5 {
                for i in 0..n {
                    found += u64::from(
                        store
                            .get(key((i + r) % n).as_bytes())
                            .expect("get")
                            .is_some(),
                    );
                }
            }
        }
        "scan" => {
            for i in 0..20_000 {
                found += store.scan(key(i).as_bytes(), None, 50).len() as u64;
            }
        }
        _ => {}
    }
    println!("{mode}: {found}");
}

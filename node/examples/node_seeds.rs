//! Writes seed inputs for the `node_decode` fuzz target (fuzz/fuzz_targets/node_decode.rs)
//! into the folder given as the first argument: valid leaves with and without log entries,
//! deadlines, flags and out-of-line values, and interior nodes, each prefixed by the byte
//! that selects its node size. A fuzzer that starts from valid nodes reaches the tail and
//! the readers instead of stopping at the first check.

use accelkv_node::layout::*;
use accelkv_node::*;

fn meta(version: u64, level: u8) -> NodeMeta {
    NodeMeta {
        version,
        old: NO_BUFFER,
        link: 7,
        left: 0,
        level,
        lock: 0,
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: node_seeds DIR");
    std::fs::create_dir_all(&dir).expect("create the seed folder");
    let mut seeds: Vec<(usize, Vec<u8>)> = Vec::new();
    for (sel, size) in [(0u8, 4096usize), (1, 8192)] {
        let g = Geometry {
            node_size: size,
            ..Geometry::default()
        };
        for (n, log) in [(0usize, 0usize), (5, 0), (40, 3), (60, 12)] {
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|i| format!("key{:04}", i * 3).into_bytes())
                .collect();
            let items: Vec<(&[u8], ValueRef)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| {
                    let v = match i % 4 {
                        0 => ValueRef::inline(b"value"),
                        1 => ValueRef::inline(b"ttl").with_deadline(1_700_000_000_000),
                        2 => ValueRef::inline(b"flagged").with_flags(42),
                        _ => ValueRef::out_of_line(0x1000 + i as u64, 600),
                    };
                    (k.as_slice(), v)
                })
                .collect();
            let mut buf = vec![0u8; size];
            build_leaf(&mut buf, &g, &items, &meta(10, 0)).expect("fits");
            for j in 0..log {
                let k = format!("key{:04}", j * 5).into_bytes();
                let v = ValueRef::inline(b"new");
                let value = (j % 3 != 2).then_some(&v);
                assert!(append_owned(&mut buf, &k, value, 11 + j as u64));
            }
            validate_node(&buf).expect("a valid seed");
            let mut seed = vec![0x80 | 0x40 | sel];
            seed.extend_from_slice(&buf);
            seeds.push((size, seed));
        }
        let seps: Vec<Vec<u8>> = (0..30).map(|i| format!("sep{i:03}").into_bytes()).collect();
        let entries: Vec<(&[u8], u64)> = seps
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_slice(), 100 + i as u64))
            .collect();
        let mut buf = vec![0u8; size];
        build_interior(&mut buf, &g, &entries, &meta(10, 1)).expect("fits");
        validate_node(&buf).expect("a valid seed");
        let mut seed = vec![0x80 | sel];
        seed.extend_from_slice(&buf);
        seeds.push((size, seed));
    }
    for (i, (size, seed)) in seeds.iter().enumerate() {
        let path = format!("{dir}/seed-{size}-{i:02}");
        std::fs::write(&path, seed).expect("write a seed");
    }
    println!("{} seeds in {dir}", seeds.len());
}

//! Cycles per node search of the simulated key search unit, by node size, fill and log
//! length (docs/RTL.md): `cargo run --release -p accelkv-rtl --features sim --example
//! ksu_cycles`. Keys are 16 bytes, values 100 (YCSB's shape); every search is for a key the
//! leaf holds, half of them in the log.

use accelkv_node::layout::*;
use accelkv_node::*;
use accelkv_rtl::{Answer, Ksu};

fn key(i: usize) -> Vec<u8> {
    format!("user{:012}", i * 7919 % 1_000_003).into_bytes()
}

fn used(buf: &[u8]) -> usize {
    used_of(u64::from_le_bytes(buf[0..8].try_into().unwrap()))
}

/// A leaf filled to `fill` of its sorted capacity with 16/100-byte items, plus `log` entries
/// (updates of its keys). Returns the node and its keys.
fn leaf(node_size: usize, fill: f64, log: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let g = Geometry {
        node_size,
        ..Geometry::default()
    };
    let value = [b'v'; 100];
    let per = leaf_item_size(16, &ValueRef::inline(&value));
    let n = ((g.leaf_capacity() as f64 * fill) as usize / per).max(1);
    let mut keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    keys.sort();
    let items: Vec<(&[u8], ValueRef)> = keys
        .iter()
        .map(|k| (k.as_slice(), ValueRef::inline(&value)))
        .collect();
    let mut buf = vec![0u8; node_size];
    let meta = NodeMeta {
        version: 1,
        old: NO_BUFFER,
        link: 0,
        left: 0,
        level: 0,
        lock: 0,
    };
    build_leaf(&mut buf, &g, &items, &meta).expect("sized to fit");
    for i in 0..log {
        let k = &keys[i * 13 % keys.len()];
        let v = ValueRef::inline(&value[..60]);
        if !append_owned(&mut buf, k, Some(&v), 1 + i as u64) {
            break;
        }
    }
    (buf, keys)
}

fn main() {
    let mut ksu = Ksu::new();
    println!("| node | fill | items | log entries | cycles mean | cycles max |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for node_size in [4096, 8192] {
        for fill in [0.25, 0.5, 1.0] {
            for log in [0, 4, 16] {
                let (node, keys) = leaf(node_size, fill, log);
                let view = NodeView::from_node(&node);
                let published = &node[..used(&node)];
                let (mut sum, mut max, mut n) = (0u64, 0u32, 0u64);
                for k in keys.iter().step_by((keys.len() / 32).max(1)) {
                    let s = ksu.search(published, k, u64::MAX, 0).expect("answers");
                    assert!(matches!(s.answer, Answer::Value(_)), "{k:?}");
                    assert!(view.leaf_get(k, u64::MAX, 0).is_some());
                    sum += u64::from(s.cycles);
                    max = max.max(s.cycles);
                    n += 1;
                }
                println!(
                    "| {node_size} | {:.0}% | {} | {} | {} | {max} |",
                    fill * 100.0,
                    keys.len(),
                    view.log_entries().count(),
                    sum / n
                );
            }
        }
    }
}

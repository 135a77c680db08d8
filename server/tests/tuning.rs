//! The evaluation's configuration knobs end to end (docs/EVALUATION.md): `--log-threshold`
//! (Honeycomb's log-block threshold) changes when leaves merge and keeps every answer right,
//! a threshold the node cannot hold is refused at start with a clear error, and
//! `--gpu-cache` is accepted whichever engine runs.

mod common;

use accelkv_client::Client;
use common::Server;
use std::collections::BTreeMap;
use std::process::Command;

/// Writes, overwrites and deletes through the binary protocol; every key reads back as the
/// model says, and a scan returns the model's items in order.
fn check_store(s: &Server) {
    let mut c = Client::connect(s.bin, None).expect("connect");
    let mut model = BTreeMap::new();
    for round in 0..3u32 {
        for i in 0..3000u32 {
            let k = format!("k{:06}", (i * 7919) % 3000).into_bytes();
            if round == 2 && i % 5 == 0 {
                c.delete(&k).expect("delete");
                model.remove(&k);
            } else {
                let v = format!("v{round}-{i}")
                    .repeat(1 + (i as usize % 7))
                    .into_bytes();
                c.put(&k, &v).expect("put");
                model.insert(k, v);
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(c.get(k).expect("get").as_ref(), Some(v), "{k:?}");
    }
    let (items, _) = c.scan(b"k", b"", 500).expect("scan");
    let want: Vec<_> = model.iter().take(500).collect();
    assert_eq!(items.len(), want.len());
    for ((k, v), (mk, mv)) in items.iter().zip(want) {
        assert_eq!((k, v), (mk, mv));
    }
}

#[test]
fn every_log_threshold_keeps_answers_right() {
    for t in ["0", "256", "4KiB"] {
        let s = Server::start(&["--log-threshold", t]);
        check_store(&s);
    }
}

#[test]
fn a_log_block_the_node_cannot_hold_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--port", "0", "--resp-port", "0", "--admin-port", "0"])
        .args(["--memcached-port", "off", "--log-threshold", "64KiB"])
        .output()
        .expect("run accelkv-server");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("log"), "{err}");
}

#[test]
fn the_gpu_cache_size_is_accepted_with_any_engine() {
    let s = Server::start(&["--gpu-cache", "16MiB"]);
    check_store(&s);
}

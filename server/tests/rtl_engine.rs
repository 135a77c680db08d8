//! `--engine rtl` end to end (issue 19): a server whose reads run through the simulated RTL
//! tree-walk engine answers redis-cli's GET, MGET, RANGE and FLOOR exactly as a server with
//! the CPU engine does, on the same data (several tree levels: 4 KiB nodes). Built only
//! with the server's `rtl` feature (Verilator); .ci/run runs it.
#![cfg(feature = "rtl")]

mod common;

use common::{RespConn, Server};
use std::process::Command;

fn cli(srv: &Server, args: &[&str]) -> String {
    let o = Command::new("redis-cli")
        .args(["-p", &srv.resp.port().to_string()])
        .args(args)
        .output()
        .expect("redis-cli (.ci/run installs it)");
    assert!(o.status.success(), "{args:?}: {o:?}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn key(i: u64) -> String {
    format!("user{:08}", i.wrapping_mul(7919) % 100_003)
}

#[test]
fn redis_cli_reads_through_the_rtl_engine_match_the_cpu_engine() {
    let rtl = Server::start(&["--engine", "rtl", "--node-size", "4096"]);
    let cpu = Server::start(&["--engine", "cpu", "--node-size", "4096"]);
    for srv in [&rtl, &cpu] {
        let mut c = RespConn::new(srv);
        for chunk in (0..4000u64).collect::<Vec<_>>().chunks(200) {
            let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
            for &i in chunk {
                args.push(key(i).into_bytes());
                args.push(format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes());
            }
            let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            c.call(&refs);
        }
        // deletes and overwrites: log entries and newer versions
        for i in (0..4000u64).step_by(7) {
            c.call(&[b"DEL", key(i).as_bytes()]);
        }
        for i in (0..4000u64).step_by(11) {
            c.call(&[b"SET", key(i).as_bytes(), b"overwritten"]);
        }
    }
    let info = cli(&rtl, &["INFO"]);
    assert!(info.contains("engine:rtl"), "{info}");
    let mut queries: Vec<Vec<String>> = Vec::new();
    for i in (0..4000u64).step_by(97) {
        queries.push(vec!["GET".into(), key(i)]);
    }
    queries.push(vec!["GET".into(), "absent".into()]);
    queries.push(vec!["MGET".into(), key(1), key(7), key(11), "nope".into()]);
    for (lo, hi) in [
        ("user0000", "user0002"),
        ("user0005", "user00051"),
        ("user0003", "user0004"),
    ] {
        queries.push(vec!["RANGE".into(), lo.into(), hi.into()]);
        queries.push(vec![
            "RANGE".into(),
            lo.into(),
            hi.into(),
            "LIMIT".into(),
            "25".into(),
        ]);
        queries.push(vec!["FLOOR".into(), lo.into(), hi.into()]);
    }
    queries.push(vec![
        "RANGE".into(),
        "a".into(),
        "z".into(),
        "LIMIT".into(),
        "40".into(),
    ]);
    for q in &queries {
        let args: Vec<&str> = q.iter().map(String::as_str).collect();
        let (a, b) = (cli(&rtl, &args), cli(&cpu, &args));
        assert_eq!(a, b, "{args:?}");
        assert!(!a.contains("ERR"), "{args:?}: {a}");
    }
    let info = cli(&rtl, &["INFO"]);
    let lookups: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("rtl_lookups:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rtl_lookups in {info}"));
    assert!(
        lookups >= 40,
        "the RTL engine ran {lookups} lookups:\n{info}"
    );
}

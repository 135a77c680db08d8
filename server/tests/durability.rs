//! The real server with a data directory, killed with SIGKILL under a write load again and
//! again: every write a client saw acknowledged (binary frames and RESP SET) is there after
//! each restart, whole. Also: a clean restart keeps everything, INFO reports the recovery,
//! and `--sync` without `--data-dir` is refused.

mod common;

use accelkv_client::Client;
use common::Server;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn data_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("accelkv-server-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A value that carries its step, 20 bytes or (every 7th step) 2 KB, so extension pages are
/// in the mix.
fn value(step: u64) -> Vec<u8> {
    let n = if step.is_multiple_of(7) { 100 } else { 1 };
    format!("{step:020}").repeat(n).into_bytes()
}

fn step_of(v: &[u8]) -> u64 {
    assert!(
        v.len().is_multiple_of(20) && !v.is_empty(),
        "torn value of {} bytes",
        v.len()
    );
    let s: u64 = std::str::from_utf8(&v[..20]).unwrap().parse().unwrap();
    assert_eq!(v, value(s).as_slice(), "value mixed up");
    s
}

/// RESP SET over a raw socket: `true` once `+OK` came back.
fn resp_set(r: &mut BufReader<TcpStream>, key: &[u8], val: &[u8]) -> bool {
    let mut cmd = format!("*3\r\n$3\r\nSET\r\n${}\r\n", key.len()).into_bytes();
    cmd.extend_from_slice(key);
    cmd.extend_from_slice(format!("\r\n${}\r\n", val.len()).as_bytes());
    cmd.extend_from_slice(val);
    cmd.extend_from_slice(b"\r\n");
    if r.get_mut().write_all(&cmd).is_err() {
        return false;
    }
    let mut line = String::new();
    matches!(r.read_line(&mut line), Ok(n) if n > 0) && line == "+OK\r\n"
}

#[test]
fn kill_9_under_write_load_loses_no_acknowledged_write() {
    let dir = data_dir("kill9");
    let d = dir.to_str().unwrap().to_string();
    let mut acked: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let t0 = Instant::now();
    for round in 0..6u64 {
        let mut server = Server::start(&["--data-dir", &d]);
        // Everything acknowledged in earlier rounds survived the kill.
        {
            let mut c = Client::connect(server.bin, None).unwrap();
            for (k, step) in &acked {
                let v = c.get(k).unwrap().unwrap_or_else(|| {
                    panic!(
                        "round {round}: acknowledged {} lost",
                        String::from_utf8_lossy(k)
                    )
                });
                let got = step_of(&v);
                assert!(
                    got >= *step,
                    "round {round}: key went back from {step} to {got}"
                );
            }
        }
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..4u64)
            .map(|t| {
                let (stop, bin, resp) = (stop.clone(), server.bin, server.resp);
                std::thread::spawn(move || {
                    let mut mine: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
                    let mut step = round * 1_000_000 + 1;
                    if t == 3 {
                        // RESP clients are acknowledged after durability too.
                        let Ok(s) = TcpStream::connect(resp) else {
                            return mine;
                        };
                        let mut r = BufReader::new(s);
                        while !stop.load(Ordering::Relaxed) {
                            let k = format!("resp-k{:03}", step % 150).into_bytes();
                            if !resp_set(&mut r, &k, &value(step)) {
                                break;
                            }
                            mine.insert(k, step);
                            step += 1;
                        }
                        return mine;
                    }
                    let Ok(mut c) = Client::connect(bin, None) else {
                        return mine;
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let k = format!("t{t}-k{:03}", step % 150).into_bytes();
                        match c.put(&k, &value(step)) {
                            Ok(_) => {
                                mine.insert(k, step);
                            }
                            Err(_) => break,
                        }
                        step += 1;
                    }
                    mine
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300 + 150 * round));
        // SIGKILL: no shutdown path runs.
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        let mut wrote = 0;
        for w in writers {
            let mine = w.join().unwrap();
            wrote += mine.len();
            acked.extend(mine);
        }
        assert!(
            wrote > 0,
            "round {round}: no write was acknowledged before the kill"
        );
    }
    // A last start checks the last round; then a clean stop and start keeps it all too.
    let server = Server::start(&["--data-dir", &d]);
    let mut c = Client::connect(server.bin, None).unwrap();
    for (k, step) in &acked {
        let got = step_of(&c.get(k).unwrap().expect("acknowledged key present"));
        assert!(got >= *step);
    }
    let info = c.stats().unwrap();
    assert!(info.contains("recovered"), "{info}");
    assert!(info.contains("durability:pages sync"), "{info}");
    drop(c);
    drop(server);
    assert!(t0.elapsed() < Duration::from_secs(120));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A disk that fills up (here: the server's file-size limit, so `pwrite` fails with EFBIG):
/// the write that needed the space gets status DISK with the device's error, later writes
/// are refused with DISK (binary) and `-ERR disk error` (RESP), reads go on, INFO says so,
/// and after a restart with room again every acknowledged write is there.
#[test]
fn full_disk_gives_disk_status_and_reads_go_on() {
    use std::os::unix::process::CommandExt;
    let dir = data_dir("full");
    let d = dir.to_str().unwrap().to_string();
    let server = Server::start_with(&["--data-dir", &d], |cmd| {
        // SAFETY: between fork and exec only async-signal-safe calls (setrlimit, signal),
        // touching no memory shared with the parent.
        unsafe {
            cmd.pre_exec(|| {
                // 6 MiB: the superblock and one 4 MiB slab fit, a second slab does not.
                let lim = libc::rlimit {
                    rlim_cur: 6 << 20,
                    rlim_max: 6 << 20,
                };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Past the limit a write fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let mut c = Client::connect(server.bin, None).unwrap();
    c.put(b"small", b"kept").unwrap();
    // A 100 KB value needs a slot of a class no slab has yet: a new slab past the limit.
    let e = c.put(b"big", &vec![7u8; 100_000]).unwrap_err();
    let msg = e.to_string();
    assert!(
        matches!(&e, accelkv_client::ClientError::Status(accelkv_proto::Status::Disk, m) if m.contains("disk error")),
        "{msg}"
    );
    let e = c.put(b"later", b"refused").unwrap_err();
    assert!(
        matches!(
            &e,
            accelkv_client::ClientError::Status(accelkv_proto::Status::Disk, _)
        ),
        "{e}"
    );
    assert_eq!(c.get(b"small").unwrap(), Some(b"kept".to_vec()));
    assert_eq!(
        c.get(b"later").unwrap(),
        None,
        "a refused write changed nothing"
    );
    let info = c.stats().unwrap();
    assert!(!info.contains("durable_failed:no"), "{info}");
    let s = TcpStream::connect(server.resp).unwrap();
    let mut r = BufReader::new(s);
    r.get_mut().write_all(b"SET x y\r\n").unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("-ERR disk error"), "{line}");
    drop(c);
    drop(server);
    // Room again: everything acknowledged is there, and writes work.
    let server = Server::start(&["--data-dir", &d]);
    let mut c = Client::connect(server.bin, None).unwrap();
    assert_eq!(c.get(b"small").unwrap(), Some(b"kept".to_vec()));
    c.put(b"after", b"ok").unwrap();
    drop(c);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sync_policy_needs_a_data_directory() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--sync", "none", "--port", "0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sync needs --data-dir"));
    let dir = data_dir("badsync");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args([
            "--data-dir",
            dir.to_str().unwrap(),
            "--sync",
            "sometimes",
            "--port",
            "0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown sync policy"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// INFO's persistence section and /metrics say how far the page writer is behind (what a
/// crash now could lose) and the bound the policy keeps it under; after a burst of writes
/// and a pause the lag is back to zero.
#[test]
fn info_and_metrics_report_the_durability_lag() {
    use std::io::Read;
    let dir = data_dir("lag");
    let d = dir.to_str().unwrap().to_string();
    let server = Server::start(&["--data-dir", &d, "--sync", "interval=10"]);
    let s = TcpStream::connect(server.resp).unwrap();
    let mut r = BufReader::new(s);
    for i in 0..200 {
        assert!(resp_set(&mut r, format!("k{i}").as_bytes(), &value(i)));
    }
    let info = |r: &mut BufReader<TcpStream>| -> String {
        r.get_mut().write_all(b"INFO\r\n").unwrap();
        let mut head = String::new();
        r.read_line(&mut head).unwrap();
        let n: usize = head.trim_start_matches('$').trim().parse().unwrap();
        let mut body = vec![0u8; n + 2];
        r.read_exact(&mut body).unwrap();
        String::from_utf8(body).unwrap()
    };
    let field = |text: &str, k: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .unwrap_or_else(|| panic!("no {k} in {text}"))
            .trim()
            .to_string()
    };
    let text = info(&mut r);
    assert!(text.contains("# Persistence\r\nloading:0\r\n"), "{text}");
    assert_eq!(field(&text, "durability"), "pages interval=10");
    assert_eq!(field(&text, "durable_max_lag_ms"), "20.000");
    field(&text, "durable_lag_versions").parse::<u64>().unwrap();
    field(&text, "durable_write_stalls").parse::<u64>().unwrap();
    // Idle: the page writer catches up within an interval or two.
    std::thread::sleep(Duration::from_millis(200));
    let text = info(&mut r);
    assert_eq!(field(&text, "durable_lag_versions"), "0", "{text}");
    assert_eq!(field(&text, "durable_lag_ms"), "0.000", "{text}");
    assert_eq!(field(&text, "rdb_changes_since_last_save"), "0", "{text}");
    let mut h = TcpStream::connect(server.admin).unwrap();
    h.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let mut m = String::new();
    let _ = h.read_to_string(&mut m);
    for name in [
        "accelkv_durable_lag_versions 0",
        "accelkv_durable_lag_seconds 0",
        "accelkv_durable_max_lag_seconds 0.02",
        "accelkv_durable_write_stalls_total ",
    ] {
        assert!(m.contains(name), "no {name} in /metrics:\n{m}");
    }
    drop(r);
    drop(server);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// FLUSHALL is one write: a reader's RANGE sees all of the old keys or none (never part),
/// a cached hot key is gone with the rest, and after kill -9 the data directory holds
/// exactly what was written after it.
#[test]
fn flushall_is_atomic_and_durable() {
    use accelkv_proto::resp::Value;
    use common::RespConn;
    let dir = data_dir("flushall");
    let d = dir.to_str().unwrap().to_string();
    let mut server = Server::start(&["--data-dir", &d, "--max-scan-items", "5000"]);
    let mut c = RespConn::new(&server);
    for chunk in 0..10 {
        let mut args: Vec<Vec<u8>> = vec![b"MSET".to_vec()];
        for i in 0..300 {
            args.push(format!("p{:05}", chunk * 300 + i).into_bytes());
            args.push(b"v".to_vec());
        }
        let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        c.call(&a);
    }
    for _ in 0..200 {
        c.str(&["GET", "p00007"]); // hot: the cache takes it
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let mut r = RespConn::new(&server);
        std::thread::spawn(move || {
            let (mut full, mut empty) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                match r.str(&["RANGE", "p", "q", "LIMIT", "5000"]) {
                    Value::Array(Some(v)) if v.len() == 6000 => full += 1,
                    Value::Array(Some(v)) if v.is_empty() => empty += 1,
                    Value::Array(Some(v)) => panic!("RANGE saw {} of 3000 keys", v.len() / 2),
                    other => panic!("{other:?}"),
                }
            }
            (full, empty)
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(c.str(&["FLUSHALL"]), Value::Simple("OK".into()));
    std::thread::sleep(Duration::from_millis(30));
    stop.store(true, Ordering::Relaxed);
    let (full, empty) = reader.join().unwrap();
    assert!(full > 0 && empty > 0, "{full} full, {empty} empty");
    assert_eq!(c.str(&["GET", "p00007"]), Value::Bulk(None));
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(0));
    assert!(matches!(c.str(&["FLUSHALL", "FOO"]), Value::Error(_)));
    for i in 0..10 {
        c.str(&["SET", &format!("after{i}"), "x"]);
    }
    server.child.kill().unwrap();
    let _ = server.child.wait();
    let server = Server::start(&["--data-dir", &d]);
    let mut c = RespConn::new(&server);
    assert_eq!(c.str(&["DBSIZE"]), Value::Integer(10));
    assert_eq!(c.str(&["GET", "p00007"]), Value::Bulk(None));
    assert_eq!(c.str(&["GET", "after9"]), Value::Bulk(Some(b"x".to_vec())));
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

/// memcached `set` then `gets` on one connection; the item's CAS unique.
fn mc_set_gets(r: &mut BufReader<TcpStream>, key: &str) -> Option<u64> {
    let cmd = format!("set {key} 0 0 1\r\nx\r\ngets {key}\r\n");
    r.get_mut().write_all(cmd.as_bytes()).ok()?;
    let mut line = String::new();
    let mut next = |line: &mut String| {
        line.clear();
        matches!(r.read_line(line), Ok(n) if n > 0)
    };
    if !next(&mut line) || line != "STORED\r\n" || !next(&mut line) {
        return None;
    }
    // VALUE <key> <flags> <bytes> <cas>
    let cas = line.trim_end().rsplit(' ').next()?.parse().ok()?;
    let mut rest = String::new();
    (next(&mut rest) && next(&mut line) && line == "END\r\n").then_some(cas)
}

/// The CAS unique memcached clients see is the item's version. Under `--sync none` a
/// kill -9 loses the last few milliseconds of writes, and with them versions clients
/// already saw; versions after the restart continue above every one of them (the version
/// lease, docs/FORMAT.md "Clock pages"), so a `cas` with a unique from before the crash
/// can never match an item written after it.
#[test]
fn cas_uniques_seen_before_a_kill_9_are_never_issued_again() {
    let dir = data_dir("cas-kill9");
    let d = dir.to_str().unwrap().to_string();
    let mut seen = 0u64;
    for round in 0..4 {
        let mut server = Server::start(&["--data-dir", &d, "--sync", "none"]);
        let mut r = BufReader::new(TcpStream::connect(server.memcached).unwrap());
        let first = mc_set_gets(&mut r, "probe").expect("set and gets after the restart");
        assert!(
            first > seen,
            "round {round}: CAS unique {first} again after a restart (seen up to {seen})"
        );
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..3)
            .map(|t| {
                let (stop, addr) = (stop.clone(), server.memcached);
                std::thread::spawn(move || {
                    let mut most = 0u64;
                    let Ok(s) = TcpStream::connect(addr) else {
                        return most;
                    };
                    let mut r = BufReader::new(s);
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        match mc_set_gets(&mut r, &format!("t{t}k{}", i % 500)) {
                            Some(cas) => most = most.max(cas),
                            None => break,
                        }
                        i += 1;
                    }
                    most
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            seen = seen.max(w.join().unwrap());
        }
        assert!(seen > first, "round {round}: no write before the kill");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn lastsave_is_the_start_then_the_last_durable_commit() {
    use common::RespConn;
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
    };
    let last = |c: &mut RespConn| match c.str(&["LASTSAVE"]) {
        accelkv_proto::resp::Value::Integer(t) => t,
        other => panic!("LASTSAVE: {other:?}"),
    };
    // In memory: when the server started.
    let before = now();
    let mem = Server::start(&[]);
    let mut c = RespConn::new(&mem);
    let t = last(&mut c);
    assert!((before - 2..=now()).contains(&t), "{t} vs {before}");
    // With a data directory: after a write under `sync`, its commit's time.
    let d = data_dir("lastsave");
    let srv = Server::start(&["--data-dir", d.to_str().unwrap()]);
    let mut c = RespConn::new(&srv);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let written = now();
    c.str(&["SET", "k", "v"]);
    let t = last(&mut c);
    assert!((written..=now()).contains(&t), "{t} vs {written}");
    let accelkv_proto::resp::Value::Bulk(Some(info)) = c.str(&["INFO", "persistence"]) else {
        panic!("INFO");
    };
    let info = String::from_utf8_lossy(&info);
    assert!(
        info.contains(&format!("rdb_last_save_time:{t}\r\n")),
        "{info}"
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&d);
}

/// DEBUG POPULATE writes: under `sync` its OK comes once every key is durable, so a kill -9
/// right after it loses none (it answered before its commits until this was checked).
#[test]
fn debug_populate_is_durable_when_it_answers() {
    use accelkv_proto::resp::Value;
    use common::RespConn;
    let dir = data_dir("populate");
    let d = dir.to_str().unwrap().to_string();
    for round in 0..3 {
        let _ = std::fs::remove_dir_all(&dir);
        let mut server = Server::start(&["--data-dir", &d]);
        let mut c = RespConn::new(&server);
        assert_eq!(
            c.str(&["DEBUG", "POPULATE", "20000"]),
            Value::Simple("OK".into())
        );
        server.child.kill().unwrap();
        let _ = server.child.wait();
        let server = Server::start(&["--data-dir", &d]);
        let mut c = RespConn::new(&server);
        assert_eq!(c.str(&["DBSIZE"]), Value::Integer(20000), "round {round}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

//! The packaging files (packaging/) do what they say: the Dockerfile's health check, run
//! with bash as Docker runs it, passes against a serving server and fails against a port
//! nothing serves; the systemd unit passes `systemd-analyze verify` (where installed) with
//! this build's binary in ExecStart; the server starts from accelkv.example.toml, and
//! takes every flag from an `ACCELKV_*` environment variable too (a flag wins).

mod common;

use common::{RespConn, Server};
use std::process::Command;

fn packaging(file: &str) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../packaging/");
    std::fs::read_to_string(format!("{path}{file}")).expect("a packaging file")
}

/// The shell command of the Dockerfile's HEALTHCHECK (its JSON string, unescaped).
fn health_check() -> String {
    let df = packaging("Dockerfile");
    let at = df.find("HEALTHCHECK").expect("a HEALTHCHECK");
    let rest = &df[at..];
    let start = rest.find("\"exec ").expect("the check's command") + 1;
    let end = start + rest[start..].find("\"]").expect("its end");
    rest[start..end].replace("\\\\", "\\")
}

#[test]
fn the_docker_health_check_asks_the_admin_port() {
    let cmd = health_check();
    assert!(cmd.contains("/dev/tcp/127.0.0.1/7708"), "{cmd}");
    let srv = Server::start(&[]);
    let port = srv.admin.port().to_string();
    let run = |c: &str| Command::new("bash").args(["-c", c]).status().unwrap();
    assert!(run(&cmd.replace("7708", &port)).success(), "{cmd}");
    // A port nothing listens on: the check fails.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = free.local_addr().unwrap().port().to_string();
    drop(free);
    assert!(!run(&cmd.replace("7708", &closed)).success());
}

#[test]
fn the_systemd_unit_verifies() {
    let unit = packaging("accelkv.service").replace(
        "/usr/local/bin/accelkv-server",
        env!("CARGO_BIN_EXE_accelkv-server"),
    );
    assert!(unit.contains("ExecStart=") && unit.contains("--data-dir /var/lib/accelkv"));
    let dir = std::env::temp_dir().join(format!("accelkv-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("accelkv.service");
    std::fs::write(&path, unit).unwrap();
    let out = match Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            accelkv_testkit::skip("systemd-analyze is not installed (apt-get install systemd)");
            return;
        }
    };
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success() && text.trim().is_empty(), "{text}");
}

#[test]
fn the_server_starts_from_the_example_config() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../accelkv.example.toml");
    // The test's own free ports, as flags, win over the file's.
    let srv = Server::start(&["--config", example]);
    let mut c = RespConn::new(&srv);
    assert_eq!(
        c.str(&["SET", "k", "v"]),
        accelkv_proto::resp::Value::Simple("OK".into())
    );
    let dbs = c.str(&["CONFIG", "GET", "databases"]);
    assert_eq!(common::strings(dbs), ["databases", "16"]);
}

#[test]
fn environment_variables_set_flags_and_a_flag_wins() {
    let srv = Server::start_with(&["--max-connections", "60"], |cmd| {
        cmd.env("ACCELKV_DATABASES", "4")
            .env("ACCELKV_MAX_CONNECTIONS", "50");
    });
    let mut c = RespConn::new(&srv);
    let dbs = c.str(&["CONFIG", "GET", "databases"]);
    assert_eq!(common::strings(dbs), ["databases", "4"]);
    let accelkv_proto::resp::Value::Bulk(Some(info)) = c.str(&["INFO", "clients"]) else {
        panic!("INFO")
    };
    assert!(String::from_utf8_lossy(&info).contains("maxclients:60\r\n"));
    let out = Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("[env: ACCELKV_MAX_SCAN_ITEMS="), "{help}");
    assert!(help.contains("\nLimits:\n"), "{help}");
}

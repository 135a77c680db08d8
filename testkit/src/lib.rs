//! What accelkv's tests do when a tool they need (redis-server, memcached, etcd, a client's
//! toolchain, NVRTC…) is not installed: [`skip`] prints why and adds a line to the skip list,
//! which `scripts/test.sh` (the README's test command) prints at the end, so a skip never
//! reads as a pass; with `ACCELKV_REQUIRE_TOOLS` set (`.ci/run` sets it and installs every
//! tool) it fails the test instead.

#![forbid(unsafe_code)]

use std::io::Write;
use std::path::PathBuf;

/// The variable that turns a skip into a failure.
pub const REQUIRE: &str = "ACCELKV_REQUIRE_TOOLS";

/// The variable naming the skip list (`scripts/test.sh` sets it; by default a file in the
/// system's temporary directory).
pub const LIST: &str = "ACCELKV_SKIP_LIST";

/// Whether a missing tool fails the test (`ACCELKV_REQUIRE_TOOLS` set, and not `0`).
pub fn tools_required() -> bool {
    std::env::var_os(REQUIRE).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The file skips are listed in.
pub fn skip_list() -> PathBuf {
    std::env::var_os(LIST)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("accelkv-skipped-tests.txt"))
}

/// This test cannot run here because of `why` (a tool that is missing, and how to get it):
/// panics when tools are required; otherwise prints it and adds `<binary> <test>: <why>` to
/// the skip list. The caller then returns.
#[track_caller]
pub fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if tools_required() {
        panic!(
            "{test}: {why} ({REQUIRE} is set: every tool must be installed; .ci/run installs them)"
        );
    }
    let binary = std::env::args()
        .next()
        .and_then(|a| {
            let name = std::path::Path::new(&a)
                .file_name()?
                .to_string_lossy()
                .into_owned();
            // `e2e-3f2a…`: the test target, without cargo's hash.
            Some(match name.rsplit_once('-') {
                Some((stem, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => {
                    stem.to_string()
                }
                _ => name,
            })
        })
        .unwrap_or_default();
    let line = format!("{binary} {test}: {why}");
    eprintln!("skipped: {line}");
    // One small append per skip: whole lines even when tests skip at once.
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(skip_list())
    {
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

#[cfg(test)]
mod tests {
    /// The only test of this binary, so changing its environment races with nothing.
    #[test]
    fn a_skip_is_listed_or_fails_when_tools_are_required() {
        if super::tools_required() {
            assert!(std::panic::catch_unwind(|| super::skip("a tool")).is_err());
            return;
        }
        let list = std::env::temp_dir().join(format!("accelkv-skips-{}", std::process::id()));
        std::env::set_var(super::LIST, &list);
        super::skip("a tool");
        super::skip("another");
        let text = std::fs::read_to_string(&list).unwrap();
        let _ = std::fs::remove_file(&list);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].ends_with("a_skip_is_listed_or_fails_when_tools_are_required: a tool"),
            "{text}"
        );
        assert!(lines[0].starts_with("accelkv_testkit "), "{text}");
    }
}

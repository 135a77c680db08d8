//! The admin endpoint's /metrics, read as Prometheus reads it: parsed by a Prometheus text
//! parser (the `prometheus-parse` crate here; the official Python client's parser and
//! `promtool check metrics` where installed, the Python parser skipped and listed where
//! missing, required with `ACCELKV_REQUIRE_TOOLS`), every
//! family with its HELP and TYPE, counts that match what the test sent, latency histograms
//! whose buckets add up; and the admin listener's bound on connections.

mod common;

use common::{RespConn, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP GET on the admin port: the status line and the body.
fn get(admin: SocketAddr, path: &str) -> (String, String) {
    let mut h = TcpStream::connect(admin).expect("admin port");
    h.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(h, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = h.read_to_string(&mut text);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP reply");
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

fn parse(text: &str) -> prometheus_parse::Scrape {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    prometheus_parse::Scrape::parse(lines).expect("a Prometheus text the parser reads")
}

/// The value of the sample `name` whose labels include `labels`.
fn value(s: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == name && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {name} {labels:?}"));
    match &sample.value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn a_scrape_parses_and_counts_what_was_served() {
    let dir = std::env::temp_dir().join(format!("accelkv-metrics-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let srv = Server::start(&["--data-dir", dir.to_str().unwrap()]);
    let mut c = RespConn::new(&srv);
    for i in 0..5 {
        c.str(&["SET", &format!("k{i}"), "v"]);
    }
    for i in 0..7 {
        c.str(&["GET", &format!("k{i}")]);
    }
    let mut mc = TcpStream::connect(srv.memcached).unwrap();
    mc.write_all(b"get k1\r\n").unwrap();
    let mut b = [0u8; 64];
    let _ = mc.read(&mut b).unwrap();

    let (status, text) = get(srv.admin, "/metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let s = parse(&text);
    // Every sample's family has its HELP (the parser keys them by family name).
    for x in &s.samples {
        let family = ["_sum", "_count", "_bucket"]
            .iter()
            .find_map(|t| x.metric.strip_suffix(t))
            .filter(|f| !s.docs.contains_key(&x.metric) && s.docs.contains_key(*f))
            .unwrap_or(&x.metric);
        assert!(s.docs.contains_key(family), "{} has no HELP", x.metric);
    }
    for line in text.lines().filter(|l| l.starts_with("# HELP ")) {
        let name = line.split(' ').nth(2).unwrap();
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} has no TYPE"
        );
    }
    assert_eq!(value(&s, "accelkv_resp_commands_total", &[]), 12.0);
    assert_eq!(value(&s, "accelkv_memcached_commands_total", &[]), 1.0);
    assert_eq!(value(&s, "accelkv_ops_total", &[("op", "get")]), 8.0);
    assert_eq!(value(&s, "accelkv_ops_total", &[("op", "put")]), 5.0);
    assert_eq!(value(&s, "accelkv_keys", &[]), 5.0);
    assert_eq!(value(&s, "accelkv_durable_failing", &[]), 0.0);
    assert!(value(&s, "accelkv_leaf_cache_hit_ratio", &[]) > 0.0);
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        value(&s, "accelkv_build_info", &[("version", version)]),
        1.0
    );
    latency_histograms(&s);
    official_parsers(&text);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each RESP command was sent alone and answered before the next: 12 RESP batches, one
/// memcached batch; the buckets rise to the count and the sum is a plausible time.
fn latency_histograms(s: &prometheus_parse::Scrape) {
    let hist = |proto: &str| {
        s.samples
            .iter()
            .find_map(|x| match &x.value {
                prometheus_parse::Value::Histogram(h)
                    if x.metric == "accelkv_request_duration_seconds"
                        && x.labels.get("protocol") == Some(proto) =>
                {
                    Some(h.clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("no latency histogram for {proto}"))
    };
    for (proto, n) in [("resp", 12.0), ("memcached", 1.0), ("binary", 0.0)] {
        let h = hist(proto);
        let counts: Vec<f64> = h.iter().map(|b| b.count).collect();
        assert!(
            counts.windows(2).all(|w| w[0] <= w[1]),
            "{proto}: {counts:?}"
        );
        let inf = h.iter().find(|b| b.less_than == f64::INFINITY).unwrap();
        assert_eq!(inf.count, n, "{proto}: {counts:?}");
        if n > 0.0 {
            // Under 10 s each, so all are in the finite buckets.
            let top = h.iter().find(|b| b.less_than == 10.0).unwrap();
            assert_eq!(top.count, n, "{proto}");
        }
    }
}

/// The official Python client's parser, and promtool's linter where installed.
fn official_parsers(text: &str) {
    let py = "import sys\nfrom prometheus_client.parser import text_string_to_metric_families as p\nfor f in p(sys.stdin.read()):\n    print(f.name, f.type, len(f.samples))\n";
    match run_with_stdin("python3", &["-c", py], text) {
        Some((true, out)) => {
            assert!(
                out.contains("accelkv_request_duration_seconds histogram"),
                "{out}"
            );
            assert!(out.contains("accelkv_ops counter"), "{out}");
        }
        Some((false, out)) if !out.contains("No module named 'prometheus_client'") => {
            panic!("the Python client's parser refused the scrape:\n{out}")
        }
        _ => accelkv_testkit::skip(
            "python3 with prometheus_client is not installed (.ci/run installs it)",
        ),
    }
    if let Some((ok, out)) = run_with_stdin("promtool", &["check", "metrics"], text) {
        assert!(ok, "promtool check metrics:\n{out}");
    }
}

/// Runs `cmd` with `input` on its stdin: whether it succeeded and what it wrote (`None`
/// where it is not installed).
fn run_with_stdin(cmd: &str, args: &[&str], input: &str) -> Option<(bool, String)> {
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    Some((out.status.success(), text))
}

#[test]
fn the_admin_listener_serves_a_bounded_number_of_connections() {
    let srv = Server::start(&[]);
    // Connections that send nothing hold their threads (until the 5 s read timeout).
    let idle: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(srv.admin).unwrap())
        .collect();
    // Let the listener take them all.
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    let (status, body) = get(srv.admin, "/metrics");
    assert_eq!(status, "HTTP/1.1 503 Service Unavailable", "{body}");
    assert!(t.elapsed() < Duration::from_secs(2));
    drop(idle);
    let t = Instant::now();
    loop {
        let (status, _) = get(srv.admin, "/health");
        if status == "HTTP/1.1 200 OK" {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "still {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(get(srv.admin, "/nothing").0, "HTTP/1.1 404 Not Found");
}

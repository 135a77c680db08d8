//! The real `accelkv-server` binary on free ports, for the end-to-end tests; killed when
//! dropped.

#![allow(dead_code)]

pub use accelkv_proto::resp::{self, Value};
use accelkv_proto::Limits;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Server {
    pub child: Child,
    pub bin: SocketAddr,
    pub resp: SocketAddr,
    pub admin: SocketAddr,
    /// The memcached port (every test server has one, on a free port).
    pub memcached: SocketAddr,
    /// The listening line the server printed.
    pub line: String,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        Server::start_with(args, |_| {})
    }

    /// [`Server::start`] after `configure` adjusted the command (resource limits, say).
    pub fn start_with(args: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_accelkv-server"));
        // What a server writes beside it (SAVE's dump.rdb without --data-dir) goes to the
        // temporary directory, never into the source tree.
        cmd.current_dir(std::env::temp_dir());
        configure(&mut cmd);
        let mut child = cmd
            .args([
                "--port",
                "0",
                "--resp-port",
                "0",
                "--admin-port",
                "0",
                "--memcached-port",
                "auto",
                "--engine-threads",
                "1",
            ])
            .args(args)
            .env_remove("ACCELKV_PASSWORD")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start accelkv-server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("listening line");
        let addr = |tag: &str| -> SocketAddr {
            let at = line
                .find(tag)
                .unwrap_or_else(|| panic!("no {tag} in {line}"))
                + tag.len();
            line[at..]
                .split_whitespace()
                .next()
                .expect("address")
                .parse()
                .expect("socket address")
        };
        Server {
            bin: addr("tcp+udp "),
            resp: addr("resp "),
            admin: addr("admin http "),
            // "memcached tcp ADDR" or "memcached tcp+udp ADDR"
            memcached: if line.contains("memcached tcp+udp ") {
                addr("memcached tcp+udp ")
            } else {
                addr("memcached tcp ")
            },
            line: line.clone(),
            child,
        }
    }

    /// Open connections, from the admin endpoint's metrics.
    pub fn connections(&self) -> u64 {
        let mut h = TcpStream::connect(self.admin).expect("admin");
        h.write_all(b"GET /metrics HTTP/1.1\r\n\r\n")
            .expect("write");
        let mut text = String::new();
        let _ = h.read_to_string(&mut text);
        text.lines()
            .find_map(|l| l.strip_prefix("accelkv_connections "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(u64::MAX, |v| v as u64)
    }

    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The server's peak resident memory so far.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with(field))
                    .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
            })
            .unwrap_or(0)
    }
}

/// Runs the server with `args` on free ports (no memcached port) expecting it to refuse to
/// start: its exit status and output.
#[allow(dead_code)]
pub fn start_refused(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_accelkv-server"))
        .args(["--port", "0", "--resp-port", "0", "--admin-port", "0"])
        .args(["--memcached-port", "off"])
        .args(args)
        .env_remove("ACCELKV_PASSWORD")
        .output()
        .expect("run accelkv-server")
}

/// Whether the server closed `s` (end of stream or a reset) within its read timeout, as
/// opposed to leaving it open (a timeout: the server hangs instead of closing).
pub fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 64];
    loop {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue, // a final error reply before the close
            Err(e) => {
                return matches!(
                    e.kind(),
                    std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::BrokenPipe
                )
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A RESP connection that sends commands and parses replies.
pub struct RespConn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl RespConn {
    pub fn new(srv: &Server) -> RespConn {
        RespConn::connect(srv.resp)
    }

    /// A connection to any RESP server (a real `redis-server`, say).
    pub fn connect(addr: SocketAddr) -> RespConn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        RespConn::from_stream(s)
    }

    /// The port of the server it is connected to.
    #[allow(dead_code)]
    pub fn peer_port(&self) -> u16 {
        self.s.peer_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// The stream, to watch the server close it (`closed_by_server`).
    #[allow(dead_code)]
    pub fn into_stream(self) -> TcpStream {
        self.s
    }

    /// A connection over a stream the caller opened (with its own timeouts).
    pub fn from_stream(s: TcpStream) -> RespConn {
        RespConn { s, buf: Vec::new() }
    }

    pub fn call(&mut self, args: &[&[u8]]) -> Value {
        self.try_call(args).expect("connection closed")
    }

    /// [`RespConn::call`], `None` when the connection breaks (a server killed meanwhile).
    pub fn try_call(&mut self, args: &[&[u8]]) -> Option<Value> {
        let mut cmd = Vec::new();
        resp::command(&mut cmd, args);
        self.s.write_all(&cmd).ok()?;
        self.try_read()
    }

    /// Sends a command without waiting for its reply ([`RespConn::read`] takes it later).
    #[allow(dead_code)]
    pub fn send(&mut self, args: &[&str]) {
        let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut cmd = Vec::new();
        resp::command(&mut cmd, &a);
        self.s.write_all(&cmd).unwrap();
    }

    /// The next reply.
    #[allow(dead_code)]
    pub fn read(&mut self) -> Value {
        self.try_read().expect("connection closed")
    }

    fn try_read(&mut self) -> Option<Value> {
        loop {
            // A client takes replies of any size the server may send (values past 1 MiB).
            let limits = Limits {
                max_bulk: 1 << 30,
                ..Limits::default()
            };
            if let Some((v, used)) = resp::parse_reply(&self.buf, &limits).ok()? {
                self.buf.drain(..used);
                return Some(v);
            }
            let mut b = [0u8; 65536];
            let n = self.s.read(&mut b).ok()?;
            if n == 0 {
                return None;
            }
            self.buf.extend_from_slice(&b[..n]);
        }
    }

    pub fn str(&mut self, args: &[&str]) -> Value {
        let a: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.call(&a)
    }
}

pub fn bulk(s: &str) -> Value {
    Value::Bulk(Some(s.as_bytes().to_vec()))
}
/// An array of bulk strings, as a reply of several values is read.
pub fn bulk_array(items: &[&str]) -> Value {
    Value::Array(Some(items.iter().map(|s| bulk(s)).collect()))
}

/// Waits (up to 10 s) until INFO shows `n` clients blocked in a blocking command.
pub fn wait_blocked(c: &mut RespConn, n: usize) {
    let t0 = Instant::now();
    let want = format!("blocked_clients:{n}\r\n");
    loop {
        let info = match c.str(&["INFO", "clients"]) {
            Value::Bulk(Some(b)) => String::from_utf8(b).unwrap(),
            other => panic!("{other:?}"),
        };
        if info.contains(&want) {
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "{info}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Field `field` of INFO's `section`, as text (panics when INFO has no such field).
#[allow(dead_code)]
pub fn info_field(c: &mut RespConn, section: &str, field: &str) -> String {
    let Value::Bulk(Some(b)) = c.str(&["INFO", section]) else {
        panic!("INFO")
    };
    let text = String::from_utf8(b).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("{field} not in {text}"))
}

/// The bulk strings of an array reply, as text (panics on anything else).
pub fn strings(v: Value) -> Vec<String> {
    let Value::Array(Some(items)) = v else {
        panic!("not an array: {v:?}")
    };
    items
        .into_iter()
        .map(|i| match i {
            Value::Bulk(Some(b)) => String::from_utf8(b).expect("utf-8"),
            other => panic!("not a bulk string: {other:?}"),
        })
        .collect()
}

pub fn err_starts(v: &Value, prefix: &str) -> bool {
    matches!(v, Value::Error(e) if e.starts_with(prefix))
}

/// A `redis-server` on a free port, without persistence; killed when dropped.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    /// A running `redis-server`, or `None` where none is installed. The port is picked by
    /// binding port 0 and letting it go, so a server started at the same moment by a test
    /// beside this one may take it first: a redis-server that exits at once is started
    /// again on another port (its log says why it exited when every try fails).
    pub fn start() -> Option<Redis> {
        Redis::start_with(&[])
    }

    /// [`Redis::start`] with more flags (later flags win: `--dir` and `--dbfilename` load
    /// an RDB file at start).
    pub fn start_with(extra: &[&str]) -> Option<Redis> {
        let mut logs = Vec::new();
        for _ in 0..5 {
            match Redis::try_start(extra) {
                Ok(r) => return Some(r),
                Err(None) => return None,
                Err(Some(log)) => logs.push(log),
            }
        }
        panic!("redis-server did not start:\n{}", logs.join("\n---\n"));
    }

    /// `Err(None)`: no redis-server to run; `Err(Some(log))`: it exited or never listened.
    fn try_start(extra: &[&str]) -> Result<Redis, Option<String>> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| Some(format!("no free port: {e}")))?
            .port();
        let log = std::env::temp_dir().join(format!("accelkv-test-redis-{port}.log"));
        let out = std::fs::File::create(&log).map_err(|e| Some(format!("{log:?}: {e}")))?;
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
            ])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .args(extra)
            .stdout(out)
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
            Err(e) => return Err(Some(format!("redis-server: {e}"))),
        };
        let mut r = Redis { child, port };
        let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = r.child.try_wait() {
                return Err(Some(format!("exited ({status}):\n{}", read_log())));
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(Some(format!("not listening after 30 s:\n{}", read_log())));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // Listening on the port is not enough: a server beside it may hold the port while
        // this one exits for it.
        // (The connection may be refused or reset, too: a server that held the port a moment
        // ago is exiting. Started again, as for any other server's port.)
        let info = std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .and_then(|s| {
                s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
                RespConn::from_stream(s).try_call(&[b"INFO", b"server"])
            });
        let ours = format!("process_id:{}\r\n", r.child.id());
        if !matches!(&info, Some(Value::Bulk(Some(b))) if String::from_utf8_lossy(b).contains(&ours))
        {
            return Err(Some(format!(
                "port {port} is another server's:\n{}",
                read_log()
            )));
        }
        let _ = std::fs::remove_file(&log);
        Ok(r)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` (one command per line, its arguments split on spaces) on a fresh accelkv
/// server and on a real `redis-server`, and fails listing every line whose replies differ.
/// Without a `redis-server` it is skipped and listed (a failure with `ACCELKV_REQUIRE_TOOLS`).
pub fn answers_as_redis_does(script: &[&str]) {
    let cmds: Vec<Vec<&str>> = script.iter().map(|l| l.split(' ').collect()).collect();
    commands_answer_as_redis_does(&cmds);
}

/// accelkv (with default flags) beside a real `redis-server`, with a connection to each;
/// the servers stop when it is dropped.
pub struct BesideRedis {
    pub ours: RespConn,
    pub theirs: RespConn,
    _srv: Server,
    _redis: Redis,
}

/// Both servers started, or `None` without a `redis-server`: the test is then skipped and
/// listed (a failure with `ACCELKV_REQUIRE_TOOLS`).
pub fn beside_redis() -> Option<BesideRedis> {
    let Some(redis) = Redis::start() else {
        accelkv_testkit::skip("redis-server is not installed (.ci/run installs it)");
        return None;
    };
    let srv = Server::start(&[]);
    Some(BesideRedis {
        ours: RespConn::new(&srv),
        theirs: RespConn::connect(([127, 0, 0, 1], redis.port).into()),
        _srv: srv,
        _redis: redis,
    })
}

/// [`answers_as_redis_does`] for commands given as their arguments (which may hold spaces).
pub fn commands_answer_as_redis_does(script: &[Vec<&str>]) {
    // Bound whole: its servers live as long as it does.
    let Some(mut both) = beside_redis() else {
        return;
    };
    let (ours, theirs) = (&mut both.ours, &mut both.theirs);
    let mut differ = Vec::new();
    for args in script {
        let (a, b) = (ours.str(args), theirs.str(args));
        if a != b {
            differ.push(format!("{args:?}: accelkv {a:?}, redis {b:?}"));
        }
    }
    assert!(differ.is_empty(), "replies differ:\n{}", differ.join("\n"));
}

/// A comparable form of `key`'s value on `c`, to compare two servers' (accelkv's and a
/// real Redis's): its type, its contents (sets and hashes sorted, a stream's entries) and
/// whether it has a deadline (not the deadline: the two clocks are read at other times).
pub fn canonical(c: &mut RespConn, key: &[u8]) -> Vec<Vec<u8>> {
    let k = std::str::from_utf8(key).unwrap();
    let Value::Simple(t) = c.str(&["TYPE", k]) else {
        panic!("TYPE {k}")
    };
    let flat = |v: Value| -> Vec<Vec<u8>> {
        match v {
            Value::Array(Some(items)) => items
                .into_iter()
                .flat_map(|i| match i {
                    Value::Bulk(Some(b)) => vec![b],
                    Value::Array(Some(inner)) => inner
                        .into_iter()
                        .map(|x| format!("{x:?}").into_bytes())
                        .collect(),
                    other => vec![format!("{other:?}").into_bytes()],
                })
                .collect(),
            Value::Bulk(Some(b)) => vec![b],
            other => panic!("{k}: {other:?}"),
        }
    };
    let mut out = match t.as_str() {
        "string" => flat(c.str(&["GET", k])),
        "list" => flat(c.str(&["LRANGE", k, "0", "-1"])),
        "set" => {
            let mut m = flat(c.str(&["SMEMBERS", k]));
            m.sort();
            m
        }
        "zset" => flat(c.str(&["ZRANGE", k, "0", "-1", "WITHSCORES"])),
        "hash" => {
            let f = flat(c.str(&["HGETALL", k]));
            let mut pairs: Vec<Vec<u8>> = f.chunks(2).map(|p| p.concat()).collect();
            pairs.sort();
            pairs
        }
        "stream" => flat(c.str(&["XRANGE", k, "-", "+"])),
        other => panic!("{k}: type {other}"),
    };
    // Whether it has a deadline (not its exact value: the two clocks read at other times).
    let Value::Integer(ttl) = c.str(&["PTTL", k]) else {
        panic!("PTTL {k}")
    };
    out.insert(0, format!("{t} expires:{}", ttl > 0).into_bytes());
    out
}

/// The client sessions' directory (tests/clients/).
pub fn clients_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients")
}

/// Whether `cmd arg` runs and succeeds (a client's toolchain is installed).
pub fn have(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

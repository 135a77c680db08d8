//! Network targets: accelkv's binary protocol over TCP (one frame per batch) and UDP (one
//! datagram per batch, split where a batch would not fit), accelkv's RESP port, Redis and
//! memcached through their own protocols (a batch is one pipeline).
//!
//! Scans on Redis follow YCSB's Redis binding: every insert also adds the key to a sorted set
//! (`ZADD`, here with score 0 so `ZRANGEBYLEX` orders by key); a scan is one server-side
//! script running `ZRANGEBYLEX` then `MGET`. memcached has no ordered reads and skips scans.

use super::{Conn, Op, Outcome, Result, Target, TargetError};
use accelkv_client::{Answer, Client, UdpClient};
use accelkv_proto::frame::Request;
use accelkv_proto::resp::{self, Value};
use accelkv_proto::Limits;
use std::io::{Read, Write};
use std::net::TcpStream;

fn io(context: &str, e: impl std::fmt::Display) -> TargetError {
    TargetError::from_display(context, e)
}

fn frame_ops(ops: &[Op]) -> Vec<Request<'_>> {
    ops.iter()
        .enumerate()
        .map(|(i, op)| {
            let id = i as u16;
            match op {
                Op::Read(key) => Request::Get { id, key },
                Op::Update(key, value) | Op::Insert(key, value) => Request::Put { id, key, value },
                Op::Scan(lo, n) => Request::Scan {
                    id,
                    lo,
                    hi: &[],
                    limit: *n as u32,
                },
            }
        })
        .collect()
}

fn frame_outcomes(ops: &[Op], answers: Vec<Answer>, out: &mut Vec<Outcome>) -> Result<()> {
    if answers.len() != ops.len() {
        return Err(TargetError(format!(
            "accelkv answered {} of {} operations",
            answers.len(),
            ops.len()
        )));
    }
    for (op, a) in ops.iter().zip(answers) {
        out.push(match op {
            Op::Read(_) => Outcome::Value(a.into_value().map_err(|e| io("accelkv GET", e))?),
            Op::Update(..) | Op::Insert(..) => {
                a.into_version().map_err(|e| io("accelkv PUT", e))?;
                Outcome::Written
            }
            Op::Scan(..) => Outcome::Items(a.into_items().map_err(|e| io("accelkv SCAN", e))?.0),
        });
    }
    Ok(())
}

/// accelkv's binary protocol over TCP.
pub struct AccelkvTcp {
    addr: String,
    password: Option<String>,
}

impl AccelkvTcp {
    /// Target at `addr`.
    pub fn new(addr: String, password: Option<String>) -> AccelkvTcp {
        AccelkvTcp { addr, password }
    }
}

impl Target for AccelkvTcp {
    fn name(&self) -> String {
        "accelkv-tcp".into()
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        let c = Client::connect(&self.addr, self.password.as_deref())
            .map_err(|e| io(&format!("connect to accelkv at {}", self.addr), e))?;
        Ok(Box::new(TcpConn(c)))
    }
}

struct TcpConn(Client);

impl Conn for TcpConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        let answers = self
            .0
            .execute(&frame_ops(ops))
            .map_err(|e| io("accelkv tcp", e))?;
        frame_outcomes(ops, answers, out)
    }
}

/// accelkv's binary protocol over UDP. Scans are not offered: their replies outgrow a
/// datagram, and accelkv sends scans over TCP (docs/PROTOCOL.md).
pub struct AccelkvUdp {
    addr: String,
    password: Option<String>,
}

impl AccelkvUdp {
    /// Target at `addr`.
    pub fn new(addr: String, password: Option<String>) -> AccelkvUdp {
        AccelkvUdp { addr, password }
    }
}

/// Request bytes one datagram carries before a batch is split (replies to reads of 1000-byte
/// values stay under the 65,507-byte datagram limit too).
const UDP_BUDGET: usize = 48 * 1024;

impl Target for AccelkvUdp {
    fn name(&self) -> String {
        "accelkv-udp".into()
    }

    fn supports_scan(&self) -> bool {
        false
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        let c = UdpClient::connect(&self.addr, self.password.as_deref())
            .map_err(|e| io(&format!("connect to accelkv at {}", self.addr), e))?;
        Ok(Box::new(UdpConn(c)))
    }
}

struct UdpConn(UdpClient);

impl Conn for UdpConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        let mut start = 0;
        while start < ops.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < ops.len() && (end == start || bytes < UDP_BUDGET / 2) {
                bytes += match &ops[end] {
                    Op::Read(k) => k.len() + 1100,
                    Op::Update(k, v) | Op::Insert(k, v) => k.len() + v.len() + 16,
                    Op::Scan(..) => {
                        return Err(TargetError("accelkv-udp does not scan".into()));
                    }
                };
                end += 1;
            }
            let chunk = &ops[start..end];
            let answers = self
                .0
                .execute(&frame_ops(chunk))
                .map_err(|e| io("accelkv udp", e))?;
            frame_outcomes(chunk, answers, out)?;
            start = end;
        }
        Ok(())
    }
}

/// A blocking RESP connection: pipelined commands, replies parsed with accelkv's parser.
struct RespStream {
    stream: TcpStream,
    out: Vec<u8>,
    buf: Vec<u8>,
    at: usize,
    limits: Limits,
}

impl RespStream {
    fn connect(addr: &str) -> Result<RespStream> {
        let stream = TcpStream::connect(addr).map_err(|e| io(&format!("connect to {addr}"), e))?;
        stream.set_nodelay(true).map_err(|e| io("nodelay", e))?;
        Ok(RespStream {
            stream,
            out: Vec::new(),
            buf: Vec::new(),
            at: 0,
            limits: Limits::default(),
        })
    }

    fn push(&mut self, args: &[&[u8]]) {
        resp::command(&mut self.out, args);
    }

    fn flush(&mut self) -> Result<()> {
        self.stream
            .write_all(&self.out)
            .map_err(|e| io("resp write", e))?;
        self.out.clear();
        Ok(())
    }

    fn reply(&mut self) -> Result<Value> {
        loop {
            match resp::parse_reply(&self.buf[self.at..], &self.limits) {
                Ok(Some((v, used))) => {
                    self.at += used;
                    if self.at == self.buf.len() {
                        self.buf.clear();
                        self.at = 0;
                    }
                    return match v {
                        Value::Error(e) => Err(TargetError(format!("server error: {e}"))),
                        v => Ok(v),
                    };
                }
                Ok(None) => {}
                Err(e) => return Err(io("resp reply", e)),
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| io("resp read", e))?;
            if n == 0 {
                return Err(TargetError("the server closed the connection".into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Flavour {
    Accelkv,
    Redis,
}

/// A RESP server: accelkv's RESP port (scans with RANGE) or Redis (scans through a sorted
/// set, as YCSB's Redis binding).
pub struct Resp {
    addr: String,
    password: Option<String>,
    flavour: Flavour,
}

impl Resp {
    /// accelkv's RESP port.
    pub fn accelkv(addr: String, password: Option<String>) -> Resp {
        Resp {
            addr,
            password,
            flavour: Flavour::Accelkv,
        }
    }

    /// Redis.
    pub fn redis(addr: String) -> Resp {
        Resp {
            addr,
            password: None,
            flavour: Flavour::Redis,
        }
    }
}

/// The sorted set holding every key, for Redis scans.
const INDEX: &[u8] = b"_accelkv_bench_index";
/// Redis scan: keys from the index, then their values, in one round trip.
const SCAN_SCRIPT: &[u8] =
    b"local ks = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], '+', 'LIMIT', 0, ARGV[2]) \
if #ks == 0 then return {} end \
local vs = redis.call('MGET', unpack(ks)) \
local r = {} \
for i = 1, #ks do r[2*i-1] = ks[i]; r[2*i] = vs[i] end \
return r";
/// accelkv RANGE's upper bound: above every key the driver writes.
const ABOVE_ALL: &[u8] = b"\xff";

impl Target for Resp {
    fn name(&self) -> String {
        match self.flavour {
            Flavour::Accelkv => "accelkv-resp".into(),
            Flavour::Redis => "redis".into(),
        }
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        let mut s = RespStream::connect(&self.addr)?;
        if let Some(pw) = &self.password {
            s.push(&[b"AUTH", pw.as_bytes()]);
            s.flush()?;
            s.reply()?;
        }
        let mut sha = Vec::new();
        if self.flavour == Flavour::Redis {
            s.push(&[b"SCRIPT", b"LOAD", SCAN_SCRIPT]);
            s.flush()?;
            match s.reply()? {
                Value::Bulk(Some(h)) => sha = h,
                other => return Err(TargetError(format!("SCRIPT LOAD answered {other:?}"))),
            }
        }
        Ok(Box::new(RespConn {
            s,
            flavour: self.flavour,
            sha,
        }))
    }
}

struct RespConn {
    s: RespStream,
    flavour: Flavour,
    sha: Vec<u8>,
}

fn flat_items(v: Value) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let Value::Array(Some(flat)) = v else {
        return Err(TargetError(format!("scan answered {v:?}")));
    };
    let mut items = Vec::with_capacity(flat.len() / 2);
    let mut it = flat.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        match (k, v) {
            (Value::Bulk(Some(k)), Value::Bulk(Some(v))) => items.push((k, v)),
            // A key removed between ZRANGEBYLEX and MGET (never, in this driver).
            (Value::Bulk(Some(_)), Value::Bulk(None)) => {}
            (k, v) => return Err(TargetError(format!("scan item {k:?} {v:?}"))),
        }
    }
    Ok(items)
}

impl Conn for RespConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        let redis = self.flavour == Flavour::Redis;
        for op in ops {
            match op {
                Op::Read(k) => self.s.push(&[b"GET", k]),
                Op::Update(k, v) => self.s.push(&[b"SET", k, v]),
                Op::Insert(k, v) => {
                    self.s.push(&[b"SET", k, v]);
                    if redis {
                        self.s.push(&[b"ZADD", INDEX, b"0", k]);
                    }
                }
                Op::Scan(k, n) => {
                    let n = n.to_string();
                    if redis {
                        let mut from = b"[".to_vec();
                        from.extend_from_slice(k);
                        let sha = std::mem::take(&mut self.sha);
                        self.s
                            .push(&[b"EVALSHA", &sha, b"1", INDEX, &from, n.as_bytes()]);
                        self.sha = sha;
                    } else {
                        self.s
                            .push(&[b"RANGE", k, ABOVE_ALL, b"LIMIT", n.as_bytes()]);
                    }
                }
            }
        }
        self.s.flush()?;
        for op in ops {
            let r = self.s.reply()?;
            out.push(match op {
                Op::Read(_) => match r {
                    Value::Bulk(v) => Outcome::Value(v),
                    other => return Err(TargetError(format!("GET answered {other:?}"))),
                },
                Op::Update(..) | Op::Insert(..) => {
                    if redis && matches!(op, Op::Insert(..)) {
                        self.s.reply()?;
                    }
                    Outcome::Written
                }
                Op::Scan(..) => Outcome::Items(flat_items(r)?),
            });
        }
        Ok(())
    }
}

/// memcached's text protocol.
pub struct Memcached {
    addr: String,
}

impl Memcached {
    /// Target at `addr`.
    pub fn new(addr: String) -> Memcached {
        Memcached { addr }
    }
}

impl Target for Memcached {
    fn name(&self) -> String {
        "memcached".into()
    }

    fn supports_scan(&self) -> bool {
        false
    }

    fn connect(&self) -> Result<Box<dyn Conn>> {
        let stream = TcpStream::connect(&self.addr)
            .map_err(|e| io(&format!("connect to {}", self.addr), e))?;
        stream.set_nodelay(true).map_err(|e| io("nodelay", e))?;
        Ok(Box::new(McConn {
            stream,
            out: Vec::new(),
            buf: Vec::new(),
            at: 0,
        }))
    }
}

struct McConn {
    stream: TcpStream,
    out: Vec<u8>,
    buf: Vec<u8>,
    at: usize,
}

impl McConn {
    /// The next CRLF-terminated line (without CRLF), reading more as needed.
    fn line(&mut self) -> Result<Vec<u8>> {
        loop {
            if let Some(nl) = self.buf[self.at..].windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[self.at..self.at + nl].to_vec();
                self.at += nl + 2;
                return Ok(line);
            }
            self.fill()?;
        }
    }

    fn bytes(&mut self, n: usize) -> Result<Vec<u8>> {
        while self.buf.len() - self.at < n + 2 {
            self.fill()?;
        }
        let v = self.buf[self.at..self.at + n].to_vec();
        self.at += n + 2;
        Ok(v)
    }

    fn fill(&mut self) -> Result<()> {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        let mut chunk = [0u8; 64 * 1024];
        let n = self
            .stream
            .read(&mut chunk)
            .map_err(|e| io("memcached read", e))?;
        if n == 0 {
            return Err(TargetError("memcached closed the connection".into()));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }
}

impl Conn for McConn {
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()> {
        for op in ops {
            match op {
                Op::Read(k) => {
                    self.out.extend_from_slice(b"get ");
                    self.out.extend_from_slice(k);
                    self.out.extend_from_slice(b"\r\n");
                }
                Op::Update(k, v) | Op::Insert(k, v) => {
                    self.out.extend_from_slice(b"set ");
                    self.out.extend_from_slice(k);
                    self.out
                        .extend_from_slice(format!(" 0 0 {}\r\n", v.len()).as_bytes());
                    self.out.extend_from_slice(v);
                    self.out.extend_from_slice(b"\r\n");
                }
                Op::Scan(..) => return Err(TargetError("memcached does not scan".into())),
            }
        }
        self.stream
            .write_all(&self.out)
            .map_err(|e| io("memcached write", e))?;
        self.out.clear();
        for op in ops {
            let line = self.line()?;
            out.push(match op {
                Op::Read(_) if line == b"END" => Outcome::Value(None),
                Op::Read(_) if line.starts_with(b"VALUE ") => {
                    let len = std::str::from_utf8(&line)
                        .ok()
                        .and_then(|l| l.split(' ').nth(3))
                        .and_then(|n| n.parse::<usize>().ok())
                        .ok_or_else(|| TargetError("memcached: bad VALUE line".into()))?;
                    let v = self.bytes(len)?;
                    let end = self.line()?;
                    if end != b"END" {
                        return Err(TargetError("memcached: missing END".into()));
                    }
                    Outcome::Value(Some(v))
                }
                _ if line == b"STORED" => Outcome::Written,
                _ => {
                    return Err(TargetError(format!(
                        "memcached answered {}",
                        String::from_utf8_lossy(&line)
                    )))
                }
            });
        }
        Ok(())
    }
}

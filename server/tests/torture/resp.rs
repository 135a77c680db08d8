//! A minimal RESP client for the crash-torture harness: pipelined SET/DEL with the time
//! each reply arrived, MGET of the whole key space, INFO. Raw sockets, so nothing between
//! the harness and the server batches, retries or reorders.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One reply.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

pub struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    pos: usize,
}

/// Appends a command to `out`.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

fn line(b: &[u8]) -> Option<(&[u8], usize)> {
    let at = b.windows(2).position(|w| w == b"\r\n")?;
    Some((&b[..at], at + 2))
}

/// Parses one reply at the start of `b`: the reply and its length, `None` if incomplete.
pub fn parse(b: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    let Some(&kind) = b.first() else {
        return Ok(None);
    };
    let Some((l, n)) = line(&b[1..]) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(l).into_owned();
    let num = || {
        text.parse::<i64>()
            .map_err(|_| format!("bad number {text:?}"))
    };
    let used = 1 + n;
    Ok(Some(match kind {
        b'+' => (Reply::Simple(text), used),
        b'-' => (Reply::Error(text), used),
        b':' => (Reply::Int(num()?), used),
        b'$' => {
            let len = num()?;
            if len < 0 {
                return Ok(Some((Reply::Bulk(None), used)));
            }
            let len = len as usize;
            if b.len() < used + len + 2 {
                return Ok(None);
            }
            (
                Reply::Bulk(Some(b[used..used + len].to_vec())),
                used + len + 2,
            )
        }
        b'*' => {
            let n = num()?;
            let mut items = Vec::new();
            let mut at = used;
            for _ in 0..n.max(0) {
                match parse(&b[at..])? {
                    Some((r, k)) => {
                        items.push(r);
                        at += k;
                    }
                    None => return Ok(None),
                }
            }
            (Reply::Array(items), at)
        }
        other => return Err(format!("unexpected reply type {:?}", other as char)),
    }))
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let sock = TcpStream::connect(addr)?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Conn {
            sock,
            buf: Vec::with_capacity(1 << 16),
            pos: 0,
        })
    }

    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sock.write_all(bytes)
    }

    /// Reads until at least one more reply is complete; returns the complete replies and
    /// when their bytes arrived. `Err` once the connection is gone.
    pub fn replies(&mut self) -> Result<(Vec<Reply>, Instant), String> {
        loop {
            let mut out = Vec::new();
            while let Some((r, n)) = parse(&self.buf[self.pos..])? {
                self.pos += n;
                out.push(r);
            }
            if !out.is_empty() {
                return Ok((out, Instant::now()));
            }
            self.buf.drain(..self.pos);
            self.pos = 0;
            let mut chunk = [0u8; 1 << 16];
            match self.sock.read(&mut chunk) {
                Ok(0) => return Err("connection closed".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// One command, one reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        let mut b = Vec::new();
        command(&mut b, args);
        self.send(&b).map_err(|e| e.to_string())?;
        let (mut r, _) = self.replies()?;
        if r.len() != 1 {
            return Err(format!("expected one reply, got {r:?}"));
        }
        Ok(r.remove(0))
    }

    /// `name:value` of INFO.
    pub fn info(&mut self) -> Result<Vec<(String, String)>, String> {
        match self.call(&[b"INFO"])? {
            Reply::Bulk(Some(t)) => Ok(String::from_utf8_lossy(&t)
                .lines()
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()),
            r => Err(format!("INFO answered {r:?}")),
        }
    }
}

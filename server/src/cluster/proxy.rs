//! Cluster mode's proxy (`--proxy`, on by default): a command for a range another node
//! leads is sent to that node's RESP port and its answer relayed, so a client that does
//! not follow `-MOVED` (plain `redis-cli`) can use any node. Proxy connections name
//! themselves `accelkv-proxy-<node>`; the receiving node answers them `-MOVED` rather than
//! proxying again, which the proxy follows (at most three hops), so a command never
//! travels in a circle. Idle connections are pooled per node and protocol.

use crate::core::route::PROXY_NAME;
use accelkv_proto::resp::{self, Version};
use accelkv_proto::Limits;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a relayed command may take, hops included.
const WAIT: Duration = Duration::from_secs(5);

/// Idle connections kept per node and protocol.
const IDLE_PER_PEER: usize = 32;

/// Redirects followed before the client is given the last one.
const HOPS: usize = 3;

/// One proxy connection.
struct Link {
    s: TcpStream,
    buf: Vec<u8>,
}

/// Why a relay failed.
enum Failed {
    /// The command was not sent (the node could not be reached).
    NotSent(String),
    /// It was sent and the connection broke before the answer: a write may have applied.
    Maybe(String),
}

/// The proxy connections of one node.
pub struct Pool {
    me: u64,
    limits: Limits,
    idle: Mutex<HashMap<(String, bool), Vec<Link>>>,
}

fn error(msg: &str) -> Vec<u8> {
    let mut out = Vec::new();
    resp::error(&mut out, msg);
    out
}

/// A redirect the proxy could not follow to a leader (the nodes' views of the range's
/// leader disagree for a moment, as around an election): the client, which asked to be
/// proxied, is told to try again rather than sent a redirect it may not follow.
fn again(moved: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(moved);
    error(&format!(
        "TRYAGAIN the range's leader changed during the request ({}); retry",
        text.trim_start_matches('-').trim_end()
    ))
}

impl Pool {
    /// The pool of node `me`, parsing answers within `limits`.
    pub fn new(me: u64, limits: Limits) -> Pool {
        Pool {
            me,
            limits,
            idle: Mutex::new(HashMap::new()),
        }
    }

    /// Sends `cmd` (a RESP command) to the node at `to` and answers its reply, following
    /// redirects; a failure is answered as the error a client can act on.
    pub async fn relay(&self, to: String, cmd: Vec<u8>, write: bool, proto: Version) -> Vec<u8> {
        let r = tokio::time::timeout(WAIT, async {
            let mut to = to;
            let mut last = Vec::new();
            for _ in 0..HOPS {
                let reply = self.exchange(&to, proto, &cmd).await?;
                match reply.strip_prefix(b"-MOVED ") {
                    Some(rest) => {
                        let next = std::str::from_utf8(rest)
                            .ok()
                            .and_then(|r| r.split_whitespace().nth(1))
                            .map(str::to_string);
                        match next {
                            Some(n) if n != to => to = n,
                            _ => return Ok(again(&reply)),
                        }
                        last = reply;
                    }
                    None => return Ok(reply),
                }
            }
            Ok(again(&last))
        })
        .await
        .unwrap_or_else(|_| Err(Failed::Maybe("no answer in time".into())));
        match r {
            Ok(reply) => reply,
            Err(Failed::NotSent(e)) => error(&format!("TRYAGAIN the range's leader: {e}")),
            Err(Failed::Maybe(e)) if write => error(&format!(
                "CLUSTERDOWN the range's leader: {e}; the write may still apply"
            )),
            Err(Failed::Maybe(e)) => error(&format!("TRYAGAIN the range's leader: {e}")),
        }
    }

    fn take(&self, to: &str, proto: Version) -> Option<Link> {
        let mut g = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = g.get_mut(&(to.to_string(), proto == Version::Resp3))?;
        while let Some(l) = v.pop() {
            // A kept connection the node closed meanwhile reads as end of stream.
            let mut b = [0u8; 1];
            if let Err(e) = l.s.try_read(&mut b) {
                if e.kind() == std::io::ErrorKind::WouldBlock {
                    return Some(l);
                }
            }
        }
        None
    }

    fn give(&self, to: &str, proto: Version, l: Link) {
        let mut g = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = g
            .entry((to.to_string(), proto == Version::Resp3))
            .or_default();
        if v.len() < IDLE_PER_PEER {
            v.push(l);
        }
    }

    async fn connect(&self, to: &str, proto: Version) -> std::io::Result<Link> {
        let s = TcpStream::connect(to).await?;
        s.set_nodelay(true)?;
        let mut l = Link { s, buf: Vec::new() };
        let name = format!("{PROXY_NAME}-{}", self.me);
        let mut hello = Vec::new();
        resp::command(&mut hello, &[b"CLIENT", b"SETNAME", name.as_bytes()]);
        if proto == Version::Resp3 {
            resp::command(&mut hello, &[b"HELLO", b"3"]);
        }
        l.s.write_all(&hello).await?;
        for _ in 0..1 + usize::from(proto == Version::Resp3) {
            self.reply(&mut l).await?;
        }
        Ok(l)
    }

    /// Reads one whole reply.
    async fn reply(&self, l: &mut Link) -> std::io::Result<Vec<u8>> {
        loop {
            match resp::reply_len(&l.buf, &self.limits) {
                Ok(Some(used)) => return Ok(l.buf.drain(..used).collect()),
                Ok(None) => {}
                Err(e) => return Err(std::io::Error::other(format!("a bad reply: {e}"))),
            }
            let mut b = [0u8; 16 << 10];
            let n = l.s.read(&mut b).await?;
            if n == 0 {
                return Err(std::io::Error::other("the connection closed"));
            }
            l.buf.extend_from_slice(&b[..n]);
        }
    }

    async fn exchange(&self, to: &str, proto: Version, cmd: &[u8]) -> Result<Vec<u8>, Failed> {
        let mut l = match self.take(to, proto) {
            Some(l) => l,
            None => self
                .connect(to, proto)
                .await
                .map_err(|e| Failed::NotSent(format!("{to}: {e}")))?,
        };
        l.s.write_all(cmd)
            .await
            .map_err(|e| Failed::Maybe(format!("{to}: {e}")))?;
        let reply = self
            .reply(&mut l)
            .await
            .map_err(|e| Failed::Maybe(format!("{to}: {e}")))?;
        self.give(to, proto, l);
        Ok(reply)
    }
}

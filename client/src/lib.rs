//! Rust client for accelkv's binary protocol (docs/PROTOCOL.md): a blocking TCP client that
//! sends many operations per frame (std sockets, no runtime), the same calls asynchronously
//! on tokio ([`AsyncClient`]), and a UDP client for reads and idempotent writes that
//! retries on timeout and pads its datagrams so replies are never larger than requests.
//!
//! ```no_run
//! use accelkv_client::Client;
//! let mut c = Client::connect("127.0.0.1:7707", None)?;
//! c.put(b"user:1", b"alice")?;
//! assert_eq!(c.get(b"user:1")?, Some(b"alice".to_vec()));
//! # Ok::<(), accelkv_client::ClientError>(())
//! ```

mod async_client;
pub mod cluster;
mod resp_conn;
mod tls;

pub use async_client::AsyncClient;
pub use cluster::ClusterClient;
pub use tls::TlsOptions;

use accelkv_proto::frame::{decode_header, decode_response, encode_request};
use accelkv_proto::{Body, FrameError, Limits, Request, Status};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::time::Duration;

/// What went wrong.
#[derive(Debug)]
pub enum ClientError {
    /// The connection failed.
    Io(std::io::Error),
    /// The server's reply could not be decoded.
    Protocol(FrameError),
    /// The server answered an operation with a status other than OK.
    Status(Status, String),
    /// No reply within the timeout after every retry (UDP), or no node served the
    /// command before the cluster client's patience ran out.
    Timeout,
    /// A RESP error reply (cluster client): the message as the server sent it.
    Resp(String),
    /// A write may or may not have taken effect (cluster client: the connection broke after
    /// it was sent, or its range's group did not commit it in time); it is not retried.
    Unknown(String),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "connection error: {e}"),
            ClientError::Protocol(e) => write!(f, "protocol error: {e}"),
            ClientError::Status(s, m) if m.is_empty() => write!(f, "server answered {s:?}"),
            ClientError::Status(s, m) => write!(f, "server answered {s:?}: {m}"),
            ClientError::Timeout => write!(f, "no reply from the server"),
            ClientError::Resp(m) => write!(f, "server answered -{m}"),
            ClientError::Unknown(m) => write!(f, "the write's outcome is unknown: {m}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl ClientError {
    /// Where a cluster node sent the operation (status MOVED: it does not lead the key's
    /// range): the range's id and its leader's binary address (`host:port`). Nothing was
    /// done; send the operation there (docs/CLUSTER.md, "The binary protocol").
    pub fn moved(&self) -> Option<(u64, &str)> {
        match self {
            ClientError::Status(Status::Moved, m) => {
                let (range, addr) = m.split_once(' ')?;
                Some((range.parse().ok()?, addr))
            }
            _ => None,
        }
    }
}

impl From<std::io::Error> for ClientError {
    fn from(e: std::io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// Result of client calls.
pub type Result<T> = std::result::Result<T, ClientError>;

/// Scan items and whether the server cut the reply at its limit.
pub type ScanReply = (Vec<(Vec<u8>, Vec<u8>)>, bool);

/// An operation's answer, owning its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The operation id it answers.
    pub id: u16,
    /// Status.
    pub status: Status,
    /// Body.
    pub body: Owned,
}

/// Owned response bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owned {
    /// No body.
    Empty,
    /// Bytes (GET, PING, STATS).
    Bytes(Vec<u8>),
    /// Write version.
    Version(u64),
    /// Scan items and whether the server cut the reply short.
    Items(Vec<(Vec<u8>, Vec<u8>)>, bool),
    /// Error message.
    Message(String),
}

impl Answer {
    /// A GET's answer: the value, `None` for NOT_FOUND, the status as an error otherwise.
    pub fn into_value(self) -> Result<Option<Vec<u8>>> {
        Client::value(self.ok())
    }

    /// A write's answer: its version, or the status as an error.
    pub fn into_version(self) -> Result<u64> {
        Client::version(self.ok())
    }

    /// A SCAN's answer: the items and whether the server cut the reply.
    pub fn into_items(self) -> Result<ScanReply> {
        Client::items(self.ok())
    }

    pub(crate) fn ok(self) -> Result<Owned> {
        match (self.status, self.body) {
            (Status::Ok, b) => Ok(b),
            (s, Owned::Message(m)) => Err(ClientError::Status(s, m)),
            (s, _) => Err(ClientError::Status(s, String::new())),
        }
    }
}

fn own(status: Status, id: u16, body: &Body<'_>) -> Answer {
    let body = match body {
        Body::Empty => Owned::Empty,
        Body::Bytes(b) => Owned::Bytes(b.to_vec()),
        Body::Version(v) => Owned::Version(*v),
        Body::Items { truncated, items } => Owned::Items(
            items
                .iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect(),
            *truncated,
        ),
        Body::Message(m) => Owned::Message(String::from_utf8_lossy(m).into_owned()),
    };
    Answer { id, status, body }
}

/// Decodes a response frame into answers ordered by operation id.
pub(crate) fn answers(buf: &[u8], limits: &Limits, frame_id: u32) -> Result<Vec<Answer>> {
    let (h, ops) = decode_response(buf, limits).map_err(ClientError::Protocol)?;
    if h.frame_id != frame_id {
        return Err(ClientError::Protocol(FrameError::Malformed(
            "reply to another frame",
        )));
    }
    let mut out: Vec<Answer> = ops.iter().map(|r| own(r.status, r.id, &r.body)).collect();
    out.sort_by_key(|a| a.id);
    Ok(out)
}

/// A connection's byte stream: TCP, or TLS over TCP.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A blocking client over TCP (or TLS: [`Client::connect_tls`]).
pub struct Client {
    stream: Box<dyn Stream>,
    token: Option<Vec<u8>>,
    next_frame: u32,
    limits: Limits,
    buf: Vec<u8>,
}

impl Client {
    /// Connects; with a password, every frame carries it as its token.
    pub fn connect(addr: impl ToSocketAddrs, password: Option<&str>) -> Result<Client> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Client::over(Box::new(stream), password))
    }

    /// Connects to the server's TLS port (`--tls-binary-port`) at `addr` (`host:port`).
    pub fn connect_tls(addr: &str, tls: &TlsOptions, password: Option<&str>) -> Result<Client> {
        let name = tls.name_for(addr)?;
        let conn =
            rustls::ClientConnection::new(tls.config()?, name).map_err(std::io::Error::other)?;
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        let tls = rustls::StreamOwned::new(conn, stream);
        Ok(Client::over(Box::new(tls), password))
    }

    fn over(stream: Box<dyn Stream>, password: Option<&str>) -> Client {
        Client {
            stream,
            token: password.map(|p| p.as_bytes().to_vec()),
            next_frame: 1,
            limits: Limits::default(),
            buf: Vec::new(),
        }
    }

    /// Sends `ops` in one frame and returns their answers ordered by operation id (give
    /// the operations ids 0, 1, 2, ... to index the answers by position).
    pub fn execute(&mut self, ops: &[Request<'_>]) -> Result<Vec<Answer>> {
        let id = self.next_frame;
        self.next_frame = self.next_frame.wrapping_add(1);
        let mut out = Vec::new();
        encode_request(&mut out, id, self.token.as_deref(), ops);
        self.stream.write_all(&out)?;
        self.buf.clear();
        let mut chunk = [0u8; 64 * 1024];
        loop {
            if let Ok(h) = decode_header(&self.buf, &self.limits) {
                if self.buf.len() >= h.frame_len {
                    return answers(&self.buf[..h.frame_len], &self.limits, id);
                }
            }
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn one(&mut self, op: Request<'_>) -> Result<Owned> {
        let mut a = self.execute(&[op])?;
        a.pop()
            .ok_or(ClientError::Protocol(FrameError::Malformed("no answer")))?
            .ok()
    }

    /// GET.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Self::value(self.one(Request::Get { id: 0, key }))
    }

    pub(crate) fn version(r: Result<Owned>) -> Result<u64> {
        match r? {
            Owned::Version(v) => Ok(v),
            _ => Err(ClientError::Protocol(FrameError::Malformed(
                "unexpected body",
            ))),
        }
    }

    /// PUT; returns the write version.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        Self::version(self.one(Request::Put { id: 0, key, value }))
    }

    /// PUT_EXPIRING: insert or replace with an expiry deadline (ms since the Unix epoch, as
    /// Redis's PXAT; 0: none); returns the write version. Readers stop seeing the key once
    /// the server's clock is past the deadline.
    pub fn put_expiring(&mut self, key: &[u8], value: &[u8], deadline: u64) -> Result<u64> {
        Self::version(self.one(Request::PutExpiring {
            id: 0,
            key,
            value,
            deadline,
        }))
    }

    /// EXPIRE: sets a present key's deadline (0: removes it; a time already past removes
    /// the key); `false` when the key is absent.
    pub fn expire(&mut self, key: &[u8], deadline: u64) -> Result<bool> {
        match self.one(Request::Expire {
            id: 0,
            key,
            deadline,
        }) {
            Ok(_) => Ok(true),
            Err(ClientError::Status(Status::NotFound, _)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// TTL: the key's deadline (`Some(0)`: none), `None` when the key is absent.
    pub fn deadline(&mut self, key: &[u8]) -> Result<Option<u64>> {
        match Self::value(self.one(Request::Ttl { id: 0, key }))? {
            None => Ok(None),
            Some(b) => match <[u8; 8]>::try_from(b.as_slice()) {
                Ok(w) => Ok(Some(u64::from_le_bytes(w))),
                Err(_) => Err(ClientError::Protocol(FrameError::Malformed(
                    "a deadline is 8 bytes",
                ))),
            },
        }
    }

    /// UPDATE (fails with NotFound when absent); returns the write version.
    pub fn update(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        Self::version(self.one(Request::Update { id: 0, key, value }))
    }

    /// DELETE; `false` when the key was absent.
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        Self::deleted(self.one(Request::Delete { id: 0, key }))
    }

    /// A GET's answer: the value, `None` for NOT_FOUND.
    pub(crate) fn value(r: Result<Owned>) -> Result<Option<Vec<u8>>> {
        match r {
            Ok(Owned::Bytes(v)) => Ok(Some(v)),
            Err(ClientError::Status(Status::NotFound, _)) => Ok(None),
            Ok(_) => Err(ClientError::Protocol(FrameError::Malformed(
                "unexpected body",
            ))),
            Err(e) => Err(e),
        }
    }

    /// A DELETE's answer: whether the key was there.
    pub(crate) fn deleted(r: Result<Owned>) -> Result<bool> {
        match Self::version(r) {
            Ok(_) => Ok(true),
            Err(ClientError::Status(Status::NotFound, _)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn items(r: Result<Owned>) -> Result<ScanReply> {
        match r? {
            Owned::Items(items, truncated) => Ok((items, truncated)),
            _ => Err(ClientError::Protocol(FrameError::Malformed(
                "unexpected body",
            ))),
        }
    }

    /// FETCH_ADD: adds `delta` to the key's 64-bit little-endian value (absent: 0) and returns
    /// the original value's 8 bytes. `kind` is `operand::U64` or `operand::I64`, `overflow`
    /// one of `operand::{WRAP, CHECKED, SATURATE}` (docs/PROTOCOL.md).
    pub fn fetch_add(&mut self, key: &[u8], delta: i64, kind: u8, overflow: u8) -> Result<[u8; 8]> {
        Self::fetch_added(self.one(Request::FetchAdd {
            id: 0,
            key,
            kind,
            overflow,
            delta,
        }))
    }

    /// A FETCH_ADD's answer: the original 8 bytes.
    pub(crate) fn fetch_added(r: Result<Owned>) -> Result<[u8; 8]> {
        Self::value(r)?.unwrap_or_default().try_into().map_err(|_| {
            ClientError::Protocol(FrameError::Malformed("fetch-and-add answer is not 8 bytes"))
        })
    }

    /// Adds `delta` to an unsigned 64-bit counter (wrapping) and returns its previous value.
    pub fn fetch_add_u64(&mut self, key: &[u8], delta: i64) -> Result<u64> {
        use accelkv_proto::frame::operand::{U64, WRAP};
        Ok(u64::from_le_bytes(self.fetch_add(key, delta, U64, WRAP)?))
    }

    /// Adds `delta` to a signed 64-bit counter (failing with `Status::Overflow` instead of
    /// wrapping) and returns its previous value.
    pub fn fetch_add_i64(&mut self, key: &[u8], delta: i64) -> Result<i64> {
        use accelkv_proto::frame::operand::{CHECKED, I64};
        Ok(i64::from_le_bytes(
            self.fetch_add(key, delta, I64, CHECKED)?,
        ))
    }

    /// Compare-and-swap: sets the value to `new` if it is `expected` (`None`: if the key is
    /// absent). `Ok(true)` if swapped, `Ok(false)` if the value differed.
    pub fn cas(&mut self, key: &[u8], expected: Option<&[u8]>, new: &[u8]) -> Result<bool> {
        Self::swapped(self.one(Request::Cas {
            id: 0,
            key,
            expected,
            new,
        }))
    }

    /// A CAS answer: whether it swapped.
    pub(crate) fn swapped(r: Result<Owned>) -> Result<bool> {
        match Self::version(r) {
            Ok(_) => Ok(true),
            Err(ClientError::Status(Status::Mismatch, _)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A vector operation (`operand::UPDATE_SCALAR2SCALAR` .. `operand::FILTER`) on the key's
    /// value read as `elem` elements, with the registered function `function`; returns what
    /// KV-Direct's table says it returns (the original value, the reduced scalar or the
    /// filtered elements) as little-endian bytes.
    pub fn vector(
        &mut self,
        key: &[u8],
        op: u8,
        elem: u8,
        overflow: u8,
        function: &str,
        operand: &[u8],
    ) -> Result<Vec<u8>> {
        Self::vector_answer(self.one(Request::Vector {
            id: 0,
            key,
            op,
            elem,
            overflow,
            function: function.as_bytes(),
            operand,
        }))
    }

    /// A VECTOR answer: its bytes (NOT_FOUND as an error: the operation needs a value).
    pub(crate) fn vector_answer(r: Result<Owned>) -> Result<Vec<u8>> {
        Self::value(r)?.ok_or(ClientError::Status(Status::NotFound, String::new()))
    }

    /// SCAN `[lo, hi)` (`hi` empty: unbounded); the flag says the server cut the reply.
    pub fn scan(&mut self, lo: &[u8], hi: &[u8], limit: u32) -> Result<ScanReply> {
        Self::items(self.one(Request::Scan {
            id: 0,
            lo,
            hi,
            limit,
        }))
    }

    /// SCAN_FLOOR from the largest key <= `kl` through `ku`.
    pub fn scan_floor(&mut self, kl: &[u8], ku: &[u8], limit: u32) -> Result<ScanReply> {
        Self::items(self.one(Request::ScanFloor {
            id: 0,
            kl,
            ku,
            limit,
        }))
    }

    /// PING with a payload; returns the echo.
    pub fn ping(&mut self, payload: &[u8]) -> Result<Vec<u8>> {
        match self.one(Request::Ping { id: 0, payload })? {
            Owned::Bytes(b) => Ok(b),
            _ => Ok(Vec::new()),
        }
    }

    /// STATS as text.
    pub fn stats(&mut self) -> Result<String> {
        match self.one(Request::Stats { id: 0 })? {
            Owned::Bytes(b) => Ok(String::from_utf8_lossy(&b).into_owned()),
            _ => Ok(String::new()),
        }
    }
}

/// A UDP client: one frame per datagram, for GET, SCAN, SCAN_FLOOR, PUT and DELETE.
pub struct UdpClient {
    socket: UdpSocket,
    token: Option<Vec<u8>>,
    next_frame: u32,
    limits: Limits,
    /// Per-try timeout and tries.
    pub timeout: Duration,
    /// Tries before giving up.
    pub tries: u32,
    /// Without a token, pad each datagram to at least this many bytes so replies of up to
    /// this size are allowed (the server never answers an unauthenticated datagram with a
    /// larger one). Default 512.
    pub pad_to: usize,
}

impl UdpClient {
    /// A client for the server at `server`.
    pub fn connect(server: impl ToSocketAddrs, password: Option<&str>) -> Result<UdpClient> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(server)?;
        Ok(UdpClient {
            socket,
            token: password.map(|p| p.as_bytes().to_vec()),
            next_frame: 1,
            limits: Limits::default(),
            timeout: Duration::from_millis(200),
            tries: 5,
            pad_to: 512,
        })
    }

    /// Sends `ops` in one datagram (retrying on timeout; only for idempotent operations) and
    /// returns the answers ordered by operation id. A PAD operation with the next free id is
    /// added when padding is needed; its answer is dropped.
    pub fn execute(&mut self, ops: &[Request<'_>]) -> Result<Vec<Answer>> {
        let id = self.next_frame;
        self.next_frame = self.next_frame.wrapping_add(1);
        let mut out = Vec::new();
        encode_request(&mut out, id, self.token.as_deref(), ops);
        let pad_id = ops
            .iter()
            .map(Request::id)
            .max()
            .map_or(0, |m| m.wrapping_add(1));
        let did_pad =
            self.token.is_none() && out.len() + accelkv_proto::frame::REQ_OP_LEN <= self.pad_to;
        if did_pad {
            let len = self.pad_to - out.len() - accelkv_proto::frame::REQ_OP_LEN;
            let mut padded: Vec<Request<'_>> = ops.to_vec();
            padded.push(Request::Pad { id: pad_id, len });
            out.clear();
            encode_request(&mut out, id, None, &padded);
        }
        self.socket.set_read_timeout(Some(self.timeout))?;
        let mut buf = vec![0u8; 65536];
        for _ in 0..self.tries.max(1) {
            self.socket.send(&out)?;
            loop {
                match self.socket.recv(&mut buf) {
                    Ok(n) => match answers(&buf[..n], &self.limits, id) {
                        Ok(a) => {
                            return Ok(a
                                .into_iter()
                                .filter(|x| !(did_pad && x.id == pad_id))
                                .collect());
                        }
                        Err(_) => continue, // a late reply to an earlier frame
                    },
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        break
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Err(ClientError::Timeout)
    }

    /// GET over UDP.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let a = self.execute(&[Request::Get { id: 0, key }])?;
        let answer = a
            .into_iter()
            .next()
            .ok_or(ClientError::Protocol(FrameError::Malformed("no answer")))?;
        Client::value(answer.ok())
    }

    /// PUT over UDP; returns the write version.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        let a = self.execute(&[Request::Put { id: 0, key, value }])?;
        match a.into_iter().next().map(Answer::ok) {
            Some(Ok(Owned::Version(v))) => Ok(v),
            Some(Err(e)) => Err(e),
            _ => Err(ClientError::Protocol(FrameError::Malformed("no answer"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_moved_status_names_the_range_and_address() {
        let e = ClientError::Status(Status::Moved, "3 10.0.0.2:7707".into());
        assert_eq!(e.moved(), Some((3, "10.0.0.2:7707")));
        let garbled = ClientError::Status(Status::Moved, "x 10.0.0.2:7707".into());
        assert_eq!(garbled.moved(), None);
        assert_eq!(
            ClientError::Status(Status::Moved, String::new()).moved(),
            None
        );
        assert_eq!(
            ClientError::Status(Status::TryAgain, "3 a:1".into()).moved(),
            None
        );
    }
}

//! The asynchronous (tokio) client: the same binary protocol and calls as the blocking
//! [`crate::Client`], for programs that already run a tokio runtime.

use crate::{answers, ClientError, Owned, Result, ScanReply};
use accelkv_proto::frame::{decode_header, encode_request};
use accelkv_proto::{FrameError, Limits, Request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, ToSocketAddrs};

/// An asynchronous client over TCP.
pub struct AsyncClient {
    stream: TcpStream,
    token: Option<Vec<u8>>,
    next_frame: u32,
    limits: Limits,
    buf: Vec<u8>,
}

impl AsyncClient {
    /// Connects; with a password, every frame carries it as its token.
    pub async fn connect(addr: impl ToSocketAddrs, password: Option<&str>) -> Result<AsyncClient> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(AsyncClient {
            stream,
            token: password.map(|p| p.as_bytes().to_vec()),
            next_frame: 1,
            limits: Limits::default(),
            buf: Vec::new(),
        })
    }

    /// Sends `ops` in one frame; answers ordered by operation id.
    pub async fn execute(&mut self, ops: &[Request<'_>]) -> Result<Vec<crate::Answer>> {
        let id = self.next_frame;
        self.next_frame = self.next_frame.wrapping_add(1);
        let mut out = Vec::new();
        encode_request(&mut out, id, self.token.as_deref(), ops);
        self.stream.write_all(&out).await?;
        self.buf.clear();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            if let Ok(h) = decode_header(&self.buf, &self.limits) {
                if self.buf.len() >= h.frame_len {
                    return answers(&self.buf[..h.frame_len], &self.limits, id);
                }
            }
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                return Err(ClientError::Io(std::io::ErrorKind::UnexpectedEof.into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    async fn one(&mut self, op: Request<'_>) -> Result<Owned> {
        let mut a = self.execute(&[op]).await?;
        a.pop()
            .ok_or(ClientError::Protocol(FrameError::Malformed("no answer")))?
            .ok()
    }

    /// GET.
    pub async fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        crate::Client::value(self.one(Request::Get { id: 0, key }).await)
    }

    /// PUT; returns the write version.
    pub async fn put(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        crate::Client::version(self.one(Request::Put { id: 0, key, value }).await)
    }

    /// UPDATE (fails with NotFound when absent); returns the write version.
    pub async fn update(&mut self, key: &[u8], value: &[u8]) -> Result<u64> {
        crate::Client::version(self.one(Request::Update { id: 0, key, value }).await)
    }

    /// DELETE; `false` when the key was absent.
    pub async fn delete(&mut self, key: &[u8]) -> Result<bool> {
        crate::Client::deleted(self.one(Request::Delete { id: 0, key }).await)
    }

    /// FETCH_ADD (see [`crate::Client::fetch_add`]); returns the original 8 bytes.
    pub async fn fetch_add(
        &mut self,
        key: &[u8],
        delta: i64,
        kind: u8,
        overflow: u8,
    ) -> Result<[u8; 8]> {
        let op = Request::FetchAdd {
            id: 0,
            key,
            kind,
            overflow,
            delta,
        };
        crate::Client::fetch_added(self.one(op).await)
    }

    /// Compare-and-swap (see [`crate::Client::cas`]); whether it swapped.
    pub async fn cas(&mut self, key: &[u8], expected: Option<&[u8]>, new: &[u8]) -> Result<bool> {
        let op = Request::Cas {
            id: 0,
            key,
            expected,
            new,
        };
        crate::Client::swapped(self.one(op).await)
    }

    /// A vector operation (see [`crate::Client::vector`]).
    pub async fn vector(
        &mut self,
        key: &[u8],
        op: u8,
        elem: u8,
        overflow: u8,
        function: &str,
        operand: &[u8],
    ) -> Result<Vec<u8>> {
        let op = Request::Vector {
            id: 0,
            key,
            op,
            elem,
            overflow,
            function: function.as_bytes(),
            operand,
        };
        crate::Client::vector_answer(self.one(op).await)
    }

    /// SCAN `[lo, hi)`.
    pub async fn scan(&mut self, lo: &[u8], hi: &[u8], limit: u32) -> Result<ScanReply> {
        crate::Client::items(
            self.one(Request::Scan {
                id: 0,
                lo,
                hi,
                limit,
            })
            .await,
        )
    }

    /// SCAN_FLOOR from the largest key <= `kl` through `ku`.
    pub async fn scan_floor(&mut self, kl: &[u8], ku: &[u8], limit: u32) -> Result<ScanReply> {
        crate::Client::items(
            self.one(Request::ScanFloor {
                id: 0,
                kl,
                ku,
                limit,
            })
            .await,
        )
    }
}

//! One blocking RESP connection: a command out, its reply back (the cluster client's
//! transport; cluster mode serves keys over RESP).

use crate::{ClientError, Result};
use accelkv_proto::resp::{self, Value};
use accelkv_proto::Limits;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A RESP connection with a read buffer that keeps what arrived past one reply.
pub struct RespConn {
    s: TcpStream,
    buf: Vec<u8>,
    out: Vec<u8>,
    limits: Limits,
}

impl RespConn {
    /// Connects to `addr`, waiting at most `timeout` to connect and for each reply.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<RespConn> {
        let s = TcpStream::connect_timeout(&addr, timeout.min(Duration::from_secs(1)))?;
        s.set_read_timeout(Some(timeout))?;
        s.set_write_timeout(Some(timeout))?;
        s.set_nodelay(true)?;
        // A reply is the server's, which enforces its own limits: a value as large as
        // `--max-value` allows (up to 512 MiB) parses.
        let limits = Limits {
            max_bulk: 512 << 20,
            ..Limits::default()
        };
        Ok(RespConn {
            s,
            buf: Vec::new(),
            out: Vec::new(),
            limits,
        })
    }

    /// Sends `args` as one command and reads its reply (an error reply is a `Value`).
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value> {
        self.out.clear();
        resp::command(&mut self.out, args);
        self.s.write_all(&self.out)?;
        let mut chunk = [0u8; 16384];
        loop {
            match resp::parse_reply(&self.buf, &self.limits) {
                Ok(Some((v, used))) => {
                    self.buf.drain(..used);
                    return Ok(v);
                }
                Ok(None) => {}
                Err(e) => {
                    return Err(ClientError::Resp(format!(
                        "the server's reply could not be parsed: {e:?}"
                    )))
                }
            }
            let n = self.s.read(&mut chunk)?;
            if n == 0 {
                return Err(ClientError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

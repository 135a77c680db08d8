//! A connection's byte stream, plain TCP or TLS (rustls, on the event loop's thread: a TLS
//! connection runs to completion like any other). The loop reads and writes plaintext
//! through [`Stream`]; for TLS, records are read from the socket and decrypted into rustls's
//! buffer, and replies are encrypted into it and written out as the socket takes them.
//!
//! Memory bound: besides the connection's own buffers, rustls holds at most one record of
//! input being decrypted and at most 64 KiB of encrypted output (its default buffer limit:
//! past it a write takes nothing, and the loop waits for the socket like a full plain
//! socket). The certificate, key and client-certificate settings are
//! `config/tls_config.rs`'s.

use mio::net::TcpStream;
use rustls::ServerConnection;
use std::io::{self, ErrorKind, Read, Write};
use std::sync::Arc;

/// A connection's stream.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<Tls>),
}

/// A TLS connection: the socket and rustls's state for it.
pub struct Tls {
    sock: TcpStream,
    conn: ServerConnection,
}

impl Stream {
    /// A stream over `sock`, with TLS when `tls` holds a server configuration.
    pub fn new(sock: TcpStream, tls: Option<&Arc<rustls::ServerConfig>>) -> io::Result<Stream> {
        Ok(match tls {
            None => Stream::Plain(sock),
            Some(cfg) => Stream::Tls(Box::new(Tls {
                sock,
                conn: ServerConnection::new(cfg.clone()).map_err(io::Error::other)?,
            })),
        })
    }

    /// The socket (to register with the poll, look at addresses, peek).
    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(t) => &mut t.sock,
        }
    }

    /// Plaintext read into `buf`, as `Read::read` on a non-blocking socket: `Ok(0)` at the
    /// end of the stream, `WouldBlock` when nothing is ready. A TLS error (a bad record, a
    /// refused certificate) is an error after rustls's alert is sent.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }

    /// Plaintext written, as `Write::write` on a non-blocking socket: for TLS the bytes taken
    /// are encrypted into rustls's buffer, which goes out now or at the next flush.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    /// Writes out what TLS holds already encrypted (handshake messages, replies the socket
    /// did not take); `WouldBlock` when some stays.
    pub fn flush_tls(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.flush_records(),
        }
    }

    /// Whether encrypted bytes wait for the socket.
    pub fn holds_output(&self) -> bool {
        match self {
            Stream::Plain(_) => false,
            Stream::Tls(t) => t.conn.wants_write(),
        }
    }

    /// Before closing: TLS's close_notify, sent if the socket takes it now.
    pub fn close_notify(&mut self) {
        if let Stream::Tls(t) = self {
            t.conn.send_close_notify();
            let _ = t.flush_records();
        }
    }
}

impl Tls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n), // 0: the peer's close_notify
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.conn.read_tls(&mut self.sock)? == 0 {
                return Ok(0); // the socket closed (without close_notify)
            }
            if let Err(e) = self.conn.process_new_packets() {
                let _ = self.flush_records(); // the alert, if the socket takes it
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
            // Handshake messages to answer; replies are flushed by the loop.
            match self.flush_records() {
                Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.flush_records() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        let n = self.conn.writer().write(buf)?;
        match self.flush_records() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        if n == 0 && !buf.is_empty() {
            // rustls's buffer is full: wait for the socket, as a full socket would.
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush_records(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

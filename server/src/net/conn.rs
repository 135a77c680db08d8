//! One TCP connection of an event loop: its socket, input and output buffers, its protocol
//! adapter's session, and the replies it holds back while its writes become durable. The loop runs its
//! input to completion (`event_loop.rs`); this module owns the byte-level I/O.
//!
//! Memory bound: a connection holds at most its unparsed input (one frame or command, up to
//! `--max-frame`, plus one read) and `--max-output` of replies plus one batch (the loop
//! stops reading a connection whose output is over the limit until the client takes it).
//! A RESP command's big arguments are read into memory of their own, exactly their size
//! (`proto::resp_stream`), and count against the same command limit.

use crate::core::reads::Answered;
use crate::core::shared::Shared;
use crate::net::session::{Buffers, Session};
use crate::net::tls::Stream;
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// Bytes read per `read` call.
const READ_CHUNK: usize = 16 * 1024;

/// Bytes made ready per step while reading a streamed argument (each zeroed once, just
/// before the reads that fill it).
const STREAM_CHUNK: usize = 1 << 20;

/// An argument being read into memory of its own ([`Ran::stream`](crate::net::session::Ran)):
/// `buf`'s capacity is the argument's size, `buf[..filled]` is read.
struct Streaming {
    buf: Vec<u8>,
    filled: usize,
}

impl Streaming {
    fn want(&self) -> usize {
        self.buf.capacity()
    }

    /// Room for the next read, never past the argument's end (so the allocation keeps its
    /// exact size).
    fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() - self.filled < READ_CHUNK && self.buf.len() < self.want() {
            let n = (self.buf.len() + STREAM_CHUNK).min(self.want());
            self.buf.resize(n, 0);
        }
        &mut self.buf[self.filled..]
    }

    fn done(&self) -> bool {
        self.filled == self.want()
    }
}

/// Counts a connection while it lives.
pub struct ConnGuard(Arc<Shared>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.close_connection();
    }
}

/// Takes a connection slot under `--max-connections`, or `None` (counted as rejected).
pub fn admit_connection(sh: &Arc<Shared>) -> Option<ConnGuard> {
    sh.open_connection().then(|| ConnGuard(sh.clone()))
}

/// Replies held back until the writes they rest on are visible to readers and, where the
/// sync policy asks, durable.
pub struct Parked {
    /// Where the held replies start in `out` (`None`: the session holds its reply itself,
    /// [`Rests::Held`](crate::net::session::Rests::Held)).
    pub mark: Option<usize>,
    /// The newest write version the replies rest on.
    pub version: u64,
    /// Whether to wait for durability once visible.
    pub durable: bool,
}

/// Input bytes: `buf[..len]` are read and not yet consumed. `buf` keeps its initialised
/// size between reads, so a read does not zero a fresh chunk each time.
#[derive(Default)]
pub struct InBuf {
    buf: Vec<u8>,
    len: usize,
}

impl InBuf {
    /// The unconsumed bytes.
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `bytes` (input read elsewhere, before this connection reached its loop).
    pub fn fill_from(&mut self, bytes: &[u8]) {
        self.buf.truncate(self.len);
        self.buf.extend_from_slice(bytes);
        self.len = self.buf.len();
    }

    /// Moves the first `n` bytes (at most all of them) to the end of `to`.
    fn take_into(&mut self, n: usize, to: &mut Vec<u8>) -> usize {
        let n = n.min(self.len);
        to.extend_from_slice(&self.buf[..n]);
        self.consume(n);
        n
    }

    /// Drops the first `n` bytes.
    pub fn consume(&mut self, n: usize) {
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        if self.len == 0 && self.buf.len() > 4 * READ_CHUNK {
            self.buf = Vec::new(); // a big frame passed: do not keep its memory
        }
    }

    /// Room for one read past the data.
    fn spare(&mut self) -> &mut [u8] {
        if self.buf.len() - self.len < READ_CHUNK {
            let size = (self.len + READ_CHUNK).max(2 * self.buf.len());
            self.buf.resize(size, 0);
        }
        &mut self.buf[self.len..]
    }
}

/// A connection.
pub struct Conn {
    /// The socket, plain or TLS (`tls.rs`).
    pub sock: Stream,
    /// Unique for the server's life (a released slot's completions find the right one).
    pub id: u64,
    /// The protocol adapter's state for this connection.
    pub session: Box<dyn Session>,
    /// Bytes read and not yet consumed.
    pub inb: InBuf,
    /// An argument being read into its own memory: input goes there, not to `inb`, until
    /// it is whole.
    streaming: Option<Streaming>,
    /// Replies; `out[..sent]` are written already.
    pub out: Vec<u8>,
    pub sent: usize,
    pub parked: Option<Parked>,
    /// Reads submitted to an engine's workers (the wait's id): nothing more of its input
    /// runs until they are answered.
    pub awaiting: Option<u64>,
    /// Those answers, handed back for the re-run of the connection's input.
    pub answers: Option<Answered>,
    /// A request waits for a message from another thread (cluster mode: its range's Raft
    /// group): nothing more of its input runs until it comes.
    pub waits: bool,
    /// Close once `out` is written (or at once after a write error).
    pub closing: bool,
    /// The client closed its side; answer what was read, then close.
    pub eof: bool,
    /// Not reading: the output is over the limit.
    pub throttled: bool,
    /// The stream failed or was dropped: nothing more is written to it, TLS's buffered
    /// records included.
    pub broken: bool,
    pub last_active: Instant,
    _guard: ConnGuard,
}

impl Conn {
    pub fn new(mut sock: Stream, id: u64, session: Box<dyn Session>, guard: ConnGuard) -> Conn {
        let _ = sock.socket().set_nodelay(true);
        Conn {
            sock,
            id,
            session,
            inb: InBuf::default(),
            streaming: None,
            out: Vec::new(),
            sent: 0,
            parked: None,
            awaiting: None,
            answers: None,
            waits: false,
            closing: false,
            eof: false,
            throttled: false,
            broken: false,
            last_active: Instant::now(),
            _guard: guard,
        }
    }

    /// What its buffers hold now (client eviction's measure of them).
    pub fn buffers(&self) -> Buffers {
        let (filled, cap) = self
            .streaming
            .as_ref()
            .map_or((0, 0), |st| (st.filled, st.buf.capacity()));
        Buffers {
            qbuf: self.inb.len + filled,
            input: self.inb.buf.capacity() + cap,
            pending: self.pending(),
        }
    }

    /// Reply bytes not yet written.
    pub fn pending(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Reads once into `inb`: `Ok(true)` if bytes came, `Ok(false)` if none are ready (or
    /// the client closed its side: `eof` is set); an error closes the connection.
    pub fn read_some(&mut self) -> bool {
        loop {
            let into = match &mut self.streaming {
                Some(st) => st.spare(),
                None => self.inb.spare(),
            };
            match self.sock.read(into) {
                Ok(0) => {
                    self.eof = true;
                    return false;
                }
                Ok(n) => {
                    match &mut self.streaming {
                        Some(st) => {
                            st.filled += n;
                            self.hand_over();
                        }
                        None => self.inb.len += n,
                    }
                    self.last_active = Instant::now();
                    self.session.on_input(self.last_active);
                    return true;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    if e.kind() != ErrorKind::WouldBlock {
                        self.fail();
                    }
                    return false;
                }
            }
        }
    }

    /// Starts reading a `len`-byte argument into memory of its own (the session asked:
    /// [`Ran::stream`](crate::net::session::Ran)), taking what the input buffer holds of it.
    pub fn stream(&mut self, len: usize) {
        let mut st = Streaming {
            buf: Vec::with_capacity(len),
            filled: 0,
        };
        st.filled = self.inb.take_into(len, &mut st.buf);
        self.streaming = Some(st);
        self.hand_over();
    }

    /// Hands a streamed argument that is whole to the session.
    fn hand_over(&mut self) {
        if self.streaming.as_ref().is_some_and(Streaming::done) {
            if let Some(st) = self.streaming.take() {
                self.session.streamed(st.buf);
            }
        }
    }

    /// Whether there is something to run: buffered input, or a request the session holds.
    pub fn has_input(&self) -> bool {
        !self.inb.is_empty() || self.session.ready()
    }

    /// Whether the client hung up, looking without taking any input (a connection waiting
    /// on another thread keeps its input for later).
    pub fn peer_closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        // A client that closed with our replies unread reset the connection: gone too.
        match self.sock.socket().peek(&mut b) {
            Ok(n) => n == 0,
            Err(e) => !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted),
        }
    }

    /// Writes what may be written (everything before a parked RESP mark) in as few calls as
    /// the socket takes.
    pub fn flush(&mut self) {
        let end = match &self.parked {
            Some(Parked {
                mark: Some(mark), ..
            }) => *mark,
            _ => self.out.len(),
        };
        // TLS records the socket did not take last time go first.
        match self.sock.flush_tls() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => return,
            Err(_) => return self.fail(),
            Ok(()) => {}
        }
        while self.sent < end {
            match self.sock.write(&self.out[self.sent..end]) {
                Ok(0) => return self.fail(),
                Ok(n) => {
                    self.sent += n;
                    self.last_active = Instant::now();
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => return self.fail(),
            }
        }
        if self.sent == self.out.len() {
            if self.out.capacity() > 4 << 20 {
                self.out = Vec::new(); // a big reply passed: do not keep its memory
            } else {
                self.out.clear();
            }
            self.sent = 0;
        } else if self.sent >= 64 * 1024 && self.sent * 2 >= self.out.len() {
            // Keep the unsent part at the front, so the buffer does not grow without bound.
            self.out.drain(..self.sent);
            if let Some(Parked {
                mark: Some(mark), ..
            }) = &mut self.parked
            {
                *mark -= self.sent;
            }
            self.sent = 0;
        }
    }

    /// Drops everything and closes at the next chance.
    pub fn fail(&mut self) {
        self.closing = true;
        self.broken = true;
        self.out.clear();
        self.sent = 0;
        self.parked = None;
    }

    /// Releases parked replies: `Ok` sends them; on a disk error the session says what
    /// replaces them (and whether to close).
    pub fn settle(&mut self, sh: &Shared, result: Result<(), String>) {
        let Some(p) = self.parked.take() else {
            return;
        };
        if result.is_err() && p.mark.is_some() {
            sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
        }
        if self.session.settle(sh, p.mark, result, &mut self.out) {
            self.closing = true;
        }
    }

    /// Whether the loop should drop it now.
    pub fn done(&self) -> bool {
        self.closing
            && self.parked.is_none()
            && self.awaiting.is_none()
            && !self.waits
            && self.pending() == 0
            && (self.broken || !self.sock.holds_output())
    }

    /// Whether its input must not run now: replies parked, reads in flight, or a command
    /// waiting on its range's group.
    pub fn held(&self) -> bool {
        self.parked.is_some() || self.awaiting.is_some() || self.waits
    }
}

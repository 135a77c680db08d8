//! While the data directory is recovered, before the event loops run: one thread accepts on
//! the TCP ports and answers every request with its protocol's LOADING reply (a function
//! each adapter gives: `-LOADING` over RESP, `SERVER_ERROR loading` over memcached, status
//! LOADING in binary frames), as Redis does, so a client that connects during a long
//! recovery is told why instead of hanging; the TLS ports too, their handshakes done here.
//! When recovery ends the thread stops and hands each connection (its TLS session
//! included), with the bytes it sent that were not a whole request yet and the replies it
//! has not taken yet, to an event loop, which serves it from there.

use crate::core::loading::{Answer, Progress};
use crate::net::tls::Stream;
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::ServerConfig;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A connection accepted while loading, for an event loop to adopt.
pub struct Held {
    /// Which of the listeners given to [`start`] accepted it.
    pub listener: usize,
    pub sock: Stream,
    /// What it sent after its last whole request.
    pub input: Vec<u8>,
    /// Replies it has not taken yet.
    pub output: Vec<u8>,
}

/// The thread answering while loading.
pub struct Loading {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: JoinHandle<Vec<Held>>,
}

const WAKER: Token = Token(usize::MAX);

struct Conn {
    sock: Stream,
    listener: usize,
    input: Vec<u8>,
    output: Vec<u8>,
}

/// A listener of the loading thread: a copy of a loop's listening socket, its protocol's
/// answer, and TLS's configuration for a TLS port.
pub type Door = (std::net::TcpListener, Answer, Option<Arc<ServerConfig>>);

/// Answers on `listeners` until [`Loading::finish`].
pub fn start(listeners: Vec<Door>, progress: Arc<Progress>) -> std::io::Result<Loading> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let mut ls = Vec::new();
    for (i, (l, answer, tls)) in listeners.into_iter().enumerate() {
        l.set_nonblocking(true)?;
        let mut l = TcpListener::from_std(l);
        poll.registry()
            .register(&mut l, Token(i), Interest::READABLE)?;
        ls.push((l, answer, tls));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("accelkv-loading".into())
        .spawn(move || run(poll, ls, &progress, &s))?;
    Ok(Loading {
        stop,
        waker,
        thread,
    })
}

impl Loading {
    /// Stops answering; the connections it holds, for the event loops.
    pub fn finish(self) -> Vec<Held> {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        self.thread.join().unwrap_or_default()
    }
}

fn run(
    mut poll: Poll,
    listeners: Vec<(TcpListener, Answer, Option<Arc<ServerConfig>>)>,
    p: &Progress,
    stop: &AtomicBool,
) -> Vec<Held> {
    let first = listeners.len();
    let mut conns: Vec<Option<Conn>> = Vec::new();
    let mut events = Events::with_capacity(256);
    while !stop.load(Ordering::Acquire) {
        if poll.poll(&mut events, None).is_err() {
            continue;
        }
        for e in events.iter() {
            match e.token() {
                WAKER => {}
                Token(i) if i < first => {
                    while let Ok((sock, _)) = listeners[i].0.accept() {
                        let Ok(mut sock) = Stream::new(sock, listeners[i].2.as_ref()) else {
                            continue;
                        };
                        let slot = conns.len();
                        let token = Token(first + slot);
                        let interest = Interest::READABLE | Interest::WRITABLE;
                        let r = poll.registry().register(sock.socket(), token, interest);
                        if r.is_ok() {
                            let (input, output) = (Vec::new(), Vec::new());
                            conns.push(Some(Conn {
                                sock,
                                listener: i,
                                input,
                                output,
                            }));
                        }
                    }
                }
                Token(t) => {
                    let Some(slot) = conns.get_mut(t - first) else {
                        continue;
                    };
                    if let Some(c) = slot.as_mut() {
                        if !serve(c, listeners[c.listener].1, p) {
                            let _ = poll.registry().deregister(c.sock.socket());
                            *slot = None;
                        }
                    }
                }
            }
        }
    }
    conns
        .into_iter()
        .flatten()
        .filter_map(|mut c| {
            poll.registry().deregister(c.sock.socket()).ok()?;
            let (sock, listener, input, output) = (c.sock, c.listener, c.input, c.output);
            Some(Held {
                listener,
                sock,
                input,
                output,
            })
        })
        .collect()
}

/// Reads what `c` sent, answers its whole requests, writes what it will take; false when
/// it is to be closed (its peer closed, an error, input that is not its protocol's, or an
/// unfinished request past 1 MiB).
fn serve(c: &mut Conn, answer: Answer, p: &Progress) -> bool {
    let mut buf = [0u8; 16 << 10];
    let mut open = true;
    loop {
        match c.sock.read(&mut buf) {
            Ok(0) => {
                open = false;
                break;
            }
            Ok(n) => c.input.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    match answer(&c.input, p, &mut c.output) {
        Some(used) => {
            c.input.drain(..used);
        }
        None => open = false,
    }
    // TLS records the socket did not take last time go first.
    match c.sock.flush_tls() {
        Err(e) if e.kind() != ErrorKind::WouldBlock => return false,
        _ => {}
    }
    while !c.output.is_empty() {
        match c.sock.write(&c.output) {
            Ok(n) if n > 0 => {
                c.output.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            _ => return false,
        }
    }
    open && c.input.len() <= 1 << 20
}

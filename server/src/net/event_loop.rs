//! One event loop per core (`--threads`), each on its own thread with its own epoll set
//! (mio), its own connections and its own read door. The listening sockets and the UDP
//! sockets are shared: every loop polls them and whichever wakes first takes what is ready,
//! so a busy loop takes fewer new connections. Each listener comes with the adapter that
//! speaks its protocol (`session.rs`); the loop knows nothing else of a protocol. A loop runs
//! each request it reads to completion on its own thread (run to completion, as Redis and
//! memcached do): the connection's session decodes in place, reads through the interleaved
//! walk (the GETs at the head of every ready connection gathered into one batch per turn,
//! gather.rs), writes through the reservation station, and replies into the connection's
//! output buffer; one write per connection per turn. The only thing a loop waits for on
//! another thread's behalf is a station slot another loop is draining.
//!
//! A reply is never waited for on the loop's thread. Writes complete without waiting for
//! older writers (tree/src/version.rs); a reply resting on a write not yet visible to
//! readers (an older writer on another thread has not completed: descheduled, say) is parked
//! and checked each turn; one that must be durable is parked until the committer's callback
//! posts it to the loop's mailbox and wakes the loop. Meanwhile the loop serves everyone else.

use crate::core::reads::{Reads, Who};
use crate::core::shared::Shared;
use crate::net::conn::{admit_connection, Conn, Parked};
use crate::net::gather::{self, Gather};
use crate::net::loading::Held;
use crate::net::mailbox::{Mailbox, Release};
use crate::net::session::{
    Datagrams, LoopCtx, NewConn, Port, PortCtx, Protocol, ReplyTo, Rests, Resumed,
};
use crate::net::tls::Stream;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use rustls::ServerConfig;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WAKE: Token = Token(0);
/// Listeners take tokens from 1, datagram ports from `PORTS`, connections from `FIRST_CONN`.
const PORTS: usize = 64;
const FIRST_CONN: usize = 128;

/// The sockets every loop serves (shared; each loop polls its own handle of each), each with
/// the adapter that speaks its protocol.
#[derive(Default)]
pub struct Sockets {
    pub listeners: Vec<Listener>,
    pub datagrams: Vec<(std::net::UdpSocket, Arc<dyn Datagrams>)>,
}

/// A listening socket, the adapter that speaks its protocol, and TLS's configuration when
/// its connections speak TLS. A loop holds its own handle of each (`S`: mio's listener).
pub struct Listener<S = std::net::TcpListener> {
    pub sock: S,
    pub proto: Arc<dyn Protocol>,
    pub tls: Option<Arc<ServerConfig>>,
}

/// An event loop; see the module docs.
pub struct Loop {
    sh: Arc<Shared>,
    poll: Poll,
    listeners: Vec<Listener<TcpListener>>,
    ports: Vec<Box<dyn Port>>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    reads: Reads,
    gather: Gather,
    mailbox: Arc<Mailbox>,
    /// Connections parked until a write version is visible.
    unseen: Vec<usize>,
    /// Reads answered by an engine's workers this turn (reused).
    answered: Vec<(u64, crate::core::reads::Answered)>,
    next_id: u64,
    index: u64,
}

fn clone_listener(l: &std::net::TcpListener) -> std::io::Result<TcpListener> {
    let l = l.try_clone()?;
    l.set_nonblocking(true)?;
    Ok(TcpListener::from_std(l))
}

impl Loop {
    /// Loop number `index` over `sockets`.
    pub fn new(
        sh: Arc<Shared>,
        sockets: &Sockets,
        index: u64,
    ) -> std::io::Result<(Loop, Arc<Mailbox>)> {
        let poll = Poll::new()?;
        let r = poll.registry();
        let mut listeners = Vec::new();
        for (i, l) in sockets.listeners.iter().enumerate() {
            let mut sock = clone_listener(&l.sock)?;
            r.register(&mut sock, Token(1 + i), Interest::READABLE)?;
            listeners.push(Listener {
                sock,
                proto: l.proto.clone(),
                tls: l.tls.clone(),
            });
        }
        let mut ports = Vec::new();
        for (i, (u, d)) in sockets.datagrams.iter().enumerate() {
            let mut port = d.port(u)?;
            r.register(port.socket_mut(), Token(PORTS + i), Interest::READABLE)?;
            ports.push(port);
        }
        assert!(listeners.len() < PORTS - 1 && ports.len() < FIRST_CONN - PORTS);
        let mailbox = Arc::new(Mailbox::new(Waker::new(r, WAKE)?));
        let wake = mailbox.clone();
        let reads = sh.engine().reads(move || wake.wake());
        Ok((
            Loop {
                sh,
                poll,
                listeners,
                ports,
                conns: Vec::new(),
                free: Vec::new(),
                reads,
                gather: Gather::default(),
                mailbox: mailbox.clone(),
                unseen: Vec::new(),
                answered: Vec::new(),
                next_id: 0,
                index,
            },
            mailbox,
        ))
    }

    /// Serves until `stop`; then closes its connections.
    pub fn run(mut self, stop: &AtomicBool) {
        crate::core::counters::use_loop_counters(self.index as usize);
        let mut events = Events::with_capacity(1024);
        let mut ready: Vec<usize> = Vec::with_capacity(1024);
        let idle_timeout = if self.sh.settings().udp_busy_poll {
            Duration::ZERO
        } else {
            Duration::from_millis(250)
        };
        let mut last_sweep = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            // While replies wait for an older writer to complete, look again at once (and
            // give the core away, so a writer descheduled on it can finish).
            let timeout = if self.unseen.is_empty() {
                idle_timeout
            } else {
                std::thread::yield_now();
                Duration::ZERO
            };
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("loop {}: poll failed: {e}", self.index);
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKE => {
                        self.settle_released();
                        self.complete_reads();
                    }
                    Token(t) if t < PORTS => self.accept(t - 1),
                    Token(t) if t < FIRST_CONN => self.drain_port(t - PORTS),
                    Token(t) => ready.push(t - FIRST_CONN),
                }
            }
            // Read every ready RESP connection, answer the GETs at the head of each as one
            // batch (gather.rs), then run what remains of each connection in order.
            ready.sort_unstable();
            ready.dedup();
            for &i in &ready {
                self.fill(i);
            }
            gather::run(
                &self.sh,
                &mut self.conns,
                &ready,
                &mut self.reads,
                &mut self.gather,
            );
            for i in ready.drain(..) {
                self.service(i);
            }
            if !self.unseen.is_empty() {
                self.check_unseen();
            }
            if last_sweep.elapsed() >= Duration::from_secs(1) && !self.sh.cron_paused() {
                last_sweep = Instant::now();
                self.sweep_idle();
            }
        }
    }

    /// Answers what datagram port `i` has waiting.
    fn drain_port(&mut self, i: usize) {
        let Some(port) = self.ports.get_mut(i) else {
            return;
        };
        let mut cx = PortCtx {
            sh: &self.sh,
            reads: &mut self.reads,
            mailbox: &self.mailbox,
            index: i,
        };
        port.drain(&mut cx);
    }

    /// Resumes whoever waited for reads an engine's workers have now answered.
    fn complete_reads(&mut self) {
        let mut answered = std::mem::take(&mut self.answered);
        self.reads.poll(&mut answered);
        for (wait, a) in answered.drain(..) {
            let (slot, id) = match a.who {
                Who::Conn { slot, id } => (slot, id),
                Who::Port(i) => {
                    if let Some(port) = self.ports.get_mut(i) {
                        let mut cx = PortCtx {
                            sh: &self.sh,
                            reads: &mut self.reads,
                            mailbox: &self.mailbox,
                            index: i,
                        };
                        port.complete(&mut cx, wait, a);
                    }
                    continue;
                }
            };
            let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if c.id != id || c.awaiting != Some(wait) {
                continue;
            }
            c.awaiting = None;
            match c.session.answered(wait, a) {
                Resumed::Rerun(a) => c.answers = Some(a),
                Resumed::Held { version, durable } => {
                    // The session's held reply is complete: release it as any other.
                    let p = Parked {
                        mark: None,
                        version,
                        durable,
                    };
                    c.parked = None;
                    park(&self.sh, c, slot, p, &self.mailbox, &mut self.unseen);
                }
            }
            self.service(slot);
        }
        self.answered = answered;
    }

    /// Moves connections whose parked writes became visible on: to the committer if they
    /// must be durable, else out to their clients.
    fn check_unseen(&mut self) {
        let mut i = 0;
        while i < self.unseen.len() {
            let slot = self.unseen[i];
            let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                self.unseen.swap_remove(i);
                continue;
            };
            let Some(p) = &c.parked else {
                self.unseen.swap_remove(i);
                continue;
            };
            if !self.sh.store().is_visible(p.version) {
                i += 1;
                continue;
            }
            self.unseen.swap_remove(i);
            if p.durable {
                let (mb, id, v) = (self.mailbox.clone(), c.id, p.version);
                self.sh.when_durable(
                    v,
                    Box::new(move |result| mb.post(Release::Conn { slot, id, result })),
                );
            } else {
                c.settle(&self.sh, Ok(()));
                self.service(slot);
            }
        }
    }

    /// Accepts what listener `i` has waiting.
    fn accept(&mut self, i: usize) {
        loop {
            let Some(l) = self.listeners.get(i) else {
                return;
            };
            let sock = match l.sock.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // WouldBlock: none left; anything else (out of descriptors): try next turn.
                Err(_) => return,
            };
            let (proto, tls) = (l.proto.clone(), l.tls.clone());
            self.admit(sock, &*proto, tls.as_ref());
        }
    }

    /// Serves a connection accepted while the data directory was recovered
    /// (net/loading.rs), from where it was left: its unsent replies, then what it sent.
    fn adopt(&mut self, h: Held) {
        let Some(l) = self.listeners.get(h.listener) else {
            return;
        };
        let proto = l.proto.clone();
        let Some(guard) = admit_connection(&self.sh) else {
            return;
        };
        let Some(slot) = self.register(h.sock, &*proto, guard) else {
            return;
        };
        if let Some(c) = self.conns[slot].as_mut() {
            c.out = h.output;
            c.inb.fill_from(&h.input);
        }
        self.service(slot);
    }

    /// Registers an accepted connection; its slot (`None`: refused or not registered).
    fn admit(
        &mut self,
        mut sock: TcpStream,
        proto: &dyn Protocol,
        tls: Option<&Arc<ServerConfig>>,
    ) -> Option<usize> {
        let Some(guard) = admit_connection(&self.sh) else {
            if tls.is_none() {
                let _ = sock.write(proto.refusal()); // (a TLS client is closed unanswered)
            }
            return None;
        };
        let sock = Stream::new(sock, tls).ok()?;
        self.register(sock, proto, guard)
    }

    /// Registers a connection that holds a slot under `--max-connections`; its slot.
    fn register(
        &mut self,
        mut sock: Stream,
        proto: &dyn Protocol,
        guard: crate::net::conn::ConnGuard,
    ) -> Option<usize> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if self
            .poll
            .registry()
            .register(
                sock.socket(),
                Token(slot + FIRST_CONN),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.free.push(slot);
            return None;
        }
        self.next_id += 1;
        let id = (self.next_id << 8) | self.index;
        let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
        let session = proto.session(&NewConn {
            loop_index: self.index as usize,
            slot,
            id,
            peer: sock.socket().peer_addr().unwrap_or(unknown),
            local: sock.socket().local_addr().unwrap_or(unknown),
            fd: std::os::fd::AsRawFd::as_raw_fd(sock.socket()),
        });
        self.conns[slot] = Some(Conn::new(sock, id, session, guard));
        Some(slot)
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut c) = self.conns[slot].take() {
            if !c.broken {
                c.sock.close_notify();
            }
            let _ = self.poll.registry().deregister(c.sock.socket());
            self.free.push(slot);
        }
    }

    /// Reads once from a RESP connection that may take input (before gathering).
    fn fill(&mut self, slot: usize) {
        let max_out = self.sh.settings().max_output;
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if c.session.gathers() && !c.closing && !c.eof && !c.held() && c.pending() <= max_out {
            c.read_some();
        }
    }

    /// Reads, runs and answers whatever a connection has, until its socket has no more
    /// input, its output is over the limit, or it is parked.
    fn service(&mut self, slot: usize) {
        let sh = &self.sh;
        let max_out = sh.settings().max_output;
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        loop {
            if !c.closing && c.session.output_over(c.pending()) {
                c.fail(); // past its output limit: closed, its replies dropped
            }
            c.flush();
            if c.waits && c.peer_closed() && c.session.abandon_wait() {
                // Parked by a blocking command, and its client is gone: nothing waits on it.
                c.waits = false;
                c.closing = true;
            }
            if c.closing || c.held() {
                break;
            }
            if c.pending() > max_out {
                c.throttled = true;
                break;
            }
            c.throttled = false;
            c.session.pushed(&mut c.out);
            if c.has_input() {
                if c.session.measured(sh, c.buffers(), true) {
                    c.fail(); // client eviction chose it, its command read and not run
                    break;
                }
                let before = c.inb.len();
                self.reads.serve(Who::Conn { slot, id: c.id });
                if let Some(a) = c.answers.take() {
                    self.reads.resume(a);
                }
                run_input(
                    sh,
                    c,
                    slot,
                    &mut self.reads,
                    &self.mailbox,
                    &mut self.unseen,
                );
                self.reads.forget();
                if c.closing || c.held() || c.pending() > max_out {
                    continue; // flush, then stop
                }
                if c.inb.len() < before {
                    // It stopped early (its replies were parked and released at once, say):
                    // complete requests may remain, and the client waits for their answers
                    // without sending more. Run them before reading.
                    continue;
                }
                if c.inb.len() > c.session.max_request(&sh.settings().limits) + 64 {
                    // An incomplete command or frame bigger than the largest allowed.
                    sh.metrics().bad_input.fetch_add(1, Ordering::Relaxed);
                    c.session.too_large(&mut c.out);
                    c.closing = true;
                    continue;
                }
            }
            if c.eof {
                c.closing = true;
                continue;
            }
            if !c.read_some() && !c.eof {
                break;
            }
        }
        if !c.closing && c.session.output_over(c.pending()) {
            c.fail();
        }
        c.flush();
        if !c.closing && c.session.measured(sh, c.buffers(), false) {
            c.fail(); // client eviction chose it
        }
        if c.done() {
            self.close(slot);
        }
    }

    /// Whether connection `id` is still the one at `slot`.
    fn holds(&self, slot: usize, id: u64) -> bool {
        self.conns
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|c| c.id == id)
    }

    /// Connection `id` at `slot`, if it still waits for a message (cluster mode); it waits
    /// no more.
    fn waiter(&mut self, slot: usize, id: u64) -> Option<&mut Conn> {
        let c = self.conns.get_mut(slot).and_then(Option::as_mut)?;
        if c.id != id || !c.waits {
            return None;
        }
        c.waits = false;
        Some(c)
    }

    fn settle_released(&mut self) {
        let released = self.mailbox.take();
        for r in released {
            match r {
                Release::Conn { slot, id, result } => {
                    let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
                        continue;
                    };
                    if c.id != id {
                        continue;
                    }
                    c.settle(&self.sh, result);
                    self.service(slot);
                }
                Release::Port { port, held, result } => {
                    if let Some(p) = self.ports.get_mut(port) {
                        p.release(&self.sh, held, result);
                    }
                }
                Release::Settled { slot, id, settled } => {
                    let Some(c) = self.waiter(slot, id) else {
                        continue;
                    };
                    c.session.deliver(settled);
                    self.service(slot);
                }
                Release::Adopt(h) => self.adopt(h),
                Release::Push { slot, id } => {
                    if self.holds(slot, id) {
                        self.service(slot);
                    }
                }
                Release::Kill { slot, id } => {
                    if self.holds(slot, id) {
                        self.close(slot);
                    }
                }
            }
        }
    }

    /// Once a second: closes the connections idle past `--idle-timeout`, and those whose
    /// unwritten output stayed past its soft limit for its seconds (a client that stopped
    /// reading gets no turn of its own to be checked in).
    fn sweep_idle(&mut self) {
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].as_mut() else {
                continue;
            };
            if !c.closing && c.pending() > 0 && c.session.output_over(c.pending()) {
                c.fail();
                if c.done() {
                    self.close(slot);
                }
            }
        }
        let Some(idle) = self.sh.settings().idle_timeout else {
            return;
        };
        let now = Instant::now();
        let stale: Vec<usize> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let c = c.as_ref()?;
                (!c.held() && now.duration_since(c.last_active) > idle).then_some(i)
            })
            .collect();
        for i in stale {
            self.close(i);
        }
    }
}

/// Parks `c`'s replies `held` on `version` (and durability when `durable`): checked each
/// turn until visible (`unseen`), then handed to the committer or released. Replies whose
/// version is visible and need no durability are released at once.
fn park(
    sh: &Arc<Shared>,
    c: &mut Conn,
    slot: usize,
    p: Parked,
    mailbox: &Arc<Mailbox>,
    unseen: &mut Vec<usize>,
) {
    let (visible, durable, version) = (sh.visible_soon(p.version), p.durable, p.version);
    c.parked = Some(p);
    if !visible {
        unseen.push(slot);
    } else if durable {
        let (mb, id) = (mailbox.clone(), c.id);
        sh.when_durable(
            version,
            Box::new(move |result| mb.post(Release::Conn { slot, id, result })),
        );
    } else {
        c.settle(sh, Ok(()));
    }
}

/// Parks a connection's replies from `mark` on what they rest on: `(version, wrote)`, the
/// newest write version they saw and whether they wrote (so wait for durability where the
/// sync policy asks). Nothing to wait for: nothing parked.
fn park_stream(
    sh: &Arc<Shared>,
    c: &mut Conn,
    slot: usize,
    mark: usize,
    (version, wrote): (u64, bool),
    mailbox: &Arc<Mailbox>,
    unseen: &mut Vec<usize>,
) {
    let durable = wrote && sh.waits_for_durability();
    if version > 0 || durable {
        let version = version.max(if durable {
            sh.store().read_version()
        } else {
            0
        });
        let p = Parked {
            mark: Some(mark),
            version,
            durable,
        };
        park(sh, c, slot, p, mailbox, unseen);
    }
}

/// Runs the complete requests buffered on `c` through its session, parking its replies if
/// the writes they rest on are not yet visible or must be durable first.
fn run_input(
    sh: &Arc<Shared>,
    c: &mut Conn,
    slot: usize,
    reads: &mut Reads,
    mailbox: &Arc<Mailbox>,
    unseen: &mut Vec<usize>,
) {
    let mark = c.out.len();
    let mut cx = LoopCtx {
        sh,
        reads,
        out: &mut c.out,
        max_out: sh.settings().max_output,
        sent: c.sent,
        reply_to: ReplyTo {
            mailbox,
            slot,
            id: c.id,
        },
    };
    let ran = c.session.run(c.inb.data(), &mut cx);
    c.inb.consume(ran.used);
    if let Some(len) = ran.stream {
        c.stream(len);
    }
    // It stopped at a read submitted to an engine's workers.
    c.awaiting = ran.awaiting.or_else(|| reads.take_submitted());
    // Or at a request waiting on another thread (cluster mode).
    c.waits |= ran.waits;
    if ran.bad {
        sh.metrics().bad_input.fetch_add(1, Ordering::Relaxed);
    }
    c.closing |= ran.close;
    match ran.rests {
        Rests::Nothing => {}
        Rests::Stream { version, wrote } => {
            park_stream(sh, c, slot, mark, (version, wrote), mailbox, unseen)
        }
        Rests::Held { version, durable } => {
            let p = Parked {
                mark: None,
                version,
                durable,
            };
            if ran.awaiting.is_some() {
                // Held until its reads are answered (complete_reads), then parked.
                c.parked = Some(p);
            } else {
                park(sh, c, slot, p, mailbox, unseen);
            }
        }
    }
}

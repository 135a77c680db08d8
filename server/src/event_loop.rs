//! One event loop per core (`--threads`), each on its own thread with its own epoll set
//! (mio), its own connections and its own read door. The listening sockets and the UDP
//! socket are shared: every loop polls them and whichever wakes first takes what is ready,
//! so a busy loop takes fewer new connections. A loop runs each request it reads to
//! completion on its own thread (run to completion, as Redis and memcached do): decode in
//! place, reads through the interleaved walk (the GETs at the head of every ready connection
//! gathered into one batch per turn, gather.rs), writes through the reservation station,
//! reply into the connection's output buffer, one write per connection per turn. The only thing a
//! loop waits for on another thread's behalf is a station slot another loop is draining.
//!
//! A reply is never waited for on the loop's thread. Writes complete without waiting for
//! older writers (tree/src/version.rs); a reply resting on a write not yet visible to
//! readers (an older writer on another thread has not completed: descheduled, say) is parked
//! and checked each turn; one that must be durable is parked until the committer's callback
//! posts it to the loop's mailbox and wakes the loop. Meanwhile the loop serves everyone else.

use crate::cluster_route::Settled;
use crate::conn::{admit_connection, Conn, Held, Parked, Proto};
use crate::exec::{run_frame, Framed, Ran, Transport};
use crate::gather::{self, Gather};
use crate::reads::{Answered, Reads, Who};
use crate::resp_batch::{self, Scratch};
use crate::resp_cmd::Session;
use crate::state::Shared;
use crate::udp::UdpPort;
use accelkv_proto::frame::decode_header;
use accelkv_proto::FrameError;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAKE: Token = Token(0);
const RESP: Token = Token(1);
const BIN: Token = Token(2);
const UDP: Token = Token(3);
const MEMCACHED: Token = Token(4);
const MEMCACHED_UDP: Token = Token(5);
const FIRST_CONN: usize = 6;

/// The sockets every loop serves (shared; each loop polls its own handle of each).
pub struct Sockets {
    pub resp: std::net::TcpListener,
    pub bin: std::net::TcpListener,
    pub udp: std::net::UdpSocket,
    /// The memcached port, when on (`--memcached-port`), and its UDP socket
    /// (`--memcached-udp`).
    pub memcached: Option<std::net::TcpListener>,
    pub memcached_udp: Option<std::net::UdpSocket>,
}

/// Which listener a connection came from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Binary,
    Resp,
    Memcached,
}

/// Parked replies whose durability was settled, posted by the committer's thread.
pub enum Release {
    Conn {
        slot: usize,
        id: u64,
        result: Result<(), String>,
    },
    Datagram {
        ran: Ran,
        peer: SocketAddr,
        result: Result<(), String>,
    },
    /// CLIENT KILL: close connection `id` at `slot`.
    Kill { slot: usize, id: u64 },
    /// Cluster mode: the command connection `id` at `slot` routed has settled.
    Cluster {
        slot: usize,
        id: u64,
        settled: crate::cluster_route::Settled,
    },
    /// Cluster mode: every routed operation of the binary frame connection `id` at `slot`
    /// waits on has settled.
    Frame {
        slot: usize,
        id: u64,
        settled: Vec<(usize, crate::cluster_route::Settled)>,
    },
}

/// How other threads reach a loop: a waker and the settled parked replies.
pub struct Mailbox {
    waker: Waker,
    released: Mutex<Vec<Release>>,
}

impl Mailbox {
    /// Posts a settled reply and wakes the loop.
    pub fn post(&self, r: Release) {
        self.released
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
        let _ = self.waker.wake();
    }

    /// Wakes the loop (to see the stop flag).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}

/// An event loop; see the module docs.
pub struct Loop {
    sh: Arc<Shared>,
    poll: Poll,
    resp: TcpListener,
    bin: TcpListener,
    udp: UdpPort,
    memcached: Option<TcpListener>,
    mc_udp: Option<crate::mc_udp::McUdp>,
    mc_scratch: crate::mc::McScratch,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    reads: Reads,
    scratch: Scratch,
    gather: Gather,
    mailbox: Arc<Mailbox>,
    /// Connections parked until a write version is visible.
    unseen: Vec<usize>,
    /// Reads answered by an engine's workers this turn (reused).
    answered: Vec<(u64, Answered)>,
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
        let mut resp = clone_listener(&sockets.resp)?;
        let mut bin = clone_listener(&sockets.bin)?;
        let udp_sock = sockets.udp.try_clone()?;
        udp_sock.set_nonblocking(true)?;
        let mut udp = UdpPort::new(mio::net::UdpSocket::from_std(udp_sock));
        let r = poll.registry();
        r.register(&mut resp, RESP, Interest::READABLE)?;
        r.register(&mut bin, BIN, Interest::READABLE)?;
        r.register(udp.socket_mut(), UDP, Interest::READABLE)?;
        let mut memcached = match &sockets.memcached {
            Some(l) => Some(clone_listener(l)?),
            None => None,
        };
        if let Some(l) = &mut memcached {
            r.register(l, MEMCACHED, Interest::READABLE)?;
        }
        let mut mc_udp = match &sockets.memcached_udp {
            Some(u) => Some(crate::mc_udp::McUdp::new(u)?),
            None => None,
        };
        if let Some(u) = &mut mc_udp {
            r.register(u.socket_mut(), MEMCACHED_UDP, Interest::READABLE)?;
        }
        let mailbox = Arc::new(Mailbox {
            waker: Waker::new(r, WAKE)?,
            released: Mutex::new(Vec::new()),
        });
        let wake = mailbox.clone();
        let reads = sh.engine.reads(move || wake.wake());
        Ok((
            Loop {
                sh,
                poll,
                resp,
                bin,
                udp,
                memcached,
                mc_udp,
                mc_scratch: Default::default(),
                conns: Vec::new(),
                free: Vec::new(),
                reads,
                scratch: Scratch::default(),
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
        crate::state::use_loop_counters(self.index as usize);
        let mut events = Events::with_capacity(1024);
        let mut ready: Vec<usize> = Vec::with_capacity(1024);
        let idle_timeout = if self.sh.settings.udp_busy_poll {
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
                eprintln!("accelkv-server: loop {}: poll failed: {e}", self.index);
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKE => {
                        self.settle_released();
                        self.complete_reads();
                    }
                    RESP => self.accept(Kind::Resp),
                    BIN => self.accept(Kind::Binary),
                    MEMCACHED => self.accept(Kind::Memcached),
                    MEMCACHED_UDP => {
                        if let Some(u) = &mut self.mc_udp {
                            u.drain(&self.sh, &mut self.reads);
                        }
                    }
                    UDP => self.udp.drain(&self.sh, &mut self.reads, &self.mailbox),
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
            if last_sweep.elapsed() >= Duration::from_secs(1) {
                last_sweep = Instant::now();
                self.sweep_idle();
            }
        }
    }

    /// Resumes whoever waited for reads an engine's workers have now answered.
    fn complete_reads(&mut self) {
        let mut answered = std::mem::take(&mut self.answered);
        self.reads.poll(&mut answered);
        for (wait, a) in answered.drain(..) {
            let (slot, id) = match a.who {
                Who::Conn { slot, id } => (slot, id),
                Who::Datagram => {
                    self.udp
                        .complete(&self.sh, &self.mailbox, &mut self.reads, wait, a);
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
            match c.parked.take() {
                Some(mut p) => match &mut p.held {
                    Held::Frame(ran) if ran.awaiting() == Some(wait) => {
                        // A binary frame: its answers are complete; release it as any other.
                        ran.complete_reads(a.replies);
                        park(&self.sh, c, slot, p, &self.mailbox, &mut self.unseen);
                    }
                    _ => {
                        c.parked = Some(p);
                        c.answers = Some(a);
                    }
                },
                None => c.answers = Some(a),
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
            if !self.sh.store.is_visible(p.version) {
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

    fn accept(&mut self, kind: Kind) {
        loop {
            let r = match (kind, &self.memcached) {
                (Kind::Binary, _) => self.bin.accept(),
                (Kind::Resp, _) => self.resp.accept(),
                (Kind::Memcached, Some(l)) => l.accept(),
                (Kind::Memcached, None) => return,
            };
            let sock = match r {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                // WouldBlock: none left; anything else (out of descriptors): try next turn.
                Err(_) => return,
            };
            self.admit(sock, kind);
        }
    }

    fn admit(&mut self, mut sock: TcpStream, kind: Kind) {
        let Some(guard) = admit_connection(&self.sh) else {
            let refusal: &[u8] = match kind {
                Kind::Resp => b"-ERR max number of clients reached\r\n",
                Kind::Memcached => b"SERVER_ERROR max number of clients reached\r\n",
                Kind::Binary => b"",
            };
            let _ = sock.write(refusal);
            return;
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if self
            .poll
            .registry()
            .register(
                &mut sock,
                Token(slot + FIRST_CONN),
                Interest::READABLE | Interest::WRITABLE,
            )
            .is_err()
        {
            self.free.push(slot);
            return;
        }
        self.next_id += 1;
        let id = (self.next_id << 8) | self.index;
        let proto = if kind == Kind::Binary {
            Proto::Binary {
                authed: false,
                settled: Vec::new(),
            }
        } else if kind == Kind::Memcached {
            Proto::Memcached(Default::default())
        } else {
            let client_id = self.sh.next_client.fetch_add(1, Ordering::Relaxed);
            let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
            let client = self.sh.clients.register(
                client_id,
                self.index as usize,
                slot,
                id,
                sock.peer_addr().unwrap_or(unknown),
                sock.local_addr().unwrap_or(unknown),
            );
            Proto::Resp(Session::new(client_id, Some(client)))
        };
        self.conns[slot] = Some(Conn::new(sock, id, proto, guard));
    }

    fn close(&mut self, slot: usize) {
        if let Some(mut c) = self.conns[slot].take() {
            let _ = self.poll.registry().deregister(&mut c.sock);
            self.free.push(slot);
        }
    }

    /// Reads once from a RESP connection that may take input (before gathering).
    fn fill(&mut self, slot: usize) {
        let max_out = self.sh.settings.max_output;
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        if matches!(c.proto, Proto::Resp(_) | Proto::Memcached(_))
            && !c.closing
            && !c.eof
            && !c.held()
            && c.pending() <= max_out
        {
            c.read_some();
        }
    }

    /// Reads, runs and answers whatever a connection has, until its socket has no more
    /// input, its output is over the limit, or it is parked.
    fn service(&mut self, slot: usize) {
        let sh = &self.sh;
        let max_out = sh.settings.max_output;
        let Some(c) = self.conns.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        loop {
            c.flush();
            if c.closing || c.held() {
                break;
            }
            if c.pending() > max_out {
                c.throttled = true;
                break;
            }
            c.throttled = false;
            if !c.inb.is_empty() {
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
                    (&mut self.scratch, &mut self.mc_scratch),
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
                if c.inb.len() > sh.settings.limits.max_frame + 64 {
                    // An incomplete command or frame bigger than the largest allowed.
                    sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
                    if matches!(c.proto, Proto::Resp(_)) {
                        c.out
                            .extend_from_slice(b"-ERR Protocol error: command too large\r\n");
                    }
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
        c.flush();
        if c.done() {
            self.close(slot);
        }
    }

    /// Connection `id` at `slot`, if it still waits on its range's group (cluster mode);
    /// it waits no more.
    fn cluster_waiter(&mut self, slot: usize, id: u64) -> Option<&mut Conn> {
        let c = self.conns.get_mut(slot).and_then(Option::as_mut)?;
        if c.id != id || !c.cluster_wait {
            return None;
        }
        c.cluster_wait = false;
        Some(c)
    }

    fn settle_released(&mut self) {
        let released = std::mem::take(
            &mut *self
                .mailbox
                .released
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
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
                Release::Datagram { ran, peer, result } => {
                    self.udp.answer_parked(&self.sh, ran, peer, result);
                }
                Release::Cluster { slot, id, settled } => {
                    let Some(c) = self.cluster_waiter(slot, id) else {
                        continue;
                    };
                    if let Proto::Resp(s) = &mut c.proto {
                        match settled {
                            Settled::Reply(r) => s.cluster.answer = Some(r),
                            Settled::Granted => s.cluster.barrier_ok = true,
                            // Routed again from the start when the loop serves it.
                            Settled::Again => {}
                        }
                    }
                    self.service(slot);
                }
                Release::Frame { slot, id, settled } => {
                    let Some(c) = self.cluster_waiter(slot, id) else {
                        continue;
                    };
                    if let Proto::Binary { settled: s, .. } = &mut c.proto {
                        *s = settled;
                    }
                    self.service(slot);
                }
                Release::Kill { slot, id } => {
                    if self
                        .conns
                        .get(slot)
                        .and_then(Option::as_ref)
                        .is_some_and(|c| c.id == id)
                    {
                        self.close(slot);
                    }
                }
            }
        }
    }

    fn sweep_idle(&mut self) {
        let Some(idle) = self.sh.settings.idle_timeout else {
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

/// Parks a RESP or memcached connection's replies from `mark` on what they rest on:
/// `(version, wrote)`, the newest write version they saw and whether they wrote (so wait
/// for durability where the sync policy asks). Nothing to wait for: nothing parked.
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
        let version = version.max(if durable { sh.store.read_version() } else { 0 });
        let p = Parked {
            held: Held::Resp { mark },
            version,
            durable,
        };
        park(sh, c, slot, p, mailbox, unseen);
    }
}

/// Runs the complete requests buffered on `c`, parking its replies if the writes they rest
/// on are not yet visible or must be durable first.
fn run_input(
    sh: &Arc<Shared>,
    c: &mut Conn,
    slot: usize,
    reads: &mut Reads,
    (scratch, mc): (&mut Scratch, &mut crate::mc::McScratch),
    mailbox: &Arc<Mailbox>,
    unseen: &mut Vec<usize>,
) {
    let max_out = sh.settings.max_output;
    match &mut c.proto {
        Proto::Memcached(session) => {
            let mark = c.out.len();
            let start = Instant::now();
            let ran = crate::mc::run(sh, session, c.inb.data(), reads, mc, &mut c.out, max_out);
            if ran.used > 0 {
                sh.record_latency(start.elapsed());
            }
            c.inb.consume(ran.used);
            c.awaiting = reads.take_submitted();
            if ran.close {
                c.closing = true;
            }
            if session.quit {
                c.closing = true;
            }
            let rests = (
                std::mem::take(&mut session.unreleased),
                std::mem::take(&mut session.wrote),
            );
            park_stream(sh, c, slot, mark, rests, mailbox, unseen);
        }
        Proto::Resp(session) => {
            let mark = c.out.len();
            let start = Instant::now();
            let ran = resp_batch::run(
                sh,
                session,
                c.inb.data(),
                reads,
                scratch,
                &mut c.out,
                max_out,
            );
            if ran.used > 0 {
                sh.record_latency(start.elapsed());
            }
            c.inb.consume(ran.used);
            // It stopped at a read submitted to an engine's workers.
            c.awaiting = reads.take_submitted();
            // Or at a command routed to its range's group (cluster mode).
            if let (Some(f), Some(cl)) = (session.cluster.forward.take(), sh.cluster.get()) {
                c.cluster_wait = true;
                let (mb, id) = (mailbox.clone(), c.id);
                cl.submit(
                    f,
                    Box::new(move |settled| mb.post(Release::Cluster { slot, id, settled })),
                );
            }
            if ran.bad.is_some() {
                sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
                c.closing = true;
            }
            if session.quit {
                c.closing = true;
            }
            let rests = (
                std::mem::take(&mut session.unreleased),
                std::mem::take(&mut session.wrote),
            );
            park_stream(sh, c, slot, mark, rests, mailbox, unseen);
        }
        Proto::Binary { authed, settled } => {
            let limits = &sh.settings.limits;
            let mut pos = 0;
            let mut parked = None;
            while c.out.len() - c.sent <= max_out {
                let rest = &c.inb.data()[pos..];
                let h = match decode_header(rest, limits) {
                    Err(FrameError::Incomplete { .. }) => break,
                    Ok(h) if rest.len() < h.frame_len => break,
                    Ok(h) => h,
                    Err(_) => {
                        sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
                        c.closing = true;
                        break;
                    }
                };
                let frame = &rest[..h.frame_len];
                let settled = std::mem::take(settled);
                let ran = match run_frame(sh, frame, Transport::Tcp, authed, reads, settled) {
                    Ok(Framed::Ran(ran)) => ran,
                    Ok(Framed::Routed(forwards)) => {
                        // Cluster mode: the frame waits for its ranges' groups and runs
                        // again, whole, with what they settled to.
                        if let Some(cl) = sh.cluster.get() {
                            c.cluster_wait = true;
                            let (mb, id) = (mailbox.clone(), c.id);
                            crate::exec_cluster::submit(&**cl, forwards, move |settled| {
                                mb.post(Release::Frame { slot, id, settled })
                            });
                        }
                        break;
                    }
                    Ok(Framed::Later) => {
                        // A write's leaf is being read back: the frame stays in the input
                        // and runs again, whole, when the wait is answered.
                        c.awaiting = reads.take_submitted();
                        break;
                    }
                    Err(_) => {
                        sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
                        c.closing = true;
                        break;
                    }
                };
                pos += h.frame_len;
                if let Some(wait) = ran.awaiting() {
                    // Its reads run on an engine's workers: held until they answer.
                    let (version, durable) = (ran.version, ran.must_wait(sh));
                    c.parked = Some(Parked {
                        held: Held::Frame(ran),
                        version,
                        durable,
                    });
                    c.awaiting = Some(wait);
                    break;
                }
                if !ran.visible(sh) || ran.must_wait(sh) {
                    parked = Some(ran);
                    break;
                }
                ran.finish(sh, Ok(()), &mut c.out);
            }
            c.inb.consume(pos);
            if let Some(ran) = parked {
                let (version, durable) = (ran.version, ran.must_wait(sh));
                let p = Parked {
                    held: Held::Frame(ran),
                    version,
                    durable,
                };
                park(sh, c, slot, p, mailbox, unseen);
            }
        }
    }
}

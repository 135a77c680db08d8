//! The UDP port of an event loop: one frame per datagram, answered on the loop that received
//! it. On Linux `recvmmsg` takes up to 32 datagrams per call and `sendmmsg` sends their
//! replies in one call; elsewhere one datagram per call. A reply whose writes must be durable
//! first is parked and sent when the committer settles it; one whose writes wait only for an
//! older writer to complete waits here (rare and short: a datagram carries few writes).

use crate::binary::execute::Transport;
use crate::binary::frame::{run_frame, Framed, Ran};
use crate::core::reads::{Answered, Reads, Who};
use crate::core::shared::Shared;
use crate::net::session::{Datagrams, Port, PortCtx};
use accelkv_proto::frame::decode_header;
use mio::net::UdpSocket;
use std::any::Any;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Datagrams per batched call.
const BATCH: usize = 32;
const MAX_DATAGRAM: usize = 65536;

/// A loop's handle of the UDP socket, with its buffers.
pub struct UdpPort {
    socket: UdpSocket,
    /// Receive buffers, always MAX_DATAGRAM long; `lens` says how much each datagram filled.
    bufs: Vec<Vec<u8>>,
    lens: [usize; BATCH],
    outs: Vec<Vec<u8>>,
    peers: Vec<Option<SocketAddr>>,
    held: Holds,
}

/// Datagrams whose replies wait, by wait id.
#[derive(Default)]
struct Holds {
    /// Frames whose reads were submitted to an engine's workers.
    waiting: HashMap<u64, (Ran, SocketAddr)>,
    /// Datagrams whose writes wait for their leaves to be read back from the page file
    /// (copied: the receive buffer is reused), run again whole when the wait is answered.
    deferred: HashMap<u64, (Vec<u8>, SocketAddr)>,
}

impl Holds {
    /// Keeps a datagram whose reply is not in its output buffer yet.
    fn hold(&mut self, cx: &mut PortCtx<'_>, outcome: Outcome, frame: &[u8], peer: SocketAddr) {
        match outcome {
            Outcome::Done => {}
            Outcome::Held(ran) => match ran.awaiting() {
                Some(id) => {
                    self.waiting.insert(id, (ran, peer));
                }
                None => durable_then_send(cx, ran, peer),
            },
            Outcome::Later => {
                if let Some(id) = cx.reads.take_submitted() {
                    self.deferred.insert(id, (frame.to_vec(), peer));
                }
            }
        }
    }
}

impl UdpPort {
    pub fn new(socket: UdpSocket) -> UdpPort {
        UdpPort {
            socket,
            bufs: (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM]).collect(),
            lens: [0; BATCH],
            outs: (0..BATCH)
                .map(|_| Vec::with_capacity(MAX_DATAGRAM))
                .collect(),
            peers: vec![None; BATCH],
            held: Holds::default(),
        }
    }

    /// Sends a parked reply once its writes are settled.
    fn answer_parked(
        &mut self,
        sh: &Shared,
        ran: Ran,
        peer: SocketAddr,
        result: Result<(), String>,
    ) {
        let out = &mut self.outs[0];
        out.clear();
        ran.finish(sh, result, out);
        if !out.is_empty() {
            let _ = self.socket.send_to(out, peer);
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn receive(&mut self) -> usize {
        for b in &mut self.bufs[..1] {
            match self.socket.recv_from(b) {
                Ok((n, peer)) => {
                    self.lens[0] = n;
                    self.peers[0] = Some(peer);
                    return 1;
                }
                Err(_) => return 0,
            }
        }
        0
    }

    #[cfg(not(target_os = "linux"))]
    fn send(&mut self, n: usize) {
        for i in 0..n {
            if let (Some(peer), false) = (self.peers[i], self.outs[i].is_empty()) {
                let _ = self.socket.send_to(&self.outs[i], peer);
            }
        }
    }
}

/// The binary protocol's UDP socket: each loop's handle is a [`UdpPort`].
pub struct BinaryDatagrams;

impl Datagrams for BinaryDatagrams {
    fn port(&self, socket: &std::net::UdpSocket) -> std::io::Result<Box<dyn Port>> {
        let s = socket.try_clone()?;
        s.set_nonblocking(true)?;
        Ok(Box::new(UdpPort::new(UdpSocket::from_std(s))))
    }
}

impl Port for UdpPort {
    fn socket_mut(&mut self) -> &mut UdpSocket {
        &mut self.socket
    }

    fn drain(&mut self, cx: &mut PortCtx<'_>) {
        loop {
            let n = self.receive();
            if n == 0 {
                return;
            }
            for i in 0..n {
                let (buf, out) = (&self.bufs[i][..self.lens[i]], &mut self.outs[i]);
                let Some(peer) = self.peers[i] else {
                    out.clear();
                    continue;
                };
                cx.reads.serve(Who::Port(cx.index));
                let outcome = answer(cx.sh, cx.reads, buf, out);
                self.held.hold(cx, outcome, buf, peer);
            }
            self.send(n);
        }
    }

    /// Completes wait `id`: a frame that waited for its reads gets their replies (and is
    /// sent once its writes are durable, when they must be); a datagram that waited for
    /// its writes' leaves runs again, whole.
    fn complete(&mut self, cx: &mut PortCtx<'_>, id: u64, a: Answered) {
        if let Some((frame, peer)) = self.held.deferred.remove(&id) {
            let mut out = std::mem::take(&mut self.outs[0]);
            cx.reads.serve(Who::Port(cx.index));
            cx.reads.resume(a);
            let outcome = answer(cx.sh, cx.reads, &frame, &mut out);
            cx.reads.forget();
            if !out.is_empty() {
                let _ = self.socket.send_to(&out, peer);
            }
            self.outs[0] = out;
            self.held.hold(cx, outcome, &frame, peer);
            return;
        }
        let Some((mut ran, peer)) = self.held.waiting.remove(&id) else {
            return;
        };
        ran.complete_reads(a.replies);
        cx.sh.view().wait_visible(ran.version);
        if ran.must_wait(cx.sh) {
            return durable_then_send(cx, ran, peer);
        }
        self.answer_parked(cx.sh, ran, peer, Ok(()));
    }

    fn release(&mut self, sh: &Shared, held: Box<dyn Any + Send>, result: Result<(), String>) {
        if let Ok(held) = held.downcast::<(Ran, SocketAddr)>() {
            let (ran, peer) = *held;
            self.answer_parked(sh, ran, peer, result);
        }
    }
}

/// Parks a datagram's reply until its writes are durable, then sends it from the loop.
fn durable_then_send(cx: &PortCtx<'_>, ran: Ran, peer: SocketAddr) {
    let version = ran.version;
    cx.when_durable(version, Box::new((ran, peer)));
}

/// What became of a datagram.
enum Outcome {
    /// Answered into its output buffer (empty: no reply).
    Done,
    /// Its reply waits for its reads (submitted to an engine's workers) or for durability.
    Held(Ran),
    /// Nothing ran: its writes wait for their leaves (`Framed::Later`).
    Later,
}

/// Answers one datagram into `out` (empty: no reply), or says why its reply waits (`out`
/// stays empty then).
fn answer(sh: &Arc<Shared>, reads: &mut Reads, frame: &[u8], out: &mut Vec<u8>) -> Outcome {
    out.clear();
    sh.metrics()
        .hot()
        .udp_datagrams
        .fetch_add(1, Ordering::Relaxed);
    let mut authed = false;
    match decode_header(frame, &sh.settings().limits) {
        // One frame per datagram: it must be whole and exact.
        Ok(h) if h.frame_len == frame.len() => {
            let ran = match run_frame(sh, frame, Transport::Udp, &mut authed, reads, Vec::new()) {
                Ok(Framed::Ran(ran)) => ran,
                Ok(Framed::Later) => return Outcome::Later,
                // Never: over UDP a keyed operation in cluster mode is refused, not routed.
                Ok(Framed::Routed(_)) | Err(_) => return Outcome::Done,
            };
            if ran.awaiting().is_some() {
                return Outcome::Held(ran); // its reads complete later
            }
            // A datagram's writes are few (PUT, DELETE); waiting here for an older writer
            // elsewhere to complete is rare and short, unlike parking a datagram.
            sh.view().wait_visible(ran.version);
            if ran.must_wait(sh) {
                return Outcome::Held(ran);
            }
            ran.finish(sh, Ok(()), out);
        }
        _ => {
            sh.metrics().bad_input.fetch_add(1, Ordering::Relaxed);
        }
    }
    Outcome::Done
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::os::fd::AsRawFd;

    fn to_addr(a: &libc::sockaddr_storage) -> Option<SocketAddr> {
        match i32::from(a.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says this storage holds a sockaddr_in.
                let v4 =
                    unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
                Some(SocketAddr::from((
                    u32::from_be(v4.sin_addr.s_addr).to_be_bytes(),
                    u16::from_be(v4.sin_port),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says this storage holds a sockaddr_in6.
                let v6 =
                    unsafe { &*(a as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
                Some(SocketAddr::from((
                    v6.sin6_addr.s6_addr,
                    u16::from_be(v6.sin6_port),
                )))
            }
            _ => None,
        }
    }

    fn to_storage(a: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
        // SAFETY: sockaddr_storage is plain data for which all zero bytes are valid.
        let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let len = match a {
            SocketAddr::V4(v4) => {
                // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in.
                let p = unsafe {
                    &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                p.sin_family = libc::AF_INET as libc::sa_family_t;
                p.sin_port = v4.port().to_be();
                p.sin_addr.s_addr = u32::from_be_bytes(v4.ip().octets()).to_be();
                std::mem::size_of::<libc::sockaddr_in>()
            }
            SocketAddr::V6(v6) => {
                // SAFETY: sockaddr_storage is large and aligned enough for a sockaddr_in6.
                let p = unsafe {
                    &mut *(&mut s as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                p.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                p.sin6_port = v6.port().to_be();
                p.sin6_addr.s6_addr = v6.ip().octets();
                p.sin6_flowinfo = v6.flowinfo();
                p.sin6_scope_id = v6.scope_id();
                std::mem::size_of::<libc::sockaddr_in6>()
            }
        };
        (s, len as libc::socklen_t)
    }

    impl UdpPort {
        /// Takes up to BATCH waiting datagrams (without blocking); returns how many.
        pub(super) fn receive(&mut self) -> usize {
            let fd = self.socket.as_raw_fd();
            // SAFETY: plain data, all zero bytes valid.
            let mut addrs: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
            let mut iovs: Vec<libc::iovec> = self
                .bufs
                .iter_mut()
                .map(|b| libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                })
                .collect();
            // SAFETY: plain data, all zero bytes valid.
            let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for i in 0..BATCH {
                hdrs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
                hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
                hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: `hdrs` holds BATCH headers whose name and iovec pointers point into
            // `addrs`, `iovs` and `self.bufs`, all alive and unmoved during the call.
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    BATCH as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                return 0;
            }
            let n = n as usize;
            for i in 0..n {
                self.lens[i] = hdrs[i].msg_len as usize;
                self.peers[i] = to_addr(&addrs[i]);
            }
            n
        }

        /// Sends the replies of the first `n` datagrams in one `sendmmsg` (datagrams with
        /// no reply are skipped; a reply that cannot be sent is dropped, as UDP may).
        pub(super) fn send(&mut self, n: usize) {
            let fd = self.socket.as_raw_fd();
            let mut addrs = Vec::with_capacity(n);
            let mut iovs = Vec::with_capacity(n);
            for i in 0..n {
                if let (Some(peer), false) = (self.peers[i], self.outs[i].is_empty()) {
                    addrs.push(to_storage(peer));
                    iovs.push(libc::iovec {
                        iov_base: self.outs[i].as_mut_ptr().cast(),
                        iov_len: self.outs[i].len(),
                    });
                }
            }
            let mut hdrs: Vec<libc::mmsghdr> = addrs
                .iter_mut()
                .zip(iovs.iter_mut())
                .map(|((a, len), iov)| {
                    // SAFETY: plain data, zero is valid.
                    let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    h.msg_hdr.msg_name = (a as *mut libc::sockaddr_storage).cast();
                    h.msg_hdr.msg_namelen = *len;
                    h.msg_hdr.msg_iov = iov;
                    h.msg_hdr.msg_iovlen = 1;
                    h
                })
                .collect();
            let mut sent = 0;
            while sent < hdrs.len() {
                // SAFETY: the headers point into `addrs`, `iovs` and `self.outs`, alive and
                // unmoved during the call.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        hdrs[sent..].as_mut_ptr(),
                        (hdrs.len() - sent) as u32,
                        libc::MSG_DONTWAIT,
                    )
                };
                if r <= 0 {
                    break;
                }
                sent += r as usize;
            }
        }
    }
}

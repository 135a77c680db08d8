//! memcached's UDP protocol on the memcached port (`--memcached-udp`, off by default as in
//! memcached): one request per datagram behind memcached's 8-byte frame header, answered on
//! the loop that received it, the reply split into numbered datagrams.
//!
//! Two rules keep the port from being an amplifier (docs/ARCHITECTURE.md, invariant 7): a reply,
//! headers included, is never larger than the datagram that asked for it (a larger one is
//! replaced by `SERVER_ERROR object too large for cache` if that fits, else dropped), and
//! UDP takes retrievals and other read-only commands only: a write gets
//! `SERVER_ERROR writes are not accepted over UDP`, since a lost datagram would leave the
//! client not knowing whether it ran. With a password no UDP sender can authenticate, so
//! every command is refused.

use crate::core::shared::Shared;
use crate::memcache::state::{McGlobal, McSession};
use crate::memcache::text::McScratch;
use crate::net::session::{Datagrams, Port, PortCtx};
use accelkv_proto::memcache::udp::{self, UDP_HEADER};
use mio::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Arc;

const MAX_DATAGRAM: usize = 65536;
const TOO_LARGE: &[u8] = b"SERVER_ERROR object too large for cache\r\n";

/// A loop's handle of the memcached UDP socket, with its buffers.
pub struct McUdp {
    socket: UdpSocket,
    buf: Vec<u8>,
    reply: Vec<u8>,
    dgram: Vec<u8>,
    scratch: McScratch,
    global: Arc<McGlobal>,
}

/// The memcached UDP socket: each loop's handle is a [`McUdp`].
pub struct McDatagrams(pub Arc<McGlobal>);

impl Datagrams for McDatagrams {
    fn port(&self, socket: &std::net::UdpSocket) -> std::io::Result<Box<dyn Port>> {
        Ok(Box::new(McUdp::new(socket, self.0.clone())?))
    }
}

impl Port for McUdp {
    fn socket_mut(&mut self) -> &mut UdpSocket {
        &mut self.socket
    }

    fn drain(&mut self, cx: &mut PortCtx<'_>) {
        self.drain_all(cx.sh, cx.reads);
    }
}

impl McUdp {
    pub fn new(s: &std::net::UdpSocket, global: Arc<McGlobal>) -> std::io::Result<McUdp> {
        let s = s.try_clone()?;
        s.set_nonblocking(true)?;
        Ok(McUdp {
            socket: UdpSocket::from_std(s),
            buf: vec![0; MAX_DATAGRAM],
            reply: Vec::new(),
            dgram: Vec::new(),
            scratch: McScratch::default(),
            global,
        })
    }

    /// Answers every datagram waiting on the socket.
    fn drain_all(&mut self, sh: &Shared, reads: &mut crate::core::reads::Reads) {
        loop {
            let (n, peer) = match self.socket.recv_from(&mut self.buf) {
                Ok(r) => r,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return, // WouldBlock: none left
            };
            sh.metrics()
                .hot()
                .udp_datagrams
                .fetch_add(1, Ordering::Relaxed);
            let Ok((h, payload)) = udp::decode_request(&self.buf[..n]) else {
                sh.metrics().bad_input.fetch_add(1, Ordering::Relaxed);
                continue; // dropped silently, as memcached does
            };
            self.reply.clear();
            let mut s = McSession::for_datagram(self.global.clone(), !sh.needs_auth());
            crate::memcache::text::run_datagram(
                sh,
                &mut s,
                payload,
                reads,
                &mut self.scratch,
                &mut self.reply,
            );
            if !fits(self.reply.len(), n) {
                self.reply.clear();
                if fits(TOO_LARGE.len(), n) {
                    self.reply.extend_from_slice(TOO_LARGE);
                } else {
                    continue; // not even the error fits: no answer
                }
            }
            for seq in 0..udp::datagrams(self.reply.len()) {
                udp::encode_datagram(&mut self.dgram, h.id, seq, &self.reply);
                let _ = self.socket.send_to(&self.dgram, peer);
            }
        }
    }
}

/// Whether a reply of `len` bytes, with its datagrams' headers, is no larger than the
/// `request` bytes that asked for it.
fn fits(len: usize, request: usize) -> bool {
    len + UDP_HEADER * udp::datagrams(len) <= request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_with_its_headers_is_never_larger_than_the_request() {
        assert!(fits(0, 8));
        assert!(fits(10, 18));
        assert!(!fits(11, 18));
        // Two datagrams carry two headers.
        assert!(!fits(1401, 1401 + 8));
        assert!(fits(1401, 1401 + 16));
    }
}

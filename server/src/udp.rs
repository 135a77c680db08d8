//! UDP with batched system calls: `recvmmsg` takes up to 32 datagrams per call and
//! `sendmmsg` sends their replies in one call (Linux; elsewhere one datagram per call).
//! With busy polling the thread never sleeps in the kernel: it polls the socket, trading a
//! core for latency.

use crate::exec::{execute_frame, Transport};
use crate::state::Shared;
use accelkv_engine::Sink;
use accelkv_proto::frame::decode_header;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Datagrams per batched call.
const BATCH: usize = 32;
const MAX_DATAGRAM: usize = 65536;

/// Answers one datagram into `out` (empty: no reply).
fn answer(sh: &Arc<Shared>, sink: &Arc<Sink>, frame: &[u8], out: &mut Vec<u8>) {
    out.clear();
    sh.metrics.udp_datagrams.fetch_add(1, Ordering::Relaxed);
    let mut authed = false;
    match decode_header(frame, &sh.settings.limits) {
        // One frame per datagram: it must be whole and exact.
        Ok(h) if h.frame_len == frame.len() => {
            if execute_frame(sh, frame, Transport::Udp, &mut authed, sink, out).is_err() {
                out.clear();
            }
        }
        _ => {
            sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Serves UDP until `stop`.
pub fn serve(sh: Arc<Shared>, socket: UdpSocket, stop: Arc<AtomicBool>, busy_poll: bool) {
    if busy_poll {
        let _ = socket.set_nonblocking(true);
    } else {
        let _ = socket.set_read_timeout(Some(Duration::from_millis(200)));
    }
    let sink = Sink::new();
    #[cfg(target_os = "linux")]
    linux::serve(&sh, &socket, &stop, busy_poll, &sink);
    #[cfg(not(target_os = "linux"))]
    {
        let mut buf = vec![0u8; MAX_DATAGRAM];
        let mut out = Vec::with_capacity(MAX_DATAGRAM);
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, peer)) = socket.recv_from(&mut buf) else {
                if busy_poll {
                    std::hint::spin_loop();
                }
                continue;
            };
            answer(&sh, &sink, &buf[..n], &mut out);
            if !out.is_empty() {
                let _ = socket.send_to(&out, peer);
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::os::fd::AsRawFd;

    pub(super) fn serve(
        sh: &Arc<Shared>,
        socket: &UdpSocket,
        stop: &AtomicBool,
        busy_poll: bool,
        sink: &Arc<Sink>,
    ) {
        let fd = socket.as_raw_fd();
        let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| vec![0u8; MAX_DATAGRAM]).collect();
        let mut outs: Vec<Vec<u8>> = (0..BATCH)
            .map(|_| Vec::with_capacity(MAX_DATAGRAM))
            .collect();
        // SAFETY: sockaddr_storage is plain data for which all zero bytes are valid.
        let mut addrs: Vec<libc::sockaddr_storage> =
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        let mut iovs: Vec<libc::iovec> = Vec::with_capacity(BATCH);
        // SAFETY: mmsghdr is plain data for which all zero bytes are valid.
        let mut hdrs: Vec<libc::mmsghdr> =
            (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect();
        while !stop.load(Ordering::Relaxed) {
            iovs.clear();
            for b in bufs.iter_mut() {
                iovs.push(libc::iovec {
                    iov_base: b.as_mut_ptr().cast(),
                    iov_len: b.len(),
                });
            }
            for i in 0..BATCH {
                hdrs[i].msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
                hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
                hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
                hdrs[i].msg_hdr.msg_iovlen = 1;
                hdrs[i].msg_hdr.msg_control = std::ptr::null_mut();
                hdrs[i].msg_hdr.msg_controllen = 0;
                hdrs[i].msg_len = 0;
            }
            let flags = if busy_poll {
                libc::MSG_DONTWAIT
            } else {
                libc::MSG_WAITFORONE
            };
            // SAFETY: `hdrs` holds BATCH headers whose name and iovec pointers point into
            // `addrs`, `iovs` and `bufs`, all alive and not moved during the call; the
            // timeout pointer is null (the socket's read timeout bounds the wait).
            let n = unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    BATCH as u32,
                    flags,
                    std::ptr::null_mut(),
                )
            };
            if n <= 0 {
                if busy_poll {
                    std::hint::spin_loop();
                }
                continue;
            }
            let n = n as usize;
            for i in 0..n {
                let len = hdrs[i].msg_len as usize;
                answer(sh, sink, &bufs[i][..len], &mut outs[i]);
            }
            // Replies go back to the senders in one sendmmsg (datagrams with no reply are
            // skipped).
            let mut send_iovs: Vec<libc::iovec> = Vec::with_capacity(n);
            let mut send_hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(n);
            for out in outs.iter_mut().take(n).filter(|o| !o.is_empty()) {
                send_iovs.push(libc::iovec {
                    iov_base: out.as_mut_ptr().cast(),
                    iov_len: out.len(),
                });
            }
            let mut k = 0;
            for i in 0..n {
                if outs[i].is_empty() {
                    continue;
                }
                // SAFETY: plain data, zero is valid.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_name = (&mut addrs[i] as *mut libc::sockaddr_storage).cast();
                h.msg_hdr.msg_namelen = hdrs[i].msg_hdr.msg_namelen;
                h.msg_hdr.msg_iov = &mut send_iovs[k];
                h.msg_hdr.msg_iovlen = 1;
                send_hdrs.push(h);
                k += 1;
            }
            let mut sent = 0;
            while sent < send_hdrs.len() {
                // SAFETY: the headers point into `addrs`, `send_iovs` and `outs`, alive and
                // unmoved during the call.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        send_hdrs[sent..].as_mut_ptr(),
                        (send_hdrs.len() - sent) as u32,
                        0,
                    )
                };
                if r <= 0 {
                    break; // a reply that cannot be sent is dropped, as UDP may
                }
                sent += r as usize;
            }
        }
    }
}

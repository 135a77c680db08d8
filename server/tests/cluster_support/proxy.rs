//! A TCP proxy in front of one node's Raft port that the test can cut: while a source
//! address is blocked, its connections are closed and new ones refused, so the test
//! partitions a node from its peers (each node sends from its own loopback address).

use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The proxy; it stops when dropped.
pub struct Proxy {
    pub addr: SocketAddr,
    blocked: Arc<Mutex<HashSet<IpAddr>>>,
    conns: Arc<Mutex<Vec<(IpAddr, TcpStream)>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// A proxy listening on `listen` that forwards to `to`.
    pub fn start(listen: SocketAddr, to: SocketAddr) -> Proxy {
        let l = TcpListener::bind(listen).expect("proxy port");
        l.set_nonblocking(true).unwrap();
        let p = Proxy {
            addr: l.local_addr().unwrap(),
            blocked: Default::default(),
            conns: Default::default(),
            stop: Default::default(),
        };
        let (blocked, conns, stop) = (p.blocked.clone(), p.conns.clone(), p.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let (c, peer) = match l.accept() {
                    Ok(x) => x,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                };
                if blocked.lock().unwrap().contains(&peer.ip()) {
                    continue; // dropped: the peer sees its connection close
                }
                let _ = c.set_nonblocking(false);
                let Ok(s) = TcpStream::connect(to) else {
                    continue;
                };
                let _ = (c.set_nodelay(true), s.set_nodelay(true));
                {
                    let mut g = conns.lock().unwrap();
                    g.push((peer.ip(), c.try_clone().unwrap()));
                    g.push((peer.ip(), s.try_clone().unwrap()));
                }
                pipe(c.try_clone().unwrap(), s.try_clone().unwrap());
                pipe(s, c);
            }
        });
        p
    }

    /// Cuts traffic from `ip` (closing its connections) until [`Proxy::heal`].
    pub fn block(&self, ip: IpAddr) {
        self.blocked.lock().unwrap().insert(ip);
        let mut g = self.conns.lock().unwrap();
        for (_, s) in g.iter().filter(|(from, _)| *from == ip) {
            let _ = s.shutdown(Shutdown::Both);
        }
        g.retain(|(from, _)| *from != ip);
    }

    /// Lets every source through again.
    pub fn heal(&self) {
        self.blocked.lock().unwrap().clear();
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (_, s) in self.conns.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn pipe(mut from: TcpStream, mut to: TcpStream) {
    std::thread::spawn(move || {
        let mut b = vec![0u8; 64 << 10];
        loop {
            match from.read(&mut b) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&b[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}

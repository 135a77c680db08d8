//! Every socket the server listens on, bound before anything starts (so a port in use is an
//! error at once), and the composition of each with the adapter that speaks its protocol:
//! the plain ports (binary TCP and UDP, RESP, memcached), which `--tls-only` leaves closed;
//! the TLS ports (`--tls-port` and its kin); the admin endpoint.

use crate::{binary, config, core, memcache, net, resp};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;

/// Every socket the server listens on.
pub struct Bound {
    /// The plain ports (`None`: `--tls-only`).
    pub plain: Option<Plain>,
    pub admin: TcpListener,
    pub tls: Option<TlsBound>,
}

/// The plain ports.
pub struct Plain {
    pub bin: TcpListener,
    pub udp: UdpSocket,
    pub resp: TcpListener,
    pub memcached: Option<TcpListener>,
    pub memcached_udp: Option<UdpSocket>,
}

/// The TLS ports (`--tls-port` and its kin) and the configuration their connections use.
pub struct TlsBound {
    config: Arc<rustls::ServerConfig>,
    resp: Option<TcpListener>,
    memcached: Option<TcpListener>,
    binary: Option<TcpListener>,
}

fn at(l: &TcpListener) -> Result<SocketAddr, String> {
    l.local_addr().map_err(|e| e.to_string())
}

impl Bound {
    /// Binds every port `settings` asks for.
    pub fn bind(settings: &config::Settings) -> Result<Bound, String> {
        let tls_only = settings.tls.as_ref().is_some_and(|t| t.only);
        let a = SocketAddr::new(settings.bind, settings.admin_port);
        let admin = TcpListener::bind(a)
            .map_err(|e| format!("cannot listen for admin HTTP on {a}: {e}"))?;
        Ok(Bound {
            plain: if tls_only {
                None
            } else {
                Some(Plain::bind(settings)?)
            },
            admin,
            tls: TlsBound::bind(settings)?,
        })
    }

    /// The plain RESP and binary TCP addresses (`None` with `--tls-only`).
    pub fn plain_addrs(&self) -> Result<Option<(SocketAddr, SocketAddr)>, String> {
        self.plain
            .as_ref()
            .map(|p| Ok((at(&p.resp)?, at(&p.bin)?)))
            .transpose()
    }

    /// The ports' part of the listening line: `binary tcp+udp ADDR resp ADDR memcached tcp
    /// ADDR admin http ADDR tls resp=ADDR …` (`plain ports off` with `--tls-only`).
    pub fn describe(&self) -> Result<String, String> {
        let mut text = match &self.plain {
            Some(p) => p.describe()?,
            None => "plain ports off".to_string(),
        };
        text.push_str(&format!(" admin http {}", at(&self.admin)?));
        if let Some(t) = &self.tls {
            text.push_str(&t.describe()?);
        }
        Ok(text)
    }

    /// What each TCP listener of the event loops answers while the data directory is
    /// recovered, on copies of the listeners, in [`Bound::wire`]'s order (a connection
    /// accepted meanwhile is handed to the loops by its listener's index); the TLS ports
    /// with their configuration, their handshakes done by the loading thread.
    pub fn loading_doors(&self) -> Result<Vec<net::loading::Door>, String> {
        let copy = |l: &TcpListener| l.try_clone().map_err(|e| e.to_string());
        let mut doors: Vec<net::loading::Door> = Vec::new();
        if let Some(p) = &self.plain {
            doors.push((copy(&p.resp)?, resp::loading::answer, None));
            doors.push((copy(&p.bin)?, binary::loading::answer, None));
            if let Some(l) = &p.memcached {
                doors.push((copy(l)?, memcache::loading::answer, None));
            }
        }
        if let Some(t) = &self.tls {
            let answers: [(&Option<TcpListener>, core::loading::Answer); 3] = [
                (&t.resp, resp::loading::answer),
                (&t.memcached, memcache::loading::answer),
                (&t.binary, binary::loading::answer),
            ];
            for (l, answer) in answers {
                if let Some(l) = l {
                    doors.push((copy(l)?, answer, Some(t.config.clone())));
                }
            }
        }
        Ok(doors)
    }

    /// The composition root: each socket with the adapter that speaks its protocol.
    pub fn wire(
        self,
        shared: &Arc<core::shared::Shared>,
        mc: &Arc<memcache::state::McGlobal>,
        resp_global: &Arc<resp::session::RespGlobal>,
    ) -> net::event_loop::Sockets {
        use net::event_loop::Listener;
        type Proto = Arc<dyn net::session::Protocol>;
        let mut sockets = net::event_loop::Sockets::default();
        let resp: Proto = Arc::new(resp::adapter::RespProtocol::new(
            shared.clone(),
            resp_global.clone(),
        ));
        let bin: Proto = Arc::new(binary::session::BinaryProtocol);
        let mc_proto: Proto = Arc::new(memcache::session::McProtocol(mc.clone()));
        let listener = |sock, proto: &Proto, tls: Option<&Arc<rustls::ServerConfig>>| Listener {
            sock,
            proto: proto.clone(),
            tls: tls.cloned(),
        };
        if let Some(p) = self.plain {
            // The plain listeners first, in loading_doors' order.
            sockets.listeners.push(listener(p.resp, &resp, None));
            sockets.listeners.push(listener(p.bin, &bin, None));
            if let Some(l) = p.memcached {
                sockets.listeners.push(listener(l, &mc_proto, None));
            }
            // The binary UDP port first: a read with no waiter named is answered to port 0.
            let d = binary::udp::BinaryDatagrams;
            sockets.datagrams.push((p.udp, Arc::new(d)));
            if let Some(u) = p.memcached_udp {
                let d = memcache::udp::McDatagrams(mc.clone());
                sockets.datagrams.push((u, Arc::new(d)));
            }
        }
        if let Some(t) = self.tls {
            // In loading_doors' order too.
            for (l, proto) in [(t.resp, &resp), (t.memcached, &mc_proto), (t.binary, &bin)] {
                if let Some(sock) = l {
                    sockets
                        .listeners
                        .push(listener(sock, proto, Some(&t.config)));
                }
            }
        }
        sockets
    }
}

impl Plain {
    /// Binds the plain ports (the binary UDP port on the binary TCP port's number).
    fn bind(settings: &config::Settings) -> Result<Plain, String> {
        let addr = |port| SocketAddr::new(settings.bind, port);
        let bind_err = |what: &str, a: SocketAddr, e: std::io::Error| {
            format!("cannot listen for {what} on {a}: {e}")
        };
        let bin = TcpListener::bind(addr(settings.port))
            .map_err(|e| bind_err("binary TCP", addr(settings.port), e))?;
        let bin_port = at(&bin)?.port();
        let udp = UdpSocket::bind(addr(bin_port))
            .map_err(|e| bind_err("binary UDP", addr(bin_port), e))?;
        let resp = TcpListener::bind(addr(settings.resp_port))
            .map_err(|e| bind_err("RESP", addr(settings.resp_port), e))?;
        let (memcached, memcached_udp) = bind_memcached(settings, addr)?;
        Ok(Plain {
            bin,
            udp,
            resp,
            memcached,
            memcached_udp,
        })
    }

    fn describe(&self) -> Result<String, String> {
        let mc = match &self.memcached {
            Some(l) => {
                let udp = if self.memcached_udp.is_some() {
                    "+udp"
                } else {
                    ""
                };
                format!("memcached tcp{udp} {}", at(l)?)
            }
            None => "memcached off".to_string(),
        };
        Ok(format!(
            "binary tcp+udp {} resp {} {mc}",
            at(&self.bin)?,
            at(&self.resp)?
        ))
    }
}

impl TlsBound {
    /// Loads the certificate and binds the TLS ports `settings` asks for.
    fn bind(settings: &config::Settings) -> Result<Option<TlsBound>, String> {
        let Some(t) = &settings.tls else {
            return Ok(None);
        };
        let config = config::tls_config::server_config(t)?;
        let listen = |what: &str, port: Option<u16>| {
            port.map(|p| {
                let a = SocketAddr::new(settings.bind, p);
                TcpListener::bind(a)
                    .map_err(|e| format!("cannot listen for {what} over TLS on {a}: {e}"))
            })
            .transpose()
        };
        Ok(Some(TlsBound {
            config,
            resp: listen("RESP", t.resp_port)?,
            memcached: listen("memcached", t.memcached_port)?,
            binary: listen("the binary protocol", t.binary_port)?,
        }))
    }

    /// ` tls resp=ADDR memcached=ADDR binary=ADDR` (the ports there are).
    fn describe(&self) -> Result<String, String> {
        let mut text = String::from(" tls");
        for (name, l) in [
            ("resp", &self.resp),
            ("memcached", &self.memcached),
            ("binary", &self.binary),
        ] {
            if let Some(l) = l {
                text.push_str(&format!(" {name}={}", at(l)?));
            }
        }
        Ok(text)
    }
}

/// The memcached port's listener (and UDP socket with `--memcached-udp`), or none when it is
/// off. The default port (11211) held by another program (a memcached) leaves it off with a
/// warning; a port asked for explicitly must bind.
fn bind_memcached(
    settings: &config::Settings,
    addr: impl Fn(u16) -> SocketAddr,
) -> Result<(Option<TcpListener>, Option<UdpSocket>), String> {
    let Some(port) = settings.memcached_port else {
        return Ok((None, None));
    };
    let tcp = match TcpListener::bind(addr(port)) {
        Ok(l) => l,
        Err(e) if !settings.memcached_explicit && e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(
                "memcached port {} is in use; memcached protocol off (give --memcached-port)",
                addr(port)
            );
            return Ok((None, None));
        }
        Err(e) => {
            return Err(format!(
                "cannot listen for memcached on {}: {e}",
                addr(port)
            ))
        }
    };
    if !settings.memcached_udp {
        return Ok((Some(tcp), None));
    }
    let at = at(&tcp)?;
    let udp =
        UdpSocket::bind(at).map_err(|e| format!("cannot listen for memcached UDP on {at}: {e}"))?;
    Ok((Some(tcp), Some(udp)))
}

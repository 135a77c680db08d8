//! accelkv-server as a library: [`serve`] runs the server with resolved [`config::Settings`]
//! until SIGINT or SIGTERM. The `accelkv-server` binary is `serve` behind the command line;
//! a program embedding the server calls it itself (after registering its own vector
//! functions, see docs/VECTOR_FUNCTIONS.md).

mod admin;
mod binary;
#[cfg(feature = "cluster")]
mod cluster;
pub mod config;
mod core;
pub mod logging;
mod memcache;
mod net;
mod resp;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The vector operations' functions and types (kept at this path for embedders).
pub use crate::core::ops::vector;
pub use crate::core::ops::vector::{
    Elem, FilterFn, Overflow, Registry, Scalar, UpdateFn, VectorError,
};
/// One RESP command as the command table describes it.
pub use resp::call::Spec as RespCommand;
/// Every RESP command the server answers (the command table).
pub use resp::table::table as resp_commands;

/// How long shutdown waits for the event loops to stop before it flushes anyway.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Serves until SIGINT or SIGTERM: binds every port, prints the listening line on stdout,
/// and returns when shut down (or with why it could not start).
pub fn serve(settings: config::Settings) -> Result<(), String> {
    serve_with(settings, Registry::default())
}

/// [`serve`] with the vector functions of `registry` (the built-ins plus what the embedding
/// program registered; docs/VECTOR_FUNCTIONS.md).
pub fn serve_with(settings: config::Settings, registry: Registry) -> Result<(), String> {
    // Before any thread starts, so a signal that arrives from now on is seen.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| format!("cannot handle signals: {e}"))?;
    let bound = Bound::bind(&settings)?;
    let progress = load_progress();
    let admin = Arc::new(admin::http::Admin::new(progress.clone()));
    start_admin(&admin, &bound.admin)?;
    // Recovering a data directory may take a while: the ports answer LOADING meanwhile.
    let loading = match &settings.data_dir {
        Some(_) => Some(
            net::loading::start(bound.loading_doors()?, progress.clone())
                .map_err(|e| format!("cannot answer while loading: {e}"))?,
        ),
        None => None,
    };
    let load = progress.load.clone();
    let shared = match core::shared::Shared::with_registry(settings.clone(), registry, load) {
        Ok(s) => s,
        Err(e) => {
            drop(loading.map(net::loading::Loading::finish));
            return Err(e);
        }
    };
    let at = |l: &std::net::TcpListener| l.local_addr().map_err(|e| e.to_string());
    let (resp_at, bin_at, admin_at) = (at(&bound.resp)?, at(&bound.bin)?, at(&bound.admin)?);
    let cluster_text = match &settings.cluster {
        Some(cs) => format!(", {}", start_cluster(&shared, cs, resp_at, bin_at)?),
        None => String::new(),
    };
    let mc_text = match &bound.memcached {
        Some(l) => {
            let udp = if bound.memcached_udp.is_some() {
                "+udp"
            } else {
                ""
            };
            format!("memcached tcp{udp} {}", at(l)?)
        }
        None => "memcached off".to_string(),
    };
    let tls_text = match &bound.tls {
        Some(t) => t.describe()?,
        None => String::new(),
    };
    let mc = Arc::new(memcache::state::McGlobal::default());
    let resp_global = Arc::new(resp::session::RespGlobal::default());
    let sockets = bound.wire(&shared, &mc, &resp_global);
    let stop = Arc::new(AtomicBool::new(false));
    let (mailboxes, done) = start_loops(&shared, &sockets, &stop)?;
    start_helpers(&shared, &stop, mc, &resp_global)?;
    if let Some(l) = loading {
        hand_over(l.finish(), &mailboxes);
    }
    admin.ready(shared.clone());
    let auth = if settings.password.is_some() {
        "on"
    } else {
        "off"
    };
    // Never panic on a closed stdout (a supervisor that stopped reading it).
    let _ = writeln!(
        std::io::stdout(),
        "accelkv-server listening: binary tcp+udp {bin_at} resp {resp_at} {mc_text} admin http {admin_at}{tls_text} (auth {auth}, engine {}, {} event loops, hot cache {} buckets, {}{cluster_text})",
        shared.engine().describe(),
        settings.threads,
        settings.cache_buckets,
        storage_text(&shared, &settings),
    );
    let _ = std::io::stdout().flush();
    let _ = signals.forever().next();
    tracing::info!("shutting down");
    if let Some(r) = shared.router() {
        r.stop();
    }
    stop_loops(&stop, &mailboxes, &done, settings.threads);
    if let Some(p) = shared.persist().filter(|_| !shared.skip_final_flush()) {
        if let Err(e) = p.flush() {
            return Err(format!("flushing the data directory at shutdown: {e}"));
        }
    }
    Ok(())
}

/// Every socket the server listens on.
struct Bound {
    bin: std::net::TcpListener,
    udp: std::net::UdpSocket,
    resp: std::net::TcpListener,
    admin: std::net::TcpListener,
    memcached: Option<std::net::TcpListener>,
    memcached_udp: Option<std::net::UdpSocket>,
    tls: Option<TlsBound>,
}

/// The TLS ports (`--tls-port` and its kin) and the configuration their connections use.
struct TlsBound {
    config: Arc<rustls::ServerConfig>,
    resp: Option<std::net::TcpListener>,
    memcached: Option<std::net::TcpListener>,
    binary: Option<std::net::TcpListener>,
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
                std::net::TcpListener::bind(a)
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

    /// ` tls resp=ADDR memcached=ADDR binary=ADDR` for the listening line (the ports there
    /// are).
    fn describe(&self) -> Result<String, String> {
        let mut text = String::from(" tls");
        for (name, l) in [
            ("resp", &self.resp),
            ("memcached", &self.memcached),
            ("binary", &self.binary),
        ] {
            if let Some(l) = l {
                let at = l.local_addr().map_err(|e| e.to_string())?;
                text.push_str(&format!(" {name}={at}"));
            }
        }
        Ok(text)
    }
}

impl Bound {
    /// Binds every port `settings` asks for (the binary UDP port on the binary TCP port's
    /// number).
    fn bind(settings: &config::Settings) -> Result<Bound, String> {
        let addr = |port| SocketAddr::new(settings.bind, port);
        let bind_err = |what: &str, a: SocketAddr, e: std::io::Error| {
            format!("cannot listen for {what} on {a}: {e}")
        };
        let bin = std::net::TcpListener::bind(addr(settings.port))
            .map_err(|e| bind_err("binary TCP", addr(settings.port), e))?;
        let bin_port = bin.local_addr().map_err(|e| e.to_string())?.port();
        let udp = std::net::UdpSocket::bind(addr(bin_port))
            .map_err(|e| bind_err("binary UDP", addr(bin_port), e))?;
        let resp = std::net::TcpListener::bind(addr(settings.resp_port))
            .map_err(|e| bind_err("RESP", addr(settings.resp_port), e))?;
        let admin = std::net::TcpListener::bind(addr(settings.admin_port))
            .map_err(|e| bind_err("admin HTTP", addr(settings.admin_port), e))?;
        let (memcached, memcached_udp) = bind_memcached(settings, addr)?;
        Ok(Bound {
            bin,
            udp,
            resp,
            admin,
            memcached,
            memcached_udp,
            tls: TlsBound::bind(settings)?,
        })
    }

    /// What each TCP listener of the event loops answers while the data directory is
    /// recovered, on copies of the listeners, in [`Bound::wire`]'s order (a connection
    /// accepted meanwhile is handed to the loops by its listener's index).
    fn loading_doors(&self) -> Result<Vec<(std::net::TcpListener, core::loading::Answer)>, String> {
        let copy = |l: &std::net::TcpListener| l.try_clone().map_err(|e| e.to_string());
        let mut doors: Vec<(std::net::TcpListener, core::loading::Answer)> = vec![
            (copy(&self.resp)?, resp::loading::answer),
            (copy(&self.bin)?, binary::loading::answer),
        ];
        if let Some(l) = &self.memcached {
            doors.push((copy(l)?, memcache::loading::answer));
        }
        Ok(doors)
    }

    /// The composition root: each socket with the adapter that speaks its protocol.
    fn wire(
        self,
        shared: &Arc<core::shared::Shared>,
        mc: &Arc<memcache::state::McGlobal>,
        resp_global: &Arc<resp::session::RespGlobal>,
    ) -> net::event_loop::Sockets {
        use net::event_loop::Listener;
        let mut sockets = net::event_loop::Sockets::default();
        let resp: Arc<dyn net::session::Protocol> = Arc::new(resp::adapter::RespProtocol::new(
            shared.clone(),
            resp_global.clone(),
        ));
        let bin: Arc<dyn net::session::Protocol> = Arc::new(binary::session::BinaryProtocol);
        let mc_proto: Arc<dyn net::session::Protocol> =
            Arc::new(memcache::session::McProtocol(mc.clone()));
        let plain = |sock, proto: &Arc<dyn net::session::Protocol>| Listener {
            sock,
            proto: proto.clone(),
            tls: None,
        };
        // The plain listeners first, in loading_doors' order.
        sockets.listeners.push(plain(self.resp, &resp));
        sockets.listeners.push(plain(self.bin, &bin));
        if let Some(l) = self.memcached {
            sockets.listeners.push(plain(l, &mc_proto));
        }
        if let Some(t) = self.tls {
            for (l, proto) in [(t.resp, &resp), (t.memcached, &mc_proto), (t.binary, &bin)] {
                if let Some(sock) = l {
                    sockets.listeners.push(Listener {
                        sock,
                        proto: proto.clone(),
                        tls: Some(t.config.clone()),
                    });
                }
            }
        }
        // The binary UDP port first: a read with no waiter named is answered to port 0.
        let d = binary::udp::BinaryDatagrams;
        sockets.datagrams.push((self.udp, Arc::new(d)));
        if let Some(u) = self.memcached_udp {
            let d = memcache::udp::McDatagrams(mc.clone());
            sockets.datagrams.push((u, Arc::new(d)));
        }
        sockets
    }
}

/// Starts `--threads` event loops over `sockets`: their mailboxes, and a channel each sends
/// on once it has stopped.
#[allow(clippy::type_complexity)]
fn start_loops(
    shared: &Arc<core::shared::Shared>,
    sockets: &net::event_loop::Sockets,
    stop: &Arc<AtomicBool>,
) -> Result<
    (
        Vec<Arc<net::mailbox::Mailbox>>,
        std::sync::mpsc::Receiver<()>,
    ),
    String,
> {
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let mut mailboxes = Vec::new();
    for i in 0..shared.settings().threads {
        let (lp, mailbox) = net::event_loop::Loop::new(shared.clone(), sockets, i as u64)
            .map_err(|e| format!("cannot start event loop {i}: {e}"))?;
        mailboxes.push(mailbox);
        let (stop, done) = (stop.clone(), done_tx.clone());
        std::thread::Builder::new()
            .name(format!("accelkv-loop-{i}"))
            .spawn(move || {
                lp.run(&stop);
                let _ = done.send(());
            })
            .map_err(|e| e.to_string())?;
    }
    let handles = mailboxes.iter().map(|m| m.clone() as _).collect();
    shared.clients().set_mailboxes(handles);
    Ok((mailboxes, done_rx))
}

/// How far recovering the data directory has read; `ACCELKV_TEST_LOAD_DELAY_US` (a testing
/// aid, as Redis's `key-load-delay`) pauses recovery before each page it decodes.
fn load_progress() -> Arc<core::loading::Progress> {
    let load = Arc::new(accelkv_durable::LoadProgress::default());
    if let Some(us) = std::env::var("ACCELKV_TEST_LOAD_DELAY_US")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        load.page_delay_us.store(us, Ordering::Relaxed);
    }
    Arc::new(core::loading::Progress {
        load,
        since: Instant::now(),
    })
}

/// The admin endpoint on a thread of its own, from before recovery.
fn start_admin(a: &Arc<admin::http::Admin>, l: &std::net::TcpListener) -> Result<(), String> {
    let (a, l) = (a.clone(), l.try_clone().map_err(|e| e.to_string())?);
    std::thread::Builder::new()
        .name("accelkv-admin".into())
        .spawn(move || admin::http::serve(a, l))
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Connections accepted while loading, to the event loops in turn.
fn hand_over(held: Vec<net::loading::Held>, mailboxes: &[Arc<net::mailbox::Mailbox>]) {
    for (i, h) in held.into_iter().enumerate() {
        mailboxes[i % mailboxes.len()].post(net::mailbox::Release::Adopt(h));
    }
}

/// The expiry sweep (with memcached's delayed `flush_all` and the reclaim of dead
/// collections' subkeys on its tick), on a thread of its own.
fn start_helpers(
    shared: &Arc<core::shared::Shared>,
    stop: &Arc<AtomicBool>,
    mc: Arc<memcache::state::McGlobal>,
    resp_global: &resp::session::RespGlobal,
) -> Result<(), String> {
    let mut reclaim = resp::types::gc::Reclaim::new(resp_global.reclaimed.clone());
    let (sh, stop) = (shared.clone(), stop.clone());
    std::thread::Builder::new()
        .name("accelkv-expire".into())
        .spawn(move || {
            let flush: core::sweep::Tick = Box::new(move |sh| mc.run_due_flush(sh));
            let reclaim: core::sweep::Tick = Box::new(move |sh| reclaim.tick(sh));
            core::sweep::run(sh, stop, vec![flush, reclaim])
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// The listening line's words for where the data lives.
fn storage_text(shared: &core::shared::Shared, settings: &config::Settings) -> String {
    match (shared.persist(), &settings.data_dir) {
        _ if settings.cluster.is_some() => {
            let dir = settings.cluster.as_ref().map(|c| c.dir.join("raft"));
            let dir = dir.unwrap_or_default();
            format!(
                "in memory, rebuilt from the Raft logs and snapshots in {}",
                dir.display()
            )
        }
        (Some(p), Some(dir)) => {
            tracing::info!("{}: {}", dir.display(), p.recovery());
            format!("data dir {}, sync {}", dir.display(), settings.sync)
        }
        _ => "in memory".to_string(),
    }
}

/// Stops the event loops: each stops within a turn; one stuck on a client cannot hold the
/// exit (bounded by [`STOP_GRACE`]).
fn stop_loops(
    stop: &AtomicBool,
    mailboxes: &[Arc<net::mailbox::Mailbox>],
    done: &std::sync::mpsc::Receiver<()>,
    threads: usize,
) {
    stop.store(true, Ordering::Relaxed);
    for m in mailboxes {
        m.wake();
    }
    let deadline = Instant::now() + STOP_GRACE;
    for _ in 0..threads {
        let left = deadline.saturating_duration_since(Instant::now());
        if done.recv_timeout(left).is_err() {
            tracing::warn!("an event loop did not stop in time; exiting anyway");
            break;
        }
    }
}

/// Joins the cluster (`--cluster`): answers the listening line's words for it.
#[cfg(feature = "cluster")]
fn start_cluster(
    sh: &Arc<core::shared::Shared>,
    cs: &config::ClusterSettings,
    resp: SocketAddr,
    binary: SocketAddr,
) -> Result<String, String> {
    let node = cluster::node::start(sh, cs, resp, binary)?;
    let text = core::route::Router::describe(&*node);
    sh.set_router(node);
    Ok(text)
}

#[cfg(not(feature = "cluster"))]
fn start_cluster(
    _: &Arc<core::shared::Shared>,
    _: &config::ClusterSettings,
    _: SocketAddr,
    _: SocketAddr,
) -> Result<String, String> {
    Err("this accelkv-server was built without cluster support: build it with `cargo build --release -p accelkv-server --features cluster` (docs/CLUSTER.md)".into())
}

/// The memcached port's listener (and UDP socket with `--memcached-udp`), or none when it is
/// off. The default port (11211) held by another program (a memcached) leaves it off with a
/// warning; a port asked for explicitly must bind.
#[allow(clippy::type_complexity)]
fn bind_memcached(
    settings: &config::Settings,
    addr: impl Fn(u16) -> SocketAddr,
) -> Result<(Option<std::net::TcpListener>, Option<std::net::UdpSocket>), String> {
    let Some(port) = settings.memcached_port else {
        return Ok((None, None));
    };
    let tcp = match std::net::TcpListener::bind(addr(port)) {
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
    let at = tcp.local_addr().map_err(|e| e.to_string())?;
    let udp = std::net::UdpSocket::bind(at)
        .map_err(|e| format!("cannot listen for memcached UDP on {at}: {e}"))?;
    Ok((Some(tcp), Some(udp)))
}

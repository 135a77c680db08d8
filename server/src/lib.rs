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
pub use resp::table::TABLE as RESP_COMMANDS;

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
    let resp_port = resp.local_addr().map_err(|e| e.to_string())?.port();
    let (memcached, memcached_udp) = bind_memcached(&settings, addr)?;
    let mc_text = match &memcached {
        Some(l) => {
            let a = l.local_addr().map_err(|e| e.to_string())?;
            let udp = if memcached_udp.is_some() { "+udp" } else { "" };
            format!("memcached tcp{udp} {a}")
        }
        None => "memcached off".to_string(),
    };
    let admin_port = admin.local_addr().map_err(|e| e.to_string())?.port();
    let auth = if settings.password.is_some() {
        "on"
    } else {
        "off"
    };
    let shared = core::shared::Shared::with_registry(settings.clone(), registry)?;
    let cluster_text = match &settings.cluster {
        Some(cs) => format!(
            ", {}",
            start_cluster(&shared, cs, addr(resp_port), addr(bin_port))?
        ),
        None => String::new(),
    };
    // The composition root: each socket with the adapter that speaks its protocol.
    let mc = Arc::new(memcache::state::McGlobal::default());
    let mut sockets = net::event_loop::Sockets::default();
    sockets.listeners.push((
        resp,
        Arc::new(resp::adapter::RespProtocol::new(shared.clone())),
    ));
    sockets
        .listeners
        .push((bin, Arc::new(binary::session::BinaryProtocol)));
    if let Some(l) = memcached {
        let p = memcache::session::McProtocol(mc.clone());
        sockets.listeners.push((l, Arc::new(p)));
    }
    // The binary UDP port first: a read with no waiter named is answered to port 0.
    sockets
        .datagrams
        .push((udp, Arc::new(binary::udp::BinaryDatagrams)));
    if let Some(u) = memcached_udp {
        let d = memcache::udp::McDatagrams(mc.clone());
        sockets.datagrams.push((u, Arc::new(d)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let mut mailboxes = Vec::new();
    for i in 0..settings.threads {
        let (lp, mailbox) = net::event_loop::Loop::new(shared.clone(), &sockets, i as u64)
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
    drop(done_tx);
    let handles = mailboxes.iter().map(|m| m.clone() as _).collect();
    shared.clients().set_mailboxes(handles);
    {
        let (sh, stop) = (shared.clone(), stop.clone());
        std::thread::Builder::new()
            .name("accelkv-expire".into())
            .spawn(move || {
                let flush: core::sweep::Tick = Box::new(move |sh| mc.run_due_flush(sh));
                core::sweep::run(sh, stop, vec![flush])
            })
            .map_err(|e| e.to_string())?;
    }
    {
        let sh = shared.clone();
        std::thread::Builder::new()
            .name("accelkv-admin".into())
            .spawn(move || admin::http::serve(sh, admin))
            .map_err(|e| e.to_string())?;
    }
    let storage = match (&shared.persist(), &settings.data_dir) {
        _ if settings.cluster.is_some() => {
            let dir = settings.cluster.as_ref().map(|c| c.dir.join("raft"));
            let dir = dir.unwrap_or_default();
            format!(
                "in memory, rebuilt from the Raft logs and snapshots in {}",
                dir.display()
            )
        }
        (Some(p), Some(dir)) => {
            eprintln!("accelkv-server: {}: {}", dir.display(), p.recovery());
            format!("data dir {}, sync {}", dir.display(), settings.sync)
        }
        _ => "in memory".to_string(),
    };
    // Never panic on a closed stdout (a supervisor that stopped reading it).
    let _ = writeln!(
        std::io::stdout(),
        "accelkv-server listening: binary tcp+udp {} resp {} {mc_text} admin http {} (auth {auth}, engine {}, {} event loops, hot cache {} buckets, {storage}{cluster_text})",
        addr(bin_port),
        addr(resp_port),
        addr(admin_port),
        shared.engine().describe(),
        settings.threads,
        settings.cache_buckets
    );
    let _ = std::io::stdout().flush();
    let _ = signals.forever().next();
    eprintln!("accelkv-server: shutting down");
    stop.store(true, Ordering::Relaxed);
    for m in &mailboxes {
        m.wake();
    }
    // Loops stop within a turn; one stuck on a client cannot hold the exit (bounded).
    let deadline = Instant::now() + STOP_GRACE;
    for _ in 0..settings.threads {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            eprintln!("accelkv-server: an event loop did not stop in time; exiting anyway");
            break;
        }
    }
    if let Some(p) = &shared.persist() {
        if let Err(e) = p.flush() {
            return Err(format!("flushing the data directory at shutdown: {e}"));
        }
    }
    Ok(())
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
            eprintln!(
                "accelkv-server: memcached port {} is in use; memcached protocol off (give --memcached-port)",
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

//! accelkv-server as a library: [`serve`] runs the server with resolved [`config::Settings`]
//! until SIGINT or SIGTERM. The `accelkv-server` binary is `serve` behind the command line;
//! a program embedding the server calls it itself (after registering its own vector
//! functions, see docs/VECTOR_FUNCTIONS.md).

mod admin;
#[doc(hidden)]
pub mod bench_hooks;
mod binary;
mod bound;
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
    let resp_global = Arc::new(resp::session::RespGlobal::default());
    let classes = &settings.notify_keyspace_events;
    (resp_global.notify.set(classes.as_bytes()))
        .map_err(|e| format!("--notify-keyspace-events {classes}: {e}"))?;
    // Before any thread starts, so a signal that arrives from now on is seen.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
    ])
    .map_err(|e| format!("cannot handle signals: {e}"))?;
    let bound = bound::Bound::bind(&settings)?;
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
    if let Some(path) = &settings.aclfile {
        let cmds = resp::acl::TableCommands::new(resp::table::table(), resp::table::find);
        if let Err(e) = resp::acl::file::load(shared.acl(), path, &cmds) {
            drop(loading.map(net::loading::Loading::finish));
            return Err(format!("--aclfile: {e}"));
        }
    }
    if let Err(e) = import_and_follow(&shared, &resp_global, &settings) {
        drop(loading.map(net::loading::Loading::finish));
        return Err(e);
    }
    let cluster_text = match (&settings.cluster, bound.plain_addrs()?) {
        (Some(cs), Some((resp_at, bin_at))) => {
            format!(", {}", start_cluster(&shared, cs, resp_at, bin_at)?)
        }
        _ => String::new(),
    };
    let ports = bound.describe()?;
    let mc = Arc::new(memcache::state::McGlobal::default());
    // The slow log's clock calibrates here, not in the first command it times.
    let _ = quanta::Instant::now();
    let sockets = bound.wire(&shared, &mc, &resp_global);
    let stop = Arc::new(AtomicBool::new(false));
    let (mailboxes, done) = start_loops(&shared, &sockets, &stop)?;
    start_helpers(&shared, &stop, mc, &resp_global)?;
    if let Some(l) = loading {
        hand_over(l.finish(), &mailboxes);
    }
    admin.ready(shared.clone());
    let auth = if shared.needs_auth() { "on" } else { "off" };
    // Never panic on a closed stdout (a supervisor that stopped reading it).
    let _ = writeln!(
        std::io::stdout(),
        "accelkv-server listening: {ports} (auth {auth}, engine {}, {} event loops, hot cache {} buckets, {}{cluster_text})",
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
    resp_global.replication.shutdown();
    stop_loops(&stop, &mailboxes, &done, settings.threads);
    if let Some(p) = shared.persist().filter(|_| !shared.skip_final_flush()) {
        // The last commit, then the index of the page file the next start reads.
        if let Err(e) = p.close() {
            return Err(format!("flushing the data directory at shutdown: {e}"));
        }
    }
    Ok(())
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
    resp_global: &Arc<resp::session::RespGlobal>,
) -> Result<(), String> {
    let (sh, g) = (shared.clone(), resp_global.clone());
    std::thread::Builder::new()
        .name("accelkv-replica".into())
        .spawn(move || resp::replica::link::run(sh, g))
        .map_err(|e| e.to_string())?;
    let mut reclaim = resp::commands::types::gc::Reclaim::new(resp_global.reclaimed.clone());
    let g = resp_global.clone();
    let (sh, stop) = (shared.clone(), stop.clone());
    std::thread::Builder::new()
        .name("accelkv-expire".into())
        .spawn(move || {
            let flush: core::sweep::Tick = Box::new(move |sh| mc.run_due_flush(sh));
            let reclaim: core::sweep::Tick = Box::new(move |sh| reclaim.tick(sh));
            let expired: core::sweep::Expired =
                Box::new(move |sh, key| resp::notify::expired(sh, &g, key));
            core::sweep::run(sh, stop, vec![flush, reclaim], expired)
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// `--import-rdb`: the file's keys loaded before serving; `--replicaof`: the primary the
/// link thread follows from the start (resp/replica/). Neither applies in cluster mode
/// (config.rs refuses them there).
fn import_and_follow(
    shared: &Arc<core::shared::Shared>,
    resp_global: &Arc<resp::session::RespGlobal>,
    settings: &config::Settings,
) -> Result<(), String> {
    if let Some(path) = &settings.import_rdb {
        let t0 = std::time::Instant::now();
        let a = resp::replica::apply::import_file(shared, resp_global, path)
            .map_err(|e| format!("--import-rdb {}: {e}", path.display()))?;
        tracing::info!(
            "--import-rdb {}: {} keys and {} libraries of functions loaded in {:.3} s; {} keys of types not served skipped (RDB types {:?}); {} failed{}",
            path.display(),
            a.keys,
            a.functions,
            t0.elapsed().as_secs_f64(),
            a.skipped,
            a.skipped_types,
            a.failed,
            a.first_error.map(|e| format!(" (first: {e})")).unwrap_or_default()
        );
    }
    resp_global.replication.follow(settings.replicaof.clone());
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

//! accelkv-server as a library: [`serve`] runs the server with resolved [`config::Settings`]
//! until SIGINT or SIGTERM. The `accelkv-server` binary is `serve` behind the command line;
//! a program embedding the server calls it itself (after registering its own vector
//! functions, see docs/VECTOR_FUNCTIONS.md).

pub mod config;
mod engines;
mod exec;
mod metrics;
mod net;
mod resp_cmd;
mod state;
mod station;
mod udp;
pub mod vector;
mod writers;

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub use vector::{Elem, FilterFn, Overflow, Registry, Scalar, UpdateFn, VectorError};

/// Serves until SIGINT or SIGTERM: binds every port, prints the listening line on stdout,
/// and returns when shut down (or with why it could not start).
pub async fn serve(settings: config::Settings) -> Result<(), String> {
    serve_with(settings, Registry::default()).await
}

/// [`serve`] with the vector functions of `registry` (the built-ins plus what the embedding
/// program registered; docs/VECTOR_FUNCTIONS.md).
pub async fn serve_with(settings: config::Settings, registry: Registry) -> Result<(), String> {
    let addr = |port| SocketAddr::new(settings.bind, port);
    let bind_err = |what: &str, a: SocketAddr, e: std::io::Error| {
        format!("cannot listen for {what} on {a}: {e}")
    };
    let tcp = tokio::net::TcpListener::bind(addr(settings.port))
        .await
        .map_err(|e| bind_err("binary TCP", addr(settings.port), e))?;
    let bin_port = tcp.local_addr().map_err(|e| e.to_string())?.port();
    let udp = std::net::UdpSocket::bind(addr(bin_port))
        .map_err(|e| bind_err("binary UDP", addr(bin_port), e))?;
    let resp = tokio::net::TcpListener::bind(addr(settings.resp_port))
        .await
        .map_err(|e| bind_err("RESP", addr(settings.resp_port), e))?;
    let admin = tokio::net::TcpListener::bind(addr(settings.admin_port))
        .await
        .map_err(|e| bind_err("admin HTTP", addr(settings.admin_port), e))?;
    let resp_port = resp.local_addr().map_err(|e| e.to_string())?.port();
    let admin_port = admin.local_addr().map_err(|e| e.to_string())?.port();
    let auth = if settings.password.is_some() {
        "on"
    } else {
        "off"
    };
    let shared = state::Shared::with_registry(settings.clone(), registry)?;
    let stop = Arc::new(AtomicBool::new(false));
    let busy_poll = settings.udp_busy_poll;
    let udp_thread = {
        let (sh, stop) = (shared.clone(), stop.clone());
        std::thread::Builder::new()
            .name("accelkv-udp".into())
            .spawn(move || udp::serve(sh, udp, stop, busy_poll))
            .map_err(|e| e.to_string())?
    };
    tokio::spawn(net::serve_binary_tcp(shared.clone(), tcp));
    tokio::spawn(net::serve_resp(shared.clone(), resp));
    tokio::spawn(net::serve_admin(shared.clone(), admin));
    let storage = match (&shared.persist, &settings.data_dir) {
        (Some(p), Some(dir)) => {
            eprintln!("accelkv-server: {}: {}", dir.display(), p.recovery());
            format!("data dir {}, sync {}", dir.display(), settings.sync)
        }
        _ => "in memory".to_string(),
    };
    // Never panic on a closed stdout (a supervisor that stopped reading it).
    let _ = writeln!(
        std::io::stdout(),
        "accelkv-server listening: binary tcp+udp {} resp {} admin http {} (auth {auth}, engine {}, {} engine threads, hot cache {} buckets, {storage})",
        addr(bin_port),
        addr(resp_port),
        addr(admin_port),
        shared.engine.describe(),
        settings.engine_threads,
        settings.cache_buckets
    );
    shutdown_signal().await;
    eprintln!("accelkv-server: shutting down");
    stop.store(true, Ordering::Relaxed);
    let _ = udp_thread.join();
    if let Some(p) = &shared.persist {
        if let Err(e) = p.flush() {
            return Err(format!("flushing the data directory at shutdown: {e}"));
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

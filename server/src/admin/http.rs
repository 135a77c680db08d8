//! The admin HTTP endpoint: `GET /metrics` (Prometheus text) and `GET /health`, served off
//! the request path from before the data directory is recovered (until then /health
//! answers 503 with how far recovery has read, and /metrics the loading gauges): a thread
//! per connection, each bounded by a 5 s timeout, at most [`MAX_CONNECTIONS`] at once; more
//! are answered 503 by one thread that refuses them in turn (reading each request for at
//! most 100 ms), and dropped when it is behind by 64.

use crate::admin::prometheus::{loading_registry, prometheus, registry, CONTENT_TYPE};
use crate::core::loading::Progress;
use crate::core::shared::Shared;
use prometheus_client::registry::Registry;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

/// Admin connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// What the admin endpoint serves: the loading state, then the server's metrics.
pub struct Admin {
    progress: Arc<Progress>,
    loading: Registry,
    ready: OnceLock<Registry>,
}

impl Admin {
    pub fn new(progress: Arc<Progress>) -> Admin {
        Admin {
            loading: loading_registry(progress.clone()),
            progress,
            ready: OnceLock::new(),
        }
    }

    /// The data directory is recovered: serve the server's metrics from now on.
    pub fn ready(&self, sh: Arc<Shared>) {
        let _ = self.ready.set(registry(sh));
    }

    fn metrics(&self) -> String {
        prometheus(self.ready.get().unwrap_or(&self.loading))
    }

    fn health(&self) -> (&'static str, String) {
        if self.ready.get().is_some() {
            return ("200 OK", "ok\n".into());
        }
        let (read, total, perc) = self.progress.read();
        let secs = self.progress.since.elapsed().as_secs_f64();
        let text = format!("loading: {read} of {total} bytes read ({perc:.1}%) in {secs:.1} s\n");
        ("503 Service Unavailable", text)
    }
}

/// Accepts admin connections until the process exits.
pub fn serve(reg: Arc<Admin>, listener: TcpListener) {
    let open = Arc::new(AtomicUsize::new(0));
    let (refuse, refused) = std::sync::mpsc::sync_channel::<TcpStream>(64);
    let _ = std::thread::Builder::new()
        .name("accelkv-admin-busy".into())
        .spawn(move || {
            for mut sock in refused {
                let _ = read_request(&mut sock, Duration::from_millis(100));
                let _ = respond(&mut sock, "503 Service Unavailable", "text/plain", "busy\n");
            }
        });
    for sock in listener.incoming() {
        let Ok(sock) = sock else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            let _ = refuse.try_send(sock);
            continue;
        }
        let (reg, done) = (reg.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("accelkv-admin-req".into())
            .spawn(move || {
                answer(&reg, sock);
                done.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The request's head, read within `timeout` (`None`: it did not come whole).
fn read_request(sock: &mut TcpStream, timeout: Duration) -> Option<Vec<u8>> {
    sock.set_read_timeout(Some(timeout)).ok()?;
    sock.set_write_timeout(Some(timeout)).ok()?;
    let mut req = Vec::new();
    let mut chunk = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        match sock.read(&mut chunk) {
            Ok(n) if n > 0 => req.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
    Some(req)
}

fn answer(reg: &Admin, mut sock: TcpStream) {
    let Some(req) = read_request(&mut sock, Duration::from_secs(5)) else {
        return;
    };
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let _ = if line.starts_with(b"GET /metrics") {
        respond(&mut sock, "200 OK", CONTENT_TYPE, &reg.metrics())
    } else if line.starts_with(b"GET /health") {
        let (status, text) = reg.health();
        respond(&mut sock, status, "text/plain", &text)
    } else {
        respond(&mut sock, "404 Not Found", "text/plain", "not found\n")
    };
}

fn respond(sock: &mut TcpStream, status: &str, kind: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes())?;
    sock.write_all(body.as_bytes())
}

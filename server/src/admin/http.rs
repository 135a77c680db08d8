//! The admin HTTP endpoint: `GET /metrics` (Prometheus text) and `GET /health`, served off
//! the request path by a thread of its own (one short-lived thread per scrape, each bounded
//! by a 5 s timeout).

use crate::admin::prometheus::prometheus;
use crate::core::shared::Shared;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// Accepts admin connections until the process exits.
pub fn serve(sh: Arc<Shared>, listener: TcpListener) {
    for sock in listener.incoming() {
        let Ok(sock) = sock else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let sh = sh.clone();
        let _ = std::thread::Builder::new()
            .name("accelkv-admin-req".into())
            .spawn(move || answer(&sh, sock));
    }
}

fn answer(sh: &Shared, mut sock: TcpStream) {
    let _ = sock.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = sock.set_write_timeout(Some(Duration::from_secs(5)));
    let mut req = Vec::new();
    let mut chunk = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
        match sock.read(&mut chunk) {
            Ok(n) if n > 0 => req.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
    let (status, body) = if line.starts_with(b"GET /metrics") {
        ("200 OK", prometheus(sh))
    } else if line.starts_with(b"GET /health") {
        ("200 OK", "ok\n".to_string())
    } else {
        ("404 Not Found", "not found\n".to_string())
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = sock.write_all(head.as_bytes());
    let _ = sock.write_all(body.as_bytes());
}

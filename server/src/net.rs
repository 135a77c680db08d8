//! Transports: binary frames over TCP (pipelined, length-delimited by the frame header) and
//! UDP (one frame per datagram), RESP over TCP, and the admin HTTP endpoint. Connection
//! limits, idle timeouts and the output-buffer cap live here.

use crate::exec::{run_frame, Transport};
use crate::metrics::prometheus;
use crate::resp_cmd::{execute, Session};
use crate::state::Shared;
use accelkv_engine::Sink;
use accelkv_proto::frame::decode_header;
use accelkv_proto::{resp, FrameError};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Counts a connection while it lives.
struct ConnGuard(Arc<Shared>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

fn admit_connection(sh: &Arc<Shared>) -> Option<ConnGuard> {
    let n = sh.connections.fetch_add(1, Ordering::Relaxed);
    if n >= sh.settings.max_connections {
        sh.connections.fetch_sub(1, Ordering::Relaxed);
        sh.metrics
            .connections_rejected
            .fetch_add(1, Ordering::Relaxed);
        return None;
    }
    sh.metrics.connections_total.fetch_add(1, Ordering::Relaxed);
    Some(ConnGuard(sh.clone()))
}

/// Reads more bytes into `buf`; `None` on EOF, error or idle timeout.
async fn read_more(sock: &mut TcpStream, buf: &mut Vec<u8>, idle: Option<Duration>) -> Option<()> {
    let mut chunk = [0u8; 64 * 1024];
    let n = match idle {
        Some(d) => tokio::time::timeout(d, sock.read(&mut chunk))
            .await
            .ok()?
            .ok()?,
        None => sock.read(&mut chunk).await.ok()?,
    };
    if n == 0 {
        return None;
    }
    buf.extend_from_slice(&chunk[..n]);
    Some(())
}

/// Writes `out`; a client that does not take it within the idle timeout (or 30 s) is dropped.
async fn write_out(sock: &mut TcpStream, out: &[u8], idle: Option<Duration>) -> Option<()> {
    let d = idle.unwrap_or(Duration::from_secs(30));
    tokio::time::timeout(d, sock.write_all(out))
        .await
        .ok()?
        .ok()
}

pub async fn serve_binary_tcp(sh: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        let Some(guard) = admit_connection(&sh) else {
            drop(sock);
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            binary_conn(sh, sock).await;
            drop(guard);
        });
    }
}

async fn binary_conn(sh: Arc<Shared>, mut sock: TcpStream) {
    let _ = sock.set_nodelay(true);
    let sink = Sink::new();
    let idle = sh.settings.idle_timeout;
    let limits = sh.settings.limits.clone();
    let mut authed = false;
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut out: Vec<u8> = Vec::new();
    while read_more(&mut sock, &mut buf, idle).await.is_some() {
        let mut pos = 0;
        let mut fatal = false;
        // Frames run on this worker thread: writes take microseconds and a read batch waits
        // microseconds for the engine, far less than moving to a blocking thread would cost.
        loop {
            let rest = &buf[pos..];
            match decode_header(rest, &limits) {
                Err(FrameError::Incomplete { .. }) => break,
                Err(_) => {
                    fatal = true;
                    break;
                }
                Ok(h) if rest.len() < h.frame_len => break,
                Ok(h) => {
                    let frame = &rest[..h.frame_len];
                    let Ok(ran) = run_frame(&sh, frame, Transport::Tcp, &mut authed, &sink) else {
                        fatal = true;
                        break;
                    };
                    // Writes are answered once durable (data directory, `sync` policy); the
                    // wait yields the worker so other connections' writes join the commit.
                    let durable = if ran.must_wait(&sh) {
                        sh.wait_durable_async().await
                    } else {
                        Ok(())
                    };
                    ran.finish(&sh, durable, &mut out);
                    pos += h.frame_len;
                    if out.len() > sh.settings.max_output {
                        fatal = true;
                        break;
                    }
                }
            }
        }
        if fatal {
            sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
            let _ = write_out(&mut sock, &out, idle).await;
            return;
        }
        buf.drain(..pos);
        if !out.is_empty() {
            if write_out(&mut sock, &out, idle).await.is_none() {
                return;
            }
            out.clear();
        }
    }
}

pub async fn serve_resp(sh: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let Some(guard) = admit_connection(&sh) else {
            let _ = sock
                .write_all(b"-ERR max number of clients reached\r\n")
                .await;
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            resp_conn(sh, sock).await;
            drop(guard);
        });
    }
}

async fn resp_conn(sh: Arc<Shared>, mut sock: TcpStream) {
    let _ = sock.set_nodelay(true);
    let sink = Sink::new();
    let idle = sh.settings.idle_timeout;
    let limits = sh.settings.limits.clone();
    let mut session = Session {
        id: sh.next_client.fetch_add(1, Ordering::Relaxed),
        authed: false,
        name: None,
        quit: false,
        wrote: false,
    };
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut out: Vec<u8> = Vec::new();
    while read_more(&mut sock, &mut buf, idle).await.is_some() {
        let mut pos = 0;
        let mut cmds: Vec<Vec<&[u8]>> = Vec::new();
        let mut bad = None;
        loop {
            match resp::parse_command(&buf[pos..], &limits) {
                Ok(Some((args, used))) => {
                    pos += used;
                    if !args.is_empty() {
                        cmds.push(args);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    bad = Some(e);
                    break;
                }
            }
        }
        let start = std::time::Instant::now();
        execute(&sh, &mut session, &cmds, &sink, &mut out);
        if !cmds.is_empty() {
            sh.record_latency(start.elapsed());
        }
        drop(cmds);
        if let Some(e) = &bad {
            sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
            resp::error(&mut out, &format!("ERR {e}"));
        }
        if out.len() > sh.settings.max_output {
            return;
        }
        if std::mem::take(&mut session.wrote) && sh.waits_for_durability() {
            if let Err(m) = sh.wait_durable_async().await {
                // The replies cannot be split by command: withhold them all, say why, close.
                sh.metrics.errors.fetch_add(1, Ordering::Relaxed);
                let msg = format!(
                    "-ERR {m} (replies withheld: the writes of this pipeline may or may not be applied)\r\n"
                );
                let _ = write_out(&mut sock, msg.as_bytes(), idle).await;
                return;
            }
        }
        if !out.is_empty() {
            if write_out(&mut sock, &out, idle).await.is_none() {
                return;
            }
            out.clear();
        }
        if bad.is_some() || session.quit {
            return;
        }
        buf.drain(..pos);
        if buf.len() > limits.max_frame {
            // An incomplete command bigger than the largest frame: refuse it.
            sh.metrics.bad_input.fetch_add(1, Ordering::Relaxed);
            let _ = write_out(
                &mut sock,
                b"-ERR Protocol error: command too large\r\n",
                idle,
            )
            .await;
            return;
        }
    }
}

/// Admin HTTP: `GET /metrics` (Prometheus text) and `GET /health`.
pub async fn serve_admin(sh: Arc<Shared>, listener: TcpListener) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            continue;
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut chunk = [0u8; 1024];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => req.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            let line = req.split(|&b| b == b'\r').next().unwrap_or_default();
            let (status, body) = if line.starts_with(b"GET /metrics") {
                ("200 OK", prometheus(&sh))
            } else if line.starts_with(b"GET /health") {
                ("200 OK", "ok\n".to_string())
            } else {
                ("404 Not Found", "not found\n".to_string())
            };
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
        });
    }
}

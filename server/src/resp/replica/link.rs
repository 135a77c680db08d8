//! The link to the primary, on the `accelkv-replica` thread: connect, hand-shake as a
//! Redis replica, take the full synchronization (`+FULLRESYNC <replid> <offset>`, then the
//! RDB file as `$<length>` and its bytes, or `$EOF:<mark>` … `<mark>` when the primary sends
//! it without a file), load it, then read the command stream, apply each command in order
//! and count its bytes into the offset. `REPLCONF ACK <offset>` goes back every second and
//! at each `REPLCONF GETACK`. A failure (the primary gone, a malformed reply) is kept for
//! INFO and retried a second later, continuing from the offset applied when the primary's
//! backlog still holds what follows (`PSYNC <replid> <offset>`, `+CONTINUE`), else with a
//! new full synchronization; REPLICAOF (another
//! primary, or NO ONE) ends the link at once, since reads time out every 100 ms to look.
//! The snapshot is held in memory while it loads: as large as the primary's RDB file.

use super::apply::Applier;
use super::{LinkState, Replication};
use crate::core::shared::Shared;
use crate::resp::session::RespGlobal;
use accelkv_proto::Limits;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The link thread's loop: follows whichever primary REPLICAOF names, until the server
/// stops.
pub fn run(sh: Arc<Shared>, global: Arc<RespGlobal>) {
    let r = global.replication.clone();
    while !r.stopping() {
        let Some((primary, g)) = r.wait_primary(Duration::from_secs(1)) else {
            continue;
        };
        let mut link = Link {
            sh: &sh,
            global: &global,
            r: &r,
            g,
            conn: None,
            buf: Vec::new(),
        };
        if let Err(e) = link.follow(&primary) {
            tracing::warn!("replication from {}:{}: {e}", primary.0, primary.1);
            let mut st = r.lock();
            if r.current(g) {
                st.state = LinkState::Connect;
                st.last_error = Some(e);
            }
            drop(st);
            r.pause(g, Duration::from_secs(1));
        }
    }
}

/// Largest argument and most arguments of a streamed command (Redis's `proto-max-bulk-len`).
fn stream_limits() -> Limits {
    Limits {
        max_bulk: 512 << 20,
        max_array: 1 << 24,
        max_inline: 64 << 10,
        ..Limits::default()
    }
}

/// How the primary answered PSYNC: a full synchronization (its replication id and the
/// snapshot's offset), or the stream continued (its id, the offset it goes on from).
enum Sync {
    Full(String, u64),
    Continue(String, u64),
}

struct Link<'a> {
    sh: &'a Arc<Shared>,
    global: &'a Arc<RespGlobal>,
    r: &'a Replication,
    g: u64,
    conn: Option<TcpStream>,
    /// Bytes read and not yet used.
    buf: Vec<u8>,
}

impl Link<'_> {
    fn set_state(&self, state: LinkState) {
        let mut st = self.r.lock();
        if self.r.current(self.g) {
            st.state = state;
        }
    }

    fn conn(&mut self) -> Result<&mut TcpStream, String> {
        self.conn
            .as_mut()
            .ok_or_else(|| "not connected".to_string())
    }

    fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        accelkv_proto::resp::command(&mut out, args);
        self.conn()?
            .write_all(&out)
            .map_err(|e| format!("writing to the primary: {e}"))
    }

    /// Reads more bytes into `buf`; `Ok(false)` when the read timed out (nothing yet).
    fn fill(&mut self) -> Result<bool, String> {
        if !self.r.current(self.g) {
            return Err("replaced by REPLICAOF".into());
        }
        let mut chunk = [0u8; 64 << 10];
        match self.conn()?.read(&mut chunk) {
            Ok(0) => Err("the primary closed the connection".into()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.r.touched();
                Ok(true)
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(false),
            Err(e) if e.kind() == ErrorKind::Interrupted => Ok(false),
            Err(e) => Err(format!("reading from the primary: {e}")),
        }
    }

    /// One reply line (without its CRLF), waiting up to `limit`; newlines the primary sends
    /// to keep the link alive while it prepares the snapshot are skipped.
    fn line(&mut self, limit: Duration) -> Result<String, String> {
        let t0 = Instant::now();
        loop {
            let lead = self.buf.iter().take_while(|&&b| b == b'\n').count();
            self.buf.drain(..lead);
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let l = String::from_utf8_lossy(&self.buf[..i]).to_string();
                self.buf.drain(..i + 2);
                return Ok(l);
            }
            if self.buf.len() > 64 << 10 {
                return Err("a reply line longer than 64 KiB".into());
            }
            if t0.elapsed() > limit {
                return Err("the primary did not answer in time".into());
            }
            self.fill()?;
        }
    }

    /// Sends `args` and returns the reply line.
    fn ask(&mut self, args: &[&[u8]]) -> Result<String, String> {
        self.send(args)?;
        self.line(Duration::from_secs(10))
    }

    fn connect(&mut self, (host, port): &(String, u16)) -> Result<(), String> {
        self.set_state(LinkState::Connect);
        let addr = (host.as_str(), *port)
            .to_socket_addrs()
            .map_err(|e| format!("resolving {host}: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} has no address"))?;
        let conn = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connecting to {host}:{port}: {e}"))?;
        let _ = conn.set_nodelay(true);
        conn.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        self.conn = Some(conn);
        Ok(())
    }

    /// The handshake. After a link to this primary that synchronized (`resume`: its
    /// replication id and the offset applied), it asks to continue from there
    /// (`PSYNC <replid> <offset + 1>`); the primary answers `+CONTINUE` when its backlog
    /// still holds what follows, else a full synchronization.
    fn handshake(&mut self, resume: Option<(String, u64)>) -> Result<Sync, String> {
        self.set_state(LinkState::Handshake);
        if let Some((user, pass)) = self.sh.settings().masterauth.clone() {
            let mut args: Vec<&[u8]> = vec![b"AUTH"];
            if let Some(u) = &user {
                args.push(u.as_bytes());
            }
            args.push(pass.as_bytes());
            let ok = self.ask(&args)?;
            if ok.starts_with('-') {
                return Err(format!("AUTH answered {ok}"));
            }
        }
        let pong = self.ask(&[b"PING"])?;
        if pong.starts_with("-NOAUTH") {
            return Err("the primary needs a password (--masterauth)".into());
        }
        if pong.starts_with('-') {
            return Err(format!("PING answered {pong}"));
        }
        let port = self.sh.settings().resp_port.to_string();
        self.ask(&[b"REPLCONF", b"listening-port", port.as_bytes()])?;
        self.ask(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"])?;
        let (id, from) = match &resume {
            Some((id, off)) => (id.clone(), (off + 1).to_string()),
            None => ("?".to_string(), "-1".to_string()),
        };
        // A primary that syncs without a file answers once its transfer starts, after
        // `repl-diskless-sync-delay` (5 s by default).
        self.send(&[b"PSYNC", id.as_bytes(), from.as_bytes()])?;
        let full = self.line(Duration::from_secs(300))?;
        let mut words = full.split(' ');
        match (words.next(), words.next(), words.next()) {
            (Some("+FULLRESYNC"), Some(id), Some(off)) => {
                let off = off.parse().map_err(|_| format!("PSYNC answered {full}"))?;
                Ok(Sync::Full(id.to_string(), off))
            }
            // `+CONTINUE [<new replid>]`: the stream goes on from the offset asked.
            (Some("+CONTINUE"), new_id, _) => match resume {
                Some((old, off)) => Ok(Sync::Continue(new_id.unwrap_or(&old).to_string(), off)),
                None => Err(format!("PSYNC answered {full}")),
            },
            _ => Err(format!("PSYNC answered {full}")),
        }
    }

    /// The snapshot's bytes: `$<length>` then that many, or `$EOF:<40-byte mark>` then bytes
    /// up to the mark.
    fn snapshot(&mut self) -> Result<Vec<u8>, String> {
        self.set_state(LinkState::Sync);
        let head = self.line(Duration::from_secs(3600))?;
        let Some(rest) = head.strip_prefix('$') else {
            return Err(format!("expected the snapshot, got {head}"));
        };
        if let Some(mark) = rest.strip_prefix("EOF:") {
            let mark = mark.as_bytes().to_vec();
            if mark.len() != 40 {
                return Err(format!("a snapshot end mark of {} bytes", mark.len()));
            }
            while !self.buf.ends_with(&mark) {
                self.fill()?;
            }
            // Nothing follows the mark until the snapshot is acknowledged.
            let mut rdb = std::mem::take(&mut self.buf);
            rdb.truncate(rdb.len() - mark.len());
            return Ok(rdb);
        }
        let len: usize = rest
            .parse()
            .map_err(|_| format!("a snapshot length of {rest}"))?;
        while self.buf.len() < len {
            self.fill()?;
        }
        let tail = self.buf.split_off(len);
        Ok(std::mem::replace(&mut self.buf, tail))
    }

    /// Loads `bytes` into an emptied store.
    fn load(&mut self, bytes: &[u8], apply: &mut Applier) -> Result<(), String> {
        let _held = self.r.applying();
        if !self.r.current(self.g) {
            return Err("replaced by REPLICAOF".into());
        }
        apply.flush_all();
        // REPLICAOF waits for the load to stop: it stops at the next key.
        let (r, g) = (self.r, self.g);
        apply
            .load(bytes, || r.current(g))
            .map_err(|e| format!("loading the primary's snapshot: {e}"))
    }

    fn follow(&mut self, primary: &(String, u16)) -> Result<(), String> {
        self.connect(primary)?;
        let resume = {
            let st = self.r.lock();
            (st.syncs > 0 && !st.replid.is_empty()).then(|| (st.replid.clone(), self.r.offset()))
        };
        let (replid, offset) = match self.handshake(resume)? {
            Sync::Continue(replid, offset) => {
                tracing::info!(
                    "replicating {}:{}: continuing from offset {offset}",
                    primary.0,
                    primary.1
                );
                let mut st = self.r.lock();
                if !self.r.current(self.g) {
                    return Ok(());
                }
                st.replid = replid;
                st.partial += 1;
                st.state = LinkState::Connected;
                drop(st);
                let mut apply = Applier::new(self.sh, self.global);
                return self.stream(&mut apply, offset);
            }
            Sync::Full(replid, offset) => (replid, offset),
        };
        let bytes = self.snapshot()?;
        let mut apply = Applier::new(self.sh, self.global);
        let t0 = Instant::now();
        self.load(&bytes, &mut apply)?;
        drop(bytes);
        tracing::info!(
            "replicating {}:{}: snapshot of {} keys loaded in {:.3} s ({} skipped)",
            primary.0,
            primary.1,
            apply.applied.keys,
            t0.elapsed().as_secs_f64(),
            apply.applied.skipped
        );
        {
            let mut st = self.r.lock();
            if !self.r.current(self.g) {
                return Ok(());
            }
            st.replid = replid;
            st.syncs += 1;
            st.loaded = apply.applied.keys;
            st.skipped = apply.applied.skipped;
            st.skipped_types = apply.applied.skipped_types.clone();
            st.last_error = apply.applied.first_error.clone();
            st.state = LinkState::Connected;
        }
        self.r.set_offset(offset);
        self.stream(&mut apply, offset)
    }

    /// Applies the command stream from `offset` on, until REPLICAOF or a failure.
    fn stream(&mut self, apply: &mut Applier, mut offset: u64) -> Result<(), String> {
        let limits = stream_limits();
        let mut acked = Instant::now();
        self.ack(offset)?;
        loop {
            let held = self.r.applying();
            if !self.r.current(self.g) {
                return Ok(());
            }
            let mut at = 0;
            while let Some((args, used)) =
                accelkv_proto::resp::parse_command(&self.buf[at..], &limits)
                    .map_err(|e| format!("a malformed command from the primary: {e:?}"))?
            {
                let args: Vec<Vec<u8>> = args.iter().map(|a| a.to_vec()).collect();
                at += used;
                let getack = args.len() >= 2
                    && args[0].eq_ignore_ascii_case(b"REPLCONF")
                    && args[1].eq_ignore_ascii_case(b"GETACK");
                if getack {
                    // The offset before this command, as a Redis replica answers.
                    apply.settle();
                    self.ack(self.r.offset())?;
                } else if !args.is_empty() {
                    apply.command(args);
                }
                offset += used as u64;
                // Inside a transaction of the stream nothing is applied until EXEC: the
                // offset a new link continues from stays before its MULTI.
                if !apply.in_tx() {
                    self.r.set_offset(offset);
                }
            }
            apply.settle();
            drop(held);
            self.buf.drain(..at);
            if apply.applied.first_error.is_some() {
                let mut st = self.r.lock();
                if st.last_error.is_none() {
                    st.last_error = apply.applied.first_error.clone();
                }
            }
            if acked.elapsed() >= Duration::from_secs(1) {
                self.ack(self.r.offset())?;
                acked = Instant::now();
            }
            if !self.r.current(self.g) {
                return Ok(());
            }
            self.fill()?;
        }
    }

    fn ack(&mut self, offset: u64) -> Result<(), String> {
        let o = offset.to_string();
        self.send(&[b"REPLCONF", b"ACK", o.as_bytes()])
    }
}

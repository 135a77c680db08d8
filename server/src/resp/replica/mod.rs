//! Replication from a running Redis (`REPLICAOF host port`, docs/REPLICATION.md): accelkv
//! connects to the primary as a Redis replica does (`PING`, `REPLCONF listening-port`,
//! `REPLCONF capa eof capa psync2`, `PSYNC ? -1`), loads the RDB snapshot the primary
//! sends (`link.rs`, `load.rs`), then applies the primary's command stream in order and
//! acknowledges the offset it reached (`REPLCONF ACK`) every second and whenever the
//! primary asks (`REPLCONF GETACK`), so the primary's `WAIT` and `INFO replication` see
//! it. While it replicates, clients' writes are refused (`-READONLY`, Redis's
//! `replica-read-only yes`); `REPLICAOF NO ONE` stops the link and keeps the data: the
//! server is a primary again. One thread (`accelkv-replica`), started with the server,
//! runs the link; it waits, doing nothing, while there is no primary to follow.

pub mod apply;
pub mod link;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Where the link stands, as INFO's `master_link_status` and ROLE's state name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkState {
    /// No primary to follow.
    #[default]
    None,
    /// Connecting to the primary (or waiting to retry).
    Connect,
    /// Handshake sent, waiting for the snapshot.
    Handshake,
    /// Receiving and loading the snapshot.
    Sync,
    /// Applying the command stream.
    Connected,
}

impl LinkState {
    /// ROLE's name of the state.
    pub fn role_name(self) -> &'static str {
        match self {
            LinkState::None | LinkState::Connect => "connect",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// What the link has done, for INFO and ROLE.
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// The primary followed (`None`: this server is a primary).
    pub primary: Option<(String, u16)>,
    pub state: LinkState,
    /// The primary's replication id, from its `+FULLRESYNC`.
    pub replid: String,
    /// Keys the last snapshot loaded, and keys it skipped (types not served).
    pub loaded: u64,
    pub skipped: u64,
    /// The RDB types of the skipped keys (each once).
    pub skipped_types: Vec<u8>,
    /// Why the last attempt failed, if it did.
    pub last_error: Option<String>,
    /// Full synchronizations done since the server started.
    pub syncs: u64,
    /// Links that continued the stream after a break (partial resynchronizations).
    pub partial: u64,
}

/// The replication state every connection sees (in `RespGlobal`).
#[derive(Default)]
pub struct Replication {
    status: Mutex<Status>,
    /// Wakes the link thread when the primary changes or the server stops.
    changed: Condvar,
    /// Bumped at every REPLICAOF: a link of an older generation stops.
    generation: AtomicU64,
    /// Clients' writes are refused (this server follows a primary).
    read_only: AtomicBool,
    /// The stream offset applied (the primary's numbering).
    offset: AtomicU64,
    /// Unix milliseconds of the last bytes read from the primary.
    last_io_ms: AtomicU64,
    stop: AtomicBool,
    /// Held by the link while it applies what it read: REPLICAOF takes it once the
    /// generation changed, so no command of the old primary is applied after it answers.
    applying: Mutex<()>,
}

impl Replication {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.lock().clone()
    }

    /// Whether clients' writes are refused.
    #[inline]
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// The stream offset applied.
    pub fn offset(&self) -> u64 {
        self.offset.load(Ordering::Relaxed)
    }

    pub(crate) fn set_offset(&self, v: u64) {
        self.offset.store(v, Ordering::Relaxed)
    }

    pub(crate) fn touched(&self) {
        self.last_io_ms.store(now_ms(), Ordering::Relaxed)
    }

    /// Seconds since the primary last sent anything (`-1`: never).
    pub fn last_io_secs(&self) -> i64 {
        match self.last_io_ms.load(Ordering::Relaxed) {
            0 => -1,
            t => (now_ms().saturating_sub(t) / 1000) as i64,
        }
    }

    /// Follows `primary` from now on (`None`: stops following and keeps the data).
    pub fn follow(&self, primary: Option<(String, u16)>) {
        let mut st = self.lock();
        self.read_only.store(primary.is_some(), Ordering::Relaxed);
        if primary.is_none() {
            // A promoted replica continues the offset, as Redis's does.
            st.state = LinkState::None;
        } else {
            st.state = LinkState::Connect;
            st.last_error = None;
            st.partial = 0;
        }
        // A new primary (or none) starts over: the next link synchronizes in full.
        st.replid.clear();
        st.syncs = 0;
        st.primary = primary;
        self.generation.fetch_add(1, Ordering::SeqCst);
        drop(st);
        self.changed.notify_all();
        // A batch the link was applying finishes; the next sees the new generation.
        drop(self.applying());
    }

    /// The lock the link holds while applying.
    pub(crate) fn applying(&self) -> MutexGuard<'_, ()> {
        self.applying.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether a link of generation `g` is still the one wanted.
    pub(crate) fn current(&self, g: u64) -> bool {
        !self.stopping() && self.generation() == g
    }

    /// Stops the link thread (the server is shutting down).
    pub fn shutdown(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_all();
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Waits until there is a primary to follow (or up to `d`); returns it and the
    /// generation it was set at.
    pub(crate) fn wait_primary(&self, d: std::time::Duration) -> Option<((String, u16), u64)> {
        let st = self.lock();
        let (st, _) = self
            .changed
            .wait_timeout_while(st, d, |s| s.primary.is_none() && !self.stopping())
            .unwrap_or_else(|e| e.into_inner());
        let g = self.generation();
        st.primary.clone().map(|p| (p, g))
    }

    /// Waits up to `d` or until REPLICAOF changes the primary or the server stops.
    pub(crate) fn pause(&self, g: u64, d: std::time::Duration) {
        let st = self.lock();
        let _ = self
            .changed
            .wait_timeout_while(st, d, |_| self.current(g))
            .unwrap_or_else(|e| e.into_inner());
    }

    /// INFO's replication section.
    pub fn info(&self) -> String {
        let st = self.status();
        let offset = self.offset();
        let Some((host, port)) = &st.primary else {
            return format!(
                "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n",
                replid_or_zero(&st.replid)
            );
        };
        let up = st.state == LinkState::Connected;
        let mut t = format!(
            "# Replication\r\nrole:slave\r\nmaster_host:{host}\r\nmaster_port:{port}\r\nmaster_link_status:{}\r\nmaster_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{offset}\r\nslave_repl_offset:{offset}\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n",
            if up { "up" } else { "down" },
            if up { self.last_io_secs() } else { -1 },
            u8::from(st.state == LinkState::Sync),
            replid_or_zero(&st.replid),
        );
        t.push_str(&format!(
            "accelkv_sync_full:{}\r\naccelkv_sync_partial:{}\r\naccelkv_sync_keys_loaded:{}\r\naccelkv_sync_keys_skipped:{}\r\n",
            st.syncs, st.partial, st.loaded, st.skipped
        ));
        if !st.skipped_types.is_empty() {
            let types: Vec<String> = st.skipped_types.iter().map(u8::to_string).collect();
            t.push_str(&format!(
                "accelkv_sync_skipped_rdb_types:{}\r\n",
                types.join(",")
            ));
        }
        if let Some(e) = &st.last_error {
            t.push_str(&format!("accelkv_link_last_error:{}\r\n", one_line(e)));
        }
        t
    }
}

fn replid_or_zero(id: &str) -> &str {
    if id.is_empty() {
        "0000000000000000000000000000000000000000"
    } else {
        id
    }
}

/// `e` on one line (INFO's fields are lines).
fn one_line(e: &str) -> String {
    e.replace(['\r', '\n'], " ")
}

/// Milliseconds since the epoch (stream_groups.rs has its twin, which this module may not
/// import: the session imports this one, layers.rs's cycle check).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

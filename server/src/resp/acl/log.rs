//! ACL LOG: the commands, keys and channels refused by a user's permissions, and the
//! failed logins, newest first, as Redis 7.2 keeps them. A refusal equal to a recent one
//! (same reason, context, object and user, within 60 seconds) is counted on that entry
//! rather than added; at most `acllog-max-len` entries are kept (128 by default).

use accelkv_proto::resp::{self, Version};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Why an entry was logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refused command ran: `toplevel`, `multi` (EXEC) or `lua` (a script).
pub type Context = &'static str;

struct Entry {
    count: u64,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    user: Vec<u8>,
    client_info: String,
    id: u64,
    created_ms: u64,
    updated_ms: u64,
}

/// The log.
pub struct AclLog {
    entries: Mutex<(VecDeque<Entry>, u64)>,
    max_len: AtomicUsize,
    /// Refusals since start, per reason (INFO stats' `acl_access_denied_*`).
    denied: [AtomicU64; 4],
}

impl Default for AclLog {
    fn default() -> Self {
        AclLog {
            entries: Mutex::new((VecDeque::new(), 0)),
            max_len: AtomicUsize::new(128),
            denied: Default::default(),
        }
    }
}

/// How close in time a refusal must be to an equal entry to be counted on it.
const GROUP_MS: u64 = 60_000;

impl AclLog {
    /// Logs one refusal.
    pub fn add(
        &self,
        reason: Reason,
        context: Context,
        object: &[u8],
        user: &[u8],
        client_info: String,
    ) {
        self.denied[reason as usize].fetch_add(1, Ordering::Relaxed);
        let now = accelkv_tree::now_ms();
        let mut g = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let (entries, next) = &mut *g;
        let same = entries.iter().position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.user == user
                && now.saturating_sub(e.updated_ms) < GROUP_MS
        });
        if let Some(i) = same {
            let mut e = entries.remove(i).expect("found above");
            e.count += 1;
            e.updated_ms = now;
            e.client_info = client_info;
            entries.push_front(e);
            return;
        }
        entries.push_front(Entry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            user: user.to_vec(),
            client_info,
            id: *next,
            created_ms: now,
            updated_ms: now,
        });
        *next += 1;
        entries.truncate(self.max_len.load(Ordering::Relaxed));
    }

    /// INFO stats' lines: refusals since start, per reason.
    pub fn stats_text(&self) -> String {
        let n = |r: Reason| self.denied[r as usize].load(Ordering::Relaxed);
        format!(
            "acl_access_denied_auth:{}\r\nacl_access_denied_cmd:{}\r\nacl_access_denied_key:{}\r\nacl_access_denied_channel:{}\r\n",
            n(Reason::Auth),
            n(Reason::Command),
            n(Reason::Key),
            n(Reason::Channel)
        )
    }

    pub fn reset(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .clear();
    }

    pub fn max_len(&self) -> usize {
        self.max_len.load(Ordering::Relaxed)
    }

    /// `acllog-max-len`: older entries past it go at once.
    pub fn set_max_len(&self, n: usize) {
        self.max_len.store(n, Ordering::Relaxed);
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .truncate(n);
    }

    /// ACL LOG's reply: the newest `count` entries.
    pub fn reply(&self, count: usize, out: &mut Vec<u8>, v: Version) {
        let now = accelkv_tree::now_ms();
        let g = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let n = count.min(g.0.len());
        resp::array(out, n);
        for e in g.0.iter().take(n) {
            resp::map(out, 10, v);
            resp::bulk(out, Some(b"count"));
            resp::integer(out, e.count as i64);
            for (k, val) in [
                ("reason", e.reason.name().as_bytes()),
                ("context", e.context.as_bytes()),
                ("object", &e.object),
                ("username", &e.user),
            ] {
                resp::bulk(out, Some(k.as_bytes()));
                resp::bulk(out, Some(val));
            }
            resp::bulk(out, Some(b"age-seconds"));
            let age = now.saturating_sub(e.created_ms) as f64 / 1000.0;
            match v {
                Version::Resp3 => out.extend_from_slice(format!(",{age}\r\n").as_bytes()),
                Version::Resp2 => resp::bulk(out, Some(age.to_string().as_bytes())),
            }
            resp::bulk(out, Some(b"client-info"));
            resp::bulk(out, Some(e.client_info.as_bytes()));
            for (k, n) in [
                ("entry-id", e.id),
                ("timestamp-created", e.created_ms),
                ("timestamp-last-updated", e.updated_ms),
            ] {
                resp::bulk(out, Some(k.as_bytes()));
                resp::integer(out, n as i64);
            }
        }
    }
}

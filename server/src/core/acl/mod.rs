//! Users and their permissions (Redis 7's ACL): the registry every protocol logs in
//! through (RESP's AUTH and HELLO as any user; the binary protocol's token and memcached's
//! `auth` as the `default` user), and the rules the RESP gate checks each command against.
//!
//! The registry hands out users as `Arc<User>` snapshots; a change (ACL SETUSER, DELUSER,
//! LOAD) replaces a user whole and bumps an epoch. A connection keeps its user's snapshot
//! and the epoch it was taken at, and takes it again when the epoch moved: one relaxed
//! load per command, so a change reaches every connection at its next command, as in
//! Redis. What names commands and categories (the RESP table) is handed in as
//! [`Commands`]; the core knows no protocol.

pub mod selector;
pub mod user;

pub use selector::{Denied, Request, Selector, READ, WRITE};
pub use user::User;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// The user every connection starts as.
pub const DEFAULT_USER: &[u8] = b"default";

/// What names commands for the rules: ids are dense, top-level commands and subcommands
/// alike (the RESP adapter's statistics indexes).
pub trait Commands {
    /// How many ids there are.
    fn count(&self) -> usize;
    /// A top-level command's id, by its lower-case name.
    fn command(&self, name: &str) -> Option<usize>;
    /// The ids of a container's subcommands (empty for other commands).
    fn subcommands(&self, id: usize) -> std::ops::Range<usize>;
    /// A container's subcommand, by its lower-case name.
    fn subcommand(&self, id: usize, sub: &str) -> Option<usize>;
    /// A category's bit, by its lower-case name (without `@`).
    fn category(&self, name: &str) -> Option<u32>;
    /// The categories of command `id`.
    fn categories(&self, id: usize) -> u32;
}

/// Why a rule was refused; the text is Redis's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Unknown,
    Syntax,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    UnmatchedParenthesis,
    FirstArgOfSubcommand,
}

impl std::fmt::Display for RuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::Syntax => "Syntax error",
            RuleError::AfterAllKeys => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::AfterAllChannels => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::UnmatchedParenthesis => "Unmatched parenthesis in acl selector",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        })
    }
}

/// The users.
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    epoch: AtomicU64,
    /// The default user is on and needs no password: connections start logged in.
    default_open: AtomicBool,
    /// `acl-pubsub-default allchannels`: new users may use every channel.
    pubsub_all: AtomicBool,
    /// `requirepass` as last set (`--password`, CONFIG SET): CONFIG GET answers it.
    requirepass: std::sync::Mutex<String>,
}

impl Acl {
    /// The registry with only the default user: every permission, and `password` (none:
    /// `nopass`).
    pub fn new(password: Option<&str>) -> Acl {
        let mut u = User::new(DEFAULT_USER, true);
        u.enabled = true;
        u.root = Selector::everything();
        match password {
            Some(p) => u.passwords.push(sha2_digest(p.as_bytes())),
            None => u.nopass = true,
        }
        let acl = Acl {
            users: RwLock::new(BTreeMap::new()),
            epoch: AtomicU64::new(1),
            default_open: AtomicBool::new(false),
            pubsub_all: AtomicBool::new(false),
            requirepass: std::sync::Mutex::new(password.unwrap_or_default().to_string()),
        };
        acl.replace_all(vec![u.finish()]);
        acl
    }

    /// Bumped at every change: a connection holding an older epoch takes its user again.
    #[inline(always)]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Whether a connection must log in before its commands run.
    pub fn needs_auth(&self) -> bool {
        !self.default_open.load(Ordering::Relaxed)
    }

    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.read().get(name).cloned()
    }

    /// The default user (it always exists).
    pub fn default_user(&self) -> Arc<User> {
        self.get(DEFAULT_USER)
            .expect("the default user is never removed")
    }

    /// Every user, in name order.
    pub fn all(&self) -> Vec<Arc<User>> {
        self.read().values().cloned().collect()
    }

    /// Adds or replaces a user.
    pub fn put(&self, u: User) {
        let mut m = self.users.write().unwrap_or_else(|e| e.into_inner());
        m.insert(u.name.clone(), Arc::new(u));
        self.changed(&m);
    }

    /// Removes users (never the default one): how many there were.
    pub fn delete(&self, names: &[&[u8]]) -> usize {
        let mut m = self.users.write().unwrap_or_else(|e| e.into_inner());
        let n = names
            .iter()
            .filter(|n| **n != DEFAULT_USER && m.remove(**n).is_some())
            .count();
        self.changed(&m);
        n
    }

    /// Replaces every user (ACL LOAD, an ACL file at start); a default user is added when
    /// `users` has none.
    pub fn replace_all(&self, users: Vec<User>) {
        let mut m = self.users.write().unwrap_or_else(|e| e.into_inner());
        let old_default = m.get(DEFAULT_USER).cloned();
        m.clear();
        for u in users {
            m.insert(u.name.clone(), Arc::new(u));
        }
        if !m.contains_key(DEFAULT_USER) {
            let mut u = User::new(DEFAULT_USER, true);
            u.enabled = true;
            u.nopass = true;
            u.root = Selector::everything();
            let u = old_default.unwrap_or_else(|| Arc::new(u.finish()));
            m.insert(DEFAULT_USER.to_vec(), u);
        }
        self.changed(&m);
    }

    fn changed(&self, m: &BTreeMap<Vec<u8>, Arc<User>>) {
        let open = m.get(DEFAULT_USER).is_some_and(|u| u.enabled && u.nopass);
        self.default_open.store(open, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    /// The user `name` logs in as with `password`: it exists, is on, and the password is
    /// one of its own (or it has `nopass`).
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        self.get(name).filter(|u| u.password_ok(password))
    }

    /// `acl-pubsub-default`: whether new users may use every channel.
    pub fn pubsub_all(&self) -> bool {
        self.pubsub_all.load(Ordering::Relaxed)
    }

    pub fn set_pubsub_all(&self, all: bool) {
        self.pubsub_all.store(all, Ordering::Relaxed);
    }

    pub fn requirepass(&self) -> String {
        self.requirepass
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_requirepass(&self, p: &str) {
        *self.requirepass.lock().unwrap_or_else(|e| e.into_inner()) = p.to_string();
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<Vec<u8>, Arc<User>>> {
        self.users.read().unwrap_or_else(|e| e.into_inner())
    }
}

fn sha2_digest(b: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(b).into()
}

/// ACL SETUSER's arguments with each `(...)` selector joined into one, as Redis joins
/// them (`"(~x" "+get)"` is the selector `(~x +get)`); the argument that opened it when a
/// parenthesis is not closed.
pub fn merge_selectors(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<Vec<u8>> = None;
    let mut start = Vec::new();
    for a in args {
        match open.as_mut() {
            Some(sel) => {
                sel.push(b' ');
                sel.extend_from_slice(a);
                if a.ends_with(b")") {
                    out.push(open.take().unwrap_or_default());
                }
            }
            None if a.starts_with(b"(") && !a.ends_with(b")") => {
                start = a.to_vec();
                open = Some(a.to_vec())
            }
            None => out.push(a.to_vec()),
        }
    }
    match open {
        Some(_) => Err(start),
        None => Ok(out),
    }
}

/// `base` with `rules` applied in order (ACL SETUSER, a line of the ACL file): the new
/// user, or the first rule refused and why (then nothing changes).
pub fn edit(
    mut base: User,
    rules: &[Vec<u8>],
    cmds: &dyn Commands,
    pubsub_all: bool,
) -> Result<User, (Vec<u8>, RuleError)> {
    for r in rules {
        base.apply(r, cmds, pubsub_all)
            .map_err(|e| (r.clone(), e))?;
    }
    Ok(base.finish())
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

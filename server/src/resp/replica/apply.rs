//! Applying what a primary sends (and what `--import-rdb` reads) through the one gate, as
//! a session of the server's own: each key of an RDB snapshot as `RESTORE key deadline
//! payload REPLACE ABSTTL` (RESTORE's checks and its packing of collections, `dump.rs`), a
//! library of functions as `FUNCTION RESTORE … REPLACE`, a database as `SELECT`, and each
//! command of the stream as the primary sent it. A transaction of the stream (`MULTI` …
//! `EXEC`) runs its commands in order once `EXEC` arrives; a reader of this server may see
//! it half applied, which Redis's replicas never show. A command that fails here is
//! counted and its error kept for INFO, and the stream goes on, as a Redis replica's does.

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::call::flag::WRITE;
use crate::resp::call::From;
use crate::resp::dispatch::run;
use crate::resp::session::{RespGlobal, Session};
use crate::resp::table::find;
use accelkv_proto::rdb::{self, Item, Value};
use std::sync::Arc;

/// What applying a snapshot or a stream has done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Applied {
    pub keys: u64,
    pub skipped: u64,
    pub skipped_types: Vec<u8>,
    pub functions: u64,
    /// Commands or keys that failed, and the first error.
    pub failed: u64,
    pub first_error: Option<String>,
}

/// A session of the server's own that applies commands in order.
pub struct Applier {
    sh: Arc<Shared>,
    s: Session,
    reads: Reads,
    out: Vec<u8>,
    /// A transaction of the stream being collected (after `MULTI`).
    tx: Option<Vec<Vec<Vec<u8>>>>,
    /// The newest write version applied and perhaps not yet visible.
    unreleased: u64,
    pub applied: Applied,
}

impl Applier {
    pub fn new(sh: &Arc<Shared>, global: &Arc<RespGlobal>) -> Applier {
        let mut s = Session {
            authed: true,
            ..Session::new(0, None, global.clone())
        };
        s.refresh_db(sh);
        Applier {
            reads: sh.loop_reads(|| {}),
            sh: sh.clone(),
            s,
            out: Vec::new(),
            tx: None,
            unreleased: 0,
            applied: Applied::default(),
        }
    }

    /// Runs `args` (name first) and returns its reply. Writes follow each other in order
    /// without waiting (the station orders writes to a key); a command that is not a
    /// write first waits until the writes before it are visible, as a client's does.
    fn run(&mut self, args: &[&[u8]]) -> &[u8] {
        self.out.clear();
        let spec = args.first().and_then(|n| find(n));
        if spec.is_none_or(|sp| !sp.has(WRITE)) {
            self.settle();
        }
        run(
            &self.sh,
            &mut self.s,
            spec,
            args,
            From::Inner,
            &mut self.reads,
            &mut self.out,
        );
        let v = std::mem::take(&mut self.s.unreleased);
        self.unreleased = self.unreleased.max(v);
        self.s.wrote = false;
        &self.out
    }

    /// Waits until every write applied so far is visible to readers (before a read, and
    /// before an offset is acknowledged).
    pub fn settle(&mut self) {
        let v = std::mem::take(&mut self.unreleased);
        if v > 0 {
            self.sh.view().wait_visible(v);
        }
    }

    /// Runs `args`, counting a failure.
    fn run_counted(&mut self, args: &[&[u8]]) -> bool {
        let reply = self.run(args);
        if reply.first() != Some(&b'-') {
            return true;
        }
        let why = String::from_utf8_lossy(&reply[1..]).trim_end().to_string();
        let name = String::from_utf8_lossy(args.first().copied().unwrap_or_default()).to_string();
        self.applied.failed += 1;
        self.applied
            .first_error
            .get_or_insert_with(|| format!("{name}: {why}"));
        false
    }

    /// Applies every item of the RDB file `bytes`, then waits until its writes are
    /// visible; stops at the next item once `go` answers false.
    pub fn load(&mut self, bytes: &[u8], go: impl Fn() -> bool) -> Result<(), rdb::LoadError> {
        rdb::load_file(bytes, |item| {
            if !go() {
                return Err("replaced by REPLICAOF".into());
            }
            self.item(item);
            Ok(())
        })?;
        self.settle();
        Ok(())
    }

    /// Empties every database and the functions (a full synchronization replaces them).
    pub fn flush_all(&mut self) {
        self.run(&[b"FLUSHALL"]);
        self.run(&[b"FUNCTION", b"FLUSH"]);
        self.run(&[b"SELECT", b"0"]);
    }

    /// Applies one item of an RDB file.
    pub fn item(&mut self, item: Item) {
        match item {
            Item::Aux(..) => {}
            Item::Select(db) => {
                let db = db.to_string();
                self.run_counted(&[b"SELECT", db.as_bytes()]);
            }
            Item::Entry {
                key,
                value,
                deadline_ms,
            } => self.entry(&key, &value, deadline_ms),
            Item::Skipped { rdb_type, .. } => {
                self.applied.skipped += 1;
                if !self.applied.skipped_types.contains(&rdb_type) {
                    self.applied.skipped_types.push(rdb_type);
                }
            }
            Item::Function(code) => {
                let payload = rdb::dump_functions(&[&code]);
                if self.run_counted(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]) {
                    self.applied.functions += 1;
                }
            }
        }
    }

    fn entry(&mut self, key: &[u8], value: &Value, deadline_ms: Option<u64>) {
        // A collection larger than one atomic write goes in pieces: RESTORE of the first,
        // then its type's own command for the rest (a reader may see it part loaded).
        if let Some((first, rest)) = split(value) {
            self.entry(key, &first, deadline_ms);
            for cmd in rest {
                let mut args: Vec<&[u8]> = vec![cmd.0, key];
                args.extend(cmd.1.iter().map(Vec::as_slice));
                self.run_counted(&args);
            }
            return;
        }
        let payload = rdb::dump(value);
        let ttl = deadline_ms.unwrap_or(0).to_string();
        if self.run_counted(&[
            b"RESTORE",
            key,
            ttl.as_bytes(),
            &payload,
            b"REPLACE",
            b"ABSTTL",
        ]) {
            self.applied.keys += 1;
        }
    }

    /// Whether a transaction of the stream is being collected (MULTI seen, EXEC not yet).
    pub fn in_tx(&self) -> bool {
        self.tx.is_some()
    }

    /// Applies one command of the primary's stream.
    pub fn command(&mut self, args: Vec<Vec<u8>>) {
        let Some(name) = args.first() else { return };
        if name.eq_ignore_ascii_case(b"MULTI") {
            self.tx = Some(Vec::new());
            return;
        }
        if name.eq_ignore_ascii_case(b"EXEC") {
            for c in self.tx.take().unwrap_or_default() {
                self.one(&c);
            }
            return;
        }
        if name.eq_ignore_ascii_case(b"DISCARD") {
            self.tx = None;
            return;
        }
        match &mut self.tx {
            Some(q) => q.push(args),
            None => self.one(&args),
        }
    }

    fn one(&mut self, args: &[Vec<u8>]) {
        let name = &args[0];
        // The primary's own traffic on the link, not writes.
        if name.eq_ignore_ascii_case(b"PING") || name.eq_ignore_ascii_case(b"REPLCONF") {
            return;
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        self.run_counted(&refs);
    }
}

/// Elements (or pairs) of a collection one RESTORE or one command carries.
const PIECE: usize = 10_000;

/// A piece of a large collection: its command's name and arguments after the key.
type Piece = (&'static [u8], Vec<Vec<u8>>);

/// `value`'s first [`PIECE`] elements as a value of its type, and the commands that add
/// the rest; `None` when it fits in one.
fn split(value: &Value) -> Option<(Value, Vec<Piece>)> {
    fn pieces<T: Clone>(
        all: &[T],
        name: &'static [u8],
        args: impl Fn(&T) -> Vec<Vec<u8>>,
    ) -> Option<(Vec<T>, Vec<Piece>)> {
        if all.len() <= PIECE {
            return None;
        }
        let rest = all[PIECE..]
            .chunks(PIECE)
            .map(|c| (name, c.iter().flat_map(&args).collect()))
            .collect();
        Some((all[..PIECE].to_vec(), rest))
    }
    Some(match value {
        Value::Hash(p) => {
            let (first, rest) = pieces(p, b"HSET", |(f, v)| vec![f.clone(), v.clone()])?;
            (Value::Hash(first), rest)
        }
        Value::Set(m) => {
            let (first, rest) = pieces(m, b"SADD", |m| vec![m.clone()])?;
            (Value::Set(first), rest)
        }
        Value::List(e) => {
            let (first, rest) = pieces(e, b"RPUSH", |e| vec![e.clone()])?;
            (Value::List(first), rest)
        }
        Value::ZSet(z) => {
            let (first, rest) = pieces(z, b"ZADD", |(m, sc)| {
                vec![
                    crate::resp::commands::types::zset::fmt_score(*sc).into_bytes(),
                    m.clone(),
                ]
            })?;
            (Value::ZSet(first), rest)
        }
        Value::String(_) | Value::Stream(_) => return None,
    })
}

/// Loads the RDB file at `path` into the store (`--import-rdb`), adding to or replacing
/// what it holds; returns what was applied.
pub fn import_file(
    sh: &Arc<Shared>,
    global: &Arc<RespGlobal>,
    path: &std::path::Path,
) -> Result<Applied, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut apply = Applier::new(sh, global);
    apply.load(&bytes, || true).map_err(|e| e.to_string())?;
    apply.run(&[b"SELECT", b"0"]);
    Ok(apply.applied)
}

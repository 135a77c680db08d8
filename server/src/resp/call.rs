//! One RESP command being run, as its handler sees it ([`Call`]), and what the command table
//! says about a command ([`Spec`]): name, arity, flags, key positions, summary and handler.
//! The gate (`gate.rs`) checks a command against its `Spec` once, then the dispatcher
//! (`dispatch.rs`) calls the handler; nothing after that checks arity or flags again.

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::session::Session;

/// What a handler gets: the server, the connection, the command (name first), the loop's
/// read door and the connection's output.
pub struct Call<'c, 'a> {
    pub sh: &'c Shared,
    pub s: &'c mut Session,
    pub args: &'c [&'a [u8]],
    pub reads: &'c mut Reads,
    pub out: &'c mut Vec<u8>,
    /// The dispatcher that called the handler.
    pub dispatch: &'static Dispatcher,
    /// The value argument handed over whole, for the handler to move into the store: only
    /// for SET, whose `args[2]` is then empty (`resp/streamed.rs`).
    pub value: Option<Vec<u8>>,
}

/// A command's handler.
pub type Handler = fn(&mut Call<'_, '_>);

/// Where a command comes from (the gate, `gate.rs`, checks it as such).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum From {
    /// A client's connection, pipelined or not: it waits behind the connection's own
    /// writes, goes where cluster mode routes it, and is queued inside MULTI.
    Client,
    /// A command EXEC runs from its queue, or one a cluster range applies from its log:
    /// checked again (memory and the disk may have changed since), never routed or queued.
    Inner,
    /// A script's `redis.call`; `ro`: the script was started read-only (EVAL_RO...).
    Script { ro: bool },
}

/// The dispatcher's entry: the server, the connection, the command's table entry (`None`:
/// unknown), the command, where it comes from (the gate checks it as such), the read
/// door, the output.
pub type Run =
    fn(&Shared, &mut Session, Option<&'static Spec>, &[&[u8]], From, &mut Reads, &mut Vec<u8>);

/// The dispatcher, for handlers that run other commands (EVAL's scripts): its table lookup
/// and its entry, handed in so they need not import the table (which names them).
pub struct Dispatcher {
    pub find: fn(&[u8]) -> Option<&'static Spec>,
    pub run: Run,
    /// Every command, in the table's order.
    pub table: fn() -> &'static [Spec],
}

/// Command flags, as Redis's command table has them (COMMAND INFO names them). The gate
/// (`gate.rs`) checks WRITE, DENYOOM, NOSCRIPT, LOADING, NO_AUTH, NO_MULTI and LOCAL (cluster
/// routing); READONLY, ADMIN, STALE, FAST and ALLOW_BUSY describe the command to clients
/// (COMMAND INFO; go-redis sends `readonly` commands to replicas) and change nothing this
/// server allows: it has no replica serving stale data and no ACL categories, and a script
/// past its time limit is stopped rather than answered `-BUSY` around.
pub mod flag {
    /// It changes the store: refused while the disk is failing; its reply waits for
    /// durability where the sync policy asks; commands after it wait until it is visible.
    pub const WRITE: u32 = 1;
    /// It only reads the store.
    pub const READONLY: u32 = 1 << 1;
    /// It may add memory: refused past `maxmemory`.
    pub const DENYOOM: u32 = 1 << 2;
    /// An administrative command.
    pub const ADMIN: u32 = 1 << 3;
    /// Not run from a script.
    pub const NOSCRIPT: u32 = 1 << 4;
    /// Allowed while the store loads.
    pub const LOADING: u32 = 1 << 5;
    /// Allowed on a stale replica.
    pub const STALE: u32 = 1 << 6;
    /// O(1) or O(log n).
    pub const FAST: u32 = 1 << 7;
    /// Allowed while a script runs too long.
    pub const ALLOW_BUSY: u32 = 1 << 8;
    /// Allowed before AUTH (and run at once inside MULTI).
    pub const NO_AUTH: u32 = 1 << 9;
    /// Not run inside a transaction (accelkv: it walks the keyspace or reads through the
    /// engine, not through the transaction's own view): queueing it aborts the
    /// transaction.
    pub const NO_MULTI: u32 = 1 << 10;
    /// Cluster mode: run on the node that received it (it names no key: connection state,
    /// introspection). accelkv's own flag, not one COMMAND INFO reports.
    pub const LOCAL: u32 = 1 << 11;

    /// Each flag with its COMMAND INFO name, in the order COMMAND INFO lists them.
    pub const NAMES: [(u32, &str); 11] = [
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (NOSCRIPT, "noscript"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (FAST, "fast"),
        (ALLOW_BUSY, "allow_busy"),
        (NO_AUTH, "no_auth"),
        (NO_MULTI, "no_multi"),
    ];
}

/// One command of the table.
#[derive(Clone, Copy)]
pub struct Spec {
    /// The name, upper case.
    pub name: &'static str,
    /// Redis's arity: a positive number, exactly that many arguments (the name included);
    /// negative, at least that many.
    pub arity: i32,
    /// Flag bits (`resp::call::flag`: WRITE, READONLY, DENYOOM, ...); COMMAND INFO names
    /// them ([`Spec::flag_names`]).
    pub flags: u32,
    /// First key argument (0: none), last (-1: the last argument), step between keys.
    pub keys: (i32, i32, i32),
    /// Command group (COMMAND DOCS).
    pub group: &'static str,
    /// What it does (COMMAND DOCS).
    pub summary: &'static str,
    /// What runs it.
    pub run: Handler,
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spec")
            .field("name", &self.name)
            .field("arity", &self.arity)
            .field("flags", &self.flag_names().collect::<Vec<_>>())
            .field("keys", &self.keys)
            .finish()
    }
}

impl Spec {
    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let a = i64::from(self.arity);
        if a >= 0 {
            argc == a
        } else {
            argc >= -a
        }
    }

    /// Whether the command has every flag of `f`.
    pub fn has(&self, f: u32) -> bool {
        self.flags & f == f
    }

    /// Whether it runs a script or function (EVAL, EVALSHA, FCALL and their `_RO` forms),
    /// whose keys follow `numkeys` and whose own commands do the work.
    pub fn runs_script(&self) -> bool {
        self.name.starts_with("EVAL") || self.name.starts_with("FCALL")
    }

    /// Whether it writes nothing but would be replicated (Redis's `may-replicate`): a
    /// read-only script may not run it, and CLIENT PAUSE WRITE holds it.
    pub fn may_replicate(&self) -> bool {
        matches!(self.name, "PUBLISH" | "SPUBLISH" | "PFCOUNT")
    }

    /// Whether it starts or ends a subscription (its replies are pub/sub's pushes).
    pub fn subscribes(&self) -> bool {
        matches!(
            self.name,
            "SUBSCRIBE"
                | "PSUBSCRIBE"
                | "SSUBSCRIBE"
                | "UNSUBSCRIBE"
                | "PUNSUBSCRIBE"
                | "SUNSUBSCRIBE"
        )
    }

    /// Its flags' names, as COMMAND INFO lists them.
    pub fn flag_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        flag::NAMES
            .iter()
            .filter(|(f, _)| self.flags & f != 0)
            .map(|(_, n)| *n)
    }

    /// The positions of its key arguments in `args` (the name first), as the table places
    /// them.
    pub fn key_positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let (first, last, step) = self.keys;
        let n = argc as i32;
        let last = if last < 0 { n + last } else { last.min(n - 1) };
        let first = if first <= 0 { n } else { first };
        (first..=last)
            .step_by(step.max(1) as usize)
            .map(|i| i as usize)
            .filter(move |&i| i < argc)
    }

    /// Its key arguments in `args` (the name first), as the table places them.
    pub fn keys_of<'b, 'a: 'b>(&self, args: &'b [&'a [u8]]) -> impl Iterator<Item = &'a [u8]> + 'b {
        self.key_positions(args.len()).map(move |i| args[i])
    }
}

/// What the command table's rows are written with (`table.rs`, `table_types.rs`).
pub mod row {
    use super::flag::*;
    use super::{Handler, Spec};

    /// A write that may grow memory.
    pub const W: u32 = WRITE | DENYOOM;
    pub const WF: u32 = WRITE | DENYOOM | FAST;
    pub const R: u32 = READONLY;
    pub const RF: u32 = READONLY | FAST;
    /// Key positions: none, the first argument, every argument.
    pub const NONE: (i32, i32, i32) = (0, 0, 0);
    pub const ONE: (i32, i32, i32) = (1, 1, 1);
    pub const ALL: (i32, i32, i32) = (1, -1, 1);

    /// The command table, one command a line: name, arity, flags, key positions, group,
    /// handler, summary (`table.rs`, `table_types.rs`).
    macro_rules! rows {
        ($($name:literal, $arity:literal, $flags:expr, $keys:expr, $group:literal, $run:path, $summary:literal;)*) => {
            &[$($crate::resp::call::row::spec($name, $arity, $flags, $keys, $group, $summary, $run)),*]
        };
    }
    pub(crate) use rows;

    /// One row.
    pub const fn spec(
        name: &'static str,
        arity: i32,
        flags: u32,
        keys: (i32, i32, i32),
        group: &'static str,
        summary: &'static str,
        run: Handler,
    ) -> Spec {
        Spec {
            name,
            arity,
            flags,
            keys,
            group,
            summary,
            run,
        }
    }
}

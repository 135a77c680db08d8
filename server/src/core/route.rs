#![cfg_attr(not(feature = "cluster"), allow(dead_code))]
//! The interface between the serving path and the cluster layer (docs/CLUSTER.md), compiled
//! in every build: what a routed command waits for ([`Forward`]) and how it settles, the
//! state a connection keeps while a command waits on its range's Raft group, and the
//! [`Router`] trait the cluster (`cluster/`, the `cluster` feature) implements. The RESP
//! adapter classifies its commands (`resp/cluster.rs`), the binary adapter its operations
//! (`binary/cluster.rs`); both call the router through this trait.

use accelkv_proto::resp::Version;
use accelkv_proto::Status;

/// What a routed command waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Forward {
    /// A write: committed in the range's group, then applied on every replica; the reply
    /// is what applying it answered here.
    Write { range: u64, cmd: Vec<u8> },
    /// A connection's run of pipelined writes to range `range`, which this node leads
    /// ([`Router::join`]): each committed as a [`Forward::Write`] is (they join the same
    /// batches), answered together, in order ([`Settled::Replies`]).
    Writes { range: u64, cmds: Vec<Vec<u8>> },
    /// A read: the range's leader confirms it still leads and has applied everything
    /// committed before (a read index); then the read runs here.
    Barrier { range: u64 },
    /// `CLUSTER SPLIT <key>`: range `range`, which this node leads, is split at `at`.
    Split { range: u64, at: Vec<u8> },
    /// `CLUSTER MOVE <range> <from> <to>`: range `range`, which this node leads, moves its
    /// replica on node `from` to node `to`.
    Move { range: u64, from: u64, to: u64 },
    /// A command for keys range `range` gave away in a split the map (at `epoch`) does not
    /// show yet, or (`leaderless`) for a range whose replica here knows no leader: it waits
    /// until the map changes or a leader is known, then is placed again (a client sees no
    /// error for a split or an election; after 2 s with neither, `-TRYAGAIN`).
    Settle {
        range: u64,
        epoch: u64,
        leaderless: bool,
    },
    /// A blocking write (BLPOP, BLMOVE, BZPOPMIN, XREADGROUP … BLOCK …) to range `range`,
    /// which this node leads: committed like a [`Forward::Write`] (its replicas answer
    /// what they find, nothing included), and while it finds nothing and `until` has not
    /// passed, committed again once one of its (stored) `keys` is written; dropped when
    /// the connection is gone (`alive`).
    Blocking {
        range: u64,
        cmd: Vec<u8>,
        keys: Vec<Vec<u8>>,
        until: Option<std::time::Instant>,
        alive: Alive,
    },
    /// A command for a range another node leads: sent there (RESP address `to`), and its
    /// answer relayed.
    Proxy {
        range: u64,
        to: String,
        cmd: Vec<u8>,
        write: bool,
        proto: Version,
    },
}

/// How a routed command ended.
#[derive(Debug)]
pub enum Settled {
    /// Its reply (a write's answer, or a redirect or error).
    Reply(Vec<u8>),
    /// A [`Forward::Writes`]' replies, one per command in order.
    Replies(Vec<Vec<u8>>),
    /// The read barrier passed: reads received before it may run.
    Granted,
    /// Place the command again: the map changed under it (a split), and nothing of it was
    /// done.
    Again,
}

/// What a connection waiting on the cluster is handed when it settles.
#[derive(Debug)]
pub enum Settlement {
    /// The RESP command it routed.
    Command(Settled),
    /// Every routed operation of the binary frame at the head of its input, by index.
    Frame(Vec<(usize, Settled)>),
    /// A blocking command's keys may have something to take, or its deadline passed
    /// (core/blocked.rs): run it again.
    Wake,
}

/// What to do with one command.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Run it here as usual (connection commands, or a read whose barrier passed).
    Here,
    /// Its reply is ready (it was routed and has settled).
    Answer(Vec<u8>),
    /// It was routed ([`ClusterSession::forward`]): stop and wait for it.
    Wait,
    /// Answer this error instead of running it (a redirect, or not in cluster mode).
    Refuse(String),
}

/// A connection's cluster state.
#[derive(Debug, Default)]
pub struct ClusterSession {
    /// The reply of the command routed last, for when its input runs again.
    pub answer: Option<Vec<u8>>,
    /// The replies of the commands that joined it ([`Router::join`]), for the commands
    /// after it, in order.
    pub more: std::collections::VecDeque<Vec<u8>>,
    /// A read barrier passed since the connection last read input: it covers every
    /// command in its input now (none is read while it waits). Cleared by the next read
    /// from the socket.
    pub barrier_ok: bool,
    /// What the command it stopped at waits for; the event loop submits it.
    pub forward: Option<Forward>,
    /// The connection gets `-MOVED` rather than being proxied: another node proxying
    /// commands (it named itself [`PROXY_NAME`]`-<node>`), so a command never travels in a
    /// circle, or a client that routes by itself (`CLUSTER NOPROXY`).
    pub proxied: bool,
    /// READONLY was sent: reads are served by any replica of their range from its own
    /// state (possibly behind the leader's), as Redis Cluster's replicas serve them.
    pub readonly: bool,
    /// Whether the connection is still open, for a blocking write that waits for it.
    pub alive: Alive,
    /// MULTI was sent: the commands queued since, and whether one was refused (EXEC then
    /// aborts); the cluster's router keeps them (cluster/node/tx.rs).
    pub tx: Option<(Vec<Vec<Vec<u8>>>, bool)>,
}

/// Whether a connection is still open: true until its owner is dropped; clones only
/// read it.
#[derive(Debug)]
pub struct Alive {
    flag: std::sync::Arc<std::sync::atomic::AtomicBool>,
    owner: bool,
}

impl Default for Alive {
    fn default() -> Alive {
        Alive {
            flag: std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true)),
            owner: true,
        }
    }
}

impl Clone for Alive {
    /// A reader of the flag (dropping it changes nothing).
    fn clone(&self) -> Alive {
        Alive {
            flag: self.flag.clone(),
            owner: false,
        }
    }
}

impl PartialEq for Alive {
    fn eq(&self, o: &Alive) -> bool {
        std::sync::Arc::ptr_eq(&self.flag, &o.flag)
    }
}

impl Eq for Alive {}

impl Alive {
    pub fn is_alive(&self) -> bool {
        self.flag.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        if self.owner {
            self.flag.store(false, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The name a node's proxy connections give themselves (CLIENT SETNAME).
pub const PROXY_NAME: &str = "accelkv-proxy";

/// Where a binary operation goes (docs/CLUSTER.md, "The binary protocol").
#[derive(Debug, PartialEq, Eq)]
pub enum Located {
    /// This node leads range `0` and holds the key: the operation goes through its group.
    Lead(u64),
    /// Answered with this status and message instead: `MOVED` (`<range> <host:port>`, the
    /// binary address of the range's leader), `TRYAGAIN`, or an error.
    Refused(Status, String),
    /// The key's range split and the map does not show it yet, or its replica here knows
    /// no leader: this [`Forward::Settle`] waits for either.
    Settle(Forward),
}

/// A cluster the serving path routes commands through.
pub trait Router: Send + Sync {
    /// Where command `args` goes, for a connection in state `s` speaking `proto`.
    fn route(&self, s: &mut ClusterSession, args: &[&[u8]], proto: Version) -> Route;
    /// Where a binary operation on `key` goes. `upto` is a scan's end (`None`: not a
    /// scan; `Some(None)`: unbounded), `floor` whether the scan starts at the floor of
    /// `key`. `count`: the operation counts towards the range's load (the first placing,
    /// not the check after a read index).
    fn locate(&self, key: &[u8], upto: Option<Option<&[u8]>>, floor: bool, count: bool) -> Located;
    /// A routed command's RESP error reply as a binary status and message.
    fn binary_error(&self, reply: &[u8]) -> (Status, String);
    /// Runs `f`, calling `done` (on another thread) when it settles.
    fn submit(&self, f: Forward, done: Box<dyn FnOnce(Settled) + Send>);
    /// Whether command `args`, which follows the routed write the connection stopped at
    /// (`s.forward`) in its input, joins it: a plain write to the same range, sent with it
    /// and answered with it ([`Forward::Writes`]), so a pipeline of writes waits for one
    /// commit, not one each. Nothing changes when it does not.
    fn join(&self, s: &mut ClusterSession, args: &[&[u8]], proto: Version) -> bool {
        let _ = (s, args, proto);
        false
    }
    /// One line for the listening message.
    fn describe(&self) -> String;
    /// Answers `CLUSTER <args>` (RANGES, INFO, MYID).
    fn command(&self, args: &[&[u8]], proto: Version, out: &mut Vec<u8>);
    /// The state of every Raft group with a replica here, by range (for /metrics).
    fn groups(&self) -> Vec<GroupSample>;
    /// A clean stop: hands what this node leads to other replicas and stops its groups
    /// (blocks for about one election timeout when it leads anything).
    fn stop(&self);
}

/// One Raft group's replica on this node, as /metrics shows it.
#[derive(Clone, Debug, Default)]
pub struct GroupSample {
    pub range: u64,
    pub term: u64,
    pub last_log_index: u64,
    pub applied_index: u64,
    pub leader: bool,
    pub leader_changes: u64,
    pub snapshot_bytes: u64,
    pub snapshots_built: u64,
}

/// A list of byte strings: `u32 count`, then each as `u32 length | bytes` (little-endian),
/// appended to `b`. Replicated commands, their batches, and the batches' replies.
pub fn put_list<T: AsRef<[u8]>>(b: &mut Vec<u8>, items: &[T]) {
    b.reserve(4 + items.iter().map(|a| a.as_ref().len() + 4).sum::<usize>());
    b.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for a in items {
        b.extend_from_slice(&(a.as_ref().len() as u32).to_le_bytes());
        b.extend_from_slice(a.as_ref());
    }
}

/// [`put_list`]'s inverse over all of `b`; `None` for bytes it did not make.
pub fn list(b: &[u8]) -> Option<Vec<&[u8]>> {
    let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
    let mut at = 4;
    let mut out = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
        out.push(b.get(at + 4..at + 4 + len)?);
        at += 4 + len;
    }
    (at == b.len()).then_some(out)
}

/// A replicated command: the reply protocol, then the arguments.
pub fn encode(args: &[Vec<u8>], proto: Version) -> Vec<u8> {
    let mut b = vec![if proto == Version::Resp3 { 3 } else { 2 }];
    put_list(&mut b, args);
    b
}

/// [`encode`]'s inverse; `None` for bytes it did not make.
pub fn decode(b: &[u8]) -> Option<(Version, Vec<&[u8]>)> {
    let proto = match b.first()? {
        2 => Version::Resp2,
        3 => Version::Resp3,
        _ => return None,
    };
    let args = list(&b[1..])?;
    (!args.is_empty()).then_some((proto, args))
}

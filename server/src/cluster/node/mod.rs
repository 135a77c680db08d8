//! Cluster mode (`--cluster`, docs/CLUSTER.md): this node registers in etcd, waits for the
//! range map, and runs an openraft group for every range it holds a replica of, with the
//! node's store as each group's state machine. The serving path asks [`Node::route`] about
//! every keyed RESP command: a key in a range this node does not lead is redirected
//! (`-MOVED <range> <host:port>`); a write to a range it leads is committed by a majority
//! of the range's replicas and then applied on each, through the same command code and
//! write door as a standalone server; a read waits for a read index (the leader confirms
//! with a quorum that it still leads and has applied everything committed before), then
//! runs on the event loop as any read.
//!
//! The groups run on a small tokio runtime of their own; the event loop hands a routed
//! command over and parks the connection until it settles (consensus needs a network round
//! trip, so this is the one hand-off on cluster mode's serving path).

mod blocking;
mod join;
mod pipeline;
mod router;
mod slots;
mod tx;
mod wire;

use crate::cluster::machine::{OpenReq, Registry, StoreMachine};
use crate::cluster::split::Ctl;
use crate::config::ClusterSettings;
use crate::core::route::{Forward, Settled};
use crate::core::shared::Shared;
use accelkv_cluster::{read_barrier, write, NodeAddr, NotServed, Open};
use accelkv_cluster::{RaftNode, Range, RangeMap};
use accelkv_proto::resp;
use join::{join, transport};
use wire::{no_leader, settle_error};

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// How long a command for keys a split gave away waits for the map to show the split, or
/// one for a range whose replica here knows no leader waits for one, before it is answered
/// `-TRYAGAIN` (a split is recorded in milliseconds; an election takes 0.4–1 s).
const SETTLE: Duration = Duration::from_secs(2);

/// Batches of writes one range has in its group's pipeline at once.
const BATCHES_IN_FLIGHT: usize = 4;

/// Most commands, and bytes, in one batch (one Raft entry).
const BATCH_COMMANDS: usize = 1024;
const BATCH_BYTES: usize = 4 << 20;

/// This node's part of the cluster.
pub struct Node {
    me: u64,
    rt: tokio::runtime::Runtime,
    raft: Arc<RaftNode>,
    map: watch::Receiver<RangeMap>,
    etcd: String,
    /// Reads and writes waiting for their groups, by range.
    queues: Arc<Mutex<HashMap<u64, Queues>>>,
    /// Whether commands for ranges led elsewhere are proxied (`--proxy`).
    proxy: bool,
    /// Idle proxy connections to other nodes' RESP ports.
    proxies: Arc<crate::cluster::proxy::Pool>,
    /// The ranges open here.
    reg: Arc<Registry>,
    /// What splits ranges and keeps the map in step with them.
    ctl: Ctl,
    /// The longest command one Raft entry carries (see [`transport`]).
    max_command: usize,
    /// `--slots redis`: keys placed by hash slot, redirects by slot.
    slots: bool,
    /// This node, for the tasks that outlive a call (blocking.rs).
    myself: std::sync::OnceLock<Weak<Node>>,
}

type Done = Box<dyn FnOnce(Settled) + Send>;

/// What one range's routed commands wait in.
///
/// Reads wait for a read index: while one is being confirmed, reads that arrive wait for
/// the next, which then serves them all (a read index taken after a read arrived is valid
/// for it; one taken before is not).
///
/// Writes are committed in batches, one Raft entry each (openraft appends and flushes its
/// log once per entry it is handed): while [`BATCHES_IN_FLIGHT`] batches are on their way,
/// writes that arrive wait for the next. Each write of a batch takes effect, in order, when
/// the batch is applied, between its arrival and its reply.
#[derive(Default)]
struct Queues {
    reading: bool,
    reads: Vec<Done>,
    writing: usize,
    writes: Vec<(Vec<u8>, Done)>,
}

/// Joins the cluster `cs` describes, serving RESP at `resp`: registers, waits for the map
/// (creating the first one once enough nodes registered) and opens this node's groups.
pub fn start(
    sh: &Arc<Shared>,
    cs: &ClusterSettings,
    resp: SocketAddr,
    binary: SocketAddr,
) -> Result<Arc<Node>, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("accelkv-raft")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the cluster runtime: {e}"))?;
    let me = cs.node_id;
    if cs.slots {
        // Before any range opens and replays its log: every key is placed by slot.
        accelkv_proto::slot::set_placed();
    }
    let transport = transport(sh.settings())?;
    let (raft, map, coord) = rt.block_on(join(cs, resp, binary, transport))?;
    let (opens, requests) = tokio::sync::mpsc::unbounded_channel();
    let reg = Arc::new(Registry {
        machines: Default::default(),
        claimed: Default::default(),
        retiring: Default::default(),
        draining: Default::default(),
        pending: Default::default(),
        raft: raft.clone(),
        opens,
    });
    let ctl = Ctl {
        me,
        raft: raft.clone(),
        coord,
        reg: reg.clone(),
        map: map.clone(),
        sh: Arc::downgrade(sh),
        split_size: cs.split_size,
        split_load: cs.split_load,
        slots: cs.slots,
    };
    let node = Arc::new(Node {
        me,
        rt,
        raft,
        map,
        etcd: cs.etcd.join(","),
        queues: Default::default(),
        proxy: cs.proxy,
        proxies: Arc::new(crate::cluster::proxy::Pool::new(
            me,
            sh.settings().limits.clone(),
        )),
        reg: reg.clone(),
        ctl: ctl.clone(),
        max_command: sh.settings().limits.max_resp_command(),
        slots: cs.slots,
        myself: Default::default(),
    });
    let _ = node.myself.set(Arc::downgrade(&node));
    // Open the ranges of the first map, then follow the map and the splits applied here.
    let first = node.map.borrow().clone();
    node.rt.block_on(open_from_map(&reg, sh, &first, me));
    node.rt.spawn(opener(
        requests,
        reg.clone(),
        Arc::downgrade(sh),
        node.map.clone(),
        me,
    ));
    let mut watch = node.map.clone();
    node.rt.spawn(async move {
        while watch.changed().await.is_ok() {
            if reg.opens.send(OpenReq::Recheck).is_err() {
                return;
            }
        }
    });
    node.rt.spawn(crate::cluster::split::run(ctl));
    Ok(node)
}

/// Opens ranges as they are asked for, one at a time.
async fn opener(
    mut requests: tokio::sync::mpsc::UnboundedReceiver<OpenReq>,
    reg: Arc<Registry>,
    sh: Weak<Shared>,
    map: watch::Receiver<RangeMap>,
    me: u64,
) {
    while let Some(req) = requests.recv().await {
        let Some(sh) = sh.upgrade() else { return };
        match req {
            OpenReq::Open {
                range,
                bounds,
                members,
                how,
            } => {
                open_one(&reg, &sh, range, bounds, &members, how).await;
                // Ranges of higher id waiting for this one (open_from_map) may open now.
                let m = map.borrow().clone();
                open_from_map(&reg, &sh, &m, me).await;
            }
            OpenReq::Recheck => {
                let m = map.borrow().clone();
                open_from_map(&reg, &sh, &m, me).await;
            }
            OpenReq::Retire(range) => {
                let gone = map
                    .borrow()
                    .range(range)
                    .is_some_and(|r| !r.replicas.contains(&me) && !r.learners.contains(&me));
                reg.retiring
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&range);
                if gone {
                    close_one(&reg, &sh, range).await;
                }
            }
        }
    }
}

/// Opens the ranges of `map` this node holds a replica of that are not open yet, except
/// one that overlaps a range open here (its split is not applied here yet: it is opened
/// when it is, or when a snapshot narrows the old range).
async fn open_from_map(reg: &Arc<Registry>, sh: &Arc<Shared>, map: &RangeMap, me: u64) {
    // A range the map shows without this node moved away: it is closed here once the
    // commands it was serving settled (a write waits at most crate::cluster::WAIT; meanwhile its group
    // answers that another node leads).
    let open: Vec<u64> = {
        let g = reg.machines.read().unwrap_or_else(|e| e.into_inner());
        g.keys().copied().collect()
    };
    for id in open {
        let gone = map
            .range(id)
            .is_some_and(|r| !r.replicas.contains(&me) && !r.learners.contains(&me));
        let first = gone
            && reg
                .retiring
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(id);
        if first {
            let opens = reg.opens.clone();
            tokio::spawn(async move {
                tokio::time::sleep(crate::cluster::WAIT + Duration::from_secs(1)).await;
                let _ = opens.send(OpenReq::Retire(id));
            });
        }
    }
    // In order of id: a range split off another has a higher id than it. A range that has
    // files here opens only once every range of lower id with files here is open, so its
    // ancestors have taken their own bounds from their files first (an ancestor whose
    // snapshot predates the split is wider, and the descendant then waits for the split to
    // be applied here). Opened first, the descendant would be overwritten by the
    // ancestor's older snapshot and log replayed after it.
    let mut mine: Vec<&accelkv_cluster::Range> = map.ranges_of(me).collect();
    mine.sort_by_key(|r| r.id);
    let mut waiting = false;
    for r in mine {
        let bounds = (r.start.clone(), r.end.clone());
        let files = reg.raft.has_files(r.id);
        if files && waiting {
            continue;
        }
        // Claiming last: a range claimed already (open, or being opened) is skipped too.
        if reg.overlaps(&bounds, r.id) || !reg.claim(r.id) {
            let open = reg
                .claimed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&r.id);
            waiting |= files && !open;
            continue;
        }
        let members: BTreeMap<u64, String> = r
            .replicas
            .iter()
            .filter_map(|id| map.nodes.get(id).map(|a| (*id, a.raft.clone())))
            .collect();
        // Range 1 is the first map's; any other was made by a split or is moving here.
        let how = if r.id == 1 {
            Open::Bootstrap
        } else {
            Open::Join
        };
        open_one(reg, sh, r.id, bounds, &members, how).await;
    }
}

/// Closes this node's replica of `range` (moved away): stops its group, deletes its files
/// and drops its keys from the store.
async fn close_one(reg: &Arc<Registry>, sh: &Arc<Shared>, range: u64) {
    if let Err(e) = reg.raft.close_group(range).await {
        tracing::warn!("cluster: {e}");
    }
    let m = reg
        .machines
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&range);
    if let Some(m) = m {
        if let Err(e) = crate::cluster::machine::clear(sh, &m.bounds()) {
            tracing::warn!("range {range}: dropping its keys: {e}");
        }
    }
    reg.unclaim(range);
    reg.draining
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&range);
    tracing::info!("range {range} moved away from this node: its replica is closed");
}

/// Opens this node's replica of `range`.
async fn open_one(
    reg: &Arc<Registry>,
    sh: &Arc<Shared>,
    range: u64,
    bounds: crate::cluster::bounds::Bounds,
    members: &BTreeMap<u64, String>,
    how: Open,
) {
    let m = Arc::new(StoreMachine::new(sh, reg, range, bounds));
    reg.machines
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(range, m.clone());
    match reg.raft.open_group(range, members, m, how).await {
        Ok(g) => {
            tokio::spawn(log_leaders(range, g.metrics()));
        }
        Err(e) => {
            tracing::warn!("cluster: {e}");
            reg.machines
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&range);
            reg.unclaim(range);
        }
    }
}

/// Logs each change of range `range`'s leader as this node sees it (on stderr).
async fn log_leaders(
    range: u64,
    mut m: watch::Receiver<
        accelkv_cluster::openraft::RaftMetrics<u64, accelkv_cluster::openraft::BasicNode>,
    >,
) {
    let mut last = None;
    loop {
        let (leader, term) = {
            let now = m.borrow_and_update();
            (now.current_leader, now.current_term)
        };
        if leader != last {
            match leader {
                Some(l) => tracing::info!("range {range}: node {l} leads (term {term})"),
                None => tracing::info!("range {range}: no leader (term {term})"),
            }
            last = leader;
        }
        if m.changed().await.is_err() {
            return;
        }
    }
}

impl Node {
    /// Runs `done` once a read index taken after this call is confirmed: batched with
    /// every read of the range that arrives while another read index is being taken.
    fn barrier(&self, range: u64, raft: accelkv_cluster::raft::Raft, done: Done) {
        {
            let mut g = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let q = g.entry(range).or_default();
            q.reads.push(done);
            if q.reading {
                return;
            }
            q.reading = true;
        }
        let (queues, map, me) = (self.queues.clone(), self.map.clone(), self.me);
        self.rt.spawn(async move {
            loop {
                let batch = {
                    let mut g = queues.lock().unwrap_or_else(|e| e.into_inner());
                    let q = g.entry(range).or_default();
                    if q.reads.is_empty() {
                        q.reading = false;
                        return;
                    }
                    std::mem::take(&mut q.reads)
                };
                let r = tokio::time::timeout(crate::cluster::WAIT, read_barrier(&raft))
                    .await
                    .unwrap_or(Err(NotServed::NotLeader(None)));
                for done in batch {
                    done(match &r {
                        Ok(()) => Settled::Granted,
                        Err(e) => Settled::Reply(settle_error(&map, me, range, e.clone())),
                    });
                }
            }
        });
    }

    /// Why a write of `len` bytes to `range` is not proposed, if it is not: the range is
    /// handing its leadership over, or the write is longer than a Raft entry may be (a
    /// transaction's writes together, say).
    fn refusal(&self, range: u64, len: usize) -> Option<Vec<u8>> {
        let draining = self
            .reg
            .draining
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&range);
        let msg = if draining {
            format!("TRYAGAIN range {range} is moving to another leader; retry")
        } else if len > self.max_command {
            format!(
                "ERR the writes come to {len} bytes, more than one replicated entry carries ({} bytes)",
                self.max_command
            )
        } else {
            return None;
        };
        let mut out = Vec::new();
        resp::error(&mut out, &msg);
        Some(out)
    }

    /// Commits `cmd` in range `range`'s group with the writes around it (see [`Queues`]),
    /// then runs `done` with its reply.
    fn write(&self, range: u64, raft: accelkv_cluster::raft::Raft, cmd: Vec<u8>, done: Done) {
        if let Some(out) = self.refusal(range, cmd.len()) {
            return done(Settled::Reply(out));
        }
        *self
            .reg
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(range)
            .or_default() += 1;
        let reg = self.reg.clone();
        let done: Done = Box::new(move |s| {
            done(s);
            if let Some(n) = reg
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(&range)
            {
                *n -= 1;
            }
        });
        {
            let mut g = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            let q = g.entry(range).or_default();
            q.writes.push((cmd, done));
            if q.writing >= BATCHES_IN_FLIGHT {
                return;
            }
            q.writing += 1;
        }
        let (queues, map, me) = (self.queues.clone(), self.map.clone(), self.me);
        self.rt.spawn(async move {
            loop {
                let batch: Vec<(Vec<u8>, Done)> = {
                    let mut g = queues.lock().unwrap_or_else(|e| e.into_inner());
                    let q = g.entry(range).or_default();
                    if q.writes.is_empty() {
                        q.writing -= 1;
                        return;
                    }
                    let (mut n, mut bytes) = (0, 0);
                    while n < q.writes.len() && n < BATCH_COMMANDS && bytes < BATCH_BYTES {
                        bytes += q.writes[n].0.len();
                        n += 1;
                    }
                    q.writes.drain(..n).collect()
                };
                let (cmds, dones): (Vec<Vec<u8>>, Vec<Done>) = batch.into_iter().unzip();
                let mut entry = Vec::new();
                crate::core::route::put_list(&mut entry, &cmds);
                let r = tokio::time::timeout(crate::cluster::WAIT, write(&raft, entry))
                    .await
                    .unwrap_or_else(|_| {
                        Err(NotServed::Unavailable(format!(
                            "the write was not committed within {} s; it may still apply",
                            crate::cluster::WAIT.as_secs()
                        )))
                    });
                let replies = r.as_ref().ok().and_then(|b| crate::core::route::list(b));
                match (&r, replies) {
                    (Ok(_), Some(replies)) if replies.len() == dones.len() => {
                        for (done, reply) in dones.into_iter().zip(replies) {
                            // Committed after a split gave its key away: not applied on
                            // any replica, so it is placed again (by the new map).
                            if crate::cluster::machine::split_away(reply) {
                                done(Settled::Again);
                            } else {
                                done(Settled::Reply(reply.to_vec()));
                            }
                        }
                    }
                    (Ok(_), _) => {
                        let e =
                            NotServed::Unavailable("the replicas answered a batch wrongly".into());
                        for done in dones {
                            done(Settled::Reply(settle_error(&map, me, range, e.clone())));
                        }
                    }
                    (Err(e), _) => {
                        for done in dones {
                            done(Settled::Reply(settle_error(&map, me, range, e.clone())));
                        }
                    }
                }
            }
        });
    }

    /// The node that leads (or, not knowing, holds) range `r`, to redirect to; or the
    /// TRYAGAIN error when there is none to name.
    fn redirect(&self, map: &RangeMap, r: &Range, leader: Option<u64>) -> Result<NodeAddr, String> {
        let hint = r.leader.filter(|l| r.replicas.contains(l));
        let to = leader.or(hint).or(r.replicas.first().copied());
        match to.and_then(|id| map.nodes.get(&id)) {
            Some(a) if leader.is_some() || to != Some(self.me) => Ok(a.clone()),
            _ => Err(no_leader(r.id)),
        }
    }

    /// Where a command on `keys` goes (RESP and binary alike): `upto` is a ranged read's
    /// end (`Some(None)`: unbounded) and `floor` whether it starts at the floor of its key;
    /// `replica_read` a read this replica may serve from its own state (READONLY); `count`:
    /// this is the pass that serves the command, which counts towards the range's load
    /// if this node leads it (a read placed again after its read index is not counted
    /// twice).
    fn place(
        &self,
        keys: &[&[u8]],
        upto: Option<Option<&[u8]>>,
        floor: bool,
        replica_read: bool,
        count: bool,
    ) -> Place {
        let map = self.map.borrow();
        let Some(r) = map.find(keys[0]) else {
            return Place::Refuse("CLUSTERDOWN the range map has a gap".into());
        };
        if keys[1..].iter().any(|k| !r.contains(k)) {
            return Place::Refuse(
                "CROSSSLOT Keys in request don't hash to the same slot (they are in different ranges)".into(),
            );
        }
        if let Some(hi) = upto {
            let inside = match (&r.end, hi) {
                (None, _) => true,
                (Some(e), Some(hi)) => hi <= e.as_slice(),
                (Some(_), None) => false,
            };
            if !inside || (floor && !r.start.is_empty()) {
                return Place::Refuse(format!(
                    "CROSSSLOT the request spans more than range {}: split it at the range's bounds (CLUSTER RANGES)",
                    r.id
                ));
            }
        }
        let group = self.raft.group(r.id);
        // The range's bounds here, which a split applied here narrows before the map
        // follows: a key outside them waits for the map.
        let held = |lead| self.reg.holds(r.id, keys, upto, lead);
        let settle = |leaderless| {
            Place::Settle(Forward::Settle {
                range: r.id,
                epoch: map.epoch,
                leaderless,
            })
        };
        let splitting = || settle(false);
        if replica_read && group.is_some() {
            // READONLY (Redis Cluster's replica reads): this replica's own state, which
            // may lag the leader's.
            return if held(false) {
                Place::Replica
            } else {
                splitting()
            };
        }
        // A replica the map shows moved away serves nothing, even while its group, removed
        // from the range's voters, has not noticed it leads no one; nor is a command sent
        // to it (the other replicas still vote for it until their election timeout).
        let open = group.is_some();
        let leader = group
            .and_then(|g| g.metrics().borrow().current_leader)
            .filter(|l| r.replicas.contains(l));
        if leader != Some(self.me) {
            // A split applied here that the map does not show yet gave the keys to a range
            // another replica may lead (slot mode hands a split-off range over): wait for
            // the map rather than send them back to the parent's leader.
            if open && !held(false) {
                return splitting();
            }
            return match self.redirect(&map, r, leader) {
                Ok(to) => Place::Away { range: r.id, to },
                // A replica here with no leader known (an election, or a range just split
                // off, whose group may not be open here yet): wait for one.
                Err(_) if leader.is_none() && (open || r.replicas.contains(&self.me)) => {
                    settle(true)
                }
                Err(m) => Place::Refuse(m),
            };
        }
        if !held(count) {
            return splitting();
        }
        Place::Lead(r.id)
    }
}

/// Where a command goes, by its keys ([`Node::place`]).
enum Place {
    /// This node leads the range and holds the keys.
    Lead(u64),
    /// Served from this replica's own state (READONLY reads).
    Replica,
    /// Another node leads the range (or holds it, the leader unknown here).
    Away { range: u64, to: NodeAddr },
    /// Refused with this error.
    Refuse(String),
    /// The range split here and the map does not show it yet, or its replica here knows no
    /// leader: this [`Forward::Settle`] waits for either.
    Settle(Forward),
}

impl Node {
    /// A command waits until the map changes from `epoch` or (`leaderless`) its range's
    /// group here knows a leader among the replicas the map names, then is placed again;
    /// after [`SETTLE`] with neither, `-TRYAGAIN`.
    fn settle(
        &self,
        range: u64,
        epoch: u64,
        leaderless: bool,
        done: Box<dyn FnOnce(Settled) + Send>,
    ) {
        let mut map = self.map.clone();
        let replicas = map.borrow().range(range).map(|r| r.replicas.clone());
        let raft = self.raft.clone();
        self.rt.spawn(async move {
            let changed = async {
                let _ = map.wait_for(|m| m.epoch != epoch).await;
            };
            // A leader known to the group here (opened first, for a range just split off),
            // one of the replicas the map names, as `place` asks.
            let led = async {
                let Some(replicas) = replicas.filter(|_| leaderless) else {
                    return std::future::pending().await;
                };
                let group = loop {
                    match raft.group(range) {
                        Some(g) => break g,
                        None => tokio::time::sleep(Duration::from_millis(2)).await,
                    }
                };
                let mut m = group.metrics();
                let _ = m
                    .wait_for(|m| m.current_leader.is_some_and(|l| replicas.contains(&l)))
                    .await;
            };
            let either = async {
                tokio::select! {
                    _ = changed => {}
                    _ = led => {}
                }
            };
            done(match tokio::time::timeout(SETTLE, either).await {
                Ok(()) => Settled::Again,
                Err(_) => {
                    let mut out = Vec::new();
                    let m = match leaderless {
                        true => no_leader(range),
                        false => format!("TRYAGAIN range {range} is splitting; retry"),
                    };
                    resp::error(&mut out, &m);
                    Settled::Reply(out)
                }
            });
        });
    }
}

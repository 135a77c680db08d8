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

use crate::cluster::machine::{OpenReq, Registry, StoreMachine};
use crate::cluster::split::Ctl;
use crate::config::ClusterSettings;
use crate::core::route::{encode, ClusterSession};
use crate::core::route::{Forward, GroupSample, Located, Route, Router, Settled, PROXY_NAME};
use crate::core::shared::Shared;
use crate::resp::cluster::{classify, normalize, Class, ONCE};
use accelkv_cluster::{read_barrier, write, Coordinator, NodeAddr, NotServed, Open};
use accelkv_cluster::{RaftNode, Range, RangeMap, Tuning};
use accelkv_proto::resp::{self, Version};
use accelkv_proto::Status;
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
}

/// The Raft port's transport: mutual TLS where `--tls-ca` is given (with `--tls-cert` and
/// `--tls-key`), and the longest frame: sixteen snapshot chunks (64 MiB), or two entries of
/// a full batch plus the largest command this server accepts, whichever is more. An entry
/// is a batch of at most [`BATCH_BYTES`] plus one command, so it always fits.
fn transport(s: &crate::config::Settings) -> Result<accelkv_cluster::raft::net::Limits, String> {
    use accelkv_cluster::raft::{link::RaftTls, net};
    let max_frame = (16 * net::SNAPSHOT_CHUNK as usize)
        .max(2 * (BATCH_BYTES + s.limits.max_resp_command()) + (1 << 20));
    let tls = match &s.tls {
        Some(t) if t.ca.is_some() => {
            let (server, client) = crate::config::tls_config::raft(t)?;
            Some(RaftTls { server, client })
        }
        _ => None,
    };
    Ok(net::Limits { tls, max_frame })
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

/// Starts this node's Raft listener, registers in etcd and waits for the range map
/// (creating the first one once enough nodes registered).
async fn join(
    cs: &ClusterSettings,
    resp: SocketAddr,
    binary: SocketAddr,
    transport: accelkv_cluster::raft::net::Limits,
) -> Result<
    (
        Arc<RaftNode>,
        tokio::sync::watch::Receiver<RangeMap>,
        Coordinator,
    ),
    String,
> {
    let me = cs.node_id;
    let listen = SocketAddr::new(resp.ip(), cs.raft_port);
    let tuning = Tuning {
        source: Some(resp.ip()),
        snapshot_every: cs.snapshot_every,
        keep_behind_snapshot: (cs.snapshot_every / 2).min(1000),
        transport,
        ..Tuning::default()
    };
    let raft = RaftNode::start(me, &listen.to_string(), cs.dir.join("raft"), tuning)
        .await
        .map_err(|e| format!("cannot listen for Raft on {listen}: {e}"))?;
    let coord = tokio::time::timeout(
        crate::cluster::WAIT,
        Coordinator::connect(&cs.etcd, &cs.name),
    )
    .await
    .map_err(|_| format!("etcd at {} did not answer", cs.etcd.join(",")))??;
    let addr = NodeAddr {
        resp: resp.to_string(),
        binary: binary.to_string(),
        raft: cs
            .raft_advertise
            .clone()
            .unwrap_or_else(|| raft.addr.to_string()),
    };
    tokio::time::timeout(crate::cluster::WAIT, coord.register(me, &addr, 3))
        .await
        .map_err(|_| format!("etcd at {} did not answer", cs.etcd.join(",")))??;
    if coord.map().await?.is_none() {
        tracing::info!(
            "node {me} registered; waiting for {} nodes to make the first range map",
            cs.replicas
        );
    }
    let first = coord.bootstrap(cs.replicas).await?;
    if let Some(a) = first.nodes.get(&me) {
        if (&a.resp, &a.raft) != (&addr.resp, &addr.raft) {
            return Err(format!(
                "node {me} is in the range map at {} / {}, not at {} / {}: restart it with the addresses it had",
                a.resp, a.raft, addr.resp, addr.raft
            ));
        }
        if a.binary != addr.binary {
            // Its binary port may change across restarts (`--port 0`), and a map
            // written before nodes advertised one has none: redirects name the new one.
            coord
                .update_map(|m| {
                    let mut n = m.clone();
                    match n.nodes.get_mut(&me) {
                        Some(a) if a.binary != addr.binary => a.binary.clone_from(&addr.binary),
                        _ => return Ok(None),
                    }
                    n.epoch += 1;
                    Ok(Some(n))
                })
                .await?;
        }
    }
    let map = coord.watch_map().await?;
    Ok((Arc::new(raft), map, coord))
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
    });
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

/// What a command changes in the connection's cluster state: READONLY and READWRITE, a
/// proxy connection naming itself, CLUSTER NOPROXY (answered here).
fn connection_state(s: &mut ClusterSession, args: &[&[u8]]) -> Option<Route> {
    if args.len() == 1 && args[0].eq_ignore_ascii_case(b"READONLY") {
        s.readonly = true;
    } else if args.len() == 1 && args[0].eq_ignore_ascii_case(b"READWRITE") {
        s.readonly = false;
    }
    if args.len() == 3
        && args[0].eq_ignore_ascii_case(b"CLIENT")
        && args[1].eq_ignore_ascii_case(b"SETNAME")
        && args[2].starts_with(PROXY_NAME.as_bytes())
    {
        s.proxied = true; // another node's proxy connection
    }
    // A client that routes by itself (accelkv_client::ClusterClient) asks for -MOVED rather
    // than a proxied answer, so its stale map is corrected at once.
    if args.len() == 2
        && args[0].eq_ignore_ascii_case(b"CLUSTER")
        && args[1].eq_ignore_ascii_case(b"NOPROXY")
    {
        s.proxied = true;
        let mut out = Vec::new();
        resp::simple(&mut out, "OK");
        return Some(Route::Answer(out));
    }
    None
}

/// `CLUSTER MOVE <range> <from> <to>`: goes to the range's leader (by its first key).
fn moving(args: &[&[u8]]) -> Result<Option<(u64, u64, u64)>, Route> {
    match args {
        [c, m, r, f, t]
            if c.eq_ignore_ascii_case(b"CLUSTER") && m.eq_ignore_ascii_case(b"MOVE") =>
        {
            let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
            match (num(r), num(f), num(t)) {
                (Some(r), Some(f), Some(t)) => Ok(Some((r, f, t))),
                _ => Err(Route::Refuse(
                    "ERR CLUSTER MOVE takes a range id and two node ids".into(),
                )),
            }
        }
        _ => Ok(None),
    }
}

/// A write as it is replicated: relative times made absolute, and its request id in front
/// when it was sent with one (`ACCELKV.ONCE`).
fn replicated(args: &[&[u8]], once: Option<(u64, u64)>) -> Vec<Vec<u8>> {
    let mut replicated = normalize(args, accelkv_tree::now_ms());
    if let Some((client, seq)) = once {
        let id = [
            ONCE.to_vec(),
            client.to_string().into(),
            seq.to_string().into(),
        ];
        replicated.splice(0..0, id);
    }
    replicated
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

impl Router for Node {
    fn route(&self, s: &mut ClusterSession, sent: &[&[u8]], proto: Version) -> Route {
        if let Some(a) = s.answer.take() {
            return Route::Answer(a);
        }
        // A write sent with a request id is routed by the command it carries.
        let (once, args) = match crate::resp::cluster::once(sent) {
            Ok(Some((id, inner))) => (Some(id), inner),
            Ok(None) => (None, sent),
            Err(e) => return Route::Refuse(e),
        };
        if once.is_some() && !matches!(classify(args), Class::Keyed { write: true, .. }) {
            return Route::Refuse(
                "ERR ACCELKV.ONCE carries one write of keys (SET, INCR, DEL, …)".into(),
            );
        }
        if let Some(r) = connection_state(s, args) {
            return r;
        }
        // CLUSTER SPLIT <key> goes to the leader of the key's range, as a write would.
        let split = args.len() == 3
            && args[0].eq_ignore_ascii_case(b"CLUSTER")
            && args[1].eq_ignore_ascii_case(b"SPLIT");
        let moving = match moving(args) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let start = moving.and_then(|(id, ..)| Some(self.map.borrow().range(id)?.start.clone()));
        if moving.is_some() && start.is_none() {
            return Route::Refuse("ERR no such range (CLUSTER RANGES)".into());
        }
        let (keys, is_write, upto) = match classify(args) {
            _ if split => (vec![args[2]], true, None),
            _ if start.is_some() => (vec![start.as_deref().unwrap_or_default()], true, None),
            Class::Local => return Route::Here,
            Class::Refused(why) => return Route::Refuse(format!("ERR {why} (docs/CLUSTER.md)")),
            Class::Keyed { keys, write, upto } => (keys, write, upto),
        };
        let floor = upto.is_some() && args[0].eq_ignore_ascii_case(b"FLOOR");
        let serving = is_write || s.barrier_ok;
        let range = match self.place(&keys, upto, floor, s.readonly && !is_write, serving) {
            Place::Lead(range) => range,
            Place::Replica => return Route::Here,
            Place::Refuse(m) => return Route::Refuse(m),
            Place::Settle(f) => {
                s.forward = Some(f);
                return Route::Wait;
            }
            Place::Away { range, to } => {
                if self.proxy && !s.proxied {
                    let mut cmd = Vec::new();
                    resp::command(&mut cmd, sent);
                    s.forward = Some(Forward::Proxy {
                        range,
                        to: to.resp,
                        cmd,
                        write: is_write,
                        proto,
                    });
                    return Route::Wait;
                }
                return Route::Refuse(format!("MOVED {range} {}", to.resp));
            }
        };
        s.forward = Some(if let Some((range, from, to)) = moving {
            Forward::Move { range, from, to }
        } else if split {
            let at = args[2].to_vec();
            Forward::Split { range, at }
        } else if is_write {
            let cmd = encode(&replicated(args, once), proto);
            Forward::Write { range, cmd }
        } else if s.barrier_ok {
            return Route::Here;
        } else {
            Forward::Barrier { range }
        });
        Route::Wait
    }

    fn locate(&self, key: &[u8], upto: Option<Option<&[u8]>>, floor: bool, count: bool) -> Located {
        match self.place(&[key], upto, floor, false, count) {
            Place::Lead(range) => Located::Lead(range),
            Place::Settle(f) => Located::Settle(f),
            // Not asked for (a replica read): no binary operation reads a replica's state.
            Place::Replica => Located::Refused(Status::Error, "not a leader read".into()),
            Place::Away { range, to } => {
                let (status, m) = binary_moved(range, Some(&to.binary));
                Located::Refused(status, m)
            }
            Place::Refuse(m) => {
                let (status, m) = self.binary_error(m.as_bytes());
                Located::Refused(status, m)
            }
        }
    }

    fn binary_error(&self, reply: &[u8]) -> (Status, String) {
        let text = String::from_utf8_lossy(reply);
        let text = text.trim_start_matches('-').trim_end();
        let (code, rest) = text.split_once(' ').unwrap_or((text, ""));
        match code {
            "MOVED" => {
                // MOVED <range> <RESP address>: the same node's binary address.
                let mut w = rest.split(' ');
                let (range, resp) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
                let map = self.map.borrow();
                let to = map.nodes.values().find(|a| a.resp == resp);
                binary_moved(range, to.map(|a| a.binary.as_str()))
            }
            "TRYAGAIN" => (Status::TryAgain, rest.to_string()),
            _ => (Status::Error, text.to_string()),
        }
    }

    fn submit(&self, f: Forward, done: Box<dyn FnOnce(Settled) + Send>) {
        let range = match f {
            Forward::Proxy {
                to,
                cmd,
                write,
                proto,
                ..
            } => {
                let pool = self.proxies.clone();
                self.rt.spawn(async move {
                    done(Settled::Reply(pool.relay(to, cmd, write, proto).await));
                });
                return;
            }
            Forward::Split { range, at } => {
                let ctl = self.ctl.clone();
                self.rt.spawn(async move {
                    let mut out = Vec::new();
                    match crate::cluster::split::split(&ctl, range, at).await {
                        Ok(child) => resp::integer(&mut out, child as i64),
                        Err(e) => resp::error(&mut out, &e),
                    }
                    done(Settled::Reply(out));
                });
                return;
            }
            Forward::Move { range, from, to } => {
                let ctl = self.ctl.clone();
                self.rt.spawn(async move {
                    let mut out = Vec::new();
                    match crate::cluster::moves::move_replica(&ctl, range, from, to).await {
                        Ok(()) => resp::simple(&mut out, "OK"),
                        Err(e) => resp::error(&mut out, &e),
                    }
                    done(Settled::Reply(out));
                });
                return;
            }
            Forward::Settle {
                range,
                epoch,
                leaderless,
            } => return self.settle(range, epoch, leaderless, done),
            Forward::Write { range, .. } | Forward::Barrier { range } => range,
        };
        let Some(raft) = self.raft.group(range) else {
            let e = NotServed::NotLeader(None);
            done(Settled::Reply(settle_error(&self.map, self.me, range, e)));
            return;
        };
        match f {
            Forward::Write { cmd, .. } => self.write(range, raft, cmd, done),
            _ => self.barrier(range, raft, done),
        }
    }

    fn command(&self, args: &[&[u8]], proto: Version, out: &mut Vec<u8>) {
        let map = self.map.borrow();
        let sub = crate::resp::reply::upper(args[0]);
        match (&sub[..], args.len()) {
            (b"RANGES", 1) => {
                // [id, start, end or nil, leader's RESP address or nil, [[node, address]…]]
                resp::array(out, map.ranges.len());
                for r in &map.ranges {
                    let leader = match self.raft.group(r.id) {
                        Some(g) => g.metrics().borrow().current_leader,
                        None => r.leader,
                    };
                    let addr = |id: u64| map.nodes.get(&id).map(|a| a.resp.as_bytes());
                    resp::array(out, 5);
                    resp::integer(out, r.id as i64);
                    resp::bulk(out, Some(&r.start));
                    resp::bulk_in(out, r.end.as_deref(), proto);
                    resp::bulk_in(out, leader.and_then(addr), proto);
                    resp::array(out, r.replicas.len());
                    for id in &r.replicas {
                        resp::array(out, 2);
                        resp::integer(out, *id as i64);
                        resp::bulk(out, addr(*id));
                    }
                }
            }
            (b"INFO", 1) => {
                let led = map
                    .ranges_of(self.me)
                    .filter(|r| {
                        let g = self.raft.group(r.id);
                        g.is_some_and(|g| g.metrics().borrow().current_leader == Some(self.me))
                    })
                    .count();
                // Keyed commands served as leader by the ranges open here (their load).
                let served: u64 = {
                    let g = self.reg.machines.read().unwrap_or_else(|e| e.into_inner());
                    g.values().map(|m| m.load.served()).sum()
                };
                let text = format!(
                    "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_epoch:{}\r\ncluster_my_node:{}\r\ncluster_known_nodes:{}\r\ncluster_ranges:{}\r\ncluster_ranges_here:{}\r\ncluster_ranges_led_here:{led}\r\ncluster_commands_led_here:{served}\r\n",
                    map.epoch,
                    self.me,
                    map.nodes.len(),
                    map.ranges.len(),
                    map.ranges_of(self.me).count(),
                );
                resp::verbatim(out, text.as_bytes(), proto);
            }
            (b"MYID", 1) => resp::bulk(out, Some(self.me.to_string().as_bytes())),
            _ => resp::error(
                out,
                &format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try RANGES, INFO, MYID, NOPROXY, SPLIT <key> or MOVE <range> <from> <to>.",
                    String::from_utf8_lossy(args[0])
                ),
            ),
        }
    }

    fn stop(&self) {
        crate::cluster::stop::hand_over(&self.ctl, &self.rt);
    }

    fn groups(&self) -> Vec<GroupSample> {
        let stats = self.raft.stats();
        stats
            .into_iter()
            .map(|g| GroupSample {
                range: g.range,
                term: g.term,
                last_log_index: g.last_log_index,
                applied_index: g.applied_index,
                leader: g.leader,
                leader_changes: g.leader_changes,
                snapshot_bytes: g.snapshot_bytes,
                snapshots_built: g.snapshots_built,
            })
            .collect()
    }

    fn describe(&self) -> String {
        let map = self.map.borrow();
        let ranges: Vec<String> = map.ranges_of(self.me).map(|r| r.id.to_string()).collect();
        format!(
            "cluster node {} raft {} etcd {} ranges [{}] epoch {}",
            self.me,
            self.raft.addr,
            self.etcd,
            ranges.join(","),
            map.epoch
        )
    }
}

/// The binary redirect of range `range` to the node at binary address `to`: MOVED, or
/// TRYAGAIN while the map has no address for it.
fn binary_moved(range: impl std::fmt::Display, to: Option<&str>) -> (Status, String) {
    match to.filter(|a| !a.is_empty()) {
        Some(a) => (Status::Moved, format!("{range} {a}")),
        None => (
            Status::TryAgain,
            format!("range {range}'s leader has no binary address in the map yet"),
        ),
    }
}

/// The error (without its `-`) for a command whose range has no leader known here.
fn no_leader(range: u64) -> String {
    format!("TRYAGAIN range {range} has no leader at the moment")
}

/// The RESP error for a routed command its group did not serve.
fn settle_error(map: &watch::Receiver<RangeMap>, me: u64, range: u64, e: NotServed) -> Vec<u8> {
    let map = map.borrow();
    let msg = match (e, map.range(range)) {
        // A leader the map shows moved away is about to step down: not followed.
        (NotServed::NotLeader(Some((id, _))), Some(r)) if id != me && r.replicas.contains(&id) => {
            match map.nodes.get(&id) {
                Some(a) => format!("MOVED {} {}", r.id, a.resp),
                None => no_leader(range),
            }
        }
        (NotServed::NotLeader(_), _) => no_leader(range),
        (NotServed::Unavailable(m), _) => format!("CLUSTERDOWN range {range}: {m}"),
    };
    let mut out = Vec::new();
    resp::error(&mut out, &msg);
    out
}

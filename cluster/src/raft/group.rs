//! The Raft groups one node runs: one per range it holds a replica of, each with its log
//! and snapshot in `<dir>/range-<id>/`, all reached through the node's one Raft port. Also
//! the two calls the serving path makes: a write (committed by a majority, then applied)
//! and a read barrier (openraft's read index: the leader confirms with a quorum that it
//! still leads and waits until it has applied everything committed before the read).

use super::log::LogStore;
use super::machine::{Machine, StateMachine};
use super::net::{self, Groups, Network};
use super::{Command, Raft};
use crate::map::{NodeId, RangeId};
use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, SnapshotPolicy};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a node's groups are tuned.
#[derive(Clone, Debug)]
pub struct Tuning {
    /// Leader heartbeat.
    pub heartbeat: Duration,
    /// A follower that hears no leader for a random time in this range starts an election.
    pub election: (Duration, Duration),
    /// A snapshot is taken after this many entries, and the log before it dropped.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot, so a replica a little behind catches up
    /// from the log rather than from a whole snapshot.
    pub keep_behind_snapshot: u64,
    /// Whether log appends are flushed to the device (always, outside tests of the logic).
    pub sync: bool,
    /// The local address Raft connections leave from (`None`: the system's choice).
    pub source: Option<std::net::IpAddr>,
    /// Mutual TLS between replicas, and the longest frame (net.rs).
    pub transport: net::Limits,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            heartbeat: Duration::from_millis(100),
            election: (Duration::from_millis(400), Duration::from_millis(800)),
            snapshot_every: 20_000,
            keep_behind_snapshot: 1000,
            sync: true,
            source: None,
            transport: net::Limits::default(),
        }
    }
}

/// Why a write or a read was not served here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotServed {
    /// This replica does not lead the group; the leader, if known, with its Raft address.
    NotLeader(Option<(NodeId, String)>),
    /// The group cannot answer now (shutting down, or no quorum in time).
    Unavailable(String),
}

impl std::fmt::Display for NotServed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotServed::NotLeader(Some((id, _))) => write!(f, "node {id} leads this range"),
            NotServed::NotLeader(None) => write!(f, "this range has no leader now"),
            NotServed::Unavailable(e) => write!(f, "the range is unavailable: {e}"),
        }
    }
}

/// How [`RaftNode::open_group`] opens a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Open {
    /// A range of the first map: a group that never ran anywhere is initialized by its
    /// lowest-numbered member.
    Bootstrap,
    /// A replica that joins a running group (a range made by a split elsewhere, or one
    /// moved here): it starts empty and is sent the leader's snapshot, or restores its
    /// own files.
    Join,
    /// A range this node just split off: [`RaftNode::seed_group`] wrote its files and the
    /// machine holds their contents already.
    Seeded,
}

/// What one group's replica here reports (Prometheus, INFO).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub range: RangeId,
    pub term: u64,
    /// The last entry in the log here.
    pub last_log_index: u64,
    /// The last entry applied to the store here (what is known committed and applied).
    pub applied_index: u64,
    /// Whether this replica leads the group.
    pub leader: bool,
    /// Times the group's leader, as this replica saw it, changed to another node since the
    /// replica opened.
    pub leader_changes: u64,
    /// Bytes of the snapshot kept here, and snapshots this replica built since it opened.
    pub snapshot_bytes: u64,
    pub snapshots_built: u64,
}

/// What a node keeps beside each open group for [`RaftNode::stats`].
struct Watched {
    sm: StateMachine,
    leader_changes: Arc<AtomicU64>,
}

/// A node's Raft side: its groups and its Raft port.
pub struct RaftNode {
    /// This node's id.
    pub id: NodeId,
    /// Where its Raft port listens.
    pub addr: SocketAddr,
    dir: PathBuf,
    groups: Groups,
    pool: Arc<net::Pool>,
    tuning: Tuning,
    watched: Mutex<HashMap<RangeId, Watched>>,
}

impl RaftNode {
    /// Starts node `id`'s Raft port on `listen` (a running tokio runtime must be current),
    /// keeping group files under `dir`.
    pub async fn start(
        id: NodeId,
        listen: &str,
        dir: PathBuf,
        tuning: Tuning,
    ) -> std::io::Result<RaftNode> {
        std::fs::create_dir_all(&dir)?;
        let l = tokio::net::TcpListener::bind(listen).await?;
        let addr = l.local_addr()?;
        let groups: Groups = Default::default();
        tokio::spawn(net::serve(l, groups.clone(), tuning.transport.clone()));
        Ok(RaftNode {
            id,
            addr,
            dir,
            groups,
            pool: Arc::new(net::Pool::new(tuning.transport.clone())),
            tuning,
            watched: Default::default(),
        })
    }

    /// Whether this node has files for range `range` (it held a replica before).
    pub fn has_files(&self, range: RangeId) -> bool {
        self.dir.join(format!("range-{range}")).exists()
    }

    /// Writes the files of a new group, range `range` split off another: a snapshot of
    /// `data` at the log's start (index 0, where openraft's `initialize` puts a group's
    /// first membership) with `members` as its voters, and a log that begins after it. So
    /// every replica that applied the split starts the group at the same state with no
    /// entry to replay, and one that did not is sent a snapshot by the group's leader.
    /// Answers `false`, writing nothing, if the range has files already. The files are
    /// written aside and renamed into place, so a crash leaves all of them or none.
    pub fn seed_group(
        &self,
        range: RangeId,
        members: &BTreeMap<NodeId, String>,
        data: &[u8],
    ) -> Result<bool, String> {
        let dir = self.dir.join(format!("range-{range}"));
        if dir.exists() {
            return Ok(false);
        }
        let tmp = self.dir.join(format!("range-{range}.seed"));
        let e = |e: std::io::Error| format!("writing the files of range {range}: {e}");
        let _ = std::fs::remove_dir_all(&tmp);
        let at = openraft::LogId::default();
        let nodes: BTreeMap<u64, BasicNode> = members
            .iter()
            .map(|(id, a)| (*id, BasicNode { addr: a.clone() }))
            .collect();
        let voters = vec![nodes.keys().copied().collect()];
        let meta = openraft::SnapshotMeta {
            last_log_id: Some(at),
            last_membership: openraft::StoredMembership::new(
                Some(at),
                openraft::Membership::new(voters, nodes),
            ),
            snapshot_id: "seed".into(),
        };
        super::machine::seed(&tmp, &meta, data).map_err(e)?;
        LogStore::seed(&tmp, at).map_err(e)?;
        std::fs::File::open(&tmp)
            .and_then(|d| d.sync_all())
            .map_err(e)?;
        std::fs::rename(&tmp, &dir).map_err(e)?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(e)?;
        Ok(true)
    }

    /// Stops this node's replica of `range` and deletes its files (it was moved away).
    pub async fn close_group(&self, range: RangeId) -> Result<(), String> {
        let g = self
            .groups
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&range);
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&range);
        if let Some(g) = g {
            let _ = g.shutdown().await;
        }
        let dir = self.dir.join(format!("range-{range}"));
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("deleting the files of range {range}: {e}"))
            }
            _ => Ok(()),
        }
    }

    /// Opens this node's replica of range `range` (whose voters are `members`, by id and
    /// Raft address), restoring it from its files; `how` says how a new replica starts.
    pub async fn open_group(
        &self,
        range: RangeId,
        members: &BTreeMap<NodeId, String>,
        machine: Arc<dyn Machine>,
        how: Open,
    ) -> Result<Raft, String> {
        let dir = self.dir.join(format!("range-{range}"));
        let log = LogStore::open(&dir, self.tuning.sync)
            .map_err(|e| format!("opening the log of range {range}: {e}"))?;
        let fresh = log.is_empty() && how == Open::Bootstrap;
        let sm = StateMachine::open(&dir, machine, how == Open::Seeded)?;
        let sm_stats = sm.clone();
        let t = &self.tuning;
        let config = openraft::Config {
            cluster_name: format!("accelkv-range-{range}"),
            heartbeat_interval: t.heartbeat.as_millis() as u64,
            election_timeout_min: t.election.0.as_millis() as u64,
            election_timeout_max: t.election.1.as_millis() as u64,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(t.snapshot_every),
            max_in_snapshot_log_to_keep: t.keep_behind_snapshot,
            snapshot_max_chunk_size: net::SNAPSHOT_CHUNK,
            ..Default::default()
        }
        .validate()
        .map_err(|e| e.to_string())?;
        let net = Network {
            range,
            source: t.source,
            pool: self.pool.clone(),
        };
        let raft = Raft::new(self.id, Arc::new(config), net, log, sm)
            .await
            .map_err(|e| format!("starting the group of range {range}: {e}"))?;
        self.groups
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(range, raft.clone());
        self.watch(range, &raft, sm_stats);
        if fresh && members.keys().next() == Some(&self.id) {
            let nodes: BTreeMap<u64, BasicNode> = members
                .iter()
                .map(|(id, a)| (*id, BasicNode { addr: a.clone() }))
                .collect();
            if let Err(e) = raft.initialize(nodes).await {
                // Already initialized (a restart that lost nothing) is no error.
                if !matches!(
                    e,
                    RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))
                ) {
                    return Err(format!("initializing range {range}: {e}"));
                }
            }
        }
        Ok(raft)
    }

    /// Counts group `range`'s leader changes (a task that ends with the group) and keeps
    /// its state machine for the snapshot sizes.
    fn watch(&self, range: RangeId, raft: &Raft, sm: StateMachine) {
        let leader_changes = Arc::new(AtomicU64::new(0));
        let count = leader_changes.clone();
        let mut rx = raft.metrics();
        tokio::spawn(async move {
            let mut last = rx.borrow().current_leader;
            while rx.changed().await.is_ok() {
                let now = rx.borrow().current_leader;
                if now.is_some() && now != last {
                    count.fetch_add(1, Ordering::Relaxed);
                }
                if now.is_some() {
                    last = now;
                }
            }
        });
        let w = Watched { sm, leader_changes };
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(range, w);
    }

    /// Every open group's state here, by range.
    pub fn stats(&self) -> Vec<GroupStats> {
        let groups = self.groups.read().unwrap_or_else(|e| e.into_inner());
        let watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<GroupStats> = groups
            .iter()
            .map(|(&range, raft)| {
                let m = raft.metrics().borrow().clone();
                let w = watched.get(&range);
                let (snapshot_bytes, snapshots_built) = w.map_or((0, 0), |w| w.sm.snapshot_stats());
                GroupStats {
                    range,
                    term: m.current_term,
                    last_log_index: m.last_log_index.unwrap_or(0),
                    applied_index: m.last_applied.map_or(0, |l| l.index),
                    leader: m.state.is_leader(),
                    leader_changes: w.map_or(0, |w| w.leader_changes.load(Ordering::Relaxed)),
                    snapshot_bytes,
                    snapshots_built,
                }
            })
            .collect();
        out.sort_by_key(|g| g.range);
        out
    }

    /// Asks the node whose Raft address is `addr` to stand for election in range `range`'s
    /// group at once (a leader that removed itself hands over with it).
    pub async fn ask_to_campaign(&self, range: RangeId, addr: &str) -> Result<(), String> {
        net::campaign(self.pool.clone(), self.tuning.source, range, addr)
            .await
            .map_err(|e| format!("asking {addr} to campaign for range {range}: {e}"))
    }

    /// The election timeout's range: a follower that hears no leader for a random time in
    /// it (after the leader's lease, which is its upper end) starts an election.
    pub fn election_timeout(&self) -> (Duration, Duration) {
        self.tuning.election
    }

    /// The group of `range`, if this node runs it.
    pub fn group(&self, range: RangeId) -> Option<Raft> {
        self.groups
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&range)
            .cloned()
    }

    /// Stops every group (their files stay).
    pub async fn shutdown(&self) {
        let all: Vec<Raft> = self
            .groups
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, r)| r)
            .collect();
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        for r in all {
            let _ = r.shutdown().await;
        }
    }
}

/// Commits `cmd` in `raft`'s group and answers what applying it answered.
pub async fn write(raft: &Raft, cmd: Vec<u8>) -> Result<Vec<u8>, NotServed> {
    match raft.client_write(Command(cmd)).await {
        Ok(r) => Ok(r.data.0),
        Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => Err(
            NotServed::NotLeader(f.leader_id.zip(f.leader_node.map(|n| n.addr))),
        ),
        Err(e) => Err(NotServed::Unavailable(e.to_string())),
    }
}

/// Waits until a read on this replica is linearizable: it leads the group (confirmed by a
/// quorum now) and has applied every command committed before this call.
pub async fn read_barrier(raft: &Raft) -> Result<(), NotServed> {
    match raft.ensure_linearizable().await {
        Ok(_) => Ok(()),
        Err(RaftError::APIError(openraft::error::CheckIsLeaderError::ForwardToLeader(f))) => Err(
            NotServed::NotLeader(f.leader_id.zip(f.leader_node.map(|n| n.addr))),
        ),
        Err(e) => Err(NotServed::Unavailable(e.to_string())),
    }
}

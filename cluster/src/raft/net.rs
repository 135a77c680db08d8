//! The transport between replicas: each Raft message travels as one length-prefixed
//! frame over TCP (`u32 length | format | payload`, the payload in postcard: codec.rs), naming the range whose group it is for,
//! and the answer comes back on the same connection. A node listens on one Raft port for
//! all its groups; a peer connection is opened on first use and again after any error.
//! The connection is plain TCP or mutual TLS (link.rs).
//!
//! Frames are bounded (`Limits::max_frame`, which the server sizes from the snapshot chunk
//! and its largest command): a reader refuses a longer one, and allocates as the bytes
//! arrive, not as the length claims. A leader whose append would be longer sends the
//! entries that fit and reports the rest unsent (openraft's `PartialSuccess`); the next
//! append carries them. Inbound connections are capped (`MAX_INBOUND`).

use super::codec;
use super::link::{self, Link, RaftTls};
use super::{Config, Raft};
use crate::map::RangeId;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of a snapshot chunk (openraft's `snapshot_max_chunk_size`, set by group.rs).
pub const SNAPSHOT_CHUNK: u64 = 4 << 20;

/// Connections a node's Raft port serves at once; more are closed at once.
const MAX_INBOUND: usize = 1024;

/// A node's Raft transport settings: TLS, and the longest frame either side takes.
#[derive(Clone, Debug)]
pub struct Limits {
    pub tls: Option<RaftTls>,
    /// The longest frame (a snapshot chunk, a batch of entries); at least a few snapshot
    /// chunks, and more than the largest command the servers accept.
    pub max_frame: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            tls: None,
            max_frame: 16 * SNAPSHOT_CHUNK as usize,
        }
    }
}

#[derive(Serialize, Deserialize)]
enum Body {
    Append(AppendEntriesRequest<Config>),
    Vote(VoteRequest<u64>),
    Snapshot(InstallSnapshotRequest<Config>),
    /// Stand for election now (a leader leaving the group hands over sooner than an
    /// election timeout; not a Raft message, so safe whenever it arrives).
    Campaign,
}

#[derive(Serialize, Deserialize)]
struct Rpc {
    range: RangeId,
    body: Body,
}

#[derive(Serialize, Deserialize)]
enum Reply {
    Append(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    Snapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    /// The campaign was started (`false`: the group has stopped).
    Campaigning(bool),
    /// This node runs no group for the range (it was moved away, or is not started yet).
    NoGroup,
}

/// The groups a node runs, by range: where incoming messages go.
pub type Groups = Arc<RwLock<HashMap<RangeId, Raft>>>;

/// Connections to peers, by address, shared by a node's groups. openraft makes a new
/// client for every leadership check (each linearizable read's read index); without the
/// pool each would open a TCP connection per peer, and a busy node would run out of ports.
/// At most `PER_PEER` (16) connections to one peer exist at once, idle or busy: a call waits
/// for one rather than opening more (a slow peer would otherwise collect a connection per
/// read it is behind on).
pub struct Pool {
    idle: Mutex<HashMap<String, Vec<Link>>>,
    permits: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// TLS and the frame limit, for the connections it opens.
    limits: Limits,
}

/// Connections to one peer at most.
const PER_PEER: usize = 16;

/// How long an exchange waits for its answer after its caller stopped waiting, so that
/// the connection can go back to the pool.
const LATE_ANSWER: Duration = Duration::from_secs(5);

impl Pool {
    /// A pool whose connections follow `limits`.
    pub fn new(limits: Limits) -> Pool {
        Pool {
            idle: Default::default(),
            permits: Default::default(),
            limits,
        }
    }

    /// The right to hold one connection to `addr`.
    async fn permit(&self, addr: &str) -> OwnedSemaphorePermit {
        let limit = self
            .permits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(addr.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(PER_PEER)))
            .clone();
        limit
            .acquire_owned()
            .await
            .expect("the pool never closes its semaphores")
    }

    fn take(&self, addr: &str) -> Option<Link> {
        self.idle
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(addr)?
            .pop()
    }

    /// Keeps an idle connection (its holder's permit vouches that there is room).
    fn give(&self, addr: &str, s: Link) {
        let mut g = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        let v = g.entry(addr.to_string()).or_default();
        if v.len() < PER_PEER {
            v.push(s);
        }
    }
}

/// Reads one frame of at most `max` bytes, its buffer growing as bytes arrive (a length
/// alone allocates nothing).
async fn read_frame<S: AsyncRead + Unpin + ?Sized>(
    s: &mut S,
    max: usize,
) -> std::io::Result<Vec<u8>> {
    let n = s.read_u32_le().await? as usize;
    if n > max {
        return Err(std::io::Error::other(format!(
            "a {n}-byte frame is longer than the limit of {max}"
        )));
    }
    let mut b = Vec::with_capacity(n.min(64 << 10));
    s.take(n as u64).read_to_end(&mut b).await?;
    if b.len() < n {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    Ok(b)
}

async fn write_frame<S: AsyncWrite + Unpin + ?Sized>(s: &mut S, b: &[u8]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(b.len() + 4);
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
    s.write_all(&out).await
}

/// Serves Raft messages arriving on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, groups: Groups, limits: Limits) {
    let inbound = Arc::new(Semaphore::new(MAX_INBOUND));
    loop {
        let Ok((s, _)) = listener.accept().await else {
            continue;
        };
        let Ok(permit) = inbound.clone().try_acquire_owned() else {
            continue; // too many connections: this one is closed
        };
        let (groups, limits) = (groups.clone(), limits.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let Ok(mut s) = link::accept(limits.tls.as_ref(), s).await else {
                return; // not a peer of ours: no certificate from the cluster's CA
            };
            while let Ok(frame) = read_frame(&mut s, limits.max_frame).await {
                let Ok(rpc) = codec::unframe::<Rpc>(&frame) else {
                    return; // not a peer of ours (or not of this format): hang up
                };
                let raft = groups
                    .read()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&rpc.range)
                    .cloned();
                let reply = match raft {
                    None => Reply::NoGroup,
                    Some(r) => match rpc.body {
                        Body::Append(q) => Reply::Append(r.append_entries(q).await),
                        Body::Vote(q) => Reply::Vote(r.vote(q).await),
                        Body::Snapshot(q) => Reply::Snapshot(r.install_snapshot(q).await),
                        // A leader asked again (the asker not having heard yet) stays
                        // one: a new election would only leave the range leaderless.
                        Body::Campaign if r.metrics().borrow().state.is_leader() => {
                            Reply::Campaigning(true)
                        }
                        Body::Campaign => Reply::Campaigning(r.trigger().elect().await.is_ok()),
                    },
                };
                let b = codec::frame(&reply).expect("a reply serializes");
                if write_frame(&mut s, &b).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// Makes the connections of one range's group to its peers.
pub struct Network {
    /// The range whose group this is.
    pub range: RangeId,
    /// The local address connections leave from (`None`: the system's choice), so a host
    /// with several addresses sends from the one it is known by.
    pub source: Option<IpAddr>,
    /// The node's idle connections.
    pub pool: Arc<Pool>,
}

impl RaftNetworkFactory<Config> for Network {
    type Network = Peer;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Peer {
        Peer {
            target,
            addr: node.addr.clone(),
            range: self.range,
            source: self.source,
            pool: self.pool.clone(),
        }
    }
}

/// One group's connection to one peer.
pub struct Peer {
    target: u64,
    addr: String,
    range: RangeId,
    source: Option<IpAddr>,
    pool: Arc<Pool>,
}

type RpcErr<E = openraft::error::Infallible> = RPCError<u64, BasicNode, RaftError<u64, E>>;

impl Peer {
    async fn call(&mut self, body: Body, ttl: Duration) -> Result<Reply, std::io::Error> {
        let rpc = codec::frame(&Rpc {
            range: self.range,
            body,
        })?;
        self.send(rpc, ttl).await
    }

    /// An append cut to the frame limit: the frame, and the last entry it carries when
    /// it does not carry them all.
    fn append_frame(
        &self,
        rpc: AppendEntriesRequest<Config>,
    ) -> std::io::Result<(Vec<u8>, Option<openraft::LogId<u64>>)> {
        let max = self.pool.limits.max_frame;
        let mut cut = None;
        let mut msg = Rpc {
            range: self.range,
            body: Body::Append(rpc),
        };
        loop {
            let b = codec::frame(&msg)?;
            if b.len() <= max {
                return Ok((b, cut));
            }
            let Body::Append(rpc) = &mut msg.body else {
                return Err(std::io::Error::other("not an append"));
            };
            let n = rpc.entries.len();
            if n <= 1 {
                return Err(std::io::Error::other(format!(
                    "an entry of {} bytes is longer than the Raft frame limit of {max}",
                    b.len()
                )));
            }
            rpc.entries.truncate(n / 2);
            cut = rpc.entries.last().map(|e| e.log_id);
            // The follower commits no further than what it is sent.
            rpc.leader_commit = rpc.leader_commit.min(cut);
        }
    }

    /// Sends an encoded request and reads its answer.
    async fn send(&mut self, rpc: Vec<u8>, ttl: Duration) -> Result<Reply, std::io::Error> {
        let (pool, addr, source) = (self.pool.clone(), self.addr.clone(), self.source);
        // Its own task: openraft drops a call once it has the answers it needs (a read
        // index's leadership check stops waiting at a quorum), and a connection abandoned
        // halfway through an exchange can never carry another; as a task the exchange
        // finishes anyway and its connection goes back to the pool, so abandoned calls do
        // not each cost a connection (and a port in TIME_WAIT). For the same reason the
        // task waits for a late answer well past the caller's `ttl` (a loaded machine's
        // peer answers late, not never); the caller stops waiting at `ttl`.
        let patience = ttl.max(LATE_ANSWER);
        let wait = tokio::time::Instant::now() + ttl;
        let permit = tokio::time::timeout_at(wait, pool.permit(&addr))
            .await
            .map_err(|_| std::io::Error::other("no connection to the peer came free in time"))?;
        let task = tokio::spawn(async move {
            let _permit = permit;
            let reused = pool.take(&addr);
            let fresh = reused.is_none();
            let mut conn = reused;
            let r = tokio::time::timeout(patience, async {
                match exchange(&mut conn, &addr, source, &pool.limits, &rpc).await {
                    // A kept connection the peer closed meanwhile (it restarted, say): once
                    // more on a new one. Every message is safe to repeat.
                    Err(_) if !fresh => {
                        conn = None;
                        exchange(&mut conn, &addr, source, &pool.limits, &rpc).await
                    }
                    r => r,
                }
            })
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the peer did not answer in time")));
            // Kept only after a whole exchange.
            if let (Ok(_), Some(s)) = (&r, conn) {
                pool.give(&addr, s);
            }
            r
        });
        let frame = tokio::time::timeout_at(wait, task)
            .await
            .map_err(|_| std::io::Error::other("the peer did not answer in time"))?
            .map_err(std::io::Error::other)??;
        codec::unframe(&frame)
    }

    #[allow(clippy::result_large_err)] // openraft's own error type, returned as it is
    fn remote<T, E: std::error::Error>(
        &self,
        r: Result<T, RaftError<u64, E>>,
    ) -> Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>> {
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// Asks the node at `addr` to stand for election in range `range`'s group now.
pub(crate) async fn campaign(
    pool: Arc<Pool>,
    source: Option<IpAddr>,
    range: RangeId,
    addr: &str,
) -> std::io::Result<()> {
    let mut peer = Peer {
        target: 0,
        addr: addr.to_string(),
        range,
        source,
        pool,
    };
    match peer.call(Body::Campaign, Duration::from_secs(1)).await? {
        Reply::Campaigning(true) => Ok(()),
        Reply::NoGroup => Err(std::io::Error::other(
            "the peer runs no group for the range",
        )),
        _ => Err(std::io::Error::other("the peer could not campaign")),
    }
}

/// Sends one frame on `conn` (connecting first if it is `None`) and reads the answer.
async fn exchange(
    conn: &mut Option<Link>,
    addr: &str,
    source: Option<IpAddr>,
    limits: &Limits,
    rpc: &[u8],
) -> std::io::Result<Vec<u8>> {
    if conn.is_none() {
        let s = connect(addr, source).await?;
        *conn = Some(link::connect(limits.tls.as_ref(), addr, s).await?);
    }
    let s = conn.as_mut().expect("connected");
    write_frame(s, rpc).await?;
    read_frame(s, limits.max_frame).await
}

/// Connects to `addr` from `source` (any port).
async fn connect(addr: &str, source: Option<IpAddr>) -> std::io::Result<TcpStream> {
    let Some(ip) = source else {
        return TcpStream::connect(addr).await;
    };
    let to = tokio::net::lookup_host(addr)
        .await?
        .find(|a| a.is_ipv4() == ip.is_ipv4())
        .ok_or_else(|| {
            std::io::Error::other(format!("{addr}: no address of the source's family"))
        })?;
    let sock = if ip.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    sock.bind(SocketAddr::new(ip, 0))?;
    sock.connect(to).await
}

fn unreachable<E: std::error::Error>(e: std::io::Error) -> RPCError<u64, BasicNode, E> {
    RPCError::Unreachable(Unreachable::new(&e))
}

fn confused<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    let e = std::io::Error::other("the peer answered another kind of message");
    RPCError::Network(NetworkError::new(&e))
}

fn no_group<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    unreachable(std::io::Error::other(
        "the peer runs no group for this range",
    ))
}

impl RaftNetwork<Config> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<Config>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RpcErr> {
        let (frame, cut) = self.append_frame(rpc).map_err(unreachable)?;
        match self.send(frame, option.hard_ttl()).await {
            // Entries were left out to fit the frame: the rest go in the next append.
            Ok(Reply::Append(Ok(AppendEntriesResponse::Success))) if cut.is_some() => {
                Ok(AppendEntriesResponse::PartialSuccess(cut))
            }
            Ok(Reply::Append(r)) => self.remote(r),
            Ok(Reply::NoGroup) => Err(no_group()),
            Ok(_) => Err(confused()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<Config>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RpcErr<InstallSnapshotError>> {
        match self.call(Body::Snapshot(rpc), option.hard_ttl()).await {
            Ok(Reply::Snapshot(r)) => self.remote(r),
            Ok(Reply::NoGroup) => Err(no_group()),
            Ok(_) => Err(confused()),
            Err(e) => Err(unreachable(e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RpcErr> {
        match self.call(Body::Vote(rpc), option.hard_ttl()).await {
            Ok(Reply::Vote(r)) => self.remote(r),
            Ok(Reply::NoGroup) => Err(no_group()),
            Ok(_) => Err(confused()),
            Err(e) => Err(unreachable(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::Command;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};
    use proptest::prelude::*;

    fn append() -> Vec<u8> {
        let id = |i| LogId::new(CommittedLeaderId::new(3, 1), i);
        let rpc = Rpc {
            range: 7,
            body: Body::Append(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(id(4)),
                entries: (5..8)
                    .map(|i| Entry {
                        log_id: id(i),
                        payload: EntryPayload::Normal(Command(b"SET k v".to_vec())),
                    })
                    .collect(),
                leader_commit: Some(id(4)),
            }),
        };
        codec::frame(&rpc).unwrap()
    }

    proptest! {
        /// Whatever arrives on the Raft port (anyone can connect to it), decoding a frame
        /// answers a message or an error, never a panic; so does a real message with bytes
        /// overwritten or cut short.
        #[test]
        fn any_frame_decodes_or_is_refused(
            raw in proptest::collection::vec(any::<u8>(), 0..256),
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
        ) {
            let _ = codec::unframe::<Rpc>(&raw);
            let _ = codec::unframe::<Reply>(&raw);
            let mut b = append();
            for (at, byte) in edits {
                let n = b.len();
                b[at % n] = byte;
            }
            let _ = codec::unframe::<Rpc>(&b);
            let _ = codec::unframe::<Rpc>(&b[..cut % (b.len() + 1)]);
        }
    }

    /// An append longer than the frame limit goes out cut to the entries that fit, and
    /// says which it carried last; the commit index sent is no further than that.
    #[test]
    fn an_append_past_the_frame_limit_is_cut_to_what_fits() {
        let id = |i| LogId::new(CommittedLeaderId::new(3, 1), i);
        let peer = |max_frame| Peer {
            target: 2,
            addr: "127.0.0.1:1".into(),
            range: 7,
            source: None,
            pool: Arc::new(Pool::new(Limits {
                tls: None,
                max_frame,
            })),
        };
        let rpc = AppendEntriesRequest::<Config> {
            vote: Vote::new_committed(3, 1),
            prev_log_id: Some(id(0)),
            entries: (1..=100)
                .map(|i| Entry {
                    log_id: id(i),
                    payload: EntryPayload::Normal(Command(vec![b'x'; 1000])),
                })
                .collect(),
            leader_commit: Some(id(90)),
        };
        let (whole, cut) = peer(1 << 20).append_frame(rpc.clone()).unwrap();
        assert_eq!(cut, None);
        let (b, cut) = peer(30_000).append_frame(rpc.clone()).unwrap();
        assert!(b.len() <= 30_000 && b.len() < whole.len());
        let sent: Rpc = codec::unframe(&b).unwrap();
        let Body::Append(q) = sent.body else {
            panic!("an append")
        };
        let last = q.entries.last().unwrap().log_id;
        assert_eq!(cut, Some(last));
        assert!(q.entries.len() >= 12, "{} entries", q.entries.len());
        assert_eq!(q.leader_commit, Some(last), "commit no further than sent");
        let e = peer(500).append_frame(rpc).unwrap_err();
        assert!(
            e.to_string().contains("longer than the Raft frame limit"),
            "{e}"
        );
    }

    /// A frame over the limit is refused from its length alone, and a length the bytes do
    /// not follow is an error, not a wait for memory.
    #[test]
    fn frames_are_bounded() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut long: &[u8] = &[0, 0, 0, 1, 1, 2, 3]; // 16 MiB claimed
            let e = read_frame(&mut long, 1 << 20).await.unwrap_err();
            assert!(e.to_string().contains("longer than the limit"), "{e}");
            let mut short: &[u8] = &[10, 0, 0, 0, 1, 2, 3];
            let e = read_frame(&mut short, 1 << 20).await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
            let mut ok: &[u8] = &[3, 0, 0, 0, 1, 2, 3];
            assert_eq!(read_frame(&mut ok, 3).await.unwrap(), vec![1, 2, 3]);
        });
    }

    #[test]
    fn a_message_round_trips_and_a_cut_one_is_refused() {
        let b = append();
        let rpc: Rpc = codec::unframe(&b).unwrap();
        assert_eq!(rpc.range, 7);
        let Body::Append(q) = rpc.body else {
            panic!("an append");
        };
        assert_eq!(q.entries.len(), 3);
        for cut in 0..b.len() {
            assert!(codec::unframe::<Rpc>(&b[..cut]).is_err(), "{cut}");
        }
    }
}

//! A RESP connection's state: authentication, its name and reply protocol, MULTI/WATCH,
//! what its replies rest on, its entry in the client registry, and (cluster mode) the
//! command waiting on its range's group.

use crate::core::acl::User;
use crate::core::clients::Registration;
use crate::core::route::ClusterSession;
use crate::core::shared::Shared;
use crate::resp::cursors::Cursors;
use accelkv_proto::resp::Version;
use std::sync::Arc;
use std::time::Instant;

/// The RESP adapter's server-wide state, shared by its connections: SCAN's cursors (Redis's
/// cursors are valid on any connection), the count of dead collections' subkeys the
/// background reclaim removed (`types/gc.rs`), the scripts, the encoding parameters.
#[derive(Default)]
pub struct RespGlobal {
    pub cursors: Cursors,
    pub reclaimed: Arc<std::sync::atomic::AtomicU64>,
    /// Loaded Lua scripts and the running ones' kill switch (script/).
    pub scripts: Arc<crate::resp::commands::script::Scripts>,
    /// Redis's encoding-tuning parameters (CONFIG SET hash-max-listpack-entries …).
    pub tuning: crate::resp::tuning::Tuning,
    /// INFO commandstats.
    pub cmdstats: crate::resp::cmdstats::CmdStats,
    /// INFO errorstats.
    pub errors: crate::resp::errorstats::ErrorStats,
    /// The databases' logical → physical table (SWAPDB).
    pub dbs: crate::resp::dbmap::DbMap,
    /// Pub/sub's subscriptions (pubsub.rs).
    pub pubsub: Arc<crate::resp::pubsub::PubSub>,
    /// SLOWLOG's entries (slowlog.rs).
    pub slowlog: crate::resp::slowlog::SlowLog,
    /// LATENCY's events (latency.rs).
    pub latency: crate::resp::latency::Latency,
    /// Keyspace notifications' classes (notify.rs).
    pub notify: crate::resp::notify_class::Notify,
    /// CLIENT PAUSE (pause.rs).
    pub pause: crate::resp::pause::Pause,
    /// ACL LOG (acl/log.rs).
    pub acl_log: crate::resp::acl::log::AclLog,
    /// Client-side caching: who reads which keys (tracking.rs).
    pub tracking: crate::resp::tracking::Tracking,
    /// `client-output-buffer-limit` (output_limits.rs).
    pub output_limits: crate::resp::output_limits::OutputLimits,
    /// MIGRATE's cached connections (commands/migrate_sockets.rs).
    pub migrate_sockets: crate::resp::commands::migrate_sockets::Sockets,
    /// Following a primary (REPLICAOF, replica/).
    pub replication: Arc<crate::resp::replica::Replication>,
}

/// What REPLCONF asked of the next SYNC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RdbOnly {
    /// Not asked: SYNC is refused (a replica's stream is not served).
    #[default]
    No,
    /// The whole data set.
    All,
    /// Only the functions' libraries (`rdb-filter-only functions`).
    Functions,
}

/// A connection's command being read argument by argument, its big arguments into memory
/// of their own (`streamed.rs`).
#[derive(Debug, Default)]
pub struct Streamed {
    pub partial: accelkv_proto::resp_stream::Partial,
    /// Every argument is read: it waits only to run.
    pub complete: bool,
}

impl Streamed {
    /// Whether it waits only to run.
    pub fn ready(&self) -> bool {
        self.complete
    }

    /// The argument the loop read into its own memory.
    pub fn streamed(&mut self, arg: Vec<u8>) {
        self.partial.streamed(arg);
    }
}

/// What a session last noted in the client registry (`Session::note_client`):
/// subscriptions per space, queued commands (-1: not in MULTI), watched keys, blocked, the
/// last command.
pub type Noted = (
    Option<[usize; 3]>,
    i64,
    usize,
    bool,
    &'static str,
    usize,
    i64,
);

/// Which replies a connection is sent (CLIENT REPLY): pub/sub messages are sent whatever
/// this says, as Redis sends them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Replies {
    #[default]
    On,
    /// None until CLIENT REPLY ON.
    Off,
    /// Not this command's (CLIENT REPLY SKIP) nor the next one's.
    Skip,
    /// Not this command's; then every one again.
    SkipThis,
}

impl Replies {
    /// After a client's command ran: its reply (from `mark` in `out`) dropped if it is not
    /// sent. `subscribes`: it was a (un)subscription, whose confirmations are sent whatever
    /// this says, as Redis sends them (pushes, in either protocol).
    pub fn after(&mut self, out: &mut Vec<u8>, mark: usize, subscribes: bool) {
        match *self {
            Replies::On => return,
            Replies::Off => {}
            Replies::Skip => *self = Replies::SkipThis,
            Replies::SkipThis => *self = Replies::On,
        }
        if !subscribes {
            out.truncate(mark);
        }
    }
}

/// Per-connection RESP state.
pub struct Session {
    pub id: u64,
    pub authed: bool,
    pub name: Option<Vec<u8>>,
    /// QUIT was received: close after the reply.
    pub quit: bool,
    /// A write command ran since the connection last waited for durability.
    pub wrote: bool,
    /// The newest write version the replies since the last park rest on (0: none): they
    /// are sent once it is visible to readers.
    pub unreleased: u64,
    /// Bytes per reply of the last batch (how many commands to decode next, given the room
    /// left under the output limit).
    pub reply_hint: usize,
    /// The reply protocol (`HELLO 3` switches to RESP3).
    pub proto: Version,
    /// MULTI/WATCH state (tx.rs).
    pub tx: TxState,
    /// This connection in the server's registry (CLIENT LIST/KILL); `None` in tests.
    pub client: Option<Registration>,
    /// Cluster mode: the command waiting on its range's group (core/route.rs).
    pub cluster: Box<ClusterSession>,
    /// The adapter's server-wide state.
    pub global: Arc<RespGlobal>,
    /// Blocking commands: keys to wake, a command asking to park (block.rs).
    pub block: crate::resp::block::BlockState,
    /// The selected database's key prefix (db.rs): the physical database that the
    /// selected one maps to (dbmap.rs).
    pub db: u16,
    /// The database the client selected (SELECT).
    pub selected: u16,
    /// The database table's epoch `db` was looked up at (0: not yet).
    pub db_epoch: u64,
    /// A command whose big arguments are being read into their own memory (streamed.rs).
    pub streamed: Option<Box<Streamed>>,
    /// The packed collections the running command has open (types/packed.rs).
    pub packs: crate::resp::commands::types::packed::Packs,
    /// A collection command run as one station operation: its key and pending writes,
    /// kept between commands for their buffers (core/station_one.rs).
    pub one: crate::core::station_one::One,
    /// Its pub/sub subscriptions, made at its first SUBSCRIBE (pubsub.rs).
    pub sub: Option<Box<crate::resp::pubsub::Subscriptions>>,
    /// How its event loop is reached for pub/sub messages, until its first SUBSCRIBE takes
    /// it (`None` without a loop: a cluster range's applied commands).
    pub push_to: Option<crate::resp::pubsub::PushTo>,
    /// The last command's name (CLIENT LIST's `cmd`), and what was last noted in the
    /// client registry, so an unchanged state is not noted again.
    pub last_cmd: std::cell::Cell<&'static str>,
    pub noted: Noted,
    /// Keyspace events waiting for their command to commit (notify.rs).
    pub events: Vec<crate::resp::notify_class::Event>,
    /// CLIENT REPLY's choice.
    pub replies: Replies,
    /// A script's command is running (MONITOR shows `lua` as its client).
    pub scripting: bool,
    /// The running function is flagged `allow-oom`: its writes pass maxmemory.
    pub allow_oom: bool,
    /// The user it is logged in as (`None`: a session of the server's own, a cluster
    /// range applying its log, which no user's rules limit).
    pub user: Option<Arc<User>>,
    /// The users' epoch `user` was taken at (a change since: it is taken again).
    pub acl_epoch: u64,
    /// `user` may run anything: the gate checks no permission.
    pub acl_open: bool,
    /// CLIENT TRACKING's state while on (tracking.rs).
    pub tracking: Option<Box<Tracked>>,
    /// Since when its output is past its class's soft limit (output_limits.rs).
    pub past_soft: Option<Instant>,
    /// What REPLCONF asked of the next SYNC (commands/sync.rs).
    pub rdb_only: RdbOnly,
}

/// A connection's client-side caching while CLIENT TRACKING is on; dropping it (OFF,
/// RESET, the connection's close) takes it out of the server's table.
pub struct Tracked {
    pub opts: crate::resp::tracking::Options,
    /// CLIENT CACHING's answer for the next command (OPTIN: yes; OPTOUT: no).
    pub caching: Option<bool>,
    id: u64,
    global: Arc<RespGlobal>,
}

impl Tracked {
    /// Starts tracking for connection `id`, its pushes queued on `me`.
    pub fn start(
        global: &Arc<RespGlobal>,
        id: u64,
        opts: crate::resp::tracking::Options,
        me: Arc<crate::resp::pubsub::Subscriber>,
    ) -> Tracked {
        global.tracking.start(id, opts.clone(), me, &global.notify);
        Tracked {
            opts,
            caching: None,
            id,
            global: global.clone(),
        }
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.global.tracking.stop(self.id, &self.global.notify);
    }
}

impl Session {
    /// A new connection's state (`client`: its entry in the server's registry).
    pub fn new(id: u64, client: Option<Registration>, global: Arc<RespGlobal>) -> Session {
        Session {
            id,
            global,
            client,
            authed: false,
            name: None,
            quit: false,
            wrote: false,
            unreleased: 0,
            reply_hint: 0,
            proto: Default::default(),
            tx: Default::default(),
            cluster: Default::default(),
            block: Default::default(),
            db: 0,
            selected: 0,
            db_epoch: 0,
            streamed: None,
            packs: Default::default(),
            one: Default::default(),
            sub: None,
            push_to: None,
            last_cmd: std::cell::Cell::new(""),
            noted: (None, -1, 0, false, "", 0, -1),
            events: Vec::new(),
            replies: Replies::On,
            scripting: false,
            allow_oom: false,
            user: None,
            acl_epoch: 0,
            acl_open: true,
            tracking: None,
            past_soft: None,
            rdb_only: Default::default(),
        }
    }

    /// Logs in as `user`, as of the users' epoch `epoch` (AUTH, HELLO, a new connection
    /// as the default user).
    pub fn login(&mut self, user: Arc<User>, epoch: u64) {
        if let Some(r) = &self.client {
            r.entry.set_user(&user.name);
        }
        self.acl_open = user.open;
        self.acl_epoch = epoch;
        self.user = Some(user);
    }

    /// Takes its user again after the users changed: a user removed since closes the
    /// connection (as Redis closes its clients), refusing everything until it does.
    #[cold]
    pub fn refresh_user(&mut self, acl: &crate::core::acl::Acl) {
        let epoch = acl.epoch();
        let Some(name) = self.user.as_ref().map(|u| u.name.clone()) else {
            self.acl_epoch = epoch;
            return;
        };
        match acl.get(&name) {
            Some(u) => self.login(u, epoch),
            None => {
                self.quit = true;
                self.login(Arc::new(User::new(&name, false).finish()), epoch);
            }
        }
    }

    /// The name of the user it is logged in as.
    pub fn user_name(&self) -> &[u8] {
        self.user
            .as_ref()
            .map_or(crate::core::acl::DEFAULT_USER, |u| &u.name)
    }

    /// Sets the connection's name (CLIENT SETNAME, HELLO SETNAME, RESET).
    pub fn set_name(&mut self, name: Option<&[u8]>) {
        if let Some(r) = &self.client {
            r.entry.set_name(name.unwrap_or_default());
        }
        self.name = name.map(<[u8]>::to_vec);
    }

    /// Selects a database (SELECT, RESET).
    pub fn set_db(&mut self, sh: &Shared, db: u16) {
        if let Some(r) = &self.client {
            r.entry.set_db(db);
        }
        self.selected = db;
        (self.db, self.db_epoch) = self.global.dbs.physical(sh, db);
    }

    /// Looks the selected database up again if the table changed since (SWAPDB,
    /// FLUSHALL, or its first read after start). When a SWAPDB moved it, the keys this
    /// connection watched there are another database's now, so its transaction fails at
    /// EXEC (Redis's SWAPDB touches the watched keys of both databases).
    pub fn refresh_db(&mut self, sh: &Shared) {
        let epoch = self.global.dbs.epoch();
        if epoch == self.db_epoch && epoch != 0 {
            return;
        }
        let was = self.db;
        (self.db, self.db_epoch) = self.global.dbs.physical(sh, self.selected);
        if self.db != was && !self.tx.stale {
            self.tx.stale = self.swap_touches_watched(sh, was);
        }
    }

    /// Whether a swap that moved the selected database from physical `was` to `self.db`
    /// touched a key this connection watched there: one live (unexpired) in either, as
    /// Redis's SWAPDB decides (a key absent or stale on both sides is untouched).
    fn swap_touches_watched(&self, sh: &Shared, was: u16) -> bool {
        use crate::resp::prefix::{shown, to_store};
        let live = |k: &[u8]| matches!(sh.view().get_with(k, |_| ()), Ok(Some(())));
        self.tx.watched.iter().any(|(key, _, _)| {
            let name = shown(key);
            to_store(was, name).as_ref() == key.as_slice()
                && (live(key) || live(&to_store(self.db, name)))
        })
    }

    /// Sets the reply protocol (HELLO, RESET).
    pub fn set_proto(&mut self, v: Version) {
        if let Some(r) = &self.client {
            r.entry.set_resp(if v == Version::Resp3 { 3 } else { 2 });
        }
        self.proto = v;
        if let Some(sub) = &self.sub {
            sub.set_resp3(v == Version::Resp3);
        }
    }

    /// Notes its state in the client registry for CLIENT LIST (subscriptions, MULTI, WATCH,
    /// blocked, the last command, MULTI's bytes, tracking), when it changed since the last
    /// note; `cmd` names the
    /// last command instead of `last_cmd` (CLIENT INFO names itself).
    pub fn note_client(&mut self, cmd: Option<&'static str>) {
        let Some(r) = &self.client else {
            return;
        };
        let now = (
            self.sub.as_ref().map(|s| s.per_space()),
            self.tx.queued.as_ref().map_or(-1, |q| q.len() as i64),
            self.tx.watched.len(),
            self.block.ticket.is_some(),
            cmd.unwrap_or(self.last_cmd.get()),
            self.tx.queued.as_ref().map_or(0, |q| {
                q.iter()
                    .map(|c| c.iter().map(Vec::len).sum::<usize>())
                    .sum()
            }),
            self.tracking
                .as_ref()
                .map_or(-1, |t| t.opts.redirect as i64),
        );
        if now == self.noted {
            return;
        }
        r.entry.note(|n| {
            n.subs = now.0.unwrap_or_default();
            (n.multi, n.watch, n.blocked, n.cmd) = (now.1, now.2, now.3, now.4);
            (n.multi_mem, n.redir) = (now.5, now.6);
        });
        self.noted = now;
    }

    /// What it holds besides the connection's buffers, as Redis's `getClientMemoryUsage`
    /// counts it: big arguments read into their own memory (part of `qbuf`), pub/sub
    /// messages waiting for the loop (part of `omem`), and MULTI's queue, watched keys,
    /// subscriptions and tracking prefixes (in `tot-mem` only): `(qbuf, omem, other)`.
    pub fn memory(&self) -> (usize, usize, usize) {
        let streamed = self
            .streamed
            .as_ref()
            .map_or(0, |st| st.partial.args().iter().map(Vec::capacity).sum());
        let waiting = self.sub.as_ref().map_or(0, |s| s.memory());
        let prefixes = self.tracking.as_ref().map_or(0, |t| t.opts.prefixes.len());
        let other = std::mem::size_of::<Session>()
            + self.noted.5
            + (self.tx.watched.len() + prefixes) * crate::core::clients::PER_ENTRY;
        (streamed, waiting, other)
    }

    /// Whether it holds a subscription while speaking RESP2: Redis's pub/sub context, where
    /// only the pub/sub commands, PING, QUIT and RESET run.
    pub fn in_pubsub_resp2(&self) -> bool {
        self.proto == Version::Resp2 && self.sub.as_ref().is_some_and(|s| s.any())
    }

    /// Whether this connection's GETs that passed the gate may run as a batch (the
    /// gathered batch across connections, or a run of GET/MGET in its own pipeline): it
    /// reads database 0, and its view of the database table is current. The one rule both
    /// GET doors follow past the gate. Not while reads of missing keys are announced
    /// (`notify.rs`), replies are held back (CLIENT REPLY) or a connection monitors
    /// (`monitor.rs`): each GET runs on its own then.
    pub fn may_batch_reads(&self) -> bool {
        self.db == 0
            && !accelkv_proto::slot::placed()
            && self.db_epoch != 0
            && self.db_epoch == self.global.dbs.epoch()
            && self.batches_plainly()
            && self.global.notify.flags() & crate::resp::notify_class::KEY_MISS == 0
    }

    /// Whether a run of plain SETs may run as one batch (`batch.rs`): not while any
    /// keyspace event is announced, nor where [`Session::may_batch_reads`] says no batch
    /// runs.
    pub fn may_batch_sets(&self) -> bool {
        self.batches_plainly() && self.global.notify.flags() == 0
    }

    /// Every reply is sent and nobody monitors: a batch's commands need not be seen one
    /// by one.
    fn batches_plainly(&self) -> bool {
        self.replies == Replies::On && !self.global.pubsub.monitoring() && self.tracking.is_none()
    }
}

/// A connection's transaction state (MULTI/WATCH, `tx.rs`).
#[derive(Default)]
pub struct TxState {
    /// Commands queued since MULTI (`None`: not in a transaction).
    pub queued: Option<Vec<Vec<Vec<u8>>>>,
    /// A queued command was refused: EXEC aborts.
    pub dirty: bool,
    /// A queued command may use memory (`denyoom`): past `maxmemory`, EXEC is refused
    /// whole, as Redis refuses it.
    pub denyoom: bool,
    /// The database table changed since keys were watched (SWAPDB): EXEC fails.
    pub stale: bool,
    /// Watched keys: each key, its version and whether it held a live value when watched.
    pub watched: Vec<(Vec<u8>, u64, bool)>,
    /// The transaction running (only during EXEC, or an atomic multi-key command).
    pub running: Option<Box<crate::core::station_tx::Tx>>,
}

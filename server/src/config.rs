//! Server configuration: command-line flags (every one documented in `--help`), an optional
//! TOML file with the same names, and the password from `ACCELKV_PASSWORD`.
//! Precedence: flag > file > default.

use clap::Parser;
use serde::Deserialize;
use size::Size;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;
pub use tls::{ClientAuth, TlsSettings};

pub mod size;
mod tls;
pub mod tls_config;

macro_rules! pick {
    ($flag:expr, $file:expr, $default:expr) => {
        $flag.or($file).unwrap_or($default)
    };
}

/// accelkv-server: an in-memory ordered key-value store served over a batched binary
/// protocol (TCP and UDP) and RESP (Redis clients and tools).
#[derive(Parser, Debug, Default, Deserialize)]
#[command(version, about)]
#[serde(deny_unknown_fields, default)]
pub struct Args {
    /// Address to listen on. Default 127.0.0.1 (loopback only); give another address to
    /// accept remote clients.
    #[arg(long, env = "ACCELKV_BIND", help_heading = "Network")]
    pub bind: Option<IpAddr>,
    /// Port of the binary protocol, on TCP and UDP. Default 7707; 0 picks free ports.
    #[arg(long, env = "ACCELKV_PORT", help_heading = "Network")]
    pub port: Option<u16>,
    /// Port of the RESP (Redis protocol) endpoint. Default 7379 (not Redis's 6379); 0 picks a
    /// free port.
    #[arg(long, env = "ACCELKV_RESP_PORT", help_heading = "Network")]
    pub resp_port: Option<u16>,
    /// Port of the admin HTTP endpoint serving Prometheus metrics at /metrics. Default 7708;
    /// 0 picks a free port.
    #[arg(long, env = "ACCELKV_ADMIN_PORT", help_heading = "Network")]
    pub admin_port: Option<u16>,
    /// Port of the memcached text and meta protocol. Default 11211 (memcached's), left off
    /// with a warning when another program holds it; `0` or `off` turns it off, `auto`
    /// picks a free port.
    #[arg(long, env = "ACCELKV_MEMCACHED_PORT", help_heading = "Network")]
    pub memcached_port: Option<String>,
    /// Also serve memcached's UDP protocol on the memcached port (off by default, as in
    /// memcached). A UDP reply is never larger than its request (no amplification).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "ACCELKV_MEMCACHED_UDP", help_heading = "Network")]
    pub memcached_udp: Option<bool>,
    /// Require this password: RESP clients send AUTH, binary frames carry it as their token.
    /// Prefer the ACCELKV_PASSWORD environment variable (flags show in `ps`).
    #[arg(
        long,
        env = "ACCELKV_PASSWORD",
        help_heading = "Network",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// Redis's ACL file: users and their permissions, one `user ...` line each, as ACL
    /// LIST shows them. Read at start (a bad line stops the start) and by ACL LOAD;
    /// ACL SAVE writes it. A `default` user it declares replaces `--password`.
    #[arg(long, env = "ACCELKV_ACLFILE", help_heading = "Network")]
    pub aclfile: Option<PathBuf>,
    /// Serve RESP over TLS on this port too (Redis's `tls-port`), beside the plain one;
    /// needs --tls-cert and --tls-key. 0 picks a free port. Default: no TLS port.
    #[arg(long, env = "ACCELKV_TLS_PORT", help_heading = "TLS")]
    pub tls_port: Option<u16>,
    /// Serve memcached's protocols over TLS on this port (as memcached's `-Z`). Default none.
    #[arg(long, env = "ACCELKV_TLS_MEMCACHED_PORT", help_heading = "TLS")]
    pub tls_memcached_port: Option<u16>,
    /// Serve the binary protocol over TLS (TCP) on this port. Default none.
    #[arg(long, env = "ACCELKV_TLS_BINARY_PORT", help_heading = "TLS")]
    pub tls_binary_port: Option<u16>,
    /// The server's certificate chain, PEM (the server's certificate first).
    #[arg(long, env = "ACCELKV_TLS_CERT", help_heading = "TLS")]
    pub tls_cert: Option<PathBuf>,
    /// The server certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "ACCELKV_TLS_KEY", help_heading = "TLS")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates, PEM, that client certificates must chain to. In cluster mode the
    /// Raft port then takes only peers whose certificates do, and presents --tls-cert to
    /// them (mutual TLS).
    #[arg(long, env = "ACCELKV_TLS_CA", help_heading = "TLS")]
    pub tls_ca: Option<PathBuf>,
    /// Client certificates on the TLS ports: `yes` (required: a client without one signed
    /// by --tls-ca is refused in the handshake), `optional` (checked when given) or `no`.
    /// Default `yes` with --tls-ca (as Redis's `tls-auth-clients`), `no` without.
    #[arg(long, env = "ACCELKV_TLS_AUTH_CLIENTS", help_heading = "TLS", value_parser = ["yes", "optional", "no"])]
    pub tls_auth_clients: Option<String>,
    /// Serve clients over TLS only: the plain RESP, memcached and binary ports (TCP and UDP)
    /// are not opened. Needs a TLS port; not with --cluster (nodes proxy over plain RESP).
    #[arg(long, env = "ACCELKV_TLS_ONLY", help_heading = "TLS", num_args = 0..=1, default_missing_value = "true")]
    pub tls_only: Option<bool>,
    /// Read engine: `auto` (the GPU engine when an NVIDIA GPU, its driver and NVRTC are
    /// present, else the CPU engine; the log and INFO say which and why), `cpu` (reads run
    /// on the event loops), `cpu-threads` (the CPU engine on `--engine-threads` threads of
    /// its own, reached like the GPU engine: for comparison), `gpu` (an error at start
    /// without a usable GPU) or `rtl` (the accelerator's RTL, simulated: slow and exact;
    /// only in a server built with `--features rtl`). Default auto.
    #[arg(long, env = "ACCELKV_ENGINE", help_heading = "Engines and event loops", value_parser = ["auto", "cpu", "cpu-threads", "gpu", "rtl"])]
    pub engine: Option<String>,
    /// Event loops: each owns its share of the connections and runs every request it reads
    /// to completion (reads through the CPU engine's interleaved walk, writes through the
    /// reservation station) on its own thread. Default: the number of cores.
    #[arg(
        long,
        env = "ACCELKV_THREADS",
        help_heading = "Engines and event loops"
    )]
    pub threads: Option<usize>,
    /// Streams of the GPU engine, or threads of `--engine cpu-threads` (the CPU engine
    /// otherwise runs on the event loops and has no threads of its own). Default: one per
    /// two cores, at least one.
    #[arg(
        long,
        env = "ACCELKV_ENGINE_THREADS",
        help_heading = "Engines and event loops"
    )]
    pub engine_threads: Option<usize>,
    /// Reads each event loop keeps in flight in the interleaved walk (G). Default 16.
    #[arg(
        long,
        env = "ACCELKV_ENGINE_WINDOW",
        help_heading = "Engines and event loops"
    )]
    pub engine_window: Option<usize>,
    /// Slots of the reservation station that orders writes by key hash and forwards values
    /// within a burst (KV-Direct). Default 1024.
    #[arg(
        long,
        env = "ACCELKV_STATION_SLOTS",
        help_heading = "Engines and event loops"
    )]
    pub station_slots: Option<usize>,
    /// Data forwarding in the reservation station: a burst of operations on one key costs
    /// one tree write. `false` writes every operation to the tree (for comparison). Default
    /// true.
    #[arg(long, env = "ACCELKV_FORWARDING", help_heading = "Engines and event loops", num_args = 0..=1, default_missing_value = "true")]
    pub forwarding: Option<bool>,
    /// Buckets of the hot-key cache (64 bytes each); 0 turns it off. Default 65536.
    #[arg(
        long,
        env = "ACCELKV_CACHE_BUCKETS",
        help_heading = "Engines and event loops"
    )]
    pub cache_buckets: Option<usize>,
    /// Device memory for the GPU engine's interior-node cache (a size; Honeycomb's on-board
    /// node cache). Default 256MiB.
    #[arg(
        long,
        env = "ACCELKV_GPU_CACHE",
        help_heading = "Engines and event loops"
    )]
    pub gpu_cache: Option<Size>,
    /// Node size (a size: 4KiB to 64KiB, a power of two). Default 8KiB.
    #[arg(long, env = "ACCELKV_NODE_SIZE", help_heading = "Store and memory")]
    pub node_size: Option<Size>,
    /// Size a leaf's log block reaches before it is merged into the sorted block (a size;
    /// Honeycomb's log-block threshold: larger favours writes, smaller reads; the node must
    /// hold it). Default 1KiB.
    #[arg(long, env = "ACCELKV_LOG_THRESHOLD", help_heading = "Store and memory")]
    pub log_threshold: Option<Size>,
    /// Memory limit for tree nodes and out-of-line values (a size: `16GiB`, `500m`, bytes;
    /// README, "Sizes"); in memory (no --data-dir), writes past it fail with an
    /// out-of-memory error; with --data-dir it is the budget of the leaf cache, and leaves
    /// past it live only in the page file. Default 16GiB.
    #[arg(long, env = "ACCELKV_MEMORY_LIMIT", help_heading = "Store and memory")]
    pub memory_limit: Option<Size>,
    /// The memory limit in MiB: the older form of --memory-limit, still read.
    #[arg(long, env = "ACCELKV_MEMORY_LIMIT_MIB", hide = true)]
    pub memory_limit_mib: Option<usize>,
    /// With --data-dir and a leaf cache: threads that read evicted leaves back for the
    /// event loops (each one blocking read at a time). More help when misses go to a slow
    /// device (docs/BENCHMARKS.md, "Data larger than memory"). Default 2.
    #[arg(long, env = "ACCELKV_LOAD_THREADS", help_heading = "Store and memory")]
    pub load_threads: Option<usize>,
    /// Most client connections (TCP and RESP together). Default 1024.
    #[arg(long, env = "ACCELKV_MAX_CONNECTIONS", help_heading = "Limits")]
    pub max_connections: Option<usize>,
    /// Redis's numbered databases over RESP (SELECT 0 to N-1; each one a key prefix in the
    /// one store). Default 16, at most 65536.
    #[arg(long, env = "ACCELKV_DATABASES", help_heading = "Limits")]
    pub databases: Option<usize>,
    /// Keyspace notifications at start, Redis's `notify-keyspace-events` classes
    /// (`KEA`: every event on both channels; default none). CONFIG SET changes it.
    #[arg(
        long,
        env = "ACCELKV_NOTIFY_KEYSPACE_EVENTS",
        help_heading = "Protocols"
    )]
    pub notify_keyspace_events: Option<String>,
    /// Close a connection idle for this many seconds; 0 never (the default, as Redis's
    /// `timeout 0`). `--timeout` is the same flag.
    #[arg(
        long,
        alias = "timeout",
        env = "ACCELKV_IDLE_TIMEOUT_SECS",
        help_heading = "Limits"
    )]
    #[serde(alias = "timeout")]
    pub idle_timeout_secs: Option<u64>,
    /// Most reply bytes buffered for one connection (a size); a client that does not read
    /// is disconnected. Default 64MiB.
    #[arg(long, env = "ACCELKV_MAX_OUTPUT", help_heading = "Limits")]
    pub max_output: Option<Size>,
    /// The output limit in MiB: the older form of --max-output, still read.
    #[arg(long, env = "ACCELKV_MAX_OUTPUT_MIB", hide = true)]
    pub max_output_mib: Option<usize>,
    /// Most operations in flight in the whole server; beyond it operations get BUSY (binary)
    /// or -BUSY (RESP). Default 65536.
    #[arg(long, env = "ACCELKV_MAX_INFLIGHT", help_heading = "Limits")]
    pub max_inflight: Option<usize>,
    /// Most operations in one binary frame. Default 1024.
    #[arg(long, env = "ACCELKV_MAX_OPS_PER_FRAME", help_heading = "Limits")]
    pub max_ops_per_frame: Option<usize>,
    /// Largest binary frame (a size). Default 4MiB.
    #[arg(long, env = "ACCELKV_MAX_FRAME", help_heading = "Limits")]
    pub max_frame: Option<Size>,
    /// Largest value (a size, up to 512MiB). Default 512MiB in memory (Redis's
    /// proto-max-bulk-len), 1MiB with --data-dir (its page file's slabs are twice the
    /// largest value).
    #[arg(long, env = "ACCELKV_MAX_VALUE", help_heading = "Limits")]
    pub max_value: Option<Size>,
    /// Most items in one scan reply. Default 1000.
    #[arg(long, env = "ACCELKV_MAX_SCAN_ITEMS", help_heading = "Limits")]
    pub max_scan_items: Option<usize>,
    /// Event loops poll their sockets instead of sleeping in the kernel (every protocol, UDP
    /// included): lower latency, every loop's core busy. Default false.
    #[arg(long, env = "ACCELKV_UDP_BUSY_POLL", help_heading = "Engines and event loops", num_args = 0..=1, default_missing_value = "true")]
    pub udp_busy_poll: Option<bool>,
    /// Keep the data in this directory (created if needed): writes are persisted as pages
    /// (no write-ahead log) and recovered at start. Without it the store is in memory only.
    #[arg(long, env = "ACCELKV_DATA_DIR", help_heading = "Store and memory")]
    pub data_dir: Option<PathBuf>,
    /// With --data-dir, when writes are acknowledged: `sync` (after they are durable, sharing
    /// fdatasyncs; the default: a crash loses nothing acknowledged), `interval=<ms>` (synced
    /// every so many ms and acknowledged before, while the page writer is less than two
    /// intervals behind: a crash loses about the last interval plus one commit of
    /// acknowledged writes), or `none` (written every millisecond, never synced, acknowledged
    /// before while the page writer is less than 10 ms behind: a process crash loses a few
    /// milliseconds, a power loss more). A crash always recovers the state as of one version
    /// (a prefix of the writes)
    #[arg(long, env = "ACCELKV_SYNC", help_heading = "Store and memory")]
    pub sync: Option<String>,
    /// Load this RDB file (written by redis-server, `redis-cli --rdb` or SAVE) at start,
    /// before serving: every key of a type served, each database under its number; keys of
    /// other types are counted in the log and skipped (docs/REPLICATION.md).
    #[arg(long, env = "ACCELKV_IMPORT_RDB", help_heading = "Store and memory")]
    pub import_rdb: Option<PathBuf>,
    /// Follow this Redis primary from the start, as `REPLICAOF host port` would
    /// (`host:port`; docs/REPLICATION.md).
    #[arg(long, env = "ACCELKV_REPLICAOF", help_heading = "Network")]
    pub replicaof: Option<String>,
    /// The password REPLICAOF sends to the primary (`AUTH`), as Redis's `masterauth`.
    /// Prefer the ACCELKV_MASTERAUTH environment variable (flags show in `ps`).
    #[arg(
        long,
        env = "ACCELKV_MASTERAUTH",
        help_heading = "Network",
        hide_env_values = true
    )]
    pub masterauth: Option<String>,
    /// The user REPLICAOF logs in as on the primary, with --masterauth (Redis's
    /// `masteruser`; without it, the default user).
    #[arg(long, env = "ACCELKV_MASTERUSER", help_heading = "Network")]
    pub masteruser: Option<String>,
    /// `emulated`: one server answers as a Redis Cluster of one node owning all 16,384
    /// hash slots (CLUSTER SLOTS, SHARDS, NODES, INFO, KEYSLOT, MYID), so cluster-aware
    /// clients (redis-py's RedisCluster, go-redis's ClusterClient, JedisCluster) connect to
    /// it; multi-key commands over keys of several slots answer `-CROSSSLOT`, as a cluster
    /// does. Default `no` (docs/CLUSTER.md, "Emulated cluster mode").
    #[arg(long, env = "ACCELKV_CLUSTER_MODE", help_heading = "Network")]
    pub cluster_mode: Option<String>,
    /// Join a cluster (docs/CLUSTER.md): `etcd=http://host:port[,http://host:port…]`, the
    /// etcd that holds the range map and membership. Needs --node-id and --data-dir (the
    /// Raft log and snapshots; the store itself is rebuilt from them), and a build with
    /// `--features cluster`.
    #[arg(long, env = "ACCELKV_CLUSTER", help_heading = "Cluster mode")]
    pub cluster: Option<String>,
    /// This node's id in the cluster (1 or more, unique, kept across restarts).
    #[arg(long, env = "ACCELKV_NODE_ID", help_heading = "Cluster mode")]
    pub node_id: Option<u64>,
    /// Port of the Raft endpoint the other replicas reach. Default 7709; 0 picks a free one.
    #[arg(long, env = "ACCELKV_RAFT_PORT", help_heading = "Cluster mode")]
    pub raft_port: Option<u16>,
    /// The Raft address the other replicas are told to reach this node at (`host:port`),
    /// when it is not the address it listens on (behind a proxy or NAT). Default: the
    /// --bind address and --raft-port.
    #[arg(long, env = "ACCELKV_RAFT_ADVERTISE", help_heading = "Cluster mode")]
    pub raft_advertise: Option<String>,
    /// The cluster's name: its key prefix in etcd (`/accelkv/<name>/`). Default `accelkv`.
    #[arg(long, env = "ACCELKV_CLUSTER_NAME", help_heading = "Cluster mode")]
    pub cluster_name: Option<String>,
    /// In cluster mode, forward a command for a range this node does not lead to the
    /// range's leader and relay its answer, so any client may use any node (the default);
    /// `false` answers `-MOVED <range> <host:port>` instead, for clients that follow it.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", env = "ACCELKV_PROXY", help_heading = "Cluster mode")]
    pub proxy: Option<bool>,
    /// In cluster mode, a range's replicas snapshot its data after this many Raft entries
    /// (each a batch of writes) and drop the log before it, keeping the last half of it or
    /// 1,000 entries, whichever is fewer. Default 20000.
    #[arg(
        long,
        env = "ACCELKV_RAFT_SNAPSHOT_EVERY",
        help_heading = "Cluster mode"
    )]
    pub raft_snapshot_every: Option<u64>,
    /// A range whose keys and values come to more than this size is split in two at its
    /// middle key by its leader (`0`: never). Default 64MiB.
    #[arg(long, env = "ACCELKV_SPLIT_SIZE", help_heading = "Cluster mode")]
    pub split_size: Option<Size>,
    /// A range whose leader serves more than this many keyed commands a second, for two
    /// seconds, is split in two at a key chosen from a sample of the commands' keys, so
    /// about half the load goes to each side (`0`: never). Default 0.
    #[arg(long, env = "ACCELKV_SPLIT_LOAD", help_heading = "Cluster mode")]
    pub split_load: Option<u64>,
    /// How a cluster places keys, chosen when it is created: `native` (the default) keeps
    /// the keys in their byte order, ranges of it, and redirects with `-MOVED <range>`;
    /// `redis` places them by Redis Cluster's hash slot (CRC16 of the key or its hash tag,
    /// mod 16,384), so ranges are runs of slots, collections stay with their keys, and
    /// cluster-aware Redis clients connect (`CLUSTER SLOTS`, `-MOVED <slot>`). Every node
    /// of a cluster gives the same.
    #[arg(long, env = "ACCELKV_SLOTS", help_heading = "Cluster mode")]
    pub slots: Option<String>,
    /// Replicas per range. The first map is made once this many nodes have registered.
    /// Default 3.
    #[arg(long, env = "ACCELKV_REPLICAS", help_heading = "Cluster mode")]
    pub replicas: Option<usize>,
    /// What to log: `error`, `warn`, `info`, `debug` or `trace`, or a filter directive such
    /// as `info,openraft=warn`. `RUST_LOG`, when set, wins. Default info.
    #[arg(long, env = "ACCELKV_LOG_LEVEL", help_heading = "Logs")]
    pub log_level: Option<String>,
    /// Append the log to this file instead of writing it to stderr.
    #[arg(long, env = "ACCELKV_LOG_FILE", help_heading = "Logs")]
    pub log_file: Option<PathBuf>,
    /// `text` (the default: a timestamp, the level, the module, the message) or `json`
    /// (one object per line).
    #[arg(long, env = "ACCELKV_LOG_FORMAT", help_heading = "Logs")]
    pub log_format: Option<String>,
    /// Read settings from this TOML file (keys as the flags, with underscores).
    #[arg(long, env = "ACCELKV_CONFIG", help_heading = "Config file")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

/// Cluster mode's settings (`--cluster`).
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// etcd's client endpoints.
    pub etcd: Vec<String>,
    pub node_id: u64,
    pub raft_port: u16,
    pub raft_advertise: Option<String>,
    pub proxy: bool,
    pub snapshot_every: u64,
    /// Bytes past which a range splits (0: never).
    pub split_size: u64,
    /// Keyed commands a second past which a range splits (0: never).
    pub split_load: u64,
    pub name: String,
    pub replicas: usize,
    /// Where the Raft logs and snapshots live (the `--data-dir`).
    pub dir: PathBuf,
    /// `--slots redis`: keys placed by Redis Cluster's hash slot (docs/CLUSTER.md).
    pub slots: bool,
}

impl ClusterSettings {
    fn resolve(
        spec: String,
        flags: &Args,
        file: &Args,
        data_dir: &mut Option<PathBuf>,
    ) -> Result<ClusterSettings, String> {
        let etcd: Vec<String> = spec
            .strip_prefix("etcd=")
            .ok_or_else(|| format!("--cluster {spec}: expected etcd=http://host:port[,…]"))?
            .split(',')
            .filter(|e| !e.is_empty())
            .map(str::to_string)
            .collect();
        if etcd.is_empty() {
            return Err("--cluster etcd=: no etcd endpoint given".into());
        }
        let node_id = flags
            .node_id
            .or(file.node_id)
            .filter(|n| *n > 0)
            .ok_or("--cluster needs --node-id (a number from 1, unique in the cluster)")?;
        let dir = data_dir.take().ok_or(
            "--cluster needs --data-dir: the Raft log and snapshots that survive a restart",
        )?;
        let split_size = pick!(flags.split_size, file.split_size, Size(64 << 20)).0;
        let slots = match flags.slots.as_deref().or(file.slots.as_deref()) {
            None | Some("native") => false,
            Some("redis") => true,
            Some(o) => return Err(format!("--slots {o}: expected native or redis")),
        };
        let replicas = pick!(flags.replicas, file.replicas, 3);
        if replicas == 0 {
            return Err("--replicas must be 1 or more".into());
        }
        Ok(ClusterSettings {
            etcd,
            node_id,
            raft_port: pick!(flags.raft_port, file.raft_port, 7709),
            raft_advertise: flags.raft_advertise.clone().or(file.raft_advertise.clone()),
            proxy: pick!(flags.proxy, file.proxy, true),
            snapshot_every: pick!(flags.raft_snapshot_every, file.raft_snapshot_every, 20_000)
                .max(2),
            split_size,
            split_load: pick!(flags.split_load, file.split_load, 0),
            name: flags
                .cluster_name
                .clone()
                .or(file.cluster_name.clone())
                .unwrap_or_else(|| "accelkv".into()),
            replicas,
            dir,
            slots,
        })
    }
}

/// The resolved configuration.
#[derive(Clone, Debug)]
pub struct Settings {
    pub bind: IpAddr,
    pub port: u16,
    pub resp_port: u16,
    pub admin_port: u16,
    /// The memcached port (`None`: off; `Some(0)`: a free one).
    pub memcached_port: Option<u16>,
    /// Whether `memcached_port` was asked for (a port in use is then an error, not a
    /// warning).
    pub memcached_explicit: bool,
    pub memcached_udp: bool,
    pub password: Option<String>,
    /// The ACL file (ACL LOAD and SAVE; read at start).
    pub aclfile: Option<PathBuf>,
    pub engine: accelkv_engine::EngineKind,
    pub engine_threads: usize,
    pub threads: usize,
    pub engine_window: usize,
    pub station_slots: usize,
    pub forwarding: bool,
    pub cache_buckets: usize,
    pub gpu_cache: usize,
    pub node_size: usize,
    pub log_threshold: usize,
    pub memory_limit: usize,
    pub load_threads: usize,
    pub max_connections: usize,
    /// RESP databases (SELECT's range).
    pub databases: usize,
    /// Keyspace notifications' classes at start (resp/notify.rs checks them at start).
    pub notify_keyspace_events: String,
    pub idle_timeout: Option<Duration>,
    pub max_output: usize,
    pub max_inflight: usize,
    pub udp_busy_poll: bool,
    pub limits: accelkv_proto::Limits,
    /// memcached's largest item: `--max-value` when given, else memcached's 1 MiB
    /// (`item_size_max`), whatever RESP's default.
    pub memcached_item_max: usize,
    /// Where the page file lives; `None` = in memory only.
    pub data_dir: Option<PathBuf>,
    pub sync: accelkv_durable::SyncPolicy,
    /// An RDB file loaded at start (`--import-rdb`).
    pub import_rdb: Option<PathBuf>,
    /// The primary followed from the start (`--replicaof host:port`).
    pub replicaof: Option<(String, u16)>,
    /// The user (if not the default) and password REPLICAOF logs in with.
    pub masterauth: Option<(Option<String>, String)>,
    /// `--cluster-mode emulated`: a one-node Redis Cluster's answers.
    pub cluster_emulated: bool,
    /// Cluster mode (`--cluster`); `None`: a standalone server.
    pub cluster: Option<ClusterSettings>,
    /// The log (`--log-level`, `--log-file`, `--log-format`).
    pub log: LogSettings,
    /// TLS (`--tls-*`); `None`: no TLS port and a plain Raft port.
    pub tls: Option<TlsSettings>,
}

impl Settings {
    /// Whether the server answers as a cluster (`--cluster`, or `--cluster-mode emulated`):
    /// INFO's `cluster_enabled`, CONFIG GET's `cluster-enabled`.
    pub fn cluster_enabled(&self) -> bool {
        self.cluster.is_some() || self.cluster_emulated
    }

    /// Resolves flags, the TOML file they name, and the environment.
    pub fn resolve(flags: Args) -> Result<Settings, String> {
        let file = file_args(&flags)?;
        let log = LogSettings::resolve(&flags, &file)?;
        let tls = TlsSettings::resolve(&flags, &file)?;
        let (auth, emulated) = (masterauth(&flags, &file), cluster_mode(&flags, &file)?);
        let mut data_dir = flags.data_dir.clone().or(file.data_dir.clone());
        let cluster = cluster_settings(&flags, &file, &mut data_dir)?;
        let bind = pick!(flags.bind, file.bind, IpAddr::from([127, 0, 0, 1]));
        if cluster.is_some() && bind.is_unspecified() {
            return Err(format!("--bind {bind} with --cluster: give the address the other nodes and clients reach this one at (it is advertised in etcd)"));
        }
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let limits = limits(&flags, &file, data_dir.is_some())?;
        // `--password` or ACCELKV_PASSWORD (clap reads both into `flags`); empty is none.
        let password = flags
            .password
            .clone()
            .or(file.password.clone())
            .filter(|p| !p.is_empty());
        if password.as_ref().is_some_and(|p| p.len() > 255) {
            return Err("password longer than 255 bytes".into());
        }
        let idle = pick!(flags.idle_timeout_secs, file.idle_timeout_secs, 0);
        let sync_text = flags.sync.clone().or(file.sync.clone());
        if sync_text.is_some() && data_dir.is_none() {
            return Err("--sync needs --data-dir (without one the store is in memory only)".into());
        }
        let sync = sync_text.as_deref().unwrap_or("sync").parse()?;
        let mc_text = flags.memcached_port.clone().or(file.memcached_port.clone());
        let memcached_port = memcached_port(mc_text.as_deref(), cluster.is_some())?;
        Ok(Settings {
            memcached_port,
            memcached_explicit: mc_text.is_some(),
            memcached_udp: pick!(flags.memcached_udp, file.memcached_udp, false),
            bind,
            port: pick!(flags.port, file.port, 7707),
            resp_port: pick!(flags.resp_port, file.resp_port, 7379),
            admin_port: pick!(flags.admin_port, file.admin_port, 7708),
            password,
            aclfile: flags.aclfile.clone().or(file.aclfile.clone()),
            engine: flags
                .engine
                .or(file.engine.clone())
                .as_deref()
                .unwrap_or("auto")
                .parse()?,
            engine_threads: pick!(
                flags.engine_threads,
                file.engine_threads,
                (cores / 2).max(1)
            ),
            threads: pick!(flags.threads, file.threads, cores).max(1),
            engine_window: pick!(flags.engine_window, file.engine_window, 16),
            station_slots: pick!(flags.station_slots, file.station_slots, 1024).max(1),
            forwarding: pick!(flags.forwarding, file.forwarding, true),
            cache_buckets: pick!(flags.cache_buckets, file.cache_buckets, 1 << 16),
            gpu_cache: flags
                .gpu_cache
                .or(file.gpu_cache)
                .map_or(256 << 20, Size::bytes),
            node_size: flags.node_size.or(file.node_size).map_or(8192, Size::bytes),
            log_threshold: flags
                .log_threshold
                .or(file.log_threshold)
                .map_or(1024, Size::bytes),
            memory_limit: size_or_mib(
                (flags.memory_limit, flags.memory_limit_mib),
                (file.memory_limit, file.memory_limit_mib),
                16 << 30,
            ),
            load_threads: pick!(flags.load_threads, file.load_threads, 2).max(1),
            max_connections: pick!(flags.max_connections, file.max_connections, 1024),
            databases: pick!(flags.databases, file.databases, 16).clamp(1, 1 << 16),
            notify_keyspace_events: (flags.notify_keyspace_events)
                .or(file.notify_keyspace_events.clone())
                .unwrap_or_default(),
            idle_timeout: (idle > 0).then(|| Duration::from_secs(idle)),
            max_output: size_or_mib(
                (flags.max_output, flags.max_output_mib),
                (file.max_output, file.max_output_mib),
                64 << 20,
            ),
            max_inflight: pick!(flags.max_inflight, file.max_inflight, 65536),
            udp_busy_poll: pick!(flags.udp_busy_poll, file.udp_busy_poll, false),
            memcached_item_max: flags
                .max_value
                .or(file.max_value)
                .map_or(1 << 20, Size::bytes),
            limits,
            data_dir,
            sync,
            import_rdb: flags.import_rdb.clone().or(file.import_rdb.clone()),
            replicaof: replicaof(flags.replicaof.as_ref().or(file.replicaof.as_ref()))?,
            masterauth: auth,
            cluster_emulated: emulated,
            cluster,
            log,
            tls,
        })
    }
}

/// `--cluster-mode`: whether it is `emulated` (`no`, the default, is not).
fn cluster_mode(flags: &Args, file: &Args) -> Result<bool, String> {
    let mode = flags.cluster_mode.as_ref().or(file.cluster_mode.as_ref());
    match mode.map(|m| m.to_ascii_lowercase()) {
        None => Ok(false),
        Some(m) if m == "no" || m == "off" => Ok(false),
        Some(m) if m == "emulated" => Ok(true),
        Some(m) => Err(format!("--cluster-mode {m}: expected no or emulated")),
    }
}

/// `--masterauth` with `--masteruser`, from the flags or the file.
fn masterauth(flags: &Args, file: &Args) -> Option<(Option<String>, String)> {
    let user = flags.masteruser.clone().or(file.masteruser.clone());
    flags
        .masterauth
        .clone()
        .or(file.masterauth.clone())
        .map(|p| (user, p))
}

/// `--replicaof host:port` as the primary's host and port.
fn replicaof(v: Option<&String>) -> Result<Option<(String, u16)>, String> {
    let Some(v) = v else { return Ok(None) };
    let bad = || format!("--replicaof {v}: expected host:port");
    let (host, port) = v.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    if host.is_empty() || port == 0 {
        return Err(bad());
    }
    Ok(Some((host.to_string(), port)))
}

/// Cluster mode's settings (`None`: `--cluster` not given), checked against the settings
/// that do not apply with it; takes the data directory, which holds the Raft files.
fn cluster_settings(
    flags: &Args,
    file: &Args,
    data_dir: &mut Option<PathBuf>,
) -> Result<Option<ClusterSettings>, String> {
    Ok(match flags.cluster.clone().or(file.cluster.clone()) {
        None if flags.slots.is_some() || file.slots.is_some() => {
            return Err("--slots applies with --cluster (one server answers as a cluster with --cluster-mode emulated)".into())
        }
        None => None,
        Some(spec) => {
            if flags.sync.is_some() || file.sync.is_some() {
                return Err("--sync does not apply with --cluster: a write is acknowledged once a majority of its range's replicas flushed it to their Raft logs".into());
            }
            if flags.memcached_port.is_some()
                || file.memcached_port.is_some()
                || flags.tls_memcached_port.is_some()
                || file.tls_memcached_port.is_some()
            {
                return Err("--memcached-port does not apply with --cluster: cluster mode serves keys over RESP and the binary protocol (TCP) only".into());
            }
            if cluster_mode(flags, file)? {
                return Err("--cluster-mode emulated does not apply with --cluster".into());
            }
            let import = flags.import_rdb.is_some() || file.import_rdb.is_some();
            if import || flags.replicaof.is_some() || file.replicaof.is_some() {
                return Err("--import-rdb and --replicaof do not apply in cluster mode".into());
            }
            Some(ClusterSettings::resolve(spec, flags, file, data_dir)?)
        }
    })
}

/// `--memcached-port`: a port, `auto` (0: any free one) or `off`; by default 11211, and
/// off in cluster mode.
fn memcached_port(text: Option<&str>, cluster: bool) -> Result<Option<u16>, String> {
    Ok(match text {
        None if cluster => None,
        None => Some(11211),
        Some("0" | "off") => None,
        Some("auto") => Some(0),
        Some(p) => Some(
            p.parse::<u16>()
                .map_err(|_| format!("--memcached-port {p}: expected a port, `auto` or `off`"))?,
        ),
    })
}

/// The settings of the TOML file `--config` names (none: every one unset).
fn file_args(flags: &Args) -> Result<Args, String> {
    let Some(path) = &flags.config else {
        return Ok(Args::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Where and how the server logs (`--log-level`, `--log-file`, `--log-format`; logging.rs
/// installs it).
#[derive(Clone, Debug)]
pub struct LogSettings {
    /// A filter directive (`info`, `warn,accelkv_server::cluster=debug`, …).
    pub level: String,
    /// Append to this file instead of writing to stderr.
    pub file: Option<PathBuf>,
    /// One JSON object per line instead of text.
    pub json: bool,
}

impl LogSettings {
    /// What the flags and the file ask for, checked: a level that is a level name or a
    /// filter directive, a format that is `text` or `json`.
    fn resolve(flags: &Args, file: &Args) -> Result<LogSettings, String> {
        let level = flags.log_level.clone().or(file.log_level.clone());
        let format = flags.log_format.clone().or(file.log_format.clone());
        LogSettings::from_parts(
            level,
            flags.log_file.clone().or(file.log_file.clone()),
            format,
        )
    }

    pub fn from_parts(
        level: Option<String>,
        file: Option<PathBuf>,
        format: Option<String>,
    ) -> Result<LogSettings, String> {
        let level = level.unwrap_or_else(|| "info".into());
        // A bare word must be a level (a filter would take it as a module's name).
        let levels = ["off", "error", "warn", "info", "debug", "trace"];
        let bad = |why: String| format!("--log-level {level}: {why}");
        for part in level.split(',') {
            let word = part.trim().to_ascii_lowercase();
            if !part.contains('=') && !levels.contains(&word.as_str()) {
                return Err(bad(format!(
                    "expected one of {}, or target=level",
                    levels.join(", ")
                )));
            }
        }
        tracing_subscriber::EnvFilter::try_new(&level).map_err(|e| bad(e.to_string()))?;
        let json = match format.as_deref() {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => return Err(format!("--log-format {other}: expected text or json")),
        };
        Ok(LogSettings { level, file, json })
    }
}

/// The protocol limits flags and file ask for.
/// A size given either in the shared syntax or, in the older form, in MiB: the flag's
/// `(size, mib)` before the file's, the size form before the MiB form in each.
fn size_or_mib(
    flag: (Option<Size>, Option<usize>),
    file: (Option<Size>, Option<usize>),
    default: usize,
) -> usize {
    let one = |(size, mib): (Option<Size>, Option<usize>)| {
        size.map(Size::bytes)
            .or(mib.map(|m| m.saturating_mul(1 << 20)))
    };
    one(flag).or(one(file)).unwrap_or(default)
}

/// The largest value by default: Redis's `proto-max-bulk-len` in memory; with a data
/// directory the old 1 MiB, since its page file's slabs are twice the largest value (a new
/// one with 512 MiB values would read 1 GiB slabs at every open, and one made with 1 MiB
/// values would refuse to open).
pub const DEFAULT_MAX_VALUE: usize = 512 << 20;

fn limits(flags: &Args, file: &Args, durable: bool) -> Result<accelkv_proto::Limits, String> {
    let mut limits = accelkv_proto::Limits::default();
    if !durable {
        limits.max_value = DEFAULT_MAX_VALUE;
    }
    limits.max_ops = pick!(
        flags.max_ops_per_frame,
        file.max_ops_per_frame,
        limits.max_ops
    );
    limits.max_frame = flags
        .max_frame
        .or(file.max_frame)
        .map_or(limits.max_frame, Size::bytes);
    limits.max_value = flags
        .max_value
        .or(file.max_value)
        .map_or(limits.max_value, Size::bytes);
    limits.max_bulk = limits.max_value + 1024;
    limits.max_scan_items = pick!(
        flags.max_scan_items,
        file.max_scan_items,
        limits.max_scan_items
    );
    if limits.max_ops == 0 || limits.max_ops > 65535 {
        return Err("max_ops_per_frame must be 1..=65535".into());
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::{Args, Settings};
    use clap::CommandFactory;

    const EXAMPLE: &str = include_str!("../../accelkv.example.toml");

    /// accelkv.example.toml names every option, and what it sets are the defaults: the
    /// settings it gives are those no file gives.
    #[test]
    fn the_example_config_has_every_option_at_its_default() {
        let parsed: Result<Args, _> = toml::from_str(EXAMPLE);
        assert!(parsed.is_ok(), "{parsed:?}");
        for a in Args::command().get_arguments() {
            let key = a.get_id().as_str();
            // The hidden flags are older spellings (`memory_limit_mib`) of listed ones.
            if matches!(key, "config" | "help" | "version") || a.is_hide_set() {
                continue;
            }
            let set = EXAMPLE.contains(&format!("\n{key} = "));
            let commented = EXAMPLE.contains(&format!("\n# {key} = "));
            assert!(set || commented, "{key} is not in accelkv.example.toml");
        }
        let path =
            std::env::temp_dir().join(format!("accelkv-example-{}.toml", std::process::id()));
        std::fs::write(&path, EXAMPLE).unwrap();
        let from_file = Settings::resolve(Args {
            config: Some(path.clone()),
            ..Args::default()
        });
        let _ = std::fs::remove_file(&path);
        let defaults = Settings::resolve(Args::default());
        assert_eq!(format!("{from_file:?}"), format!("{defaults:?}"));
    }

    #[test]
    fn an_empty_password_is_none() {
        let s = Settings::resolve(Args {
            password: Some(String::new()),
            ..Args::default()
        })
        .unwrap();
        assert_eq!(s.password, None);
    }

    /// What a Redis replica or an emulated cluster adds is refused with `--cluster`, whose
    /// ranges replicate through Raft and are not slots; each is taken alone.
    #[test]
    fn replication_and_emulated_slots_do_not_apply_with_cluster() {
        use clap::Parser;
        let with = |extra: &[&str]| {
            let base = ["accelkv-server", "--cluster", "etcd=http://127.0.0.1:2379"];
            let args = base.iter().chain(extra).copied();
            Settings::resolve(Args::try_parse_from(args).unwrap()).err()
        };
        let e = with(&["--cluster-mode", "emulated"]).unwrap();
        assert!(e.contains("--cluster-mode emulated does not apply"), "{e}");
        for extra in [&["--import-rdb", "/x.rdb"][..], &["--replicaof", "h:6379"]] {
            let e = with(extra).unwrap();
            assert!(e.contains("do not apply in cluster mode"), "{e}");
        }
        let alone = |a: &[&str]| Settings::resolve(Args::try_parse_from(a).unwrap());
        let s = alone(&["accelkv-server", "--cluster-mode", "emulated"]).unwrap();
        assert!(s.cluster_emulated && s.cluster_enabled());
        let s = alone(&["accelkv-server", "--replicaof", "h:6379"]).unwrap();
        assert_eq!(s.replicaof, Some(("h".into(), 6379)));
        assert!(!s.cluster_enabled());
        assert!(alone(&["accelkv-server", "--cluster-mode", "maybe"]).is_err());
    }

    #[test]
    fn timeout_is_the_idle_timeout() {
        use clap::Parser;
        let a = Args::try_parse_from(["accelkv-server", "--timeout", "7"]).unwrap();
        assert_eq!(a.idle_timeout_secs, Some(7));
        let f: Args = toml::from_str("timeout = 9").unwrap();
        assert_eq!(f.idle_timeout_secs, Some(9));
        let s = Settings::resolve(Args::default()).unwrap();
        assert_eq!(s.idle_timeout, None, "never, by default");
    }

    /// Flags, the file and the older MiB forms give one size; the flag wins.
    #[test]
    fn sizes_in_one_syntax_everywhere() {
        use clap::Parser;
        let parse = |args: &[&str], file: &str| {
            let path = std::env::temp_dir().join(format!(
                "accelkv-sizes-{}-{}.toml",
                std::process::id(),
                args.len()
            ));
            std::fs::write(&path, file).unwrap();
            let mut a = Args::try_parse_from(args).unwrap();
            a.config = Some(path.clone());
            let s = Settings::resolve(a);
            let _ = std::fs::remove_file(&path);
            s.unwrap()
        };
        let s = parse(
            &["s", "--memory-limit", "2GiB", "--max-frame", "64KiB"],
            "memory_limit = \"1g\"\nmax_output = \"8mb\"\nmax_value = 4096\n",
        );
        assert_eq!(s.memory_limit, 2 << 30, "the flag wins");
        assert_eq!(s.max_output, 8 << 20, "mb is 1024²");
        assert_eq!(s.limits.max_frame, 64 << 10);
        assert_eq!(s.limits.max_value, 4096);
        let s = parse(&["s", "--memory-limit-mib", "512"], "max_output_mib = 2\n");
        assert_eq!((s.memory_limit, s.max_output), (512 << 20, 2 << 20));
        let s = parse(&["s"], "memory_limit = \"500m\"\nmemory_limit_mib = 1\n");
        assert_eq!(
            s.memory_limit, 500_000_000,
            "the size form before the MiB form"
        );
        let e = Args::try_parse_from(["s", "--max-value", "1.5MiB"]).unwrap_err();
        assert!(e.to_string().contains("KiB/MiB/GiB"), "{e}");
        let e = toml::from_str::<Args>("split_size = \"64 MiB\"").unwrap_err();
        assert!(e.to_string().contains("not a size"), "{e}");
    }
}

//! The systems the driver measures, behind one trait: a [`Target`] opens one [`Conn`] per
//! driver thread, and a connection executes batches of independent operations (a batch of one
//! is YCSB's one-operation-at-a-time client; larger batches use each system's own batching:
//! accelkv frames and engine batches, Redis and memcached pipelines).

#[cfg(feature = "lmdb")]
mod lmdb;
pub mod local;
pub mod net;
#[cfg(feature = "rocksdb")]
pub mod rocks;
mod scratch;

use std::fmt;

/// One operation of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Read one record.
    Read(Vec<u8>),
    /// Replace an existing record.
    Update(Vec<u8>, Vec<u8>),
    /// Insert a new record.
    Insert(Vec<u8>, Vec<u8>),
    /// Up to `count` records in key order starting at the key (YCSB's scan).
    Scan(Vec<u8>, usize),
}

/// What an operation returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A read's value (`None`: not found).
    Value(Option<Vec<u8>>),
    /// A write was acknowledged.
    Written,
    /// A scan's records.
    Items(Vec<(Vec<u8>, Vec<u8>)>),
}

/// A target's failure.
#[derive(Debug)]
pub struct TargetError(pub String);

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TargetError {}

impl TargetError {
    /// An error from anything displayable.
    pub fn from_display(context: &str, e: impl fmt::Display) -> TargetError {
        TargetError(format!("{context}: {e}"))
    }
}

/// Result of target calls.
pub type Result<T> = std::result::Result<T, TargetError>;

/// A system under test.
pub trait Target: Send + Sync {
    /// Name in reports (`accelkv-engine`, `redis`, ...).
    fn name(&self) -> String;

    /// Whether it can answer YCSB's scan (memcached cannot).
    fn supports_scan(&self) -> bool {
        true
    }

    /// A connection for one driver thread.
    fn connect(&self) -> Result<Box<dyn Conn>>;

    /// Whether it writes to a storage device from this process (its device bytes per
    /// operation are measured).
    fn uses_device(&self) -> bool {
        false
    }
}

/// One driver thread's connection.
pub trait Conn: Send {
    /// Executes `ops` (independent of each other) and appends one outcome per operation, in
    /// order, to `out`.
    fn execute(&mut self, ops: &[Op], out: &mut Vec<Outcome>) -> Result<()>;
}

/// Parses a target specification: `accelkv`, `accelkv-engine[=auto|cpu|gpu]` (default
/// `cpu`), `btreemap`, `rocksdb`,
/// `accelkv=OPTIONS` and `accelkv-engine=[KIND,]OPTIONS` with store options `mvcc=off`,
/// `log=<bytes>`, `cache=<buckets>` (see `local::StoreOptions`),
/// `accelkv-durable[=POLICY[,budget=MiB][,whole]]` (POLICY `sync`, `interval=<ms>` or `none`;
/// default `sync`; a budget makes leaves past it live only in the page file; `whole` turns
/// delta pages off),
/// `rocksdb=sync|none[,cache=MiB]` (RocksDB with its WAL synced on every write or not, and
/// its block cache, default 1 GiB), `lmdb=sync|none` (LMDB, every commit synced or not), or
/// `accelkv-tcp=ADDR`, `accelkv-udp=ADDR`, `accelkv-resp=ADDR`, `redis=ADDR`,
/// `memcached=ADDR`. `password` is used by the accelkv network targets.
/// The error for a target whose cargo feature this build left out.
#[cfg(any(not(feature = "rocksdb"), not(feature = "lmdb")))]
fn not_built(what: &str, feature: &str) -> TargetError {
    TargetError(format!(
        "this accelkv-bench was built without {what}: build with --features {feature} \
         (see docs/BENCHMARKS.md)"
    ))
}

pub fn parse(spec: &str, password: Option<&str>) -> Result<Box<dyn Target>> {
    let (kind, addr) = match spec.split_once('=') {
        Some((k, a)) => (k, Some(a.to_string())),
        None => (spec, None),
    };
    let need = |what: &str| {
        addr.clone()
            .ok_or_else(|| TargetError(format!("target {what} needs an address: {what}=HOST:PORT")))
    };
    let pw = password.map(str::to_string);
    Ok(match kind {
        "accelkv" => Box::new(local::Accelkv::reference(local::StoreOptions::parse(
            spec,
            addr.as_deref().unwrap_or("").split(','),
        )?)?),
        "accelkv-engine" => {
            // An engine kind first (optional), then store options.
            let mut parts = addr.as_deref().unwrap_or("").split(',').peekable();
            let kind = match parts.peek() {
                Some(k) if !k.is_empty() && !k.contains('=') => parts.next().unwrap_or("cpu"),
                _ => "cpu",
            };
            let o = local::StoreOptions::parse(spec, parts)?;
            Box::new(local::Accelkv::engine(kind.parse().map_err(TargetError)?, o)?)
        }
        "accelkv-durable" => Box::new(local::Durable::open(addr.as_deref().unwrap_or("sync"))?),
        "btreemap" => Box::new(local::BTree::default()),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocks::Rocks::open(addr.as_deref())?),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => return Err(not_built("RocksDB", "rocksdb")),
        #[cfg(feature = "lmdb")]
        "lmdb" => Box::new(lmdb::Lmdb::open(addr.as_deref())?),
        #[cfg(not(feature = "lmdb"))]
        "lmdb" => return Err(not_built("LMDB", "lmdb")),
        "accelkv-tcp" => Box::new(net::AccelkvTcp::new(need(kind)?, pw)),
        "accelkv-udp" => Box::new(net::AccelkvUdp::new(need(kind)?, pw)),
        "accelkv-resp" => Box::new(net::Resp::accelkv(need(kind)?, pw)),
        "redis" => Box::new(net::Resp::redis(need(kind)?)),
        "memcached" => Box::new(net::Memcached::new(need(kind)?)),
        other => {
            return Err(TargetError(format!(
                "unknown target '{other}' (accelkv, accelkv-engine[=auto|cpu|gpu], accelkv-durable[=POLICY], \
                 btreemap, rocksdb[=sync|none], lmdb[=sync|none], \
                 accelkv-tcp=ADDR, accelkv-udp=ADDR, accelkv-resp=ADDR, redis=ADDR, memcached=ADDR)"
            )))
        }
    })
}

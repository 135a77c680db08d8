//! A client for an accelkv cluster (docs/CLUSTER.md): it caches the range map (`CLUSTER
//! RANGES`), sends each command straight to the leader of its key's range, follows
//! `-MOVED` (and asks for the map again when a range it did not know answers), waits out
//! `-TRYAGAIN` with a growing pause, and merges a scan that crosses ranges in key order,
//! resuming from the last key it has whenever a split or move changes the map under it.
//! It speaks RESP, the protocol cluster mode serves keys over.
//!
//! Its connections ask the nodes not to proxy (`CLUSTER NOPROXY`): a node answers `-MOVED`
//! for a range it does not lead, so a stale map costs one redirect and is then corrected,
//! rather than an extra hop on every command.
//!
//! Its typed writes ([`ClusterClient::set`], [`ClusterClient::del`],
//! [`ClusterClient::incr_by`]) carry a request id (`ACCELKV.ONCE <client> <seq> …`, this
//! client's random id and a number that grows with each write): the range applies a write
//! at most once however often it arrives, and answers a repeat with the first reply. So
//! such a write is sent again when its connection broke or its group did not commit it in
//! time, and is answered [`ClientError::Unknown`] only if the client's patience runs out
//! meanwhile. A write sent with [`ClusterClient::command`] carries no id: one whose outcome
//! cannot be known is answered [`ClientError::Unknown`] at once, and the caller decides.
//! Reads are retried freely.
//!
//! ```no_run
//! use accelkv_client::cluster::ClusterClient;
//! let mut c = ClusterClient::connect(&["127.0.0.1:7001", "127.0.0.1:7002"])?;
//! c.set(b"user:1", b"alice")?;
//! assert_eq!(c.get(b"user:1")?, Some(b"alice".to_vec()));
//! let items = c.scan(b"user:", Some(b"user;"), 1000)?; // across every range, in key order
//! # Ok::<(), accelkv_client::ClientError>(())
//! ```

use crate::resp_conn::RespConn;
use crate::{ClientError, Result};
use accelkv_proto::resp::Value;
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

/// One range of the map as the client caches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeInfo {
    /// The range's id.
    pub id: u64,
    /// Its first key.
    pub start: Vec<u8>,
    /// The key after its last (`None`: the end of the key space).
    pub end: Option<Vec<u8>>,
    /// The RESP address of its leader, as last learned (`None`: not known).
    pub leader: Option<String>,
    /// Its replicas: node id and RESP address.
    pub replicas: Vec<(u64, String)>,
}

impl RangeInfo {
    /// Whether `key` is in this range.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|e| key < e)
    }
}

/// What the client has done, for a caller's report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// `-MOVED` answers followed.
    pub redirects: u64,
    /// `-TRYAGAIN` (and, for reads, `-CLUSTERDOWN`) answers waited out.
    pub retries: u64,
    /// Times the range map was asked for.
    pub map_loads: u64,
}

/// A cluster client (see the module's documentation).
pub struct ClusterClient {
    seeds: Vec<SocketAddr>,
    password: Option<String>,
    map: Vec<RangeInfo>,
    conns: HashMap<String, RespConn>,
    patience: Duration,
    io_timeout: Duration,
    page: usize,
    stats: ClusterStats,
    /// This client's id in its writes' request ids (random).
    id: u64,
    /// The sequence number of its last write with a request id.
    seq: u64,
}

/// What a routed command is, for what may be retried.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    /// A write without a request id: never sent twice.
    Write,
    /// A write with a request id: sent again until it is answered.
    Once,
}

/// A random client id (std's hasher keys are random per process and per use).
fn client_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish()
}

impl ClusterClient {
    /// Connects through any of `seeds` (RESP addresses of cluster nodes) and loads the map.
    pub fn connect<A: ToSocketAddrs>(seeds: &[A]) -> Result<ClusterClient> {
        ClusterClient::with_password(seeds, None)
    }

    /// [`ClusterClient::connect`] to a cluster whose nodes require a password.
    pub fn with_password<A: ToSocketAddrs>(
        seeds: &[A],
        password: Option<&str>,
    ) -> Result<ClusterClient> {
        let mut addrs = Vec::new();
        for s in seeds {
            addrs.extend(s.to_socket_addrs()?);
        }
        if addrs.is_empty() {
            return Err(ClientError::Resp("no seed address given".into()));
        }
        let mut c = ClusterClient {
            seeds: addrs,
            password: password.map(str::to_string),
            map: Vec::new(),
            conns: HashMap::new(),
            patience: Duration::from_secs(15),
            io_timeout: Duration::from_secs(8),
            page: 500,
            stats: ClusterStats::default(),
            id: client_id(),
            seq: 0,
        };
        c.refresh()?;
        Ok(c)
    }

    /// How long one call keeps retrying redirects and unavailable ranges before it gives up
    /// ([`ClientError::Timeout`]); default 15 s, longer than an election.
    pub fn set_patience(&mut self, d: Duration) {
        self.patience = d;
    }

    /// Items asked for per `RANGE` page in [`ClusterClient::scan`] (default 500).
    pub fn set_page(&mut self, n: usize) {
        self.page = n.max(1);
    }

    /// The range map as last loaded, ordered by start key.
    pub fn ranges(&self) -> &[RangeInfo] {
        &self.map
    }

    /// Redirects, retries and map loads so far.
    pub fn stats(&self) -> ClusterStats {
        self.stats
    }

    /// Loads the range map from the first node that answers: the nodes the map names, then
    /// the seeds.
    pub fn refresh(&mut self) -> Result<()> {
        self.stats.map_loads += 1;
        let mut tried: Vec<String> = self
            .map
            .iter()
            .flat_map(|r| r.leader.iter().chain(r.replicas.iter().map(|(_, a)| a)))
            .cloned()
            .collect();
        tried.sort();
        tried.dedup();
        tried.extend(self.seeds.iter().map(|a| a.to_string()));
        let mut last = ClientError::Resp("no node answered CLUSTER RANGES".into());
        for addr in tried {
            match self.ask(&addr, &[b"CLUSTER", b"RANGES"]) {
                Ok(v) => match parse_map(v) {
                    Ok(map) if !map.is_empty() => {
                        self.map = map;
                        return Ok(());
                    }
                    Ok(_) => last = ClientError::Resp("the range map is empty".into()),
                    Err(e) => last = e,
                },
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The value of `key` (`GET`).
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.routed(key, &[b"GET", key], Kind::Read)? {
            Value::Bulk(v) => Ok(v),
            v => Err(unexpected("GET", &v)),
        }
    }

    /// Sets `key` to `value` (`SET`).
    pub fn set(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        match self.routed(key, &[b"SET", key, value], Kind::Once)? {
            Value::Simple(_) => Ok(()),
            v => Err(unexpected("SET", &v)),
        }
    }

    /// Deletes `key`; whether it was there (`DEL`).
    pub fn del(&mut self, key: &[u8]) -> Result<bool> {
        match self.routed(key, &[b"DEL", key], Kind::Once)? {
            Value::Integer(n) => Ok(n > 0),
            v => Err(unexpected("DEL", &v)),
        }
    }

    /// Adds `by` to the integer at `key` (absent: 0); the new value (`INCRBY`).
    pub fn incr_by(&mut self, key: &[u8], by: i64) -> Result<i64> {
        let by = by.to_string();
        match self.routed(key, &[b"INCRBY", key, by.as_bytes()], Kind::Once)? {
            Value::Integer(n) => Ok(n),
            v => Err(unexpected("INCRBY", &v)),
        }
    }

    /// Runs any command whose keys all lie in `key`'s range, sent to that range's leader;
    /// `write` says whether it changes anything (a write of unknown outcome is not
    /// retried). An error reply other than a redirect is returned as [`ClientError::Resp`].
    pub fn command(&mut self, key: &[u8], args: &[&[u8]], write: bool) -> Result<Value> {
        let kind = if write { Kind::Write } else { Kind::Read };
        self.routed(key, args, kind)
    }

    /// The items with keys in `[lo, hi)` (`hi` `None`: no upper bound), at most `limit`, in
    /// key order across every range they fall in. Each range is read in `RANGE … CURSOR`
    /// pages from its leader, so each page is linearizable on its own; the scan as a whole
    /// is not one snapshot (docs/CLUSTER.md, "Guarantees"). A split or move meanwhile makes
    /// it ask for the map again and go on from the last key it has: no key is skipped or
    /// repeated.
    pub fn scan(
        &mut self,
        lo: &[u8],
        hi: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut out = Vec::new();
        let mut from = lo.to_vec();
        let started = Instant::now();
        while out.len() < limit && hi.is_none_or(|h| from.as_slice() < h) {
            let Some(r) = self.find(&from).cloned() else {
                self.refresh()?;
                if started.elapsed() > self.patience {
                    return Err(ClientError::Resp(
                        "CLUSTERDOWN the range map has a gap".into(),
                    ));
                }
                continue;
            };
            // This range's part of the scan: up to its end or `hi`, whichever is first.
            let part_hi = match (r.end.as_deref(), hi) {
                (Some(e), Some(h)) => Some(e.min(h)),
                (e, h) => e.or(h),
            };
            let want = (limit - out.len()).min(self.page).to_string();
            let args: [&[u8]; 6] = [
                b"RANGE",
                &from,
                part_hi.unwrap_or(b"+"),
                b"LIMIT",
                want.as_bytes(),
                b"CURSOR",
            ];
            let page = match self.routed(&from, &args, Kind::Read) {
                Err(ClientError::Resp(e)) if e.starts_with("CROSSSLOT") => {
                    // The range split since the map was read: plan this part again.
                    self.refresh()?;
                    continue;
                }
                page => page?,
            };
            let (next, items) = parse_page(page)?;
            out.extend(items);
            from = match (next, part_hi) {
                (Some(next), _) => next,
                (None, Some(end)) => end.to_vec(),
                (None, None) => break,
            };
        }
        out.truncate(limit);
        Ok(out)
    }

    /// The cached range holding `key`.
    fn find(&self, key: &[u8]) -> Option<&RangeInfo> {
        self.map.iter().find(|r| r.contains(key))
    }

    /// Where a command for `key` goes: its range's leader if known, else a replica, else a
    /// seed (the `attempt`-th, so successive attempts try different nodes).
    fn target(&self, key: &[u8], attempt: usize) -> String {
        match self.find(key) {
            Some(r) => match (&r.leader, attempt) {
                (Some(l), 0) => l.clone(),
                _ if !r.replicas.is_empty() => r.replicas[attempt % r.replicas.len()].1.clone(),
                _ => self.seeds[attempt % self.seeds.len()].to_string(),
            },
            None => self.seeds[attempt % self.seeds.len()].to_string(),
        }
    }

    /// Runs `args` at the leader of `key`'s range, following redirects until it is answered
    /// or the patience runs out.
    fn routed(&mut self, key: &[u8], args: &[&[u8]], kind: Kind) -> Result<Value> {
        let started = Instant::now();
        let mut attempt = 0;
        let mut pause = Duration::from_millis(5);
        let mut redirected = 0;
        // A write with a request id: the same id on every attempt.
        let (id, seq, once): (String, String, Vec<&[u8]>);
        let args = if kind == Kind::Once {
            self.seq += 1;
            (id, seq) = (self.id.to_string(), self.seq.to_string());
            once = [&b"ACCELKV.ONCE"[..], id.as_bytes(), seq.as_bytes()]
                .into_iter()
                .chain(args.iter().copied())
                .collect();
            &once[..]
        } else {
            args
        };
        // Why an attempt's outcome is unknown, if one's is.
        let mut unknown: Option<String> = None;
        loop {
            if started.elapsed() > self.patience {
                return Err(match unknown {
                    Some(why) => ClientError::Unknown(format!(
                        "{why}; sent again until the client's patience ran out"
                    )),
                    None => ClientError::Timeout,
                });
            }
            let to = self.target(key, attempt);
            let conn = match self.conn(&to) {
                Ok(c) => c,
                Err(_) => {
                    // Nothing was sent: try another node and a fresher map.
                    attempt += 1;
                    self.forget_leader(&to);
                    back_off(&mut pause);
                    let _ = self.refresh();
                    continue;
                }
            };
            let reply = conn.call(args);
            let reply = match reply {
                Ok(v) => v,
                Err(e) => {
                    self.conns.remove(&to);
                    self.forget_leader(&to);
                    let why = format!("the connection to {to} broke after the write was sent: {e}");
                    match kind {
                        Kind::Write => return Err(ClientError::Unknown(why)),
                        Kind::Once => unknown = Some(why),
                        Kind::Read => {}
                    }
                    attempt += 1;
                    let _ = self.refresh();
                    continue;
                }
            };
            let Value::Error(e) = reply else {
                return Ok(reply);
            };
            if let Some(rest) = e.strip_prefix("MOVED ") {
                self.stats.redirects += 1;
                redirected += 1;
                if redirected > 2 {
                    // Redirected again and again: the nodes do not agree on the leader yet
                    // (an election is under way); wait as for TRYAGAIN.
                    back_off(&mut pause);
                }
                let mut it = rest.split_whitespace();
                let (id, addr) = (it.next().and_then(|i| i.parse::<u64>().ok()), it.next());
                let (Some(id), Some(addr)) = (id, addr) else {
                    return Err(ClientError::Resp(e));
                };
                // A range the map does not show holding the key: the map is stale.
                if self.find(key).is_none_or(|r| r.id != id) {
                    let _ = self.refresh();
                }
                if let Some(r) = self.map.iter_mut().find(|r| r.id == id) {
                    r.leader = Some(addr.to_string());
                }
                attempt = 0;
                continue;
            }
            let retry =
                e.starts_with("TRYAGAIN") || (kind != Kind::Write && e.starts_with("CLUSTERDOWN"));
            if kind == Kind::Once && e.starts_with("CLUSTERDOWN") {
                unknown = Some(e.clone());
            }
            if retry {
                self.stats.retries += 1;
                back_off(&mut pause);
                let _ = self.refresh();
                attempt = 0;
                continue;
            }
            if e.starts_with("CLUSTERDOWN") {
                // A write that was not committed in time may still commit.
                return Err(ClientError::Unknown(e));
            }
            return Err(ClientError::Resp(e));
        }
    }

    /// Drops the leader hint that pointed at `addr`.
    fn forget_leader(&mut self, addr: &str) {
        for r in &mut self.map {
            if r.leader.as_deref() == Some(addr) {
                r.leader = None;
            }
        }
    }

    /// A pooled connection to `addr`, opened (and told not to proxy) if need be.
    fn conn(&mut self, addr: &str) -> Result<&mut RespConn> {
        if !self.conns.contains_key(addr) {
            let sa: SocketAddr = addr
                .to_socket_addrs()?
                .next()
                .ok_or_else(|| ClientError::Resp(format!("no address for {addr}")))?;
            let mut c = RespConn::connect(sa, self.io_timeout)?;
            if let Some(p) = &self.password {
                expect_ok(c.call(&[b"AUTH", p.as_bytes()])?, "AUTH")?;
            }
            expect_ok(c.call(&[b"CLUSTER", b"NOPROXY"])?, "CLUSTER NOPROXY")?;
            self.conns.insert(addr.to_string(), c);
        }
        Ok(self.conns.get_mut(addr).expect("inserted above"))
    }

    /// One command at `addr`, no routing (the map itself).
    fn ask(&mut self, addr: &str, args: &[&[u8]]) -> Result<Value> {
        let r = self.conn(addr).and_then(|c| c.call(args));
        if r.is_err() {
            self.conns.remove(addr);
        }
        match r? {
            Value::Error(e) => Err(ClientError::Resp(e)),
            v => Ok(v),
        }
    }
}

/// Sleeps `pause`, then doubles it up to 200 ms (the wait between retries of one call).
fn back_off(pause: &mut Duration) {
    std::thread::sleep(*pause);
    *pause = (*pause * 2).min(Duration::from_millis(200));
}

fn expect_ok(v: Value, what: &str) -> Result<()> {
    match v {
        Value::Simple(_) => Ok(()),
        Value::Error(e) => Err(ClientError::Resp(format!("{what}: {e}"))),
        v => Err(unexpected(what, &v)),
    }
}

fn unexpected(what: &str, v: &Value) -> ClientError {
    ClientError::Resp(format!("unexpected reply to {what}: {v:?}"))
}

/// `CLUSTER RANGES`: `[id, start, end or nil, leader or nil, [[node, address]…]]` per range.
fn parse_map(v: Value) -> Result<Vec<RangeInfo>> {
    let bad = |what: &str| ClientError::Resp(format!("malformed CLUSTER RANGES reply: {what}"));
    let Value::Array(Some(rows)) = v else {
        return Err(bad("not an array"));
    };
    let mut map = Vec::with_capacity(rows.len());
    for row in rows {
        let Value::Array(Some(f)) = row else {
            return Err(bad("a range is not an array"));
        };
        let [Value::Integer(id), Value::Bulk(Some(start)), Value::Bulk(end), Value::Bulk(leader), Value::Array(Some(reps))] =
            f.as_slice()
        else {
            return Err(bad("a range's fields"));
        };
        let mut replicas = Vec::with_capacity(reps.len());
        for rep in reps {
            match rep {
                Value::Array(Some(p)) => match p.as_slice() {
                    [Value::Integer(n), Value::Bulk(Some(a))] => {
                        replicas.push((*n as u64, String::from_utf8_lossy(a).into_owned()))
                    }
                    _ => return Err(bad("a replica")),
                },
                _ => return Err(bad("a replica")),
            }
        }
        map.push(RangeInfo {
            id: *id as u64,
            start: start.clone(),
            end: end.clone(),
            leader: leader
                .as_ref()
                .map(|l| String::from_utf8_lossy(l).into_owned()),
            replicas,
        });
    }
    map.sort_by(|a, b| a.start.cmp(&b.start));
    Ok(map)
}

/// A `RANGE … CURSOR` page: the key to go on from (`None`: the part is done) and the items.
type Page = (Option<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>);

fn parse_page(v: Value) -> Result<Page> {
    let bad = || ClientError::Resp(format!("malformed RANGE page: {v:?}"));
    let Value::Array(Some(parts)) = &v else {
        return Err(bad());
    };
    let [next, Value::Array(Some(flat))] = parts.as_slice() else {
        return Err(bad());
    };
    let next = match next {
        Value::Bulk(n) => n.clone(),
        _ => return Err(bad()),
    };
    if flat.len() % 2 != 0 {
        return Err(bad());
    }
    let mut items = Vec::with_capacity(flat.len() / 2);
    for kv in flat.chunks(2) {
        match (&kv[0], &kv[1]) {
            (Value::Bulk(Some(k)), Value::Bulk(Some(v))) => items.push((k.clone(), v.clone())),
            _ => return Err(bad()),
        }
    }
    Ok((next, items))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(b: &[u8]) -> Value {
        Value::Bulk(Some(b.to_vec()))
    }

    fn row(id: i64, start: &[u8], end: Option<&[u8]>, leader: Option<&str>) -> Value {
        Value::Array(Some(vec![
            Value::Integer(id),
            bulk(start),
            Value::Bulk(end.map(<[u8]>::to_vec)),
            Value::Bulk(leader.map(|l| l.as_bytes().to_vec())),
            Value::Array(Some(vec![Value::Array(Some(vec![
                Value::Integer(1),
                bulk(b"127.0.0.1:1"),
            ]))])),
        ]))
    }

    #[test]
    fn map_is_ordered_and_finds_keys() {
        let v = Value::Array(Some(vec![
            row(2, b"m", None, None),
            row(1, b"", Some(b"m"), Some("127.0.0.1:1")),
        ]));
        let map = parse_map(v).unwrap();
        assert_eq!(map[0].id, 1);
        assert!(map[0].contains(b"") && map[0].contains(b"l\xff") && !map[0].contains(b"m"));
        assert!(map[1].contains(b"m") && map[1].contains(b"\xff\xff"));
        assert_eq!(map[0].leader.as_deref(), Some("127.0.0.1:1"));
        assert_eq!(map[1].leader, None);
    }

    #[test]
    fn malformed_maps_and_pages_are_errors() {
        assert!(parse_map(Value::Integer(1)).is_err());
        assert!(parse_map(Value::Array(Some(vec![Value::Integer(1)]))).is_err());
        assert!(parse_page(Value::Array(Some(vec![Value::Bulk(None)]))).is_err());
        let odd = Value::Array(Some(vec![
            Value::Bulk(None),
            Value::Array(Some(vec![bulk(b"k")])),
        ]));
        assert!(parse_page(odd).is_err());
        let ok = Value::Array(Some(vec![
            bulk(b"n"),
            Value::Array(Some(vec![bulk(b"k"), bulk(b"v")])),
        ]));
        assert_eq!(
            parse_page(ok).unwrap(),
            (Some(b"n".to_vec()), vec![(b"k".to_vec(), b"v".to_vec())])
        );
    }
}

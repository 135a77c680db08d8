//! The coordinator: etcd holds the range map and node membership, so accelkv has no
//! cluster manager of its own. Under `/accelkv/<cluster>/`:
//!
//! - `nodes/<id>`: a live node's addresses (JSON `NodeAddr`), under a lease the node keeps
//!   alive; a node that stops renewing drops out after the lease's TTL.
//! - `map`: the range map (JSON `RangeMap`). It is created once, by whichever node first
//!   sees enough live nodes, in a transaction that only succeeds while it is absent; every
//!   later change is a compare-and-swap on its etcd revision, and bumps its `epoch`.
//!
//! Nodes watch the map. A watch or lease that breaks (etcd restarting, say) is opened again
//! after a short wait, reading the map afresh, so a restart of etcd loses nothing: the map
//! is in etcd's own log, and leases are restored by etcd and renewed again.

use crate::map::{NodeAddr, NodeId, RangeMap};
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, PutOptions, Txn, TxnOp,
    WatchOptions,
};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

/// How long a broken watch or lease waits before it is opened again.
const RETRY: Duration = Duration::from_millis(300);

/// A connection to etcd for one cluster.
#[derive(Clone)]
pub struct Coordinator {
    client: Client,
    prefix: String,
}

fn etcd_err(what: &str, e: etcd_client::Error) -> String {
    format!("etcd: {what}: {e}")
}

impl Coordinator {
    /// Connects to the etcd `endpoints` (`http://host:port`) for the cluster named `cluster`.
    pub async fn connect(endpoints: &[String], cluster: &str) -> Result<Coordinator, String> {
        let opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2));
        let client = Client::connect(endpoints, Some(opts))
            .await
            .map_err(|e| etcd_err("connecting", e))?;
        Ok(Coordinator {
            client,
            prefix: format!("/accelkv/{cluster}/"),
        })
    }

    fn key(&self, k: &str) -> String {
        format!("{}{k}", self.prefix)
    }

    /// Registers node `id` at `addr` under a lease of `ttl` seconds and keeps it alive in
    /// the background for as long as the runtime runs, registering again after any break.
    pub async fn register(&self, id: NodeId, addr: &NodeAddr, ttl: i64) -> Result<(), String> {
        let lease = self.put_node(id, addr, ttl).await?;
        let me = self.clone();
        let addr = addr.clone();
        tokio::spawn(async move {
            let mut lease = Some(lease);
            loop {
                if let Some(l) = lease.take() {
                    me.keep_alive(l, ttl).await;
                }
                tokio::time::sleep(RETRY).await;
                lease = me.put_node(id, &addr, ttl).await.ok();
            }
        });
        Ok(())
    }

    async fn put_node(&self, id: NodeId, addr: &NodeAddr, ttl: i64) -> Result<i64, String> {
        let mut c = self.client.clone();
        let lease = c
            .lease_grant(ttl, None)
            .await
            .map_err(|e| etcd_err("granting a lease", e))?
            .id();
        let body = serde_json::to_vec(addr).expect("an address serializes");
        c.put(
            self.key(&format!("nodes/{id}")),
            body,
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
        .map_err(|e| etcd_err("registering the node", e))?;
        Ok(lease)
    }

    /// Renews `lease` every third of its TTL until renewing fails.
    async fn keep_alive(&self, lease: i64, ttl: i64) {
        let mut c = self.client.clone();
        let Ok((mut keeper, mut stream)) = c.lease_keep_alive(lease).await else {
            return;
        };
        let every = Duration::from_millis((ttl as u64 * 1000 / 3).max(100));
        loop {
            if keeper.keep_alive().await.is_err() {
                return;
            }
            match stream.message().await {
                Ok(Some(r)) if r.ttl() > 0 => {}
                _ => return, // expired or broken: register again
            }
            tokio::time::sleep(every).await;
        }
    }

    /// The nodes registered now.
    pub async fn live_nodes(&self) -> Result<BTreeMap<NodeId, NodeAddr>, String> {
        let mut c = self.client.clone();
        let prefix = self.key("nodes/");
        let r = c
            .get(prefix.clone(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| etcd_err("listing nodes", e))?;
        let mut out = BTreeMap::new();
        for kv in r.kvs() {
            let id = std::str::from_utf8(&kv.key()[prefix.len()..])
                .ok()
                .and_then(|s| s.parse().ok());
            let addr = serde_json::from_slice(kv.value()).ok();
            if let (Some(id), Some(addr)) = (id, addr) {
                out.insert(id, addr);
            }
        }
        Ok(out)
    }

    /// The map and its etcd revision, if one was created.
    pub async fn map(&self) -> Result<Option<(RangeMap, i64)>, String> {
        let mut c = self.client.clone();
        let r = c
            .get(self.key("map"), None)
            .await
            .map_err(|e| etcd_err("reading the map", e))?;
        match r.kvs().first() {
            None => Ok(None),
            Some(kv) => Ok(Some((RangeMap::from_json(kv.value())?, kv.mod_revision()))),
        }
    }

    /// Creates `map` unless a map exists; answers whichever map is there afterwards.
    pub async fn create_map(&self, map: &RangeMap) -> Result<RangeMap, String> {
        map.validate()?;
        let mut c = self.client.clone();
        let key = self.key("map");
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, map.to_json(), None)]);
        c.txn(txn)
            .await
            .map_err(|e| etcd_err("creating the map", e))?;
        Ok(self
            .map()
            .await?
            .ok_or("the map vanished after it was created")?
            .0)
    }

    /// Replaces the map with `map` if it is still at etcd revision `rev` (nobody changed it
    /// since it was read); answers whether it was replaced. `map.epoch` must be greater.
    pub async fn replace_map(&self, map: &RangeMap, rev: i64) -> Result<bool, String> {
        map.validate()?;
        let mut c = self.client.clone();
        let key = self.key("map");
        let txn = Txn::new()
            .when([Compare::mod_revision(key.clone(), CompareOp::Equal, rev)])
            .and_then([TxnOp::put(key, map.to_json(), None)]);
        let r = c
            .txn(txn)
            .await
            .map_err(|e| etcd_err("replacing the map", e))?;
        Ok(r.succeeded())
    }

    /// Changes the map: `f` answers the new map for the one it is shown (with `epoch`
    /// bumped), or `None` when nothing needs changing; a compare-and-swap that loses a race
    /// reads the map again and asks `f` again. Answers the map as it stands afterwards.
    pub async fn update_map(
        &self,
        mut f: impl FnMut(&RangeMap) -> Result<Option<RangeMap>, String>,
    ) -> Result<RangeMap, String> {
        loop {
            let (m, rev) = self.map().await?.ok_or("no map was created yet")?;
            match f(&m)? {
                None => return Ok(m),
                Some(n) => {
                    if self.replace_map(&n, rev).await? {
                        return Ok(n);
                    }
                }
            }
        }
    }

    /// Waits until a map exists, creating a one-range map over the `replicas` lowest-numbered
    /// live nodes once that many are registered (placing keys by hash slot if `by_slot`).
    pub async fn bootstrap(&self, replicas: usize, by_slot: bool) -> Result<RangeMap, String> {
        loop {
            if let Some((m, _)) = self.map().await? {
                return Ok(m);
            }
            let live = self.live_nodes().await?;
            if live.len() >= replicas {
                let chosen: Vec<(NodeId, NodeAddr)> = live.into_iter().take(replicas).collect();
                let mut m = RangeMap::single(&chosen);
                m.slots = by_slot.then(|| "redis".to_string());
                return self.create_map(&m).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Follows the map: the receiver always holds the newest map seen (starting with the
    /// current one, which must exist). Runs in the background for as long as the runtime.
    pub async fn watch_map(&self) -> Result<watch::Receiver<RangeMap>, String> {
        let (first, rev) = self.map().await?.ok_or("no map was created yet")?;
        let (tx, rx) = watch::channel(first);
        let me = self.clone();
        tokio::spawn(async move {
            let mut rev = rev;
            loop {
                rev = me.follow(&tx, rev).await;
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(RETRY).await;
                // Read afresh: changes made while the watch was broken are not missed.
                if let Ok(Some((m, r))) = me.map().await {
                    rev = r;
                    tx.send_if_modified(|cur| {
                        let newer = m.epoch > cur.epoch;
                        if newer {
                            *cur = m;
                        }
                        newer
                    });
                }
            }
        });
        Ok(rx)
    }

    /// Watches the map from after revision `rev` until the watch breaks; answers the last
    /// revision seen.
    async fn follow(&self, tx: &watch::Sender<RangeMap>, mut rev: i64) -> i64 {
        let mut c = self.client.clone();
        let opts = WatchOptions::new().with_start_revision(rev + 1);
        let Ok(mut stream) = c.watch(self.key("map"), Some(opts)).await else {
            return rev;
        };
        while let Ok(Some(resp)) = stream.message().await {
            if resp.canceled() {
                break;
            }
            for ev in resp.events() {
                let Some(kv) = ev.kv() else { continue };
                rev = rev.max(kv.mod_revision());
                if ev.event_type() != EventType::Put {
                    continue;
                }
                if let Ok(m) = RangeMap::from_json(kv.value()) {
                    tx.send_if_modified(|cur| {
                        let newer = m.epoch > cur.epoch;
                        if newer {
                            *cur = m;
                        }
                        newer
                    });
                }
            }
        }
        rev
    }
}

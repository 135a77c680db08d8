//! Splitting ranges (docs/CLUSTER.md, "Splits"): a range whose keys and values come to
//! more than `--split-size` bytes, or one named by `CLUSTER SPLIT <key>`, is split by its
//! leader. The leader reserves the new range's id in the map, commits `ACCELKV.SPLIT` in
//! the range's log (every replica narrows the range and seeds the new range's group at
//! that point, `machine.rs`), then records the split in the map by compare-and-swap
//! with a new epoch. Until the map shows it, a command routed to the old range for a key it
//! gave away is answered `-TRYAGAIN`; a leader that finds the map behind a split its range
//! applied (its predecessor died between the two) records it.

use crate::cluster::bounds::Bounds;
use crate::cluster::machine::{Registry, StoreMachine, SPLIT};
use crate::cluster::WAIT;
use crate::core::route::{encode, list, put_list};
use crate::core::shared::Shared;
use accelkv_cluster::{write, Coordinator, RaftNode, RangeId, RangeMap};
use accelkv_proto::resp::Version;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// What the split machinery works with (clones share it).
#[derive(Clone)]
pub(crate) struct Ctl {
    pub me: u64,
    pub raft: Arc<RaftNode>,
    pub coord: Coordinator,
    pub reg: Arc<Registry>,
    pub map: watch::Receiver<RangeMap>,
    pub sh: Weak<Shared>,
    /// Bytes past which a range splits (0: never).
    pub split_size: u64,
    /// Keyed commands a second past which a range splits (0: never).
    pub split_load: u64,
    /// `--slots redis`: every split is at a hash slot's bound.
    pub slots: bool,
}

/// Half-second ticks a range must stay over `--split-load` before it is split by load.
const BUSY_TICKS: u32 = 4;

/// A led range's load when the split loop last looked.
struct Busy {
    served: u64,
    at: tokio::time::Instant,
    /// Ticks in a row the range was over `--split-load`.
    ticks: u32,
}

/// Splits range `range` (which this node must lead) at `at`; answers the new range's id,
/// or the error to answer the client.
pub(crate) async fn split(ctl: &Ctl, range: RangeId, at: Vec<u8>) -> Result<RangeId, String> {
    let raft = ctl
        .raft
        .group(range)
        .ok_or_else(|| format!("TRYAGAIN this node does not serve range {range} now"))?;
    let b = ctl
        .reg
        .bounds(range)
        .ok_or_else(|| format!("TRYAGAIN this node does not serve range {range} now"))?;
    if at.as_slice() <= b.0.as_slice() || b.1.as_deref().is_some_and(|e| at.as_slice() >= e) {
        return Err(format!(
            "ERR the split key must lie inside range {range}, after its first key"
        ));
    }
    // Slot mode: a range is a run of whole slots, so it splits at the bound of the key's slot
    // (or of the next, when the key is in the range's first slot).
    let at = match ctl.slots {
        true => accelkv_proto::slot::split_bound(&at, &b.0, b.1.as_deref()).ok_or_else(|| {
            format!("ERR range {range} holds one hash slot, which cannot be split")
        })?,
        false => at,
    };
    if ctl
        .map
        .borrow()
        .range(range)
        .is_some_and(|r| !r.learners.is_empty())
    {
        return Err(format!("TRYAGAIN range {range} is moving; split it after"));
    }
    let members = {
        let m = raft.metrics().borrow().membership_config.clone();
        let mem = m.membership();
        if mem.get_joint_config().len() > 1 || mem.learner_ids().next().is_some() {
            return Err(format!(
                "TRYAGAIN range {range} is changing its replicas; split it after"
            ));
        }
        mem.voter_ids()
            .filter_map(|id| mem.get_node(&id).map(|n| format!("{id}={}", n.addr)))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut child = 0;
    ctl.coord
        .update_map(|m| {
            let mut n = m.clone();
            child = n.reserve_id();
            Ok(Some(n))
        })
        .await
        .map_err(|e| format!("CLUSTERDOWN {e}"))?;
    let cmd = encode(
        &[
            SPLIT.to_vec(),
            at.clone(),
            child.to_string().into_bytes(),
            members.into_bytes(),
        ],
        Version::Resp2,
    );
    let mut entry = Vec::new();
    put_list(&mut entry, &[cmd]);
    let reply = tokio::time::timeout(WAIT, write(&raft, entry))
        .await
        .map_err(|_| format!("CLUSTERDOWN the split of range {range} was not committed in time"))?
        .map_err(|e| format!("TRYAGAIN {e}"))?;
    let first = list(&reply).and_then(|l| l.first().map(|r| r.to_vec()));
    match first {
        Some(r) if r.starts_with(b"+OK") => {}
        Some(r) if r.starts_with(b"-") => {
            let text = String::from_utf8_lossy(&r[1..]);
            return Err(text.trim_end().to_string());
        }
        _ => return Err("ERR the replicas answered the split wrongly".into()),
    }
    let heir = match ctl.slots {
        true => heir(ctl, range),
        false => None,
    };
    match &heir {
        Some((_, addr)) => campaign_at(ctl, child, addr.clone()),
        None => campaign(ctl, child),
    }
    record(ctl, range, &at, child, heir.map_or(ctl.me, |h| h.0)).await?;
    Ok(child)
}

/// Has this node, the parent's leader, stand for election in the new range's group as soon
/// as the group is open here. A seeded group holds no vote, so no leader lease delays it:
/// the new range has a leader in milliseconds rather than after an election timeout
/// (400–800 ms, and its keys answered `-TRYAGAIN` meanwhile), and the leader is the node
/// that led the keys before. A replica that has not opened the group yet cannot vote, so
/// the campaign is tried again every 20 ms until some leader is known (another replica
/// timing out first and winning is harmless).
fn campaign(ctl: &Ctl, child: RangeId) {
    let raft = ctl.raft.clone();
    tokio::spawn(async move {
        let t = tokio::time::Instant::now();
        while t.elapsed() < Duration::from_secs(2) {
            if let Some(g) = raft.group(child) {
                if g.metrics().borrow().current_leader.is_some() {
                    return;
                }
                let _ = g.trigger().elect().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            } else {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
    });
}

/// Slot mode spreads the slots' primaries, as Redis Cluster's do: the new range is led by
/// the replica of `range` that leads the fewest ranges (by the map's hints; another node
/// before this one on a tie), when that is not this node; its id and Raft address.
fn heir(ctl: &Ctl, range: RangeId) -> Option<(u64, String)> {
    let map = ctl.map.borrow();
    let r = map.range(range)?;
    let led = |id: u64| map.ranges.iter().filter(|x| x.leader == Some(id)).count();
    let best = r
        .replicas
        .iter()
        .copied()
        .min_by_key(|id| (led(*id), *id == ctl.me, *id))?;
    (best != ctl.me).then(|| Some((best, map.nodes.get(&best)?.raft.clone())))?
}

/// [`campaign`], by another replica (at Raft address `addr`): asked to stand for election
/// in the new range's group every 20 ms until it has (its group opens once it applied the
/// split) or some leader is known.
fn campaign_at(ctl: &Ctl, child: RangeId, addr: String) {
    let raft = ctl.raft.clone();
    tokio::spawn(async move {
        let t = tokio::time::Instant::now();
        while t.elapsed() < Duration::from_secs(2) {
            let known = raft
                .group(child)
                .is_some_and(|g| g.metrics().borrow().current_leader.is_some());
            if known {
                return;
            }
            // Once it stood, it is not asked again (its election decides).
            if raft.ask_to_campaign(child, &addr).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// Records in the map that range `range` split at `at`, giving range `child` the keys from
/// there, led by `child_leader` (nothing to do if the map shows it already).
async fn record(
    ctl: &Ctl,
    range: RangeId,
    at: &[u8],
    child: RangeId,
    child_leader: u64,
) -> Result<(), String> {
    let me = ctl.me;
    ctl.coord
        .update_map(|m| {
            if m.range(child).is_some() {
                return Ok(None);
            }
            let mut n = m.clone();
            n.split(range, at, child)?;
            for r in n
                .ranges
                .iter_mut()
                .filter(|r| r.id == child || r.id == range)
            {
                r.leader = Some(if r.id == child { child_leader } else { me });
            }
            Ok(Some(n))
        })
        .await
        .map(|_| ())
        .map_err(|e| format!("CLUSTERDOWN recording the split of range {range}: {e}"))
}

/// Every half second, for each range this node leads: records a split the map is behind
/// on, splits the range if it grew past `--split-size` (measured again once a quarter
/// of that has been written to it since it was last measured), and splits it by load if
/// its leader here served more than `--split-load` commands a second for two seconds.
pub(crate) async fn run(ctl: Ctl) {
    let mut measured: HashMap<RangeId, u64> = HashMap::new();
    let mut busy: HashMap<RangeId, Busy> = HashMap::new();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    loop {
        tick.tick().await;
        let machines: Vec<_> = {
            let g = ctl.reg.machines.read().unwrap_or_else(|e| e.into_inner());
            g.values().cloned().collect()
        };
        for m in machines {
            let Some(g) = ctl.raft.group(m.id) else {
                continue;
            };
            if g.metrics().borrow().current_leader != Some(ctl.me) {
                continue;
            }
            let done = {
                let st = m.state.lock().unwrap_or_else(|e| e.into_inner());
                st.split.clone()
            };
            if let Some((at, child, _)) = done {
                if ctl.map.borrow().range(child).is_none() {
                    if let Err(e) = record(&ctl, m.id, &at, child, ctl.me).await {
                        tracing::warn!("{e}");
                    }
                }
            }
            if by_load(&ctl, &m, &mut busy).await || ctl.split_size == 0 {
                continue;
            }
            let written = m.written.load(Ordering::Relaxed);
            if measured
                .get(&m.id)
                .is_some_and(|w| written.saturating_sub(*w) < ctl.split_size / 4)
            {
                continue;
            }
            measured.insert(m.id, written);
            let Some(sh) = ctl.sh.upgrade() else { return };
            let (b, limit) = (m.bounds(), ctl.split_size);
            let mid = tokio::task::spawn_blocking(move || middle(&sh, &b, limit))
                .await
                .ok()
                .flatten();
            if let Some((at, bytes)) = mid {
                match split(&ctl, m.id, at).await {
                    Ok(child) => tracing::info!(
                        "range {} holds {bytes} bytes (over --split-size {limit}): split off range {child}",
                        m.id
                    ),
                    Err(e) => tracing::warn!("splitting range {}: {e}", m.id),
                }
            }
        }
    }
}

/// Splits range `m` if its leader here has served more than `--split-load` commands a
/// second for [`BUSY_TICKS`] ticks, at the key that halves its sampled load; whether it did.
async fn by_load(ctl: &Ctl, m: &StoreMachine, busy: &mut HashMap<RangeId, Busy>) -> bool {
    if ctl.split_load == 0 {
        return false;
    }
    let now = tokio::time::Instant::now();
    let served = m.load.served();
    let b = busy.entry(m.id).or_insert(Busy {
        served,
        at: now,
        ticks: 0,
    });
    let secs = now.duration_since(b.at).as_secs_f64();
    if secs <= 0.0 {
        return false;
    }
    // (saturating: a range closed and opened here again counts from 0)
    let rate = served.saturating_sub(b.served) as f64 / secs;
    (b.served, b.at) = (served, now);
    b.ticks = if rate > ctl.split_load as f64 {
        b.ticks + 1
    } else {
        0
    };
    if b.ticks < BUSY_TICKS {
        return false;
    }
    let Some(at) = m.load.split_key(&m.bounds()) else {
        return false; // one key is most of the load, or too few sampled yet
    };
    b.ticks = 0;
    match split(ctl, m.id, at.clone()).await {
        Ok(child) => {
            m.load.forget();
            tracing::info!(
                "range {} served {rate:.0} commands/s (over --split-load {}): split at {:?}, off range {child}",
                m.id,
                ctl.split_load,
                String::from_utf8_lossy(&at)
            );
            true
        }
        Err(e) => {
            tracing::warn!("splitting range {} by load: {e}", m.id);
            false
        }
    }
}

/// If range `b`'s keys and values come to more than `limit` bytes: the first key of the
/// leaf at the middle of them (never the range's first key), and the total.
fn middle(sh: &Shared, b: &Bounds, limit: u64) -> Option<(Vec<u8>, u64)> {
    let (lo, hi) = (&b.0, b.1.as_deref());
    let snap = sh.store().snapshot();
    let mut marks: Vec<(Vec<u8>, u64)> = Vec::new();
    let mut total = 0u64;
    let mut key = lo.clone();
    loop {
        let next = snap.leaf(&key, |img| {
            let mut first = true;
            for (k, v, _, _) in &img.items {
                if *k >= lo.as_slice() && hi.is_none_or(|h| *k < h) {
                    if first && *k > lo.as_slice() {
                        marks.push((k.to_vec(), total));
                    }
                    first = false;
                    total += (k.len() + v.len()) as u64;
                }
            }
            img.high.map(<[u8]>::to_vec)
        });
        match next {
            Ok(Some(n)) if hi.is_none_or(|h| n.as_slice() < h) => key = n,
            _ => break,
        }
    }
    if total <= limit {
        return None;
    }
    marks
        .into_iter()
        .find(|(_, before)| *before >= total / 2)
        .map(|(k, _)| (k, total))
}

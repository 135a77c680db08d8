//! Moving a range's replica to another node (docs/CLUSTER.md, "Moves"), on the range's
//! leader, for `CLUSTER MOVE <range> <from> <to>`: the new node is named a learner in the
//! map (so it opens the range, empty), added to the group as a learner and caught up (the
//! leader's snapshot and log), the group's voters are switched in one membership change
//! (openraft's joint consensus), and the map is written with the new replicas and a new
//! epoch; the old node sees itself gone from the range and closes its replica. Each step is
//! safe to repeat, so a move cut short (its leader died) is finished by sending it again.

use crate::cluster::split::Ctl;
use accelkv_cluster::openraft::BasicNode;
use accelkv_cluster::RangeId;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long the new replica may take to catch up.
const CATCH_UP: Duration = Duration::from_secs(120);

/// Moves range `range`'s replica on node `from` to node `to`; answers the error to give
/// the client.
pub(crate) async fn move_replica(
    ctl: &Ctl,
    range: RangeId,
    from: u64,
    to: u64,
) -> Result<(), String> {
    let raft = ctl
        .raft
        .group(range)
        .ok_or_else(|| format!("TRYAGAIN this node does not serve range {range} now"))?;
    let voters: BTreeSet<u64> = {
        let m = raft.metrics().borrow().membership_config.clone();
        m.membership().voter_ids().collect()
    };
    if voters.contains(&to) && !voters.contains(&from) {
        return finish(ctl, range, &voters).await; // done already, but for the map
    }
    if !voters.contains(&from) {
        return Err(format!("ERR node {from} holds no replica of range {range}"));
    }
    if voters.contains(&to) {
        return Err(format!(
            "ERR node {to} holds a replica of range {range} already"
        ));
    }
    let live = ctl
        .coord
        .live_nodes()
        .await
        .map_err(|e| format!("CLUSTERDOWN {e}"))?;
    let addr = live
        .get(&to)
        .cloned()
        .ok_or_else(|| format!("ERR node {to} is not registered (is it running?)"))?;
    // 1. The map names the new node a learner of the range: it opens the range.
    ctl.coord
        .update_map(|m| {
            let Some(i) = m.ranges.iter().position(|r| r.id == range) else {
                return Err(format!("range {range} is not in the map"));
            };
            if m.ranges[i].learners.contains(&to) {
                return Ok(None);
            }
            let mut n = m.clone();
            n.nodes.insert(to, addr.clone());
            n.ranges[i].learners.push(to);
            n.epoch += 1;
            Ok(Some(n))
        })
        .await
        .map_err(|e| format!("CLUSTERDOWN {e}"))?;
    // 2. The group takes it as a learner and catches it up.
    let node = BasicNode {
        addr: addr.raft.clone(),
    };
    tokio::time::timeout(CATCH_UP, raft.add_learner(to, node, true))
        .await
        .map_err(|_| format!("CLUSTERDOWN node {to} did not catch up with range {range} in time; send the move again"))?
        .map_err(|e| format!("TRYAGAIN adding node {to} to range {range}: {e}"))?;
    // 3. One membership change makes it a voter and the old node nothing. A leader that
    // removes itself first stops taking writes and lets those it took settle, so none is
    // left waiting on a group that stops leading.
    let mut next = voters.clone();
    next.remove(&from);
    next.insert(to);
    if from == ctl.me {
        drain(ctl, range).await;
    }
    let changed = tokio::time::timeout(CATCH_UP, raft.change_membership(next.clone(), false)).await;
    if !matches!(changed, Ok(Ok(_))) {
        // Still a voter: take writes again. (Once removed, it drains until it closes.)
        ctl.reg
            .draining
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&range);
    }
    changed
        .map_err(|_| {
            format!(
                "CLUSTERDOWN range {range}'s replicas did not change in time; send the move again"
            )
        })?
        .map_err(|e| format!("TRYAGAIN changing range {range}'s replicas: {e}"))?;
    tracing::info!("range {range} moved from node {from} to node {to}");
    if from == ctl.me {
        hand_over(ctl, range, raft, to);
    }
    finish(ctl, range, &next).await
}

/// A leader that removed itself steps down once the change is applied; the others still
/// hold its lease (the election timeout's upper end, from its last heartbeat) and would
/// start an election only a random timeout after that. openraft 0.9 has no leadership
/// transfer, so once the lease has run out one remaining voter that was one before (not the
/// node just added) is asked to campaign at once: the range is without a leader for about
/// one lease rather than a lease and an election timeout.
fn hand_over(ctl: &Ctl, range: RangeId, raft: accelkv_cluster::raft::Raft, added: u64) {
    let (me, node) = (ctl.me, ctl.raft.clone());
    tokio::spawn(async move {
        let t = tokio::time::Instant::now();
        while raft.metrics().borrow().state.is_leader() {
            if t.elapsed() > Duration::from_secs(5) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(node.election_timeout().1 + Duration::from_millis(20)).await;
        let m = raft.metrics().borrow().clone();
        if m.current_leader.is_some_and(|l| l != me) {
            return; // a leader was elected meanwhile
        }
        let mem = m.membership_config.membership();
        let heir = mem
            .voter_ids()
            .find(|id| *id != me && *id != added)
            .and_then(|id| mem.get_node(&id).map(|n| n.addr.clone()));
        if let Some(addr) = heir {
            if let Err(e) = node.ask_to_campaign(range, &addr).await {
                tracing::warn!("{e}");
            }
        }
    });
}

/// Stops range `range` taking writes here and waits (at most a write's own wait) for the
/// writes it took to be answered.
pub(crate) async fn drain(ctl: &Ctl, range: RangeId) {
    ctl.reg
        .draining
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(range);
    let t = tokio::time::Instant::now();
    while t.elapsed() < crate::cluster::WAIT {
        let busy = ctl
            .reg
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&range)
            .is_some_and(|n| *n > 0);
        if !busy {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// 4. The map shows the range's new replicas (and no learner).
async fn finish(ctl: &Ctl, range: RangeId, voters: &BTreeSet<u64>) -> Result<(), String> {
    let me = ctl.me;
    ctl.coord
        .update_map(|m| {
            let Some(i) = m.ranges.iter().position(|r| r.id == range) else {
                return Err(format!("range {range} is not in the map"));
            };
            let r = &m.ranges[i];
            let now: BTreeSet<u64> = r.replicas.iter().copied().collect();
            if now == *voters && r.learners.is_empty() {
                return Ok(None);
            }
            let mut n = m.clone();
            let r = &mut n.ranges[i];
            r.replicas = voters.iter().copied().collect();
            r.learners.clear();
            r.leader = voters.contains(&me).then_some(me);
            n.epoch += 1;
            Ok(Some(n))
        })
        .await
        .map(|_| ())
        .map_err(|e| format!("CLUSTERDOWN recording the move of range {range}: {e}"))
}

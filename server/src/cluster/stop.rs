//! A clean stop in cluster mode (SIGTERM, SIGINT, SHUTDOWN): the ranges this node leads are
//! handed to another replica before the process exits, so a planned restart costs no
//! election timeout. openraft 0.9 has no leadership transfer, and a follower refuses to
//! vote while the leader's lease (the election timeout's upper end) holds; so each led
//! range first stops taking writes and waits for those in flight (as a move does), its
//! group stops sending heartbeats (and will not stand for election again), and once the
//! lease has run out the most up-to-date follower is asked to campaign at once. When every
//! range has its new leader (or after 2 s) the node's groups stop. Clients see `-TRYAGAIN`
//! meanwhile — the group here still answers for the range, and then redirects to the new
//! leader — never a write of unknown outcome.

use crate::cluster::moves::drain;
use crate::cluster::split::Ctl;
use accelkv_cluster::RangeId;
use std::time::{Duration, Instant};

/// How long a node that handed its ranges over goes on serving before it stops: what was
/// parked for a leader during the election is settled and answered meanwhile.
const GRACE: Duration = Duration::from_millis(300);

/// Hands what this node leads over and stops its groups; blocks for about one lease when it
/// leads anything (at most a write's wait more).
pub(crate) fn hand_over(ctl: &Ctl, rt: &tokio::runtime::Runtime) {
    let t0 = Instant::now();
    let ranges: Vec<RangeId> = ctl
        .reg
        .machines
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .copied()
        .collect();
    let led: Vec<(RangeId, accelkv_cluster::raft::Raft)> = ranges
        .into_iter()
        .filter_map(|r| ctl.raft.group(r).map(|g| (r, g)))
        .filter(|(_, g)| g.metrics().borrow().state.is_leader())
        .collect();
    rt.block_on(async {
        for (range, _) in &led {
            drain(ctl, *range).await;
        }
        let heirs: Vec<(RangeId, String)> = led
            .iter()
            .filter_map(|(range, raft)| Some((*range, heir(ctl.me, raft)?)))
            .collect();
        for (_, raft) in &led {
            raft.runtime_config().heartbeat(false);
            raft.runtime_config().elect(false);
        }
        if !heirs.is_empty() {
            tokio::time::sleep(ctl.raft.election_timeout().1 + Duration::from_millis(20)).await;
        }
        for (range, addr) in &heirs {
            if let Err(e) = ctl.raft.ask_to_campaign(*range, addr).await {
                tracing::warn!("handing range {range} over at stop: {e}");
            }
        }
        let t = tokio::time::Instant::now();
        for (_, raft) in &led {
            let mut m = raft.metrics();
            let me = ctl.me;
            let moved = m.wait_for(|m| m.current_leader.is_some_and(|l| l != me));
            let _ = tokio::time::timeout_at(t + Duration::from_secs(2), moved).await;
        }
        if !led.is_empty() {
            // Commands that reached this node around the election (parked for a leader,
            // or on their way to the new one) are answered before it goes.
            tokio::time::sleep(GRACE).await;
        }
        ctl.raft.shutdown().await;
    });
    if !led.is_empty() {
        tracing::info!(
            "handed {} led range(s) over before stopping, in {:.2} s",
            led.len(),
            t0.elapsed().as_secs_f64()
        );
    }
}

/// The Raft address of the follower whose log matches the leader's furthest.
fn heir(me: u64, raft: &accelkv_cluster::raft::Raft) -> Option<String> {
    let m = raft.metrics().borrow().clone();
    let mem = m.membership_config.membership();
    let best = m.replication.as_ref().and_then(|r| {
        r.iter()
            .filter(|(id, _)| **id != me && mem.voter_ids().any(|v| v == **id))
            .max_by_key(|(_, matched)| matched.map(|l| l.index))
            .map(|(id, _)| *id)
    });
    let id = best.or_else(|| mem.voter_ids().find(|v| *v != me))?;
    mem.get_node(&id).map(|n| n.addr.clone())
}

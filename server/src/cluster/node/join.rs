//! Joining the cluster: this node's Raft listener and its transport (mutual TLS, the
//! longest frame), its registration in etcd, and the range map it waits for (creating the
//! first one once enough nodes registered).

use super::BATCH_BYTES;
use crate::config::ClusterSettings;
use accelkv_cluster::{Coordinator, NodeAddr, RaftNode, RangeMap, Tuning};
use std::net::SocketAddr;
use std::sync::Arc;

/// The Raft port's transport: mutual TLS where `--tls-ca` is given (with `--tls-cert` and
/// `--tls-key`), and the longest frame: sixteen snapshot chunks (64 MiB), or two entries of
/// a full batch plus the largest command this server accepts, whichever is more. An entry
/// is a batch of at most [`BATCH_BYTES`] plus one command, so it always fits.
pub(super) fn transport(
    s: &crate::config::Settings,
) -> Result<accelkv_cluster::raft::net::Limits, String> {
    use accelkv_cluster::raft::{link::RaftTls, net};
    let max_frame = (16 * net::SNAPSHOT_CHUNK as usize)
        .max(2 * (BATCH_BYTES + s.limits.max_resp_command()) + (1 << 20));
    let tls = match &s.tls {
        Some(t) if t.ca.is_some() => {
            let (server, client) = crate::config::tls_config::raft(t)?;
            Some(RaftTls { server, client })
        }
        _ => None,
    };
    Ok(net::Limits { tls, max_frame })
}

/// Starts this node's Raft listener, registers in etcd and waits for the range map
/// (creating the first one once enough nodes registered).
pub(super) async fn join(
    cs: &ClusterSettings,
    resp: SocketAddr,
    binary: SocketAddr,
    transport: accelkv_cluster::raft::net::Limits,
) -> Result<
    (
        Arc<RaftNode>,
        tokio::sync::watch::Receiver<RangeMap>,
        Coordinator,
    ),
    String,
> {
    let me = cs.node_id;
    let listen = SocketAddr::new(resp.ip(), cs.raft_port);
    let tuning = Tuning {
        source: Some(resp.ip()),
        snapshot_every: cs.snapshot_every,
        keep_behind_snapshot: (cs.snapshot_every / 2).min(1000),
        transport,
        ..Tuning::default()
    };
    let raft = RaftNode::start(me, &listen.to_string(), cs.dir.join("raft"), tuning)
        .await
        .map_err(|e| format!("cannot listen for Raft on {listen}: {e}"))?;
    let coord = tokio::time::timeout(
        crate::cluster::WAIT,
        Coordinator::connect(&cs.etcd, &cs.name),
    )
    .await
    .map_err(|_| format!("etcd at {} did not answer", cs.etcd.join(",")))??;
    let addr = NodeAddr {
        resp: resp.to_string(),
        binary: binary.to_string(),
        raft: cs
            .raft_advertise
            .clone()
            .unwrap_or_else(|| raft.addr.to_string()),
    };
    tokio::time::timeout(crate::cluster::WAIT, coord.register(me, &addr, 3))
        .await
        .map_err(|_| format!("etcd at {} did not answer", cs.etcd.join(",")))??;
    if coord.map().await?.is_none() {
        tracing::info!(
            "node {me} registered; waiting for {} nodes to make the first range map",
            cs.replicas
        );
    }
    let first = coord.bootstrap(cs.replicas, cs.slots).await?;
    if first.by_slot() != cs.slots {
        let mode = |b: bool| if b { "redis" } else { "native" };
        return Err(format!(
            "the cluster places keys with --slots {}, and this node was started with --slots {}: start it with the cluster's",
            mode(first.by_slot()),
            mode(cs.slots)
        ));
    }
    if let Some(a) = first.nodes.get(&me) {
        if (&a.resp, &a.raft) != (&addr.resp, &addr.raft) {
            return Err(format!(
                "node {me} is in the range map at {} / {}, not at {} / {}: restart it with the addresses it had",
                a.resp, a.raft, addr.resp, addr.raft
            ));
        }
        if a.binary != addr.binary {
            // Its binary port may change across restarts (`--port 0`), and a map
            // written before nodes advertised one has none: redirects name the new one.
            coord
                .update_map(|m| {
                    let mut n = m.clone();
                    match n.nodes.get_mut(&me) {
                        Some(a) if a.binary != addr.binary => a.binary.clone_from(&addr.binary),
                        _ => return Ok(None),
                    }
                    n.epoch += 1;
                    Ok(Some(n))
                })
                .await?;
        }
    }
    let map = coord.watch_map().await?;
    Ok((Arc::new(raft), map, coord))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Args, Settings};
    use accelkv_cluster::raft::net::SNAPSHOT_CHUNK;
    use clap::Parser;

    #[test]
    fn a_raft_frame_holds_a_full_batch_and_the_largest_command() {
        for flags in [&[][..], &["--max-value", "536870912"][..]] {
            let args =
                Args::parse_from(std::iter::once("accelkv-server").chain(flags.iter().copied()));
            let s = Settings::resolve(args).unwrap();
            let t = transport(&s).unwrap();
            assert!(t.tls.is_none(), "no --tls-ca: a plain Raft port");
            assert!(t.max_frame >= 16 * SNAPSHOT_CHUNK as usize);
            assert!(t.max_frame >= 2 * (BATCH_BYTES + s.limits.max_resp_command()));
        }
    }
}

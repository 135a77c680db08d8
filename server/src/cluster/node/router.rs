//! [`Router`] for [`Node`]: where each RESP command or binary operation goes (here, to
//! the range's leader through Raft, or redirected), and the cluster's own commands
//! (CLUSTER RANGES, INFO, MYID, SPLIT, MOVE).

use super::tx::Tx;
use super::wire::{
    binary_moved, by_slot, connection_state, moving, one_database, replicated, settle_error,
};
use super::{Node, Place};
use crate::core::route::{
    encode, ClusterSession, Forward, GroupSample, Located, Route, Router, Settled,
};
use crate::resp::cluster::{classify, Class};
use accelkv_cluster::NotServed;
use accelkv_proto::resp::{self, Version};
use accelkv_proto::slot;
use accelkv_proto::Status;

impl Node {
    /// CLUSTER INFO's lines about this node and its ranges (in both modes).
    pub(super) fn info_lines(&self) -> String {
        let map = self.map.borrow();
        let led = map
            .ranges_of(self.me)
            .filter(|r| {
                let g = self.raft.group(r.id);
                g.is_some_and(|g| g.metrics().borrow().current_leader == Some(self.me))
            })
            .count();
        // Keyed commands served as leader by the ranges open here (their load).
        let served: u64 = {
            let g = self.reg.machines.read().unwrap_or_else(|e| e.into_inner());
            g.values().map(|m| m.load.served()).sum()
        };
        format!(
            "cluster_my_node:{}\r\ncluster_ranges:{}\r\ncluster_ranges_here:{}\r\ncluster_ranges_led_here:{led}\r\ncluster_commands_led_here:{served}\r\n",
            self.me,
            map.ranges.len(),
            map.ranges_of(self.me).count(),
        )
    }
}

impl Node {
    /// Routes one command (a transaction as its `ACCELKV.EXEC`).
    fn route_one(&self, s: &mut ClusterSession, sent: &[&[u8]], proto: Version) -> Route {
        // A write sent with a request id is routed by the command it carries.
        let (once, args) = match crate::resp::cluster::once(sent) {
            Ok(Some((id, inner))) => (Some(id), inner),
            Ok(None) => (None, sent),
            Err(e) => return Route::Refuse(e),
        };
        if once.is_some() && !matches!(classify(args), Class::Keyed { write: true, .. }) {
            return Route::Refuse(
                "ERR ACCELKV.ONCE carries one write of keys (SET, INCR, DEL, …)".into(),
            );
        }
        // CLUSTER SPLIT <key> goes to the leader of the key's range, as a write would.
        let split = args.len() == 3
            && args[0].eq_ignore_ascii_case(b"CLUSTER")
            && args[1].eq_ignore_ascii_case(b"SPLIT");
        let moving = match moving(args) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let start = moving.and_then(|(id, ..)| Some(self.map.borrow().range(id)?.start.clone()));
        if moving.is_some() && start.is_none() {
            return Route::Refuse("ERR no such range (CLUSTER RANGES)".into());
        }
        let (keys, is_write, upto) = match classify(args) {
            _ if split => (vec![args[2]], true, None),
            _ if start.is_some() => (vec![start.as_deref().unwrap_or_default()], true, None),
            Class::Local => return Route::Here,
            Class::Refused(why) => return Route::Refuse(format!("ERR {why} (docs/CLUSTER.md)")),
            Class::Keyed { keys, write, upto } => (keys, write, upto),
        };
        // Slot mode: every key of one slot, placed as the store keeps it.
        let slotted = match self.slots && start.is_none() {
            true => match by_slot(args, &keys, upto) {
                Ok(slot) => Some((
                    slot,
                    keys.iter().map(|k| slot::place(k)).collect::<Vec<_>>(),
                )),
                Err(m) => return Route::Refuse(m),
            },
            false => match self.fields_elsewhere(args, &keys) {
                Some(m) => return Route::Refuse(m),
                None => None,
            },
        };
        let (slot, keys): (_, Vec<&[u8]>) = match &slotted {
            Some((slot, placed)) => (Some(*slot), placed.iter().map(Vec::as_slice).collect()),
            None => (None, keys),
        };
        let floor = upto.is_some() && args[0].eq_ignore_ascii_case(b"FLOOR");
        let serving = is_write || s.barrier_ok;
        let range = match self.place(&keys, upto, floor, s.readonly && !is_write, serving) {
            Place::Lead(range) => range,
            Place::Replica => return Route::Here,
            Place::Refuse(m) => return Route::Refuse(m),
            Place::Settle(f) => {
                s.forward = Some(f);
                return Route::Wait;
            }
            Place::Away { range, to } => {
                if self.proxy && !s.proxied {
                    let mut cmd = Vec::new();
                    resp::command(&mut cmd, sent);
                    s.forward = Some(Forward::Proxy {
                        range,
                        to: to.resp,
                        cmd,
                        write: is_write,
                        proto,
                    });
                    return Route::Wait;
                }
                let to_where = slot.map_or(range, u64::from);
                return Route::Refuse(format!("MOVED {to_where} {}", to.resp));
            }
        };
        s.forward = Some(if let Some((range, from, to)) = moving {
            Forward::Move { range, from, to }
        } else if split {
            let at = keys[0].to_vec();
            Forward::Split { range, at }
        } else if let (true, Some(until)) = (is_write, super::blocking::deadline(args)) {
            Forward::Blocking {
                range,
                cmd: encode(&replicated(args, once), proto),
                keys: keys.iter().map(|k| k.to_vec()).collect(),
                until,
                alive: s.alive.clone(),
            }
        } else if is_write {
            let cmd = encode(&replicated(args, once), proto);
            Forward::Write { range, cmd }
        } else if s.barrier_ok {
            return Route::Here;
        } else {
            Forward::Barrier { range }
        });
        Route::Wait
    }
}

impl Node {
    /// Native mode keeps a collection's fields in the reserved end of the key space
    /// (docs/FORMAT.md), so a command of a collection type is served where that end lies
    /// in the key's range: always while the cluster is one range, and after splits for
    /// the keys of the last range only (`--slots redis` keeps every collection with its
    /// key). The range's bounds here count too (a split applied here before the map shows
    /// it). The refusal, if this is one elsewhere; the range's replicas check again as
    /// they apply it (machine.rs).
    pub(super) fn fields_elsewhere(&self, args: &[&[u8]], keys: &[&[u8]]) -> Option<String> {
        if !crate::resp::cluster::keeps_fields(args) {
            return None;
        }
        let map = self.map.borrow();
        let reserved = accelkv_proto::collection::RESERVED;
        let fields = map.find(&reserved)?.id;
        let elsewhere = keys.iter().any(|k| {
            map.find(k).is_some_and(|r| {
                // Its bounds here still hold the key but no longer the fields (a key they
                // no longer hold waits for the map in `place`).
                let narrowed = self.reg.bounds(r.id).is_some_and(|b| {
                    crate::cluster::bounds::inside(&b, k)
                        && b.1.is_some_and(|e| e.as_slice() <= reserved.as_slice())
                });
                r.id != fields || narrowed
            })
        });
        elsewhere.then(|| crate::resp::cluster::fields_elsewhere_error(args))
    }
}

impl Router for Node {
    fn route(&self, s: &mut ClusterSession, sent: &[&[u8]], proto: Version) -> Route {
        if let Some(a) = s.answer.take() {
            // The next command's, when it joined this one.
            s.answer = s.more.pop_front();
            return Route::Answer(a);
        }
        if let Some(r) = connection_state(s, sent) {
            return r;
        }
        if let Some(m) = one_database(sent) {
            return Route::Refuse(m.into());
        }
        match super::tx::queue(s, sent, proto) {
            Tx::Answer(r) => r,
            Tx::Not => self.route_one(s, sent, proto),
            Tx::Exec(wrapped) => {
                let args: Vec<&[u8]> = wrapped.iter().map(Vec::as_slice).collect();
                let r = self.route_one(s, &args, proto);
                // Kept while it waits to be placed again (a split, an election).
                if !matches!(s.forward, Some(Forward::Settle { .. })) {
                    s.tx = None;
                }
                r
            }
        }
    }

    fn locate(&self, key: &[u8], upto: Option<Option<&[u8]>>, floor: bool, count: bool) -> Located {
        if self.slots {
            let why =
                "the binary protocol's keys are not served in slot mode (--slots redis): use RESP";
            return Located::Refused(Status::Error, why.into());
        }
        match self.place(&[key], upto, floor, false, count) {
            Place::Lead(range) => Located::Lead(range),
            Place::Settle(f) => Located::Settle(f),
            // Not asked for (a replica read): no binary operation reads a replica's state.
            Place::Replica => Located::Refused(Status::Error, "not a leader read".into()),
            Place::Away { range, to } => {
                let (status, m) = binary_moved(range, Some(&to.binary));
                Located::Refused(status, m)
            }
            Place::Refuse(m) => {
                let (status, m) = self.binary_error(m.as_bytes());
                Located::Refused(status, m)
            }
        }
    }

    fn binary_error(&self, reply: &[u8]) -> (Status, String) {
        let text = String::from_utf8_lossy(reply);
        let text = text.trim_start_matches('-').trim_end();
        let (code, rest) = text.split_once(' ').unwrap_or((text, ""));
        match code {
            "MOVED" => {
                // MOVED <range> <RESP address>: the same node's binary address.
                let mut w = rest.split(' ');
                let (range, resp) = (w.next().unwrap_or(""), w.next().unwrap_or(""));
                let map = self.map.borrow();
                let to = map.nodes.values().find(|a| a.resp == resp);
                binary_moved(range, to.map(|a| a.binary.as_str()))
            }
            "TRYAGAIN" => (Status::TryAgain, rest.to_string()),
            _ => (Status::Error, text.to_string()),
        }
    }

    fn submit(&self, f: Forward, done: Box<dyn FnOnce(Settled) + Send>) {
        let range = match f {
            Forward::Proxy {
                to,
                cmd,
                write,
                proto,
                ..
            } => {
                let pool = self.proxies.clone();
                self.rt.spawn(async move {
                    done(Settled::Reply(pool.relay(to, cmd, write, proto).await));
                });
                return;
            }
            Forward::Split { range, at } => {
                let ctl = self.ctl.clone();
                self.rt.spawn(async move {
                    let mut out = Vec::new();
                    match crate::cluster::split::split(&ctl, range, at).await {
                        Ok(child) => resp::integer(&mut out, child as i64),
                        Err(e) => resp::error(&mut out, &e),
                    }
                    done(Settled::Reply(out));
                });
                return;
            }
            Forward::Move { range, from, to } => {
                let ctl = self.ctl.clone();
                self.rt.spawn(async move {
                    let mut out = Vec::new();
                    match crate::cluster::moves::move_replica(&ctl, range, from, to).await {
                        Ok(()) => resp::simple(&mut out, "OK"),
                        Err(e) => resp::error(&mut out, &e),
                    }
                    done(Settled::Reply(out));
                });
                return;
            }
            Forward::Settle {
                range,
                epoch,
                leaderless,
            } => return self.settle(range, epoch, leaderless, done),
            Forward::Blocking {
                range,
                cmd,
                keys,
                until,
                alive,
            } => return self.blocking((range, cmd, keys), until, alive, done),
            Forward::Writes { range, cmds } => return self.writes(range, cmds, done),
            Forward::Write { range, .. } | Forward::Barrier { range } => range,
        };
        let Some(raft) = self.raft.group(range) else {
            let e = NotServed::NotLeader(None);
            done(Settled::Reply(settle_error(&self.map, self.me, range, e)));
            return;
        };
        match f {
            Forward::Write { cmd, .. } => self.write(range, raft, cmd, done),
            _ => self.barrier(range, raft, done),
        }
    }

    fn join(&self, s: &mut ClusterSession, args: &[&[u8]], proto: Version) -> bool {
        super::pipeline::join(self, s, args, proto)
    }

    fn command(&self, args: &[&[u8]], proto: Version, out: &mut Vec<u8>) {
        if self.slots && self.slot_command(args, proto, out) {
            return;
        }
        let map = self.map.borrow();
        let sub = crate::resp::reply::upper(args[0]);
        match (&sub[..], args.len()) {
            (b"RANGES", 1) => {
                // [id, start, end or nil, leader's RESP address or nil, [[node, address]…]]
                resp::array(out, map.ranges.len());
                for r in &map.ranges {
                    let leader = match self.raft.group(r.id) {
                        Some(g) => g.metrics().borrow().current_leader,
                        None => r.leader,
                    };
                    let addr = |id: u64| map.nodes.get(&id).map(|a| a.resp.as_bytes());
                    resp::array(out, 5);
                    resp::integer(out, r.id as i64);
                    resp::bulk(out, Some(&r.start));
                    resp::bulk_in(out, r.end.as_deref(), proto);
                    resp::bulk_in(out, leader.and_then(addr), proto);
                    resp::array(out, r.replicas.len());
                    for id in &r.replicas {
                        resp::array(out, 2);
                        resp::integer(out, *id as i64);
                        resp::bulk(out, addr(*id));
                    }
                }
            }
            (b"INFO", 1) => {
                let text = format!(
                    "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_epoch:{}\r\ncluster_known_nodes:{}\r\n{}",
                    map.epoch,
                    map.nodes.len(),
                    self.info_lines(),
                );
                resp::verbatim(out, text.as_bytes(), proto);
            }
            (b"MYID", 1) => resp::bulk(out, Some(self.me.to_string().as_bytes())),
            _ => resp::error(
                out,
                &format!(
                    "ERR unknown subcommand or wrong number of arguments for '{}'. Try RANGES, INFO, MYID, NOPROXY, SPLIT <key> or MOVE <range> <from> <to>.",
                    String::from_utf8_lossy(args[0])
                ),
            ),
        }
    }

    fn stop(&self) {
        crate::cluster::stop::hand_over(&self.ctl, &self.rt);
    }

    fn groups(&self) -> Vec<GroupSample> {
        let stats = self.raft.stats();
        stats
            .into_iter()
            .map(|g| GroupSample {
                range: g.range,
                term: g.term,
                last_log_index: g.last_log_index,
                applied_index: g.applied_index,
                leader: g.leader,
                leader_changes: g.leader_changes,
                snapshot_bytes: g.snapshot_bytes,
                snapshots_built: g.snapshots_built,
            })
            .collect()
    }

    fn describe(&self) -> String {
        let map = self.map.borrow();
        let ranges: Vec<String> = map.ranges_of(self.me).map(|r| r.id.to_string()).collect();
        format!(
            "cluster node {} raft {} etcd {} ranges [{}] epoch {}",
            self.me,
            self.raft.addr,
            self.etcd,
            ranges.join(","),
            map.epoch
        )
    }
}

//! [`Router`] for [`Node`]: where each RESP command or binary operation goes (here, to
//! the range's leader through Raft, or redirected), and the cluster's own commands
//! (CLUSTER RANGES, INFO, MYID, SPLIT, MOVE).

use super::wire::{binary_moved, connection_state, moving, replicated, settle_error};
use super::{Node, Place};
use crate::core::route::{
    encode, ClusterSession, Forward, GroupSample, Located, Route, Router, Settled,
};
use crate::resp::cluster::{classify, Class};
use accelkv_cluster::NotServed;
use accelkv_proto::resp::{self, Version};
use accelkv_proto::Status;

impl Router for Node {
    fn route(&self, s: &mut ClusterSession, sent: &[&[u8]], proto: Version) -> Route {
        if let Some(a) = s.answer.take() {
            return Route::Answer(a);
        }
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
        if let Some(r) = connection_state(s, args) {
            return r;
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
                return Route::Refuse(format!("MOVED {range} {}", to.resp));
            }
        };
        s.forward = Some(if let Some((range, from, to)) = moving {
            Forward::Move { range, from, to }
        } else if split {
            let at = args[2].to_vec();
            Forward::Split { range, at }
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

    fn locate(&self, key: &[u8], upto: Option<Option<&[u8]>>, floor: bool, count: bool) -> Located {
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

    fn command(&self, args: &[&[u8]], proto: Version, out: &mut Vec<u8>) {
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
                let text = format!(
                    "cluster_enabled:1\r\ncluster_state:ok\r\ncluster_epoch:{}\r\ncluster_my_node:{}\r\ncluster_known_nodes:{}\r\ncluster_ranges:{}\r\ncluster_ranges_here:{}\r\ncluster_ranges_led_here:{led}\r\ncluster_commands_led_here:{served}\r\n",
                    map.epoch,
                    self.me,
                    map.nodes.len(),
                    map.ranges.len(),
                    map.ranges_of(self.me).count(),
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

//! A RESP connection's pipelined writes to one range, sent together: when a connection
//! stops at a write routed to a range this node leads, the plain writes that follow it in
//! the input, to the same range, join it ([`join`]); all are handed to the range's write
//! queue at once, so they share the group's next batches (one Raft entry, one flush for
//! many), and the connection waits for one commit rather than one per command. Each is
//! answered with its own reply, in order; the input then runs again from the first, each
//! command taking its reply (`ClusterSession::answer` and `more`). A command that does not
//! join (a read, a write to another range, a blocking one, anything with state: MULTI,
//! `ACCELKV.ONCE`) ends the run and is served after it, as before.

use super::wire::{by_slot, one_database};
use super::{Node, Place};
use crate::core::route::{encode, ClusterSession, Forward, Settled};
use crate::resp::cluster::{classify, Class};
use accelkv_proto::resp::{self, Version};
use accelkv_proto::slot;
use std::sync::{Arc, Mutex};

/// Most commands one run sends together (a run longer than this waits again).
const MAX_RUN: usize = 256;

/// Whether `args` joins the routed write `s` stopped at (see the module's docs).
pub(super) fn join(node: &Node, s: &mut ClusterSession, args: &[&[u8]], proto: Version) -> bool {
    let range = match &s.forward {
        Some(Forward::Write { range, .. }) => *range,
        Some(Forward::Writes { range, cmds }) if cmds.len() < MAX_RUN => *range,
        _ => return false,
    };
    let name = crate::resp::reply::upper(args[0]);
    let special = matches!(&name[..], b"MULTI" | b"EXEC" | b"DISCARD" | b"UNWATCH")
        || args[0].eq_ignore_ascii_case(crate::resp::cluster::ONCE)
        || args[0].eq_ignore_ascii_case(crate::resp::cluster::TX);
    if s.tx.is_some() || special || one_database(args).is_some() {
        return false;
    }
    if super::blocking::deadline(args).is_some() {
        return false;
    }
    let Class::Keyed {
        keys,
        write: true,
        upto: None,
    } = classify(args)
    else {
        return false;
    };
    let placed: Vec<Vec<u8>> = match node.slots {
        true if by_slot(args, &keys, None).is_err() => return false,
        true => keys.iter().map(|k| slot::place(k)).collect(),
        false if node.fields_elsewhere(args, &keys).is_some() => return false,
        false => keys.iter().map(|k| k.to_vec()).collect(),
    };
    let keys: Vec<&[u8]> = placed.iter().map(Vec::as_slice).collect();
    if !matches!(node.place(&keys, None, false, false, true), Place::Lead(r) if r == range) {
        return false;
    }
    let cmd = encode(&super::wire::replicated(args, None), proto);
    s.forward = match s.forward.take() {
        Some(Forward::Write { range, cmd: first }) => Some(Forward::Writes {
            range,
            cmds: vec![first, cmd],
        }),
        Some(Forward::Writes { range, mut cmds }) => {
            cmds.push(cmd);
            Some(Forward::Writes { range, cmds })
        }
        other => other,
    };
    true
}

/// What a run's commands answered so far, and who waits for all of them.
struct Gather {
    replies: Vec<Option<Vec<u8>>>,
    left: usize,
    done: Option<super::Done>,
}

impl Node {
    /// Submits a [`Forward::Writes`]: each command into the range's write queue, and one
    /// answer once all have settled.
    pub(super) fn writes(&self, range: u64, cmds: Vec<Vec<u8>>, done: super::Done) {
        let Some(raft) = self.raft.group(range) else {
            let e = accelkv_cluster::NotServed::NotLeader(None);
            let reply = super::settle_error(&self.map, self.me, range, e);
            return done(Settled::Replies(vec![reply; cmds.len()]));
        };
        let gather = Arc::new(Mutex::new(Gather {
            replies: vec![None; cmds.len()],
            left: cmds.len(),
            done: Some(done),
        }));
        for (i, cmd) in cmds.into_iter().enumerate() {
            let gather = gather.clone();
            let one: super::Done = Box::new(move |settled| {
                let mut g = gather.lock().unwrap_or_else(|e| e.into_inner());
                g.replies[i] = Some(match settled {
                    Settled::Reply(r) => r,
                    // Committed after a split gave its key away (nothing applied): the
                    // client sends it again, to the range the map now names.
                    _ => {
                        let mut e = Vec::new();
                        resp::error(&mut e, "TRYAGAIN the key's range split; retry");
                        e
                    }
                });
                g.left -= 1;
                if g.left == 0 {
                    let replies = g.replies.drain(..).map(Option::unwrap_or_default).collect();
                    if let Some(done) = g.done.take() {
                        drop(g);
                        done(Settled::Replies(replies));
                    }
                }
            });
            self.write(range, raft.clone(), cmd, one);
        }
    }
}

//! A range's state machine in cluster mode (docs/CLUSTER.md): the node's one store, of
//! which each range's group owns the keys within its bounds. Committed commands are applied
//! through the same RESP command code and write door as a standalone server's; a command
//! for a key outside the bounds (routed before a split moved the key to another range) is
//! answered `-TRYAGAIN` and changes nothing. A split is itself a replicated command
//! (`ACCELKV.SPLIT`): every replica applies it at the same point of the range's log,
//! narrows the range's bounds there, and starts the new range's group from the store's
//! contents at that point (a seeded snapshot), so the new group has nothing to replay.
//!
//! Each node keeps its open ranges in a [`Registry`]. Two open ranges never overlap: a
//! range in the map that overlaps one still open here (whose split this node has not
//! applied yet) waits until that split is applied here or a snapshot narrows the old range.

use crate::cluster::bounds::{covers, inside, overlap, Bounds};
use crate::cluster::load::Load;
use crate::cluster::once::Sessions;
use crate::cluster::snapshot;
use crate::core::reads::Reads;
use crate::core::route::{decode, list, put_list};
use crate::core::shared::Shared;
use crate::resp::cluster::{classify, once, Class};
use crate::resp::dispatch::command;
use crate::resp::gate::From;
use crate::resp::session::Session;
use accelkv_cluster::{Machine, Open, RaftNode, RangeId};
use accelkv_proto::resp;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use tokio::sync::mpsc::UnboundedSender;

/// The command a split replicates: `ACCELKV.SPLIT <at> <new range id> <members>`, the
/// members as `id=raft-address` separated by commas. Clients cannot send it: only commands
/// the router classifies as keyed writes reach a log.
pub(crate) const SPLIT: &[u8] = b"ACCELKV.SPLIT";

/// What the reply to a replicated command says when a split gave its keys away before it
/// was applied (`-TRYAGAIN range <id> split (its keys moved to range <new>); retry`):
/// nothing was done, on any replica.
const SPLIT_AWAY: &str = "split (its keys moved to range";

/// Whether `reply` is a replicated command's answer that a split gave its keys away.
pub(crate) fn split_away(reply: &[u8]) -> bool {
    reply.starts_with(b"-TRYAGAIN range ")
        && reply
            .windows(SPLIT_AWAY.len())
            .any(|w| w == SPLIT_AWAY.as_bytes())
}

/// What the node's group opener is asked to do.
pub(crate) enum OpenReq {
    /// Open range `range` (the new half of a split this node applied).
    Open {
        range: RangeId,
        bounds: Bounds,
        members: BTreeMap<u64, String>,
        how: Open,
    },
    /// Compare the open ranges with the map again (it changed, or a range narrowed).
    Recheck,
    /// Close range `range` if the map still shows it moved away from this node.
    Retire(RangeId),
}

/// The ranges open on this node.
pub(crate) struct Registry {
    pub machines: RwLock<BTreeMap<RangeId, Arc<StoreMachine>>>,
    /// Ranges opened or being opened (so the map and a split never both open one).
    pub claimed: Mutex<BTreeSet<RangeId>>,
    /// Ranges moved away from this node, to be closed once what they were doing settled.
    pub retiring: Mutex<BTreeSet<RangeId>>,
    /// Ranges whose leader here is moving its own replica away: new writes are answered
    /// `-TRYAGAIN` until another node leads.
    pub draining: Mutex<BTreeSet<RangeId>>,
    /// Write batches each range has in its group's pipeline here, and writes waiting.
    pub pending: Mutex<BTreeMap<RangeId, usize>>,
    pub raft: Arc<RaftNode>,
    pub opens: UnboundedSender<OpenReq>,
}

impl Registry {
    /// The bounds of open range `range`.
    pub fn bounds(&self, range: RangeId) -> Option<Bounds> {
        let g = self.machines.read().unwrap_or_else(|e| e.into_inner());
        g.get(&range).map(|m| m.bounds())
    }

    /// Whether open range `range` holds these keys (see [`covers`]); `lead`: this node
    /// serves them as the range's leader, and they count towards its load
    /// (`load.rs`).
    pub fn holds(
        &self,
        range: RangeId,
        keys: &[&[u8]],
        upto: Option<Option<&[u8]>>,
        lead: bool,
    ) -> bool {
        let g = self.machines.read().unwrap_or_else(|e| e.into_inner());
        g.get(&range).is_some_and(|m| {
            let held = {
                let st = m.state.lock().unwrap_or_else(|e| e.into_inner());
                covers(&st.bounds, keys, upto)
            };
            if held && lead {
                m.load.count(keys[0]);
            }
            held
        })
    }

    /// Whether `b` overlaps a range open here other than `except`.
    pub fn overlaps(&self, b: &Bounds, except: RangeId) -> bool {
        let g = self.machines.read().unwrap_or_else(|e| e.into_inner());
        g.iter()
            .any(|(id, m)| *id != except && overlap(&m.bounds(), b))
    }

    /// Claims `range` for opening; `false` if it is opened or being opened already.
    pub fn claim(&self, range: RangeId) -> bool {
        let mut c = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        c.insert(range)
    }

    pub fn unclaim(&self, range: RangeId) {
        let mut c = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        c.remove(&range);
    }

    /// A split was applied here: starts range `child` over `bounds` from the store's
    /// contents now, unless it is open here already (the map opened it first: its leader
    /// sends it a snapshot) or has files of its own (a restart replaying the split: they
    /// are newer).
    fn split_off(
        &self,
        sh: &Shared,
        child: RangeId,
        bounds: Bounds,
        members: BTreeMap<u64, String>,
        sessions: &Sessions,
    ) {
        let mut c = self.claimed.lock().unwrap_or_else(|e| e.into_inner());
        if !c.insert(child) {
            return;
        }
        let how = if self.raft.has_files(child) {
            Open::Join
        } else {
            let data = snapshot::encode(sh.store(), &bounds, sessions);
            match data.and_then(|d| self.raft.seed_group(child, &members, &d)) {
                Ok(true) => Open::Seeded,
                Ok(false) => Open::Join,
                Err(e) => {
                    tracing::warn!("range {child}: {e}; it will be sent a snapshot");
                    Open::Join
                }
            }
        };
        drop(c);
        let _ = self.opens.send(OpenReq::Open {
            range: child,
            bounds,
            members,
            how,
        });
    }
}

/// The bounds and split history of one range, as replicated.
pub(crate) struct MState {
    pub bounds: Bounds,
    /// The last split applied: where, the new range's id, and where the range ended before.
    pub split: Option<(Vec<u8>, RangeId, Option<Vec<u8>>)>,
}

/// A range's state machine: the node's store within the range's bounds.
pub(crate) struct StoreMachine {
    pub id: RangeId,
    sh: Weak<Shared>,
    reg: Weak<Registry>,
    pub state: Mutex<MState>,
    exec: Mutex<(Session, Reads)>,
    /// The last write of each client that sends request ids (`once.rs`).
    sessions: Mutex<Sessions>,
    /// Bytes of commands applied (what the split check watches).
    pub written: AtomicU64,
    /// Commands served as the range's leader here, and a sample of their keys.
    pub load: Load,
}

impl StoreMachine {
    pub fn new(sh: &Arc<Shared>, reg: &Arc<Registry>, id: RangeId, bounds: Bounds) -> StoreMachine {
        let mut session = Session {
            authed: true,
            ..Session::new(0, None, Default::default())
        };
        // A replica applies a blocking command once, as inside MULTI: the leader waits.
        session.block.never = true;
        StoreMachine {
            id,
            sh: Arc::downgrade(sh),
            reg: Arc::downgrade(reg),
            state: Mutex::new(MState {
                bounds,
                split: None,
            }),
            exec: Mutex::new((session, sh.engine().reads(|| {}))),
            sessions: Mutex::new(Sessions::default()),
            written: AtomicU64::new(0),
            load: Load::default(),
        }
    }

    pub fn bounds(&self) -> Bounds {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bounds
            .clone()
    }

    /// Applies `ACCELKV.SPLIT` (deterministic: every replica answers the same).
    fn split(&self, sh: &Shared, args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        let parsed = (|| {
            let at = args.get(1)?.to_vec();
            let child: RangeId = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            let mut members = BTreeMap::new();
            for m in std::str::from_utf8(args.get(3)?).ok()?.split(',') {
                let (id, addr) = m.split_once('=')?;
                members.insert(id.parse().ok()?, addr.to_string());
            }
            Some((at, child, members))
        })();
        let Some((at, child, members)) = parsed else {
            resp::error(&mut out, "ERR a split command could not be decoded");
            return out;
        };
        let old_end = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let b = &st.bounds;
            if at.as_slice() <= b.0.as_slice() || !inside(b, &at) {
                // The leader checked the key: a split applied since moved it elsewhere.
                resp::error(
                    &mut out,
                    &format!(
                        "TRYAGAIN range {} no longer holds the split key; retry",
                        self.id
                    ),
                );
                return out;
            }
            let old = st.bounds.1.replace(at.clone());
            st.split = Some((at.clone(), child, old.clone()));
            old
        };
        tracing::info!(
            "range {} split at {:?}: keys from there are range {child}",
            self.id,
            String::from_utf8_lossy(&at)
        );
        if let Some(reg) = self.reg.upgrade() {
            // The new range remembers this one's clients: a write sent again after the
            // split goes to it.
            let sessions = self
                .sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            reg.split_off(sh, child, (at, old_end), members, &sessions);
        }
        resp::simple(&mut out, "OK");
        out
    }

    /// Why a replicated command on `keys` (and a ranged read up to `upto`) changes nothing
    /// here: a key outside the range's bounds, or one a descendant (`others`) holds.
    fn not_held(
        &self,
        keys: &[&[u8]],
        upto: Option<Option<&[u8]>>,
        others: &[Bounds],
    ) -> Option<String> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let theirs = keys.iter().any(|k| others.iter().any(|o| inside(o, k)));
        (!covers(&st.bounds, keys, upto) || theirs).then(|| {
            let to = st.split.as_ref().map_or(0, |s| s.1);
            format!("range {} {SPLIT_AWAY} {to}); retry", self.id)
        })
    }

    /// Whether this range holds the reserved end of the key space (native mode keeps
    /// collections' fields there), no range split off it holding it instead.
    fn holds_fields(&self, others: &[Bounds]) -> bool {
        let reserved = accelkv_proto::collection::RESERVED;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        inside(&st.bounds, &reserved) && !others.iter().any(|o| inside(o, &reserved))
    }

    /// The bounds of the ranges open on this node that were split off this one, directly
    /// or not: those of higher id that overlap it. Ranges are made in the order of their
    /// ids, each from keys its parent held then and no other range did, so a higher-id
    /// range overlapping this one's bounds is a descendant, and its keys are its own: this
    /// range's bounds can be wider only for a state older than the split (a snapshot or
    /// log replayed here after the descendant was opened). A lower-id range overlapping
    /// this one is an ancestor whose bounds here are that old; it yields to this one.
    fn descendants(&self) -> Vec<Bounds> {
        let Some(r) = self.reg.upgrade() else {
            return Vec::new();
        };
        let g = r.machines.read().unwrap_or_else(|e| e.into_inner());
        g.range(self.id + 1..).map(|(_, m)| m.bounds()).collect()
    }
}

impl Machine for StoreMachine {
    /// A seed (this range split off one open here): the store holds its keys already; the
    /// clients' last writes come from the seed.
    fn adopt(&self, data: &[u8]) {
        if let Ok(d) = snapshot::decode(data) {
            *self.sessions.lock().unwrap_or_else(|e| e.into_inner()) = d.sessions;
        }
    }

    /// Applies a batch of commands (one Raft entry), answering the list of their replies.
    fn apply(&self, batch: &[u8]) -> Vec<u8> {
        let Some(sh) = self.sh.upgrade() else {
            return Vec::new(); // shutting down
        };
        let Some(cmds) = list(batch) else {
            return Vec::new(); // not a batch: its writer hears "answered wrongly"
        };
        self.written
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let mut g = self.exec.lock().unwrap_or_else(|e| e.into_inner());
        let (s, reads) = &mut *g;
        // Keys a range split off this one holds here are its own: a command of this range's
        // log replayed from before the split never writes over them (in a node that did not
        // miss a split, ranges open on it never overlap and this refuses nothing).
        let others = self.descendants();
        let mut replies = Vec::with_capacity(cmds.len());
        for cmd in cmds {
            let mut out = Vec::new();
            let Some((proto, sent)) = decode(cmd) else {
                resp::error(&mut out, "ERR a replicated command could not be decoded");
                replies.push(out);
                continue;
            };
            // A write with a request id: applied once, answered from the table again.
            let (once, args) = match once(&sent) {
                Ok(Some((id, inner))) => (Some(id), inner.to_vec()),
                _ => (None, sent),
            };
            if let Some((client, seq)) = once {
                let seen = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(reply) = seen.seen(client, seq) {
                    replies.push(reply);
                    continue;
                }
            }
            if args[0] == SPLIT {
                replies.push(self.split(&sh, &args));
                continue;
            }
            if args[0] == crate::binary::cluster::OP {
                // A binary operation, applied as the binary protocol runs it.
                let frame = args.get(1).copied().unwrap_or_default();
                replies.push(crate::binary::replica::apply(&sh, frame, |key| {
                    self.not_held(&[key], None, &others)
                }));
                continue;
            }
            if let Class::Keyed { keys, upto, .. } = classify(&args) {
                // Slot mode: the keys as the store keeps them, after their slot.
                let placed: Vec<Vec<u8>> = match accelkv_proto::slot::placed() {
                    true => keys.iter().map(|k| accelkv_proto::slot::place(k)).collect(),
                    false => Vec::new(),
                };
                let keys: Vec<&[u8]> = match placed.is_empty() {
                    true => keys,
                    false => placed.iter().map(Vec::as_slice).collect(),
                };
                if let Some(why) = self.not_held(&keys, upto, &others) {
                    resp::error(&mut out, &format!("TRYAGAIN {why}"));
                    replies.push(out);
                    continue;
                }
                if !accelkv_proto::slot::placed()
                    && crate::resp::cluster::keeps_fields(&args)
                    && !self.holds_fields(&others)
                {
                    // Native mode: a split since it was routed left its fields elsewhere.
                    let e = crate::resp::cluster::fields_elsewhere_error(&args);
                    resp::error(&mut out, &e);
                    replies.push(out);
                    continue;
                }
            }
            s.proto = proto;
            match args[0].eq_ignore_ascii_case(crate::resp::cluster::TX) {
                true => transaction(&sh, s, reads, &args, &mut out),
                false => command(&sh, s, &args, From::Inner, reads, &mut out),
            }
            let v = std::mem::take(&mut s.unreleased);
            if v > 0 {
                // Applied in order: the next command (and the reply) sees this one.
                sh.store().wait_visible(v);
            }
            s.wrote = false;
            if let Some((client, seq)) = once {
                let mut t = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
                t.record(client, seq, &out);
            }
            replies.push(out);
        }
        let mut out = Vec::new();
        put_list(&mut out, &replies);
        out
    }

    fn snapshot(&self) -> Result<Vec<u8>, String> {
        let sh = self.sh.upgrade().ok_or("shutting down")?;
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        snapshot::encode(sh.store(), &self.bounds(), &sessions)
    }

    fn install(&self, data: &[u8]) -> Result<(), String> {
        let sh = self.sh.upgrade().ok_or("shutting down")?;
        let snap = snapshot::decode(data)?;
        let (lo, hi) = &snap.bounds;
        let began = std::time::Instant::now();
        let _g = self.exec.lock().unwrap_or_else(|e| e.into_inner());
        // Keys a range split off this one holds here are its own (the case for a snapshot
        // older than a split whose new range is open here).
        let reg = self.reg.upgrade();
        let others = self.descendants();
        let mine = |k: &[u8]| !others.iter().any(|o| inside(o, k));
        snapshot::install(sh.store(), &snap.parts, mine)?;
        tracing::info!(
            "range {}: installed a snapshot of {} items in {} pages over [{}, {}) in {} ms",
            self.id,
            snap.items(),
            snap.parts.len(),
            String::from_utf8_lossy(lo),
            hi.as_deref().map_or("end".into(), String::from_utf8_lossy),
            began.elapsed().as_millis()
        );
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.bounds = snap.bounds;
        }
        *self.sessions.lock().unwrap_or_else(|e| e.into_inner()) = snap.sessions;
        if let Some(r) = reg {
            let _ = r.opens.send(OpenReq::Recheck);
        }
        Ok(())
    }
}

/// Deletes the keys within `b` from the store.
pub(crate) fn clear(sh: &Shared, b: &Bounds) -> Result<(), String> {
    snapshot::held_keys(sh.store(), &b.0, b.1.as_deref(), |keys| {
        for k in keys {
            sh.store().delete(&k).map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// Applies an `ACCELKV.EXEC` (a transaction, cluster/node/tx.rs): its commands run as
/// EXEC runs a connection's queue, one station transaction, and the reply is EXEC's.
fn transaction(sh: &Shared, s: &mut Session, reads: &mut Reads, args: &[&[u8]], out: &mut Vec<u8>) {
    let Some(cmds) = crate::resp::cluster::tx_commands(args) else {
        return resp::error(out, "ERR a transaction could not be decoded");
    };
    s.tx = Default::default();
    s.tx.queued = Some(
        cmds.iter()
            .map(|c| c.iter().map(|a| a.to_vec()).collect())
            .collect(),
    );
    command(sh, s, &[b"EXEC"], From::Inner, reads, out);
    s.tx = Default::default();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(lo: &str, hi: Option<&str>) -> Bounds {
        (lo.as_bytes().to_vec(), hi.map(|h| h.as_bytes().to_vec()))
    }

    #[test]
    fn bounds_cover_keys_and_ranged_reads() {
        let r = b("b", Some("m"));
        assert!(covers(&r, &[b"b", b"c"], None));
        assert!(!covers(&r, &[b"a"], None));
        assert!(!covers(&r, &[b"m"], None));
        assert!(covers(&r, &[b"c"], Some(Some(b"m"))));
        assert!(!covers(&r, &[b"c"], Some(Some(b"n"))));
        assert!(!covers(&r, &[b"c"], Some(None)));
        assert!(covers(&b("b", None), &[b"c"], Some(None)));
        assert!(overlap(&b("a", Some("m")), &b("l", None)));
        assert!(!overlap(&b("a", Some("m")), &b("m", None)));
        assert!(!overlap(&b("m", None), &b("a", Some("m"))));
        assert!(overlap(&b("", None), &b("q", Some("r"))));
    }
}

//! Blocking writes in cluster mode (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX,
//! BLMPOP, BZMPOP, XREADGROUP … BLOCK): a range's replicas cannot wait, so each applies the
//! command once and answers what it finds, nothing included (as inside MULTI); the
//! leader waits instead. It commits the command at once; while the answer is nothing and
//! the client's timeout has not passed, it watches the keys here (their last write's
//! version, every [`POLL`]) and commits the command again once one was written. The
//! connection that sent it holds nothing meanwhile but its place in the input, and the
//! wait ends when it closes.

use super::Node;
use crate::core::route::{Alive, Settled};
use std::sync::Weak;
use std::time::{Duration, Instant};

/// How often a waiting blocking write looks at its keys.
const POLL: Duration = Duration::from_millis(2);

/// A blocking write's deadline, if `args` is one: `Some(None)` waits for ever, `None` is
/// not a blocking write (or its timeout is malformed: the command answers the error).
pub(crate) fn deadline(args: &[&[u8]]) -> Option<Option<Instant>> {
    let name = crate::resp::reply::upper(args[0]);
    let secs = |a: &[u8]| crate::resp::commands::types::blocking::timeout_arg(a).ok();
    let wait = match &name[..] {
        b"BLPOP" | b"BRPOP" | b"BLMOVE" | b"BRPOPLPUSH" | b"BZPOPMIN" | b"BZPOPMAX" => {
            secs(args.last()?)?
        }
        b"BLMPOP" | b"BZMPOP" => secs(args.get(1)?)?,
        b"XREADGROUP" => {
            let at = args.iter().position(|a| a.eq_ignore_ascii_case(b"BLOCK"))?;
            let ms: u64 = std::str::from_utf8(args.get(at + 1)?).ok()?.parse().ok()?;
            (ms > 0).then(|| Duration::from_millis(ms))
        }
        _ => return None,
    };
    Some(wait.map(|d| Instant::now() + d))
}

/// Whether a reply is a blocking command's "nothing" (a null in RESP2 or RESP3).
fn is_nothing(reply: &[u8]) -> bool {
    matches!(reply, b"*-1\r\n" | b"$-1\r\n" | b"_\r\n")
}

impl Node {
    /// Runs the wait of a [`Forward::Blocking`](crate::core::route::Forward::Blocking).
    pub(super) fn blocking(
        &self,
        (range, cmd, keys): (u64, Vec<u8>, Vec<Vec<u8>>),
        until: Option<Instant>,
        alive: Alive,
        done: super::Done,
    ) {
        let node: Weak<Node> = self.myself.get().cloned().unwrap_or_default();
        self.rt.spawn(async move {
            let mut seen: Option<Vec<u64>> = None;
            loop {
                let Some(n) = node.upgrade() else { return };
                if !alive.is_alive() {
                    return; // the client left
                }
                let Some(sh) = n.ctl.sh.upgrade() else { return };
                let versions: Vec<u64> = keys
                    .iter()
                    .map(|k| sh.view().key_version(k).unwrap_or(u64::MAX))
                    .collect();
                let expired = until.is_some_and(|u| Instant::now() >= u);
                if expired || seen.as_ref() != Some(&versions) {
                    seen = Some(versions);
                    let Some(raft) = n.raft.group(range) else {
                        let e = accelkv_cluster::NotServed::NotLeader(None);
                        return done(Settled::Reply(super::settle_error(&n.map, n.me, range, e)));
                    };
                    let (tx, rx) = tokio::sync::oneshot::channel();
                    n.write(
                        range,
                        raft,
                        cmd.clone(),
                        Box::new(move |s| drop(tx.send(s))),
                    );
                    drop((n, sh));
                    match rx.await {
                        Ok(Settled::Reply(r)) if !expired && is_nothing(&r) => {}
                        Ok(s) => return done(s),
                        Err(_) => return,
                    }
                } else {
                    drop((n, sh));
                }
                tokio::time::sleep(POLL).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocking_writes_and_their_timeouts() {
        let d = |a: &[&str]| {
            let a: Vec<&[u8]> = a.iter().map(|s| s.as_bytes()).collect();
            deadline(&a)
        };
        assert_eq!(d(&["BLPOP", "a", "b", "0"]), Some(None));
        assert!(matches!(d(&["brpop", "a", "1.5"]), Some(Some(_))));
        assert!(matches!(
            d(&["BLMPOP", "2", "1", "a", "LEFT"]),
            Some(Some(_))
        ));
        assert!(matches!(d(&["BZPOPMIN", "z", "0.1"]), Some(Some(_))));
        assert_eq!(
            d(&[
                "XREADGROUP",
                "GROUP",
                "g",
                "c",
                "BLOCK",
                "0",
                "STREAMS",
                "s",
                ">"
            ]),
            Some(None)
        );
        assert_eq!(
            d(&["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]),
            None
        );
        assert_eq!(d(&["LPOP", "a"]), None);
        assert_eq!(d(&["BLPOP", "a", "-1"]), None);
        assert!(is_nothing(b"*-1\r\n") && is_nothing(b"_\r\n") && !is_nothing(b"*0\r\n"));
    }
}

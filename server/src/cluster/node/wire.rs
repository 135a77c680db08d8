//! What routing reads from a command's arguments alone, and the errors it answers: the
//! commands that change a connection's cluster state (READONLY, READWRITE, a proxy naming
//! itself, CLUSTER NOPROXY), CLUSTER MOVE's arguments, a write as it is replicated, and
//! the redirect and retry errors (RESP and binary).

use crate::core::route::{ClusterSession, Route, PROXY_NAME};
use crate::resp::cluster::{normalize, ONCE};
use accelkv_cluster::{NotServed, RangeMap};
use accelkv_proto::resp;
use accelkv_proto::slot;
use accelkv_proto::Status;
use tokio::sync::watch;

/// What a command changes in the connection's cluster state: READONLY and READWRITE, a
/// proxy connection naming itself, CLUSTER NOPROXY (answered here).
pub(super) fn connection_state(s: &mut ClusterSession, args: &[&[u8]]) -> Option<Route> {
    if args.len() == 1 && args[0].eq_ignore_ascii_case(b"READONLY") {
        s.readonly = true;
    } else if args.len() == 1 && args[0].eq_ignore_ascii_case(b"READWRITE") {
        s.readonly = false;
    }
    if args.len() == 3
        && args[0].eq_ignore_ascii_case(b"CLIENT")
        && args[1].eq_ignore_ascii_case(b"SETNAME")
        && args[2].starts_with(PROXY_NAME.as_bytes())
    {
        s.proxied = true; // another node's proxy connection
    }
    // A client that routes by itself (accelkv_client::ClusterClient) asks for -MOVED rather
    // than a proxied answer, so its stale map is corrected at once.
    if args.len() == 2
        && args[0].eq_ignore_ascii_case(b"CLUSTER")
        && args[1].eq_ignore_ascii_case(b"NOPROXY")
    {
        s.proxied = true;
        let mut out = Vec::new();
        resp::simple(&mut out, "OK");
        return Some(Route::Answer(out));
    }
    None
}

/// `CLUSTER MOVE <range> <from> <to>`: goes to the range's leader (by its first key).
pub(super) fn moving(args: &[&[u8]]) -> Result<Option<(u64, u64, u64)>, Route> {
    match args {
        [c, m, r, f, t]
            if c.eq_ignore_ascii_case(b"CLUSTER") && m.eq_ignore_ascii_case(b"MOVE") =>
        {
            let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
            match (num(r), num(f), num(t)) {
                (Some(r), Some(f), Some(t)) => Ok(Some((r, f, t))),
                _ => Err(Route::Refuse(
                    "ERR CLUSTER MOVE takes a range id and two node ids".into(),
                )),
            }
        }
        _ => Ok(None),
    }
}

/// A write as it is replicated: relative times made absolute, and its request id in front
/// when it was sent with one (`ACCELKV.ONCE`).
pub(super) fn replicated(args: &[&[u8]], once: Option<(u64, u64)>) -> Vec<Vec<u8>> {
    let mut replicated = normalize(args, accelkv_tree::now_ms());
    if let Some((client, seq)) = once {
        let id = [
            ONCE.to_vec(),
            client.to_string().into(),
            seq.to_string().into(),
        ];
        replicated.splice(0..0, id);
    }
    replicated
}

/// The binary redirect of range `range` to the node at binary address `to`: MOVED, or
/// TRYAGAIN while the map has no address for it.
pub(super) fn binary_moved(range: impl std::fmt::Display, to: Option<&str>) -> (Status, String) {
    match to.filter(|a| !a.is_empty()) {
        Some(a) => (Status::Moved, format!("{range} {a}")),
        None => (
            Status::TryAgain,
            format!("range {range}'s leader has no binary address in the map yet"),
        ),
    }
}

/// The error (without its `-`) for a command whose range has no leader known here.
pub(super) fn no_leader(range: u64) -> String {
    format!("TRYAGAIN range {range} has no leader at the moment")
}

/// The RESP error for a routed command its group did not serve.
pub(super) fn settle_error(
    map: &watch::Receiver<RangeMap>,
    me: u64,
    range: u64,
    e: NotServed,
) -> Vec<u8> {
    let map = map.borrow();
    let msg = match (e, map.range(range)) {
        // A leader the map shows moved away is about to step down: not followed.
        (NotServed::NotLeader(Some((id, _))), Some(r)) if id != me && r.replicas.contains(&id) => {
            match map.nodes.get(&id) {
                // Slot mode redirects by slot: the range's first.
                Some(a) if map.by_slot() => {
                    let first = accelkv_proto::slot::slots_of_range(&r.start, r.end.as_deref());
                    format!("MOVED {} {}", first.map_or(0, |f| f.0), a.resp)
                }
                Some(a) => format!("MOVED {} {}", r.id, a.resp),
                None => no_leader(range),
            }
        }
        (NotServed::NotLeader(_), _) => no_leader(range),
        (NotServed::Unavailable(m), _) => format!("CLUSTERDOWN range {range}: {m}"),
    };
    let mut out = Vec::new();
    resp::error(&mut out, &msg);
    out
}

/// Slot mode's checks of a keyed command (`--slots redis`): every key in one hash slot,
/// which it answers, as Redis Cluster's `-CROSSSLOT` asks; RANGE and FLOOR, which order keys
/// across slots, are not served.
pub(super) fn by_slot(
    args: &[&[u8]],
    keys: &[&[u8]],
    upto: Option<Option<&[u8]>>,
) -> Result<u16, String> {
    if upto.is_some() {
        return Err(format!(
            "ERR {} orders keys across hash slots: not served with --slots redis (docs/CLUSTER.md)",
            String::from_utf8_lossy(args[0]).to_uppercase()
        ));
    }
    let first = slot::key_slot(keys[0]);
    if keys[1..].iter().any(|k| slot::key_slot(k) != first) {
        return Err("CROSSSLOT Keys in request don't hash to the same slot".into());
    }
    Ok(first)
}

/// Redis Cluster's refusals of other databases, which a cluster has not (its ranges'
/// replicas apply every command in database 0): SELECT of one other than 0, MOVE, SWAPDB,
/// COPY … DB.
pub(super) fn one_database(args: &[&[u8]]) -> Option<&'static str> {
    let name = crate::resp::reply::upper(args[0]);
    match &name[..] {
        b"SELECT" if args.get(1).is_some_and(|d| *d != b"0") => {
            Some("ERR SELECT is not allowed in cluster mode")
        }
        b"MOVE" => Some("ERR MOVE is not allowed in cluster mode"),
        b"SWAPDB" => Some("ERR SWAPDB is not allowed in cluster mode"),
        b"COPY" if args.iter().any(|a| a.eq_ignore_ascii_case(b"DB")) => {
            Some("ERR Copying to another database is not allowed in cluster mode")
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use accelkv_cluster::NodeAddr;

    fn addr(n: u16) -> NodeAddr {
        NodeAddr {
            resp: format!("127.0.0.1:{n}"),
            raft: format!("127.0.0.1:{}", n + 1),
            binary: String::new(),
        }
    }

    #[test]
    fn connection_commands_change_the_cluster_state() {
        let mut s = ClusterSession::default();
        assert!(connection_state(&mut s, &[b"READONLY"]).is_none() && s.readonly);
        assert!(connection_state(&mut s, &[b"readwrite"]).is_none() && !s.readonly);
        let name = format!("{PROXY_NAME}-2");
        assert!(connection_state(&mut s, &[b"CLIENT", b"SETNAME", name.as_bytes()]).is_none());
        assert!(s.proxied);
        let mut s = ClusterSession::default();
        assert!(connection_state(&mut s, &[b"CLIENT", b"SETNAME", b"app"]).is_none());
        assert!(!s.proxied);
        match connection_state(&mut s, &[b"cluster", b"noproxy"]) {
            Some(Route::Answer(a)) => assert_eq!(a, b"+OK\r\n"),
            r => panic!("{r:?}"),
        }
        assert!(s.proxied);
        assert!(connection_state(&mut s, &[b"GET", b"k"]).is_none());
    }

    #[test]
    fn cluster_move_takes_three_numbers() {
        assert_eq!(
            moving(&[b"CLUSTER", b"MOVE", b"7", b"1", b"3"]).ok(),
            Some(Some((7, 1, 3)))
        );
        assert!(matches!(
            moving(&[b"cluster", b"move", b"7", b"x", b"3"]),
            Err(Route::Refuse(e)) if e.contains("range id and two node ids")
        ));
        assert_eq!(moving(&[b"CLUSTER", b"RANGES"]).ok(), Some(None));
        assert_eq!(moving(&[b"GET", b"k"]).ok(), Some(None));
    }

    #[test]
    fn a_write_is_replicated_with_absolute_times_and_its_request_id() {
        let r = replicated(&[b"SET", b"k", b"v", b"EX", b"10"], None);
        assert_eq!(&r[..3], &[b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
        assert_eq!(r[3], b"PXAT");
        let at: u64 = String::from_utf8_lossy(&r[4]).parse().unwrap();
        let now = accelkv_tree::now_ms();
        assert!(at > now + 9_000 && at <= now + 10_000, "{at} vs {now}");
        let r = replicated(&[b"DEL", b"k"], Some((4, 9)));
        assert_eq!(r, [ONCE, b"4", b"9", b"DEL", b"k"].map(|a| a.to_vec()));
    }

    #[test]
    fn binary_redirects_need_an_address() {
        assert_eq!(
            binary_moved(3, Some("127.0.0.1:7707")),
            (Status::Moved, "3 127.0.0.1:7707".to_string())
        );
        assert_eq!(binary_moved(3, Some("")).0, Status::TryAgain);
        assert_eq!(binary_moved(3, None).0, Status::TryAgain);
    }

    #[test]
    fn a_command_its_group_did_not_serve_gets_the_errors_clients_retry_on() {
        let mut map = RangeMap::single(&[(1, addr(7000)), (2, addr(7010)), (3, addr(7020))]);
        map.ranges[0].replicas = vec![1, 2];
        let (_tx, rx) = watch::channel(map);
        let text = |e| String::from_utf8(settle_error(&rx, 1, 1, e)).unwrap();
        // A leader the map names as a replica: followed.
        let to_two = NotServed::NotLeader(Some((2, "127.0.0.1:7011".into())));
        assert_eq!(text(to_two), "-MOVED 1 127.0.0.1:7010\r\n");
        // Itself, or a node the range moved away from: not followed.
        for id in [1, 3] {
            let e = NotServed::NotLeader(Some((id, String::new())));
            assert_eq!(text(e), format!("-{}\r\n", no_leader(1)));
        }
        assert_eq!(
            text(NotServed::NotLeader(None)),
            format!("-{}\r\n", no_leader(1))
        );
        let down = text(NotServed::Unavailable("no quorum".into()));
        assert_eq!(down, "-CLUSTERDOWN range 1: no quorum\r\n");
    }
}

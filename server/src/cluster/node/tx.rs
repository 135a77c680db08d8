//! MULTI/EXEC in cluster mode: the node that receives MULTI queues the commands that
//! follow in the connection's cluster state (each checked as it arrives: an unknown
//! command, a wrong argument count or one not served in cluster mode is answered with its
//! error and makes EXEC answer `-EXECABORT`, as Redis does), and EXEC sends them on as one
//! command, `ACCELKV.EXEC <command>…`, routed by all their keys together: they must lie in
//! one range (in slot mode one hash slot, else `-CROSSSLOT`). The range's replicas run
//! the commands as a standalone server runs EXEC (one station transaction), so no reader
//! sees part of it. WATCH is not served yet (a watched key's version is a node's own).

use crate::core::route::{encode, ClusterSession, Route};
use crate::resp::cluster::{classify, normalize, Class, TX};
use crate::resp::reply::upper;
use accelkv_proto::resp::{self, Version};

/// What a command does to a connection's transaction.
pub(super) enum Tx {
    /// Answered here: MULTI, DISCARD, a queued command, an aborted or empty EXEC.
    Answer(Route),
    /// EXEC: route this `ACCELKV.EXEC` instead.
    Exec(Vec<Vec<u8>>),
    /// Not part of a transaction: route it as it is.
    Not,
}

fn simple(text: &str) -> Tx {
    let mut o = Vec::new();
    resp::simple(&mut o, text);
    Tx::Answer(Route::Answer(o))
}

fn refuse(text: impl Into<String>) -> Tx {
    Tx::Answer(Route::Refuse(text.into()))
}

/// What `args` does to the transaction of connection `s` (commands in `proto`).
pub(super) fn queue(s: &mut ClusterSession, args: &[&[u8]], proto: Version) -> Tx {
    let name = upper(args[0]);
    match (&name[..], &mut s.tx) {
        (b"MULTI", None) if args.len() == 1 => {
            s.tx = Some((Vec::new(), false));
            simple("OK")
        }
        (b"MULTI", Some(_)) => refuse("ERR MULTI calls can not be nested"),
        (b"EXEC", None) => refuse("ERR EXEC without MULTI"),
        (b"DISCARD", None) => refuse("ERR DISCARD without MULTI"),
        (b"DISCARD", Some(_)) => {
            s.tx = None;
            simple("OK")
        }
        // Nothing is watched in cluster mode.
        (b"UNWATCH", None) => simple("OK"),
        (b"EXEC", Some((_, true))) => {
            s.tx = None;
            refuse("EXECABORT Transaction discarded because of previous errors.")
        }
        (b"EXEC", Some((cmds, false))) if cmds.is_empty() => {
            s.tx = None;
            let mut o = Vec::new();
            resp::array(&mut o, 0);
            Tx::Answer(Route::Answer(o))
        }
        (b"EXEC", Some((cmds, false))) => {
            let now = accelkv_tree::now_ms();
            let mut wrapped = vec![TX.to_vec()];
            for c in cmds.iter() {
                let a: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
                wrapped.push(encode(&normalize(&a, now), proto));
            }
            Tx::Exec(wrapped)
        }
        (_, Some((cmds, dirty))) => match refusal(args) {
            Some(e) => {
                *dirty = true;
                refuse(e)
            }
            None => {
                cmds.push(args.iter().map(|a| a.to_vec()).collect());
                simple("QUEUED")
            }
        },
        _ => Tx::Not,
    }
}

/// Why a command cannot be queued in cluster mode (`None`: it can).
fn refusal(args: &[&[u8]]) -> Option<String> {
    let name = String::from_utf8_lossy(args[0]);
    let Some(spec) = crate::resp::table::find(args[0]) else {
        return Some(format!(
            "ERR unknown command '{name}', with args beginning with: "
        ));
    };
    if !spec.arity_ok(args.len()) {
        let lower = name.to_lowercase();
        return Some(format!(
            "ERR wrong number of arguments for '{lower}' command"
        ));
    }
    match classify(args) {
        Class::Keyed { upto: None, .. } => None,
        Class::Keyed { .. } => Some("ERR RANGE and FLOOR are not served inside MULTI".into()),
        Class::Refused(why) => Some(format!("ERR {why} (docs/CLUSTER.md)")),
        Class::Local => Some(format!(
            "ERR {} is not served inside MULTI in cluster mode: a transaction holds keyed commands",
            name.to_uppercase()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(s: &mut ClusterSession, a: &[&str]) -> String {
        let a: Vec<&[u8]> = a.iter().map(|x| x.as_bytes()).collect();
        match queue(s, &a, Version::Resp2) {
            Tx::Answer(Route::Answer(o)) => String::from_utf8(o).unwrap(),
            Tx::Answer(Route::Refuse(e)) => format!("-{e}"),
            Tx::Answer(_) => "other".into(),
            Tx::Exec(w) => format!("exec {}", w.len() - 1),
            Tx::Not => "not".into(),
        }
    }

    #[test]
    fn multi_queues_and_exec_wraps_or_aborts() {
        let mut s = ClusterSession::default();
        assert_eq!(run(&mut s, &["GET", "a"]), "not");
        assert!(run(&mut s, &["EXEC"]).starts_with("-ERR EXEC without MULTI"));
        assert_eq!(run(&mut s, &["MULTI"]), "+OK\r\n");
        assert!(run(&mut s, &["multi"]).contains("nested"));
        assert_eq!(
            run(&mut s, &["SET", "{t}a", "1", "EX", "10"]),
            "+QUEUED\r\n"
        );
        assert_eq!(run(&mut s, &["INCR", "{t}b"]), "+QUEUED\r\n");
        assert_eq!(run(&mut s, &["EXEC"]), "exec 2");
        // The queue stays until the router sends it on (a split may place it again).
        assert!(s.tx.is_some());
        s.tx = None;
        assert_eq!(run(&mut s, &["MULTI"]), "+OK\r\n");
        assert!(run(&mut s, &["NOSUCH"]).starts_with("-ERR unknown command"));
        assert!(run(&mut s, &["PING"]).contains("not served inside MULTI"));
        assert!(run(&mut s, &["EXEC"]).starts_with("-EXECABORT"));
        assert!(s.tx.is_none());
        assert_eq!(run(&mut s, &["MULTI"]), "+OK\r\n");
        assert_eq!(run(&mut s, &["EXEC"]), "*0\r\n");
        assert_eq!(run(&mut s, &["MULTI"]), "+OK\r\n");
        assert_eq!(run(&mut s, &["DISCARD"]), "+OK\r\n");
        assert!(s.tx.is_none());
    }
}

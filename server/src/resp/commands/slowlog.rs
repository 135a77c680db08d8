//! SLOWLOG GET, LEN, RESET and HELP over the server's slow log (`resp/slowlog.rs`).

use crate::resp::call::Call;
use crate::resp::reply::{parse_i64, upper};
use accelkv_proto::resp;

const HELP: &[&str] = &[
    "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
    "HELP",
    "    Print this help.",
];

/// `SLOWLOG GET [count] | LEN | RESET | HELP`.
pub fn slowlog(x: &mut Call<'_, '_>) {
    let log = &x.s.global.slowlog;
    match (upper(x.args[1]).as_slice(), x.args.len()) {
        (b"GET", 2 | 3) => {
            let n = match x.args.get(2).map(|a| parse_i64(a)) {
                None => Some(10),
                Some(Some(-1)) => None,
                Some(Some(n)) if n >= 0 => Some(n as usize),
                Some(Some(_)) => {
                    return resp::error(x.out, "ERR count should be greater than or equal to -1")
                }
                Some(None) => {
                    return resp::error(x.out, "ERR value is not an integer or out of range")
                }
            };
            let entries = log.get(n);
            resp::array(x.out, entries.len());
            for e in entries {
                resp::array(x.out, 6);
                resp::integer(x.out, e.id as i64);
                resp::integer(x.out, e.time as i64);
                resp::integer(x.out, e.micros as i64);
                resp::array(x.out, e.args.len());
                for a in &e.args {
                    resp::bulk(x.out, Some(a));
                }
                resp::bulk(x.out, Some(e.addr.as_bytes()));
                resp::bulk(x.out, Some(&e.name));
            }
        }
        (b"LEN", 2) => resp::integer(x.out, log.len() as i64),
        (b"RESET", 2) => {
            log.reset();
            resp::simple(x.out, "OK")
        }
        (b"HELP", 2) => {
            resp::array(x.out, HELP.len());
            for l in HELP {
                resp::simple(x.out, l);
            }
        }
        _ => {
            let sub = String::from_utf8_lossy(x.args[1]);
            resp::error(x.out, &format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try SLOWLOG HELP."))
        }
    }
}

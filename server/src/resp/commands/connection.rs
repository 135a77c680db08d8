//! RESP connection commands: what Redis clients send before their first real command
//! (AUTH, HELLO, CLIENT, SELECT, READONLY) and PING, ECHO, QUIT, RESET.

use crate::core::shared::Shared;
use crate::resp::call::Call;
use crate::resp::reply::{parse_i64, upper, wrong_args};
use crate::resp::session::{Replies, Session};
use accelkv_proto::resp::{self, Version};

/// `AUTH [username] password`: logs in as the user (`default` without a name), its
/// passwords compared in constant time; a failure is noted in ACL LOG.
pub fn auth(x: &mut Call<'_, '_>) {
    let (user, given) = match x.args.len() {
        2 => (crate::core::acl::DEFAULT_USER, x.args[1]),
        3 => (x.args[1], x.args[2]),
        _ => return resp::error(x.out, "ERR syntax error"),
    };
    if x.args.len() == 2 && !x.sh.needs_auth() {
        return resp::error(x.out, "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    }
    match log_in(x.sh, x.s, user, given) {
        Ok(()) => resp::simple(x.out, "OK"),
        Err(e) => resp::error(x.out, e),
    }
}

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Logs `s` in as `user` with password `given` (AUTH, HELLO AUTH), or notes the failure in
/// ACL LOG.
fn log_in(sh: &Shared, s: &mut Session, user: &[u8], given: &[u8]) -> Result<(), &'static str> {
    let epoch = sh.acl().epoch();
    match sh.acl().authenticate(user, given) {
        Some(u) => {
            s.login(u, epoch);
            s.authed = true;
            Ok(())
        }
        None => {
            crate::resp::acl::command::log_auth_failure(s, user);
            Err(WRONGPASS)
        }
    }
}

pub fn quit(x: &mut Call<'_, '_>) {
    x.s.quit = true;
    resp::simple(x.out, "OK")
}

pub fn ping(x: &mut Call<'_, '_>) {
    if x.s.in_pubsub_resp2() && x.args.len() <= 2 {
        // Redis's answer in the pub/sub context: a message-shaped pair.
        resp::array(x.out, 2);
        resp::bulk(x.out, Some(b"pong"));
        return resp::bulk(x.out, Some(x.args.get(1).copied().unwrap_or_default()));
    }
    match x.args.len() {
        1 => resp::simple(x.out, "PONG"),
        2 => resp::bulk(x.out, Some(x.args[1])),
        _ => wrong_args(x.out, x.args[0]),
    }
}

pub fn echo(x: &mut Call<'_, '_>) {
    resp::bulk(x.out, Some(x.args[1]))
}

pub fn select(x: &mut Call<'_, '_>) {
    let n = match crate::resp::reply::parse_i64(x.args[1]) {
        Some(n) => n,
        None => return resp::error(x.out, "ERR value is not an integer or out of range"),
    };
    if n != 0 && x.sh.router().is_some() {
        return resp::error(x.out, "ERR SELECT is not allowed in cluster mode");
    }
    if n < 0 || n >= x.sh.settings().databases as i64 {
        return resp::error(x.out, "ERR DB index is out of range");
    }
    x.s.set_db(x.sh, n as u16);
    resp::simple(x.out, "OK")
}

/// READONLY and READWRITE: accepted for cluster-aware clients.
pub fn accept(x: &mut Call<'_, '_>) {
    resp::simple(x.out, "OK")
}

/// RESET: the connection's transaction, protocol, name and authentication start over.
pub fn reset(x: &mut Call<'_, '_>) {
    let s = &mut *x.s;
    s.tx = Default::default();
    s.tracking = None;
    crate::resp::commands::pubsub::end_all(s);
    s.set_proto(Version::Resp2);
    s.set_name(None);
    s.login(x.sh.acl().default_user(), x.sh.acl().epoch());
    s.authed = !x.sh.needs_auth();
    s.set_db(x.sh, 0);
    s.replies = Replies::On;
    resp::simple(x.out, "RESET")
}

const BAD_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

/// Whether a client name is one Redis accepts (printable, no spaces).
fn name_ok(n: &[u8]) -> bool {
    !n.iter().any(|b| *b <= b' ' || *b > b'~')
}

/// `CLIENT PAUSE timeout [WRITE|ALL]`: `timeout` milliseconds from now.
fn pause(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let all = match c.get(3).map(|m| upper(m)) {
        None => true,
        Some(m) if m.as_slice() == b"ALL" => true,
        Some(m) if m.as_slice() == b"WRITE" => false,
        Some(_) => return resp::error(out, "ERR CLIENT PAUSE mode must be WRITE or ALL"),
    };
    let Some(ms) = crate::resp::reply::parse_i64(c[2]).filter(|n| *n >= 0) else {
        return resp::error(out, "ERR timeout is not an integer or out of range");
    };
    let end = accelkv_tree::now_ms().saturating_add(ms as u64);
    s.global.pause.pause(end, all);
    sh.pause_expiry(s.global.pause.end());
    // Those parked already look again (a longer pause parks them for longer).
    sh.blocked().wake([crate::resp::pause::PAUSE_KEY]);
    resp::simple(out, "OK")
}

/// CLIENT and its subcommands.
pub fn client(x: &mut Call<'_, '_>) {
    let (sh, s, c, out) = (x.sh, &mut *x.s, x.args, &mut *x.out);
    let argc = c.len();
    match upper(c[1]).as_slice() {
        b"SETNAME" if argc == 3 => {
            if !name_ok(c[2]) {
                return resp::error(out, BAD_NAME);
            }
            s.set_name(Some(c[2]));
            resp::simple(out, "OK")
        }
        b"LIST" => crate::resp::commands::introspect::client_list(sh, s, c, out),
        b"KILL" if argc >= 3 => crate::resp::commands::introspect::client_kill(sh, s, c, out),
        b"KILL" => resp::error(
            out,
            "ERR wrong number of arguments for 'client|kill' command",
        ),
        b"GETNAME" => resp::bulk_in(out, s.name.as_deref(), s.proto),
        b"ID" => resp::integer(out, s.id as i64),
        b"SETINFO" if argc == 4 => set_info(s, c[2], c[3], out),
        b"INFO" if argc == 2 => crate::resp::commands::introspect::client_info(sh, s, c, out),
        b"NO-EVICT" | b"NO-TOUCH" => crate::resp::commands::introspect::client_switch(s, c, out),
        b"HELP" if argc == 2 => crate::resp::reply::help(out, "CLIENT", CLIENT_HELP),
        b"TRACKING" if argc >= 3 => crate::resp::commands::tracking::tracking(sh, s, c, out),
        b"CACHING" if argc == 3 => crate::resp::commands::tracking::caching(s, c, out),
        b"GETREDIR" if argc == 2 => crate::resp::commands::tracking::getredir(s, out),
        b"TRACKINGINFO" if argc == 2 => crate::resp::commands::tracking::trackinginfo(sh, s, out),
        b"PAUSE" if argc == 3 || argc == 4 => pause(sh, s, c, out),
        b"UNPAUSE" if argc == 2 => {
            s.global.pause.unpause();
            sh.pause_expiry(0);
            sh.blocked().wake([crate::resp::pause::PAUSE_KEY]);
            resp::simple(out, "OK")
        }
        b"REPLY" if argc == 3 => match upper(c[2]).as_slice() {
            b"ON" => {
                s.replies = Replies::On;
                resp::simple(out, "OK")
            }
            b"OFF" => s.replies = Replies::Off,
            b"SKIP" => s.replies = Replies::Skip,
            _ => resp::error(out, "ERR syntax error"),
        },
        b"UNBLOCK" if argc == 3 || argc == 4 => {
            crate::resp::commands::introspect::client_unblock(sh, c, out)
        }
        _ => unknown_or_arity(c, out),
    }
}

/// `CLIENT HELP`'s lines (`reply::help` adds the header and HELP's own).
const CLIENT_HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are: ID, ADDR, LADDR, USER, TYPE, MAXAGE, SKIPME.",
    "LIST [options ...]",
    "    Return information about client connections. Options: TYPE, ID.",
    "UNPAUSE",
    "    Stop the current client pause, resuming traffic.",
    "PAUSE <timeout> [WRITE|ALL]",
    "    Suspend all, or just write, clients for <timeout> milliseconds.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]] [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
];

/// A CLIENT subcommand Redis knows given the wrong number of arguments, or one it does
/// not know, with Redis's errors.
fn unknown_or_arity(c: &[&[u8]], out: &mut Vec<u8>) {
    let sub = String::from_utf8_lossy(c[1]).into_owned();
    match crate::resp::subcommands::known("CLIENT", c[1]) {
        true => resp::error(
            out,
            &format!(
                "ERR wrong number of arguments for 'client|{}' command",
                sub.to_lowercase()
            ),
        ),
        false => resp::error(
            out,
            &format!("ERR unknown subcommand '{sub}'. Try CLIENT HELP."),
        ),
    }
}

/// `CLIENT SETINFO LIB-NAME|LIB-VER value`: what CLIENT LIST shows as `lib-name` and
/// `lib-ver` (client libraries send it on connecting).
fn set_info(s: &crate::resp::session::Session, attr: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let attr = String::from_utf8_lossy(attr).to_lowercase();
    if attr != "lib-name" && attr != "lib-ver" {
        return resp::error(out, &format!("ERR Unrecognized option '{attr}'"));
    }
    if value.iter().any(|b| *b < b'!' || *b > b'~') {
        return resp::error(
            out,
            &format!("ERR {attr} cannot contain spaces, newlines or special characters."),
        );
    }
    if let Some(r) = &s.client {
        r.entry.note(|n| match attr.as_str() {
            "lib-name" => n.lib_name = value.to_vec(),
            _ => n.lib_ver = value.to_vec(),
        });
    }
    resp::simple(out, "OK")
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`: switches the reply
/// protocol (2 or 3), authenticates and names the connection, as Redis 7 does, and answers
/// the server's properties (a map in RESP3, a flat array in RESP2).
pub fn hello(x: &mut Call<'_, '_>) {
    let (sh, s, c, out) = (x.sh, &mut *x.s, x.args, &mut *x.out);
    let mut version = s.proto;
    if c.len() >= 2 {
        version = match parse_i64(c[1]) {
            Some(2) => Version::Resp2,
            Some(3) => Version::Resp3,
            Some(_) => {
                return resp::error(out, "NOPROTO sorry, this protocol version is not supported")
            }
            None => {
                return resp::error(
                    out,
                    "ERR Protocol version is not an integer or out of range",
                )
            }
        };
    }
    let (mut auth, mut name): (Option<(&[u8], &[u8])>, _) = (None, None);
    let mut i = 2;
    while i < c.len() {
        match upper(c[i]).as_slice() {
            b"AUTH" if i + 2 < c.len() => {
                auth = Some((c[i + 1], c[i + 2]));
                i += 3;
            }
            b"SETNAME" if i + 1 < c.len() => {
                if !name_ok(c[i + 1]) {
                    return resp::error(out, BAD_NAME);
                }
                name = Some(c[i + 1]);
                i += 2;
            }
            _ => {
                let opt = String::from_utf8_lossy(c[i]);
                return resp::error(out, &format!("ERR Syntax error in HELLO option '{opt}'"));
            }
        }
    }
    match (auth, sh.needs_auth()) {
        (Some((user, given)), _) => {
            if let Err(e) = log_in(sh, s, user, given) {
                return resp::error(out, e);
            }
        }
        (None, true) if !s.authed => {
            return resp::error(
                out,
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            )
        }
        (None, _) => {}
    }
    if let Some(n) = name {
        s.set_name(Some(n));
    }
    s.set_proto(version);
    resp::map(out, 7, version);
    for (k, v) in [
        ("server", "accelkv"),
        ("version", env!("CARGO_PKG_VERSION")),
    ] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(v.as_bytes()));
    }
    resp::bulk(out, Some(b"proto"));
    resp::integer(out, if version == Version::Resp3 { 3 } else { 2 });
    resp::bulk(out, Some(b"id"));
    resp::integer(out, s.id as i64);
    for (k, v) in [("mode", "standalone"), ("role", "master")] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(v.as_bytes()));
    }
    resp::bulk(out, Some(b"modules"));
    resp::array(out, 0);
}

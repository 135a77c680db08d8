//! The ACL command (SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, DRYRUN, GENPASS,
//! LOG, SAVE, LOAD, HELP) with Redis 7.2's replies and errors, and the texts of a
//! refusal (the gate's `-NOPERM`, DRYRUN's answer) and its ACL LOG entry.

use crate::core::acl::{edit, merge_selectors, Denied, User};
use crate::core::clients::Filter;
use crate::resp::acl::categories;
use crate::resp::acl::log::Reason;
use crate::resp::acl::TableCommands;
use crate::resp::call::{Call, From};
use crate::resp::reply::{help, subcommand_ok, upper};
use crate::resp::session::Session;
use accelkv_proto::resp;

/// ACL's subcommands and their arities (negative: at least), as Redis 7's table has them.
const SUBS: &[(&str, i32)] = &[
    ("CAT", -2),
    ("DELUSER", -3),
    ("DRYRUN", -4),
    ("GENPASS", -2),
    ("GETUSER", 3),
    ("HELP", 2),
    ("LIST", 2),
    ("LOAD", 2),
    ("LOG", -2),
    ("SAVE", 2),
    ("SETUSER", -3),
    ("USERS", 2),
    ("WHOAMI", 2),
];

/// `ACL <subcommand> ...`.
pub fn acl(x: &mut Call<'_, '_>) {
    if !subcommand_ok(x.out, "ACL", SUBS, x.args) {
        return;
    }
    let sub = upper(x.args[1]);
    // Past what they take (one argument), CAT, GENPASS and LOG answer their own error, as
    // in Redis.
    if matches!(sub.as_slice(), b"CAT" | b"GENPASS" | b"LOG") && x.args.len() > 3 {
        let s = String::from_utf8_lossy(x.args[1]);
        return resp::error(
            x.out,
            &format!(
                "ERR unknown subcommand or wrong number of arguments for '{s}'. Try ACL HELP."
            ),
        );
    }
    match sub.as_slice() {
        b"SETUSER" => setuser(x),
        b"GETUSER" => crate::resp::acl::getuser::getuser(x),
        b"DELUSER" => deluser(x),
        b"LIST" | b"USERS" => list(x, sub.as_slice() == b"USERS"),
        b"WHOAMI" => resp::bulk(x.out, Some(x.s.user_name())),
        b"CAT" => cat(x),
        b"DRYRUN" => dryrun(x),
        b"GENPASS" => genpass(x),
        b"LOG" => log(x),
        b"SAVE" | b"LOAD" => crate::resp::acl::getuser::save_or_load(x, sub.as_slice() == b"SAVE"),
        _ => help(x.out, "ACL", HELP),
    }
}

fn table(x: &Call<'_, '_>) -> TableCommands {
    TableCommands::new((x.dispatch.table)(), x.dispatch.find)
}

/// `ACL SETUSER name rule...`: every rule applies, or none.
fn setuser(x: &mut Call<'_, '_>) {
    let name = x.args[2];
    if name.iter().any(|b| *b == b' ' || *b == 0) {
        return resp::error(
            x.out,
            "ERR Usernames can't contain spaces or null characters",
        );
    }
    let rules = match merge_selectors(&x.args[3..]) {
        Ok(r) => r,
        Err(at) => {
            let at = String::from_utf8_lossy(&at);
            return resp::error(
                x.out,
                &format!("ERR Unmatched parenthesis in acl selector starting at '{at}'."),
            );
        }
    };
    let acl = x.sh.acl();
    let old = acl.get(name);
    let base = old
        .as_ref()
        .map_or_else(|| User::new(name, acl.pubsub_all()), |u| (**u).clone());
    match edit(base, &rules, &table(x), acl.pubsub_all()) {
        Ok(u) => {
            // Subscribers whose channels the user no longer covers are disconnected, as
            // Redis disconnects them.
            let narrower = old.is_some_and(|o| !covers(&u, &o));
            acl.put(u);
            if narrower {
                kill_clients(x, name, true);
            }
            resp::simple(x.out, "OK")
        }
        Err((op, e)) => {
            let op = String::from_utf8_lossy(&op);
            resp::error(
                x.out,
                &format!("ERR Error in ACL SETUSER modifier '{op}': {e}"),
            )
        }
    }
}

/// Whether `new`'s channel rules allow at least what `old`'s did.
fn covers(new: &User, old: &User) -> bool {
    let (n, o) = (&new.root, &old.root);
    n.all_channels || (!o.all_channels && o.channels.iter().all(|c| n.channels.contains(c)))
}

/// Closes the connections logged in as `name` (only the subscribed ones when `subscribed`);
/// the caller's own closes after its reply.
fn kill_clients(x: &mut Call<'_, '_>, name: &[u8], subscribed: bool) {
    let f = Filter {
        user: Some(name.to_vec()),
        subscribed,
        ..Default::default()
    };
    let (_, me) = x.sh.clients().kill(&f, x.s.id);
    if me {
        x.s.quit = true;
    }
}

/// `ACL DELUSER name...`: how many existed; their connections are closed.
fn deluser(x: &mut Call<'_, '_>) {
    let names = &x.args[2..];
    if names.contains(&crate::core::acl::DEFAULT_USER) {
        return resp::error(x.out, "ERR The 'default' user cannot be removed");
    }
    let n = x.sh.acl().delete(names);
    for name in names {
        kill_clients(x, name, false);
    }
    resp::integer(x.out, n as i64)
}

/// `ACL LIST` (each user's line) and `ACL USERS` (their names).
fn list(x: &mut Call<'_, '_>, names_only: bool) {
    let users = x.sh.acl().all();
    resp::array(x.out, users.len());
    for u in users {
        if names_only {
            resp::bulk(x.out, Some(&u.name));
        } else {
            let line = format!("user {} {}", String::from_utf8_lossy(&u.name), u.describe());
            resp::bulk(x.out, Some(line.as_bytes()));
        }
    }
}

/// `ACL CAT [category]`: the categories, or the commands of one.
fn cat(x: &mut Call<'_, '_>) {
    let Some(c) = x.args.get(2) else {
        resp::array(x.out, categories::NAMES.len());
        for n in categories::NAMES {
            resp::bulk(x.out, Some(n.as_bytes()));
        }
        return;
    };
    let lower = String::from_utf8_lossy(c).to_lowercase();
    let Some(bit) = categories::bit(&lower) else {
        let c = String::from_utf8_lossy(c);
        return resp::error(x.out, &format!("ERR Unknown category '{c}'"));
    };
    let t = table(x);
    let names: Vec<String> = t
        .names()
        .into_iter()
        .enumerate()
        .filter(|(id, _)| crate::core::acl::Commands::categories(&t, *id) & bit != 0)
        .map(|(_, n)| n)
        .collect();
    resp::array(x.out, names.len());
    for n in names {
        resp::bulk(x.out, Some(n.as_bytes()));
    }
}

/// `ACL DRYRUN user command [arg...]`: whether the user may run it, and if not, why.
fn dryrun(x: &mut Call<'_, '_>) {
    let Some(user) = x.sh.acl().get(x.args[2]) else {
        let u = String::from_utf8_lossy(x.args[2]);
        return resp::error(x.out, &format!("ERR User '{u}' not found"));
    };
    let cmd = &x.args[3..];
    let Some(spec) = (x.dispatch.find)(cmd[0]) else {
        let c = String::from_utf8_lossy(cmd[0]);
        return resp::error(x.out, &format!("ERR Command '{c}' not found"));
    };
    if !spec.arity_ok(cmd.len()) {
        let c = String::from_utf8_lossy(cmd[0]).to_lowercase();
        return resp::error(
            x.out,
            &format!("ERR wrong number of arguments for '{c}' command"),
        );
    }
    let table = (x.dispatch.table)();
    let pos = table
        .iter()
        .position(|s| std::ptr::eq(s, spec))
        .unwrap_or(0);
    let verdict = if spec.has(crate::resp::call::flag::NO_AUTH) || user.open {
        Ok(())
    } else {
        crate::resp::acl::check::check(&user, table, spec, pos, cmd)
    };
    match verdict {
        Err(d) => {
            let name = String::from_utf8_lossy(&user.name).into_owned();
            let text = denied_text(&name, cmd, d, true);
            resp::bulk(x.out, Some(text.as_bytes()))
        }
        Ok(()) => resp::simple(x.out, "OK"),
    }
}

/// `ACL GENPASS [bits]`: a random password of `bits` bits (256 by default) in
/// hexadecimal, from the operating system's random source.
fn genpass(x: &mut Call<'_, '_>) {
    let bits = match x.args.get(2) {
        None => 256,
        Some(b) => match crate::resp::reply::parse_i64(b).filter(|n| (1..=4096).contains(n)) {
            Some(n) => n as usize,
            None => {
                return resp::error(
                    x.out,
                    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                )
            }
        },
    };
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    let mut hex = crate::core::acl::user::hex(&bytes);
    hex.truncate(chars);
    resp::bulk(x.out, Some(hex.as_bytes()))
}

/// `ACL LOG [count|RESET]`.
fn log(x: &mut Call<'_, '_>) {
    let log = &x.s.global.acl_log;
    let count = match x.args.get(2) {
        None => 10,
        Some(a) if a.eq_ignore_ascii_case(b"RESET") => {
            log.reset();
            return resp::simple(x.out, "OK");
        }
        // A negative count lists nothing, as in Redis.
        Some(a) => match crate::resp::reply::parse_i64(a) {
            Some(n) => n.max(0) as usize,
            None => return resp::error(x.out, "ERR value is not an integer or out of range"),
        },
    };
    log.reply(count, x.out, x.s.proto)
}

const HELP: &[&str] = &[
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
];

/// A refusal's text: the gate's (after `NOPERM `) or, `dryrun`, ACL DRYRUN's, which
/// names the key or channel.
pub fn denied_text(user: &str, args: &[&[u8]], d: Denied, dryrun: bool) -> String {
    let arg =
        |i: usize| String::from_utf8_lossy(args.get(i).copied().unwrap_or_default()).into_owned();
    match (d, dryrun) {
        (Denied::Command, _) => format!(
            "User {user} has no permissions to run the '{}' command",
            crate::resp::subcommands::full_name(args)
        ),
        (Denied::Key(_), false) => "No permissions to access a key".into(),
        (Denied::Channel(_), false) => "No permissions to access a channel".into(),
        (Denied::Key(i), true) => format!(
            "User {user} has no permissions to access the '{}' key",
            arg(i)
        ),
        (Denied::Channel(i), true) => {
            format!(
                "User {user} has no permissions to access the '{}' channel",
                arg(i)
            )
        }
    }
}

/// Notes a refusal in ACL LOG.
pub fn log_denied(s: &Session, args: &[&[u8]], d: Denied, context: &'static str) {
    let (reason, object) = match d {
        Denied::Command => (
            Reason::Command,
            crate::resp::subcommands::full_name(args).into_bytes(),
        ),
        Denied::Key(i) => (
            Reason::Key,
            args.get(i).copied().unwrap_or_default().to_vec(),
        ),
        Denied::Channel(i) => (
            Reason::Channel,
            args.get(i).copied().unwrap_or_default().to_vec(),
        ),
    };
    let info = client_info(s);
    s.global
        .acl_log
        .add(reason, context, &object, s.user_name(), info);
}

/// Notes a failed login (AUTH, HELLO) as `user` in ACL LOG.
pub fn log_auth_failure(s: &Session, user: &[u8]) {
    let info = client_info(s);
    s.global
        .acl_log
        .add(Reason::Auth, "toplevel", b"AUTH", user, info);
}

fn client_info(s: &Session) -> String {
    s.client
        .as_ref()
        .map(|r| r.entry.line(None))
        .unwrap_or_default()
}

/// ACL LOG's context of a command from `from`: `lua` in a script, `multi` in EXEC.
pub fn context(from: From) -> &'static str {
    match from {
        From::Script { .. } => "lua",
        From::Inner => "multi",
        From::Client => "toplevel",
    }
}

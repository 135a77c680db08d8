//! `COMMAND [COUNT | LIST [FILTERBY …] | INFO [name ...] | DOCS [name ...] | GETKEYS …]`
//! from the command table
//! (`table.rs`, handed in), in Redis 7's reply shapes: what client libraries and tools (redis-cli's
//! hints, cluster-aware clients' key extraction) ask a server about its commands.

use crate::core::acl::Commands;
use crate::core::glob;
use crate::resp::acl::{categories, TableCommands};
use crate::resp::call::Call;
use crate::resp::call::Spec;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// One COMMAND INFO entry: name, arity, flags, first key, last key, step, ACL categories,
/// tips, key specifications, subcommands.
fn info(out: &mut Vec<u8>, s: &Spec, v: Version) {
    resp::array(out, 10);
    resp::bulk(out, Some(s.name.to_lowercase().as_bytes()));
    resp::integer(out, i64::from(s.arity));
    // Keys found by reading the arguments (a count, STREAMS, STORE): Redis's movablekeys.
    let movable = crate::resp::db::movable_keys(s).then_some("movablekeys");
    let flags: Vec<&str> = s.flag_names().chain(movable).collect();
    resp::set(out, flags.len(), v);
    for f in flags {
        resp::simple(out, f);
    }
    let (first, last, step) = s.keys;
    resp::integer(out, i64::from(first));
    resp::integer(out, i64::from(last));
    resp::integer(out, i64::from(step));
    let cats =
        crate::resp::acl::categories::of(s, None, crate::resp::subcommands::is_container(s.name));
    let names = crate::resp::acl::categories::names(cats);
    resp::set(out, names.clone().count(), v);
    for c in names {
        resp::simple(out, &format!("@{c}"));
    }
    resp::set(out, 0, v);
    resp::array(out, 0);
    resp::array(out, 0);
}

/// One COMMAND DOCS entry (its name, then a map of summary, since, group).
fn docs(out: &mut Vec<u8>, s: &Spec, v: Version) {
    resp::bulk(out, Some(s.name.to_lowercase().as_bytes()));
    resp::map(out, 3, v);
    for (k, val) in [
        ("summary", s.summary),
        ("since", "1.0.0"),
        ("group", s.group),
    ] {
        resp::bulk(out, Some(k.as_bytes()));
        resp::bulk(out, Some(val.as_bytes()));
    }
}

/// How a command is looked up by name.
pub type Find = fn(&[u8]) -> Option<&'static Spec>;

/// The table entries `names` ask for (every entry when empty); `None` for an unknown one.
fn pick<'a>(
    table: &'static [Spec],
    find: Find,
    names: &'a [&'a [u8]],
) -> Box<dyn Iterator<Item = Option<&'static Spec>> + 'a> {
    if names.is_empty() {
        Box::new(table.iter().map(Some))
    } else {
        Box::new(names.iter().map(move |n| find(n)))
    }
}

/// COMMAND HELP's lines.
const HELP: &[&str] = &[
    "(no subcommand)",
    "    Return details about all commands.",
    "COUNT",
    "    Return the total number of commands in this server.",
    "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
    "    Return a list of all commands in this server.",
    "INFO [<command-name> ...]",
    "    Return details about the given commands, or all of them.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about the given commands, or all of them.",
    "GETKEYS <full-command>",
    "    Return the keys from a full command.",
];

/// COMMAND and its subcommands, answered from `table`.
pub fn command(s: &Session, c: &[&[u8]], table: &'static [Spec], find: Find, out: &mut Vec<u8>) {
    let sub = c.get(1).map(|a| a.to_ascii_uppercase());
    let v = s.proto;
    match sub.as_deref() {
        None => {
            resp::array(out, table.len());
            for spec in table {
                info(out, spec, v);
            }
        }
        Some(b"COUNT") if c.len() == 2 => resp::integer(out, table.len() as i64),
        Some(b"LIST") => list(table, find, &c[2..], out),
        Some(b"INFO") => {
            let found: Vec<_> = pick(table, find, &c[2..]).collect();
            resp::array(out, found.len());
            for spec in found {
                match spec {
                    Some(spec) => info(out, spec, v),
                    None => resp::bulk_in(out, None, v),
                }
            }
        }
        Some(b"GETKEYS") if c.len() >= 3 => getkeys(find, &c[2..], out),
        Some(b"HELP") if c.len() == 2 => crate::resp::reply::help(out, "COMMAND", HELP),
        Some(b"DOCS") => {
            let found: Vec<_> = pick(table, find, &c[2..]).flatten().collect();
            resp::map(out, found.len(), v);
            for spec in found {
                docs(out, spec, v);
            }
        }
        Some(_) => {
            let sub = String::from_utf8_lossy(c[1]);
            resp::error(
                out,
                &format!("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try COMMAND HELP."),
            )
        }
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`: every
/// command's name and every subcommand's (`client|list`), lower case, or those the filter
/// keeps (no modules here: MODULE keeps none).
fn list(table: &'static [Spec], find: Find, args: &[&[u8]], out: &mut Vec<u8>) {
    let filter = match args {
        [] => None,
        [by, kind, value] if by.eq_ignore_ascii_case(b"FILTERBY") => {
            Some((kind.to_ascii_uppercase(), *value))
        }
        _ => return resp::error(out, "ERR syntax error"),
    };
    // Names and categories by the ids ACL's rules use (`get`, `config|get`), as ACL CAT
    // lists them.
    let cmds = TableCommands::new(table, find);
    let names = cmds.names();
    let keep = |id: usize, name: &str| -> Option<bool> {
        let Some((kind, value)) = &filter else {
            return Some(true);
        };
        Some(match kind.as_slice() {
            b"MODULE" => false,
            b"PATTERN" => glob::matches(&value.to_ascii_lowercase(), name.as_bytes()),
            b"ACLCAT" => {
                let cat = String::from_utf8_lossy(value).to_ascii_lowercase();
                categories::bit(&cat).is_some_and(|bit| cmds.categories(id) & bit != 0)
            }
            _ => return None,
        })
    };
    let mut kept = Vec::new();
    for (id, n) in names.iter().enumerate() {
        match keep(id, n) {
            Some(true) => kept.push(n),
            Some(false) => {}
            None => return resp::error(out, "ERR syntax error"),
        }
    }
    resp::array(out, kept.len());
    for n in kept {
        resp::bulk(out, Some(n.as_bytes()));
    }
}

/// `COMMAND GETKEYS command [arg ...]`: the keys the command names, as the gate finds
/// them (after `numkeys` for EVAL, FCALL, ZUNION…), with Redis's errors.
fn getkeys(find: Find, cmd: &[&[u8]], out: &mut Vec<u8>) {
    let Some(spec) = find(cmd[0]) else {
        return resp::error(out, "ERR Invalid command specified");
    };
    let n = cmd.len() as i32;
    if (spec.arity >= 0 && n != spec.arity) || n < -spec.arity {
        return resp::error(out, "ERR Invalid number of arguments specified for command");
    }
    let at = crate::resp::db::key_positions(spec, cmd);
    if at.is_empty() && spec.runs_script() {
        return resp::array(out, 0);
    }
    if at.is_empty() && spec.keys != (0, 0, 0) {
        return resp::error(out, "ERR Invalid arguments specified for command");
    }
    if at.is_empty() {
        return resp::error(out, "ERR The command has no key arguments");
    }
    resp::array(out, at.len());
    for i in at {
        resp::bulk(out, cmd.get(i).copied());
    }
}

/// `COMMAND [COUNT|INFO|DOCS|LIST|GETKEYS ...]`, from the dispatcher's table.
pub fn command_cmd(x: &mut Call<'_, '_>) {
    command(x.s, x.args, (x.dispatch.table)(), x.dispatch.find, x.out)
}

//! Container commands' subcommands as Redis counts them (INFO commandstats'
//! `cmdstat_config|get`, LATENCY HISTOGRAM's `client|id`): each known subcommand has a
//! statistics index of its own after the command table's rows; the dispatcher charges a
//! container's run to its subcommand's index (one array lookup for every other command).

use crate::resp::call::Spec;
use std::sync::OnceLock;

/// Each container command and the subcommands Redis 7 lists for it.
const SUBS: &[(&str, &[&str])] = &[
    (
        "ACL",
        &[
            "CAT", "DELUSER", "DRYRUN", "GENPASS", "GETUSER", "HELP", "LIST", "LOAD", "LOG",
            "SAVE", "SETUSER", "USERS", "WHOAMI",
        ],
    ),
    (
        "CLIENT",
        &[
            "CACHING",
            "GETNAME",
            "GETREDIR",
            "HELP",
            "ID",
            "INFO",
            "KILL",
            "LIST",
            "NO-EVICT",
            "NO-TOUCH",
            "PAUSE",
            "REPLY",
            "SETINFO",
            "SETNAME",
            "TRACKING",
            "TRACKINGINFO",
            "UNBLOCK",
            "UNPAUSE",
        ],
    ),
    (
        "COMMAND",
        &["COUNT", "DOCS", "GETKEYS", "HELP", "INFO", "LIST"],
    ),
    ("CONFIG", &["GET", "HELP", "RESETSTAT", "REWRITE", "SET"]),
    (
        "FUNCTION",
        &[
            "DELETE", "DUMP", "FLUSH", "HELP", "KILL", "LIST", "LOAD", "RESTORE", "STATS",
        ],
    ),
    (
        "LATENCY",
        &[
            "DOCTOR",
            "GRAPH",
            "HELP",
            "HISTOGRAM",
            "HISTORY",
            "LATEST",
            "RESET",
        ],
    ),
    (
        "MEMORY",
        &["DOCTOR", "HELP", "MALLOC-STATS", "PURGE", "STATS", "USAGE"],
    ),
    (
        "OBJECT",
        &["ENCODING", "FREQ", "HELP", "IDLETIME", "REFCOUNT"],
    ),
    (
        "PUBSUB",
        &[
            "CHANNELS",
            "HELP",
            "NUMPAT",
            "NUMSUB",
            "SHARDCHANNELS",
            "SHARDNUMSUB",
        ],
    ),
    (
        "SCRIPT",
        &["DEBUG", "EXISTS", "FLUSH", "HELP", "KILL", "LOAD"],
    ),
    ("SLOWLOG", &["GET", "HELP", "LEN", "RESET"]),
    (
        "XGROUP",
        &[
            "CREATE",
            "CREATECONSUMER",
            "DELCONSUMER",
            "DESTROY",
            "HELP",
            "SETID",
        ],
    ),
    ("XINFO", &["CONSUMERS", "GROUPS", "HELP", "STREAM"]),
];

/// Per table row: the first statistics index of its subcommands and their names, for a
/// container (`None` for the rest).
type Containers = Vec<Option<(usize, &'static [&'static str])>>;

fn containers(table: &[Spec]) -> &'static Containers {
    static C: OnceLock<Containers> = OnceLock::new();
    C.get_or_init(|| {
        let mut next = table.len();
        table
            .iter()
            .map(|spec| {
                let (_, subs) = SUBS.iter().find(|(n, _)| *n == spec.name)?;
                let first = next;
                next += subs.len();
                Some((first, *subs))
            })
            .collect()
    })
}

/// The statistics index of the command at table position `pos` run with `args`: its
/// subcommand's for a container (an unknown subcommand counts as the container).
pub fn stats_index(table: &[Spec], pos: usize, args: &[&[u8]]) -> usize {
    let Some(Some((first, subs))) = containers(table).get(pos) else {
        return pos;
    };
    let Some(sub) = args.get(1) else {
        return pos;
    };
    subs.iter()
        .position(|s| s.as_bytes().eq_ignore_ascii_case(sub))
        .map_or(pos, |i| first + i)
}

/// Every statistics index's name, lower case: the table's commands, then `name|sub`.
pub fn names(table: &[Spec]) -> Vec<String> {
    let mut out: Vec<String> = table.iter().map(|s| s.name.to_ascii_lowercase()).collect();
    for (spec, c) in table.iter().zip(containers(table)) {
        if let Some((_, subs)) = c {
            for s in *subs {
                out.push(format!("{}|{}", spec.name, s).to_ascii_lowercase());
            }
        }
    }
    out
}

/// The statistics indexes of the subcommands of the command at table position `pos`
/// (empty for a command without subcommands).
pub fn range(table: &[Spec], pos: usize) -> std::ops::Range<usize> {
    match containers(table).get(pos) {
        Some(Some((first, subs))) => *first..first + subs.len(),
        _ => 0..0,
    }
}

/// The statistics index of subcommand `sub` of the command at table position `pos`.
pub fn find(table: &[Spec], pos: usize, sub: &[u8]) -> Option<usize> {
    let Some(Some((first, subs))) = containers(table).get(pos) else {
        return None;
    };
    let i = subs
        .iter()
        .position(|s| s.as_bytes().eq_ignore_ascii_case(sub))?;
    Some(first + i)
}

/// The table position and subcommand name (upper case) of statistics index `id`; `None`
/// for the subcommand of a top-level command's own index.
pub fn parts(table: &[Spec], id: usize) -> (usize, Option<&'static str>) {
    if id < table.len() {
        return (id, None);
    }
    for (pos, c) in containers(table).iter().enumerate() {
        if let Some((first, subs)) = c {
            if (*first..first + subs.len()).contains(&id) {
                return (pos, Some(subs[id - first]));
            }
        }
    }
    (id, None)
}

/// A command's name as Redis's errors give it: lower case, with its subcommand after a `|`
/// for the commands that have subcommands (`client|info`, `pubsub|numpat`).
pub fn full_name(args: &[&[u8]]) -> String {
    const CONTAINERS: &[&str] = &[
        "acl", "client", "cluster", "command", "config", "function", "latency", "memory", "module",
        "object", "pubsub", "script", "slowlog", "xgroup", "xinfo",
    ];
    let name = String::from_utf8_lossy(args[0]).to_lowercase();
    match args.get(1) {
        Some(sub) if CONTAINERS.contains(&name.as_str()) => {
            format!("{name}|{}", String::from_utf8_lossy(sub).to_lowercase())
        }
        _ => name,
    }
}

/// Whether the command named `name` (upper case) has subcommands.
pub fn is_container(name: &str) -> bool {
    SUBS.iter().any(|(n, _)| *n == name)
}

/// Whether `sub` is a subcommand Redis 7 lists for `container` (upper case).
pub fn known(container: &str, sub: &[u8]) -> bool {
    SUBS.iter()
        .find(|(n, _)| *n == container)
        .is_some_and(|(_, subs)| subs.iter().any(|s| s.as_bytes().eq_ignore_ascii_case(sub)))
}

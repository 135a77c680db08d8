//! Which commands a CLIENT PAUSE holds (`pause.rs` keeps the pause itself): under `ALL`,
//! every command; under `WRITE`, those that write or would be replicated, as Redis's
//! `may-replicate` flag says: writes, EXEC of a transaction holding one, EVAL and EVALSHA
//! of a script whose shebang does not declare `no-writes`, FCALL of a function not flagged
//! `no-writes`, PUBLISH, SPUBLISH and PFCOUNT.

use crate::resp::call::flag::WRITE;
use crate::resp::call::Spec;
use crate::resp::session::Session;

/// When the pause holding command `args` (`spec`) of `s` ends (Unix milliseconds), if one
/// does. One relaxed load while no pause is set.
pub fn holds(s: &Session, spec: &Spec, args: &[&[u8]]) -> Option<u64> {
    let (end, all) = s.global.pause.active()?;
    (all || replicates(s, spec, args)).then_some(end)
}

/// Whether command `args` (`spec`) writes or would be replicated: EXEC when its
/// transaction holds such a command.
fn replicates(s: &Session, spec: &Spec, args: &[&[u8]]) -> bool {
    if spec.name == "EXEC" {
        return s.tx.queued.iter().flatten().any(|c| {
            let a: Vec<&[u8]> = c.iter().map(Vec::as_slice).collect();
            a.first()
                .and_then(|n| crate::resp::table::find(n))
                .is_some_and(|sp| one(s, sp, &a))
        });
    }
    one(s, spec, args)
}

fn one(s: &Session, spec: &Spec, args: &[&[u8]]) -> bool {
    if spec.has(WRITE) {
        return true;
    }
    match spec.name {
        "EVAL" | "EVALSHA" => !no_writes(s, spec, args),
        "FCALL" => !args
            .get(1)
            .is_some_and(|f| s.global.scripts.functions.no_writes(f)),
        _ => spec.may_replicate(),
    }
}

/// Whether the script EVAL or EVALSHA runs declares `no-writes` in its shebang.
fn no_writes(s: &Session, spec: &Spec, args: &[&[u8]]) -> bool {
    let Some(arg) = args.get(1) else {
        return false;
    };
    let body = match spec.name {
        "EVAL" => Some(std::sync::Arc::new(arg.to_vec())),
        _ => {
            let sha = String::from_utf8_lossy(arg).to_ascii_lowercase();
            let bodies = s.global.scripts.bodies.lock();
            bodies.ok().and_then(|b| b.get(&sha).cloned())
        }
    };
    let flags = body.and_then(|b| crate::resp::commands::script::shebang(&b).ok().flatten());
    flags.is_some_and(|(f, _)| f.iter().any(|g| g == "no-writes"))
}

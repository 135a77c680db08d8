//! EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT: a script's commands run through the
//! dispatcher inside one transaction (the EXEC running, or one of its own committed when it
//! returns, aborted when it is stopped).

use crate::core::reads::Reads;
use crate::core::shared::Shared;
use crate::resp::call::From;
use crate::resp::call::{Call, Dispatcher};
use crate::resp::commands::script::lua::{self, Ran, Stop};
use crate::resp::commands::script::{sha1_hex, Scripts};
use crate::resp::reply::err_store;
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Value as Reply, Version};
use accelkv_proto::Limits;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a script may run before it is stopped and its writes discarded. (Redis's
/// `lua-time-limit` is when Redis starts answering BUSY to every other client while the
/// script goes on: accelkv serves the other loops' clients meanwhile, so CONFIG SET
/// lua-time-limit is accepted and reported, and changes nothing.)
pub const TIME_LIMIT: Duration = Duration::from_secs(5);

/// `EVAL script numkeys [key ...] [arg ...]`.
pub fn eval(x: &mut Call<'_, '_>) {
    let body = x.args[1].to_vec();
    let sha = sha1_hex(&body);
    let scripts = x.s.global.scripts.clone();
    scripts
        .bodies
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(sha.clone())
        .or_insert_with(|| Arc::new(body.clone()));
    run(x, (&body, &sha), false)
}

/// `EVAL_RO script numkeys [key ...] [arg ...]`: refuses writes.
pub fn eval_ro(x: &mut Call<'_, '_>) {
    let body = x.args[1].to_vec();
    let sha = sha1_hex(&body);
    run(x, (&body, &sha), true)
}

/// `EVALSHA sha1 numkeys [key ...] [arg ...]`.
pub fn evalsha(x: &mut Call<'_, '_>) {
    by_sha(x, false)
}

/// `EVALSHA_RO sha1 numkeys [key ...] [arg ...]`.
pub fn evalsha_ro(x: &mut Call<'_, '_>) {
    by_sha(x, true)
}

fn by_sha(x: &mut Call<'_, '_>, ro: bool) {
    let sha = String::from_utf8_lossy(x.args[1]).to_ascii_lowercase();
    let body =
        x.s.global
            .scripts
            .bodies
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&sha)
            .cloned();
    match body {
        Some(b) => run(x, (&b, &sha), ro),
        None => resp::error(x.out, "NOSCRIPT No matching script. Please use EVAL."),
    }
}

/// A script's keys and arguments.
type KeysArgs<'a> = (Vec<&'a [u8]>, Vec<&'a [u8]>);

/// Splits `numkeys key... arg...`.
fn keys_and_args<'a>(args: &[&'a [u8]]) -> Result<KeysArgs<'a>, &'static str> {
    let n: i64 = std::str::from_utf8(args[0])
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or("ERR value is not an integer or out of range")?;
    if n < 0 {
        return Err("ERR Number of keys can't be negative");
    }
    let n = n as usize;
    if n > args.len() - 1 {
        return Err("ERR Number of keys can't be greater than number of args");
    }
    Ok((args[1..1 + n].to_vec(), args[1 + n..].to_vec()))
}

fn run(x: &mut Call<'_, '_>, (body, sha): (&[u8], &str), ro: bool) {
    // Redis 7's shebang: `#!lua flags=no-writes,allow-oom`, the line kept out of the code.
    let (body, ro, oom) = match crate::resp::commands::script::shebang(body) {
        Err(e) => return resp::error(x.out, &format!("ERR {e}")),
        Ok(None) => (body, ro, false),
        Ok(Some((flags, at))) => {
            let has = |f: &str| flags.iter().any(|g| g == f);
            (&body[at..], ro || has("no-writes"), has("allow-oom"))
        }
    };
    x.s.allow_oom = oom;
    run_with(x, ro, |keys, argv, deadline, scripts, exec| {
        lua::run((body, sha), (keys, argv), deadline, scripts, exec)
    });
    x.s.allow_oom = false;
}

/// Runs a script or function (`go`, given its keys and arguments from `x`'s `numkeys`
/// on) inside the running transaction or one of its own, read-only when `ro`.
pub(crate) fn run_with(
    x: &mut Call<'_, '_>,
    ro: bool,
    go: impl FnOnce(
        &[&[u8]],
        &[&[u8]],
        Instant,
        &Arc<Scripts>,
        &mut dyn FnMut(&[Vec<u8>]) -> Reply,
    ) -> Ran,
) {
    let (keys, argv) = match keys_and_args(&x.args[2..]) {
        Ok(v) => v,
        Err(e) => return resp::error(x.out, e),
    };
    let (sh, scripts) = (x.sh, x.s.global.scripts.clone());
    let own_tx = x.s.tx.running.is_none();
    if own_tx {
        x.s.tx.running = Some(Box::new(sh.writes().begin()));
    }
    let proto = std::mem::replace(&mut x.s.proto, Version::Resp2);
    scripts.running.fetch_add(1, Ordering::SeqCst);
    let (s, reads, d) = (&mut *x.s, &mut *x.reads, x.dispatch);
    let ran = crate::resp::commands::tx::guarded(sh, s, |s| {
        let mut exec = |cmd: &[Vec<u8>]| one_command((sh, d), s, reads, cmd, ro);
        go(
            &keys,
            &argv,
            Instant::now() + TIME_LIMIT,
            &scripts,
            &mut exec,
        )
    });
    if scripts.running.fetch_sub(1, Ordering::SeqCst) == 1 {
        scripts.kill.store(false, Ordering::SeqCst);
    }
    x.s.proto = proto;
    match ran {
        Ran::Reply(reply) => {
            if own_tx {
                if let Some(done) = crate::resp::commands::tx::commit_running(sh, x.s) {
                    if let Some(e) = done.failed.iter().flatten().next() {
                        return err_store(x.out, e);
                    }
                }
            }
            x.out.extend_from_slice(&reply);
        }
        Ran::Stopped(why) => {
            if own_tx {
                if let Some(tx) = x.s.tx.running.take() {
                    sh.writes().abort(*tx);
                }
            }
            resp::error(
                x.out,
                match why {
                    Stop::Killed => "ERR Script killed by user with SCRIPT KILL... (its writes were discarded)",
                    Stop::TimeLimit => "ERR Script ran past the 5 s time limit and was stopped (its writes were discarded)",
                },
            )
        }
    }
}

/// One command of a script, through the dispatcher: its reply.
fn one_command(
    (sh, d): (&Shared, &Dispatcher),
    s: &mut Session,
    reads: &mut Reads,
    cmd: &[Vec<u8>],
    ro: bool,
) -> Reply {
    let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
    let mut out = Vec::new();
    // The gate refuses what scripts may not run (unknown, `noscript`, writes from a
    // read-only script...) with Redis's errors, which the script sees as error replies.
    s.scripting = true;
    (d.run)(
        sh,
        s,
        (d.find)(args[0]),
        &args,
        From::Script { ro },
        reads,
        &mut out,
    );
    s.scripting = false;
    let limits = Limits {
        max_value: usize::MAX / 4,
        max_array: usize::MAX / 4,
        ..Limits::default()
    };
    match resp::parse_reply(&out, &limits) {
        Ok(Some((v, _))) => v,
        _ => Reply::Error("ERR the command gave no reply".into()),
    }
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL ...`.
pub fn script(x: &mut Call<'_, '_>) {
    let scripts: Arc<Scripts> = x.s.global.scripts.clone();
    let sub = x.args[1].to_ascii_uppercase();
    let bodies = || scripts.bodies.lock().unwrap_or_else(|e| e.into_inner());
    match (sub.as_slice(), &x.args[2..]) {
        (b"LOAD", [body]) => {
            let sha = sha1_hex(body);
            bodies()
                .entry(sha.clone())
                .or_insert_with(|| Arc::new(body.to_vec()));
            resp::bulk(x.out, Some(sha.as_bytes()))
        }
        (b"EXISTS", shas) if !shas.is_empty() => {
            let b = bodies();
            resp::array(x.out, shas.len());
            for sha in shas {
                let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
                resp::integer(x.out, i64::from(b.contains_key(&sha)));
            }
        }
        (b"FLUSH", [] | [_]) => {
            if let [mode] = &x.args[2..] {
                if !mode.eq_ignore_ascii_case(b"ASYNC") && !mode.eq_ignore_ascii_case(b"SYNC") {
                    return resp::error(x.out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
            }
            bodies().clear();
            resp::simple(x.out, "OK")
        }
        (b"KILL", []) => {
            if scripts.running.load(Ordering::SeqCst) == 0 {
                return resp::error(x.out, "NOTBUSY No scripts in execution right now.");
            }
            scripts.kill.store(true, Ordering::SeqCst);
            resp::simple(x.out, "OK")
        }
        _ => resp::error(
            x.out,
            &format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try SCRIPT HELP.",
                String::from_utf8_lossy(x.args[1])
            ),
        ),
    }
}

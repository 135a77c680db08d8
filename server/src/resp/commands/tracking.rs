//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO (client-side caching, `tracking.rs`),
//! with Redis 7's options, errors and replies.

use crate::core::shared::Shared;
use crate::resp::reply::upper;
use crate::resp::session::{Session, Tracked};
use crate::resp::tracking::Options;
use accelkv_proto::resp;

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]`.
pub fn tracking(sh: &Shared, s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let on = match c.get(2).map(|a| upper(a)).as_deref() {
        Some(b"ON") => true,
        Some(b"OFF") => false,
        _ => return resp::error(out, "ERR syntax error"),
    };
    let opts = match options(sh, &c[3..]) {
        Ok(o) => o,
        Err(e) => return resp::error(out, &e),
    };
    if !on {
        s.tracking = None;
        return resp::simple(out, "OK");
    }
    let old = s.tracking.as_ref().map(|t| t.opts.clone());
    if let Err(e) = check(&opts, old.as_ref()) {
        return resp::error(out, &e);
    }
    let mut opts = opts;
    if let Some(old) = old {
        // Enabled again: the prefixes add up, as in Redis.
        let mut prefixes = old.prefixes;
        prefixes.extend(opts.prefixes);
        opts.prefixes = prefixes;
    }
    let Some(me) = crate::resp::commands::pubsub::subscriptions(s).map(|sub| sub.me()) else {
        return resp::error(out, "ERR this connection cannot track keys");
    };
    // The old registration goes before the new one is made (both are this connection's).
    s.tracking = None;
    s.tracking = Some(Box::new(Tracked::start(&s.global, s.id, opts, me)));
    resp::simple(out, "OK")
}

fn options(sh: &Shared, args: &[&[u8]]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let more = i + 1 < args.len();
        match upper(args[i]).as_slice() {
            b"REDIRECT" if more => {
                if o.redirect != 0 {
                    return Err("ERR A client can only redirect to a single other client".into());
                }
                let id = crate::resp::reply::parse_i64(args[i + 1])
                    .ok_or("ERR value is not an integer or out of range")?;
                if id <= 0 || sh.clients().list(Some(&[id as u64]), None, None).is_empty() {
                    return Err("ERR The client ID you want redirect to does not exist".into());
                }
                o.redirect = id as u64;
                i += 1;
            }
            b"PREFIX" if more => {
                o.prefixes.push(args[i + 1].to_vec());
                i += 1;
            }
            b"BCAST" => o.bcast = true,
            b"OPTIN" => o.optin = true,
            b"OPTOUT" => o.optout = true,
            b"NOLOOP" => o.noloop = true,
            _ => return Err("ERR syntax error".into()),
        }
        i += 1;
    }
    Ok(o)
}

/// Redis's checks of an ON, against the options already on (`old`).
fn check(o: &Options, old: Option<&Options>) -> Result<(), String> {
    if !o.bcast && !o.prefixes.is_empty() {
        return Err("ERR PREFIX option requires BCAST mode to be enabled".into());
    }
    if old.is_some_and(|old| old.bcast != o.bcast) {
        return Err("ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    if o.bcast && (o.optin || o.optout) {
        return Err("ERR OPTIN and OPTOUT are not compatible with BCAST".into());
    }
    if o.optin && o.optout {
        return Err("ERR You can't specify both OPTIN mode and OPTOUT mode".into());
    }
    if old.is_some_and(|old| (o.optin && old.optout) || (o.optout && old.optin)) {
        return Err("ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.".into());
    }
    let text = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
    for (i, p) in o.prefixes.iter().enumerate() {
        if let Some(q) = old
            .into_iter()
            .flat_map(|old| &old.prefixes)
            .find(|q| overlap(p, q) && p != *q)
        {
            return Err(format!("ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(q)));
        }
        if let Some(q) = o.prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
            return Err(format!("ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.", text(p), text(q)));
        }
    }
    Ok(())
}

fn overlap(a: &[u8], b: &[u8]) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// `CLIENT CACHING YES|NO`: whether the next command's keys are tracked (OPTIN: yes;
/// OPTOUT: no).
pub fn caching(s: &mut Session, c: &[&[u8]], out: &mut Vec<u8>) {
    let Some(t) = s
        .tracking
        .as_mut()
        .filter(|t| t.opts.optin || t.opts.optout)
    else {
        return resp::error(out, "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled");
    };
    match upper(c[2]).as_slice() {
        b"YES" if t.opts.optin => t.caching = Some(true),
        b"YES" => {
            return resp::error(
                out,
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            )
        }
        b"NO" if t.opts.optout => t.caching = Some(false),
        b"NO" => {
            return resp::error(
                out,
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            )
        }
        _ => return resp::error(out, "ERR syntax error"),
    }
    resp::simple(out, "OK")
}

/// `CLIENT GETREDIR`: -1 while not tracking, else the REDIRECT client (0: none).
pub fn getredir(s: &Session, out: &mut Vec<u8>) {
    resp::integer(
        out,
        s.tracking.as_ref().map_or(-1, |t| t.opts.redirect as i64),
    )
}

/// `CLIENT TRACKINGINFO`: flags, redirect, prefixes.
pub fn trackinginfo(sh: &Shared, s: &Session, out: &mut Vec<u8>) {
    let v = s.proto;
    resp::map(out, 3, v);
    resp::bulk(out, Some(b"flags"));
    let mut flags: Vec<&str> = Vec::new();
    match &s.tracking {
        None => flags.push("off"),
        Some(t) => {
            flags.push("on");
            for (on, name) in [
                (t.opts.bcast, "bcast"),
                (t.opts.optin, "optin"),
                (t.opts.optout, "optout"),
                (t.caching == Some(true), "caching-yes"),
                (t.caching == Some(false), "caching-no"),
                (t.opts.noloop, "noloop"),
            ] {
                if on {
                    flags.push(name);
                }
            }
            let gone = t.opts.redirect != 0
                && sh
                    .clients()
                    .list(Some(&[t.opts.redirect]), None, None)
                    .is_empty();
            if gone {
                flags.push("broken_redirect");
            }
        }
    }
    resp::set(out, flags.len(), v);
    for f in flags {
        resp::bulk(out, Some(f.as_bytes()));
    }
    resp::bulk(out, Some(b"redirect"));
    resp::integer(
        out,
        s.tracking.as_ref().map_or(-1, |t| t.opts.redirect as i64),
    );
    resp::bulk(out, Some(b"prefixes"));
    // In byte order, as Redis keeps them.
    let mut prefixes = s
        .tracking
        .as_ref()
        .map(|t| t.opts.prefixes.clone())
        .unwrap_or_default();
    prefixes.sort();
    resp::array(out, prefixes.len());
    for p in prefixes {
        resp::bulk(out, Some(&p));
    }
}

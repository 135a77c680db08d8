//! Pub/sub commands (`resp/pubsub.rs` holds the subscriptions and the queues): SUBSCRIBE,
//! PSUBSCRIBE and SSUBSCRIBE and their UN- forms, each answering one reply per name with
//! the connection's count of subscriptions; PUBLISH and SPUBLISH, answering how many
//! received the message; PUBSUB's introspection. In RESP2 a connection with a subscription
//! runs only these, PING, QUIT and RESET (the gate refuses the rest, as Redis does); in
//! RESP3 it runs everything, and messages arrive as pushes between replies.

use crate::resp::call::Call;
use crate::resp::pubsub::{PushTo, Space, Subscriptions};
use crate::resp::session::Session;
use accelkv_proto::resp::{self, Version};

/// `SUBSCRIBE channel [channel ...]`.
pub fn subscribe(x: &mut Call<'_, '_>) {
    subscribe_in(x, Space::Channel)
}

/// `PSUBSCRIBE pattern [pattern ...]`.
pub fn psubscribe(x: &mut Call<'_, '_>) {
    subscribe_in(x, Space::Pattern)
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`.
pub fn ssubscribe(x: &mut Call<'_, '_>) {
    subscribe_in(x, Space::Shard)
}

/// `UNSUBSCRIBE [channel ...]` (none: every channel).
pub fn unsubscribe(x: &mut Call<'_, '_>) {
    unsubscribe_in(x, Space::Channel)
}

/// `PUNSUBSCRIBE [pattern ...]`.
pub fn punsubscribe(x: &mut Call<'_, '_>) {
    unsubscribe_in(x, Space::Pattern)
}

/// `SUNSUBSCRIBE [shardchannel ...]`.
pub fn sunsubscribe(x: &mut Call<'_, '_>) {
    unsubscribe_in(x, Space::Shard)
}

/// `PUBLISH channel message`: how many subscribers (by channel and by pattern) got it.
pub fn publish(x: &mut Call<'_, '_>) {
    let n = x.s.global.pubsub.publish(false, x.args[1], x.args[2]);
    resp::integer(x.out, n as i64)
}

/// `SPUBLISH shardchannel message`.
pub fn spublish(x: &mut Call<'_, '_>) {
    let n = x.s.global.pubsub.publish(true, x.args[1], x.args[2]);
    resp::integer(x.out, n as i64)
}

/// One subscription's reply: `[verb, name, count]` (a push in RESP3).
fn notice(out: &mut Vec<u8>, verb: &[u8], name: Option<&[u8]>, count: usize, v: Version) {
    resp::push(out, 3, v);
    resp::bulk(out, Some(verb));
    resp::bulk_in(out, name, v);
    resp::integer(out, count as i64);
}

/// The count a reply of `space` carries: channels and patterns together, or shard
/// channels alone (Redis 7's counts).
fn count(subs: Option<&Subscriptions>, space: Space) -> usize {
    let (all, shard) = subs.map_or((0, 0), Subscriptions::counts);
    match space {
        Space::Shard => shard,
        _ => all,
    }
}

/// The connection's subscriptions, made at its first subscription (`None`: it has no
/// event loop to push to, as a cluster range's applied commands have not).
pub(crate) fn subscriptions(s: &mut Session) -> Option<&mut Subscriptions> {
    if s.sub.is_none() {
        let to: PushTo = s.push_to.take()?;
        let resp3 = s.proto == Version::Resp3;
        let registry = s.global.pubsub.clone();
        s.sub = Some(Box::new(Subscriptions::new(registry, s.id, resp3, to)));
    }
    s.sub.as_deref_mut()
}

fn subscribe_in(x: &mut Call<'_, '_>, space: Space) {
    let v = x.s.proto;
    let Some(subs) = subscriptions(x.s) else {
        return resp::error(x.out, "ERR this connection cannot subscribe");
    };
    for name in &x.args[1..] {
        subs.add(space, name);
        notice(
            x.out,
            space.verbs().0,
            Some(name),
            count(Some(subs), space),
            v,
        );
    }
}

fn unsubscribe_in(x: &mut Call<'_, '_>, space: Space) {
    let (v, verb) = (x.s.proto, space.verbs().1);
    let names: Vec<Vec<u8>> = match (x.args.len(), x.s.sub.as_deref()) {
        (1, Some(subs)) => subs.names(space),
        (1, None) => Vec::new(),
        _ => x.args[1..].iter().map(|n| n.to_vec()).collect(),
    };
    if names.is_empty() {
        return notice(x.out, verb, None, count(x.s.sub.as_deref(), space), v);
    }
    for name in &names {
        if let Some(subs) = x.s.sub.as_deref_mut() {
            subs.remove(space, name);
        }
        notice(x.out, verb, Some(name), count(x.s.sub.as_deref(), space), v);
    }
}

/// Ends every subscription of the connection, and MONITOR mode (RESET).
pub fn end_all(s: &mut Session) {
    if let Some(subs) = s.sub.as_deref_mut() {
        subs.end_monitor();
        for space in [Space::Channel, Space::Pattern, Space::Shard] {
            for name in subs.names(space) {
                subs.remove(space, &name);
            }
        }
    }
}

const HELP: &[&str] = &[
    "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CHANNELS [<pattern>]",
    "    Return the currently active channels matching a <pattern> (default: '*').",
    "NUMPAT",
    "    Return number of subscriptions to patterns.",
    "NUMSUB [<channel> ...]",
    "    Return the number of subscribers for the specified channels, excluding",
    "    pattern subscriptions(default: no channels).",
    "SHARDCHANNELS [<pattern>]",
    "    Return the currently active shard level channels matching a <pattern> (default: '*').",
    "SHARDNUMSUB [<shardchannel> ...]",
    "    Return the number of subscribers for the specified shard level channel(s)",
    "HELP",
    "    Prints this help.",
];

/// `PUBSUB CHANNELS | NUMSUB | NUMPAT | SHARDCHANNELS | SHARDNUMSUB | HELP`.
pub fn pubsub(x: &mut Call<'_, '_>) {
    let (reg, c, out) = (&x.s.global.pubsub, x.args, &mut *x.out);
    let sub = c[1].to_ascii_uppercase();
    let names = |space: Space, out: &mut Vec<u8>| {
        let all = reg.names(space, c.get(2).copied());
        resp::array(out, all.len());
        for n in &all {
            resp::bulk(out, Some(n));
        }
    };
    let numsub = |space: Space, out: &mut Vec<u8>| {
        resp::array(out, (c.len() - 2) * 2);
        for n in &c[2..] {
            resp::bulk(out, Some(n));
            resp::integer(out, reg.count(space, n) as i64);
        }
    };
    match (sub.as_slice(), c.len()) {
        (b"CHANNELS", 2 | 3) => names(Space::Channel, out),
        (b"SHARDCHANNELS", 2 | 3) => names(Space::Shard, out),
        (b"NUMSUB", _) => numsub(Space::Channel, out),
        (b"SHARDNUMSUB", _) => numsub(Space::Shard, out),
        (b"NUMPAT", 2) => resp::integer(out, reg.len(Space::Pattern) as i64),
        (b"HELP", 2) => {
            resp::array(out, HELP.len());
            for l in HELP {
                resp::simple(out, l);
            }
        }
        (b"CHANNELS" | b"SHARDCHANNELS" | b"NUMPAT" | b"HELP", _) => resp::error(
            out,
            &format!(
                "ERR wrong number of arguments for 'pubsub|{}' command",
                String::from_utf8_lossy(c[1]).to_lowercase()
            ),
        ),
        _ => resp::error(
            out,
            &format!(
                "ERR unknown subcommand '{}'. Try PUBSUB HELP.",
                String::from_utf8_lossy(c[1])
            ),
        ),
    }
}

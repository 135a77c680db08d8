//! The RESP listener's adapter ([`RespProtocol`]) and the event loop's side of a RESP
//! connection: its input runs through `batch.rs`, its leading GETs may be gathered with
//! other connections' (net/gather.rs), and a cluster settlement reaches its session here.

use crate::core::clients::{ClientLimit, Measured};
use crate::core::counters::Proto;
use crate::core::route::{Settled, Settlement};
use crate::core::shared::Shared;
use crate::net::session::{withhold, Buffers, LoopCtx, NewConn, Protocol, Ran, Rests};
use crate::resp::batch::Scratch;
use crate::resp::door::get_reply;
use crate::resp::gate;
use crate::resp::session::{RespGlobal, Session};
use crate::resp::streamed;
use accelkv_engine::Found;
use accelkv_proto::resp;
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    /// Each event loop's reusable buffers for RESP batches (a loop is a thread).
    static SCRATCH: RefCell<Scratch> = RefCell::default();
    /// Argument offsets while looking for GETs to gather.
    static SPANS: RefCell<Vec<(usize, usize)>> = const { RefCell::new(Vec::new()) };
}

/// The RESP listener's adapter.
pub struct RespProtocol {
    sh: Arc<Shared>,
    global: Arc<RespGlobal>,
}

impl RespProtocol {
    pub fn new(sh: Arc<Shared>, global: Arc<RespGlobal>) -> RespProtocol {
        RespProtocol { sh, global }
    }
}

impl Protocol for RespProtocol {
    fn session(&self, c: &NewConn) -> Box<dyn crate::net::session::Session> {
        let client_id = self.sh.next_client_id();
        let reg = self.sh.clients().register(
            client_id,
            (c.loop_index, c.slot, c.id),
            (c.peer, c.local),
            c.fd,
        );
        let mut s = Session::new(client_id, Some(reg), self.global.clone());
        let epoch = self.sh.acl().epoch();
        s.login(self.sh.acl().default_user(), epoch);
        Box::new(s)
    }

    fn refusal(&self) -> &'static [u8] {
        b"-ERR max number of clients reached\r\n"
    }
}

/// What a run of a connection's input did, in the RESP adapter's terms.
struct Input {
    used: usize,
    bad: Option<accelkv_proto::RespError>,
    stream: Option<usize>,
}

impl Session {
    /// Runs the input: first the command being streamed, if any (`streamed.rs`), then the
    /// complete commands as one pipeline (`batch.rs`); a command left incomplete inside a
    /// big bulk string starts streaming.
    fn run_input(&mut self, input: &[u8], cx: &mut LoopCtx<'_>) -> Input {
        let sh = cx.sh;
        self.refresh_db(sh);
        let mut from = 0;
        if self.streamed.is_some() {
            let st = streamed::resume(sh, self, input, cx.reads, cx.out);
            if !st.done || st.bad.is_some() {
                return Input {
                    used: st.used,
                    bad: st.bad,
                    stream: st.stream,
                };
            }
            from = st.used;
        }
        let ran = SCRATCH.with(|sc| {
            let sc = &mut *sc.borrow_mut();
            crate::resp::batch::run(sh, self, &input[from..], cx.reads, sc, cx.out, cx.max_out)
        });
        let used = from + ran.used;
        let stream = match ran.bad {
            None => streamed::start(sh, self, &input[used..]),
            Some(_) => None,
        };
        match stream {
            Some((header, len)) => Input {
                used: used + header,
                bad: None,
                stream: Some(len),
            },
            None => Input {
                used,
                bad: ran.bad,
                stream: None,
            },
        }
    }
}

/// Whether `b` starts with a RESP `GET` of one key (`*2\r\n$3\r\nGET\r\n`, any case): a
/// cheap test before decoding, so other commands cost nothing here.
fn starts_get(b: &[u8]) -> bool {
    b.len() >= 13
        && &b[..8] == b"*2\r\n$3\r\n"
        && b[8..11].eq_ignore_ascii_case(b"GET")
        && &b[11..13] == b"\r\n"
}

impl Session {
    /// Whether this connection's user may run `spec` (GET) on `key`: its rules alone, for
    /// a command whose other checks passed for this connection a moment before.
    fn may_read(&self, spec: Option<&'static crate::resp::call::Spec>, key: &[u8]) -> bool {
        let (Some(user), Some(spec)) = (self.user.as_ref(), spec) else {
            return false;
        };
        let pos = crate::resp::table::position(spec);
        crate::resp::acl::check::reads_key(user, pos, key)
    }
}

impl crate::net::session::Session for Session {
    fn protocol(&self) -> Proto {
        Proto::Resp
    }

    fn run(&mut self, input: &[u8], cx: &mut LoopCtx<'_>) -> Ran {
        let start = Instant::now();
        let sh = cx.sh;
        if self.push_to.is_none() && self.sub.is_none() {
            // Once per connection: how pub/sub messages reach it (commands/pubsub.rs).
            let (notify, kill) = cx.reply_to.pusher();
            self.push_to = Some(crate::resp::pubsub::PushTo { notify, kill });
        }
        let ran = self.run_input(input, cx);
        if ran.used > 0 {
            let elapsed = start.elapsed();
            sh.record_latency(Proto::Resp, elapsed);
            self.global.cmdstats.charge_noted(elapsed);
        }
        // It may have stopped at a command routed to its range's group (cluster mode).
        let mut waits = false;
        if let (Some(f), Some(cl)) = (self.cluster.forward.take(), sh.router()) {
            waits = true;
            let send = cx.reply_to.sender();
            cl.submit(f, Box::new(move |s| send(Settlement::Command(s))));
        }
        if let Some(req) = self.block.req.take() {
            waits = true;
            let send = cx.reply_to.sender();
            self.block.ticket = Some(sh.blocked().park(
                (
                    req.keys,
                    crate::core::blocked::Who {
                        client: self.id,
                        on_nokey: req.on_nokey,
                        takes: req.takes,
                        behind: req.behind,
                        unblocked: self.block.unblocked.clone(),
                    },
                ),
                req.deadline,
                req.seen,
                Box::new(move || send(Settlement::Wake)),
            ));
        } else if self.block.ticket.as_ref().is_some_and(|t| !t.parked()) {
            // A woken command ran and did not park again (it answered, or was refused): its
            // place goes, passing on the turns it held, and it is parked no more.
            self.block.ticket = None;
            (self.block.until, self.block.after) = (None, None);
        }
        self.note_client(None);
        Ran {
            used: ran.used,
            close: ran.bad.is_some() || self.quit,
            bad: ran.bad.is_some(),
            rests: Rests::Stream {
                version: std::mem::take(&mut self.unreleased),
                wrote: std::mem::take(&mut self.wrote),
            },
            waits,
            awaiting: None,
            stream: ran.stream,
        }
    }

    fn pushed(&mut self, out: &mut Vec<u8>) {
        if let Some(sub) = &self.sub {
            sub.take_into(out);
        }
    }

    /// Its class's `client-output-buffer-limit` (pubsub while it holds a subscription,
    /// normal otherwise) against its replies not yet written and its queued messages.
    fn output_over(&mut self, pending: usize) -> bool {
        use crate::resp::output_limits::Class;
        let (class, queued) = match &self.sub {
            Some(s) if s.any() => (Class::Pubsub, s.queued()),
            _ => (Class::Normal, 0),
        };
        let limit = self.global.output_limits.get(class);
        if limit == Default::default() {
            return false;
        }
        let over = limit.exceeded(
            (pending + queued) as u64,
            &mut self.past_soft,
            Instant::now(),
        );
        if over {
            tracing::debug!(
                id = self.id,
                "client closed: client-output-buffer-limit reached"
            );
        }
        over
    }

    fn measured(&mut self, sh: &Shared, b: Buffers, before_run: bool) -> bool {
        let Some(r) = &self.client else {
            return false;
        };
        if before_run && r.clients().limit() == ClientLimit::Bytes(0) {
            return false;
        }
        let (streamed, waiting, other) = self.memory();
        r.measure(Measured {
            qbuf: (b.qbuf + streamed) as u64,
            omem: (b.pending + waiting) as u64,
            // Replies count while unwritten, not the buffer kept between them, so a
            // connection's measure does not move with the size of its last reply.
            total: (b.input + streamed + b.pending + waiting + other) as u64,
        });
        let maxmemory = sh.memory_cap() as u64;
        r.clients().over(maxmemory) && r.clients().evict(maxmemory, self.id)
    }

    fn streamed(&mut self, arg: Vec<u8>) {
        if let Some(st) = &mut self.streamed {
            st.streamed(arg);
        }
    }

    fn ready(&self) -> bool {
        self.streamed.as_ref().is_some_and(|st| st.ready())
    }

    fn on_input(&mut self, now: Instant) {
        if let Some(r) = &self.client {
            r.entry.touch(now);
        }
        // Cluster mode: a read barrier covers what was read before it.
        self.cluster.barrier_ok = false;
    }

    fn gathers(&self) -> bool {
        true
    }

    fn gather(
        &self,
        sh: &Shared,
        input: &[u8],
        out: usize,
        room: usize,
        keys: &mut Vec<(usize, usize)>,
    ) -> usize {
        // A GET of one key, as the gate would judge it now (the connection's state is the
        // same for every GET gathered from it; a user whose rules restrict anything has
        // each key checked, and the first refused is left to the connection's own run,
        // which refuses and logs it). A connection with a write not yet released is left
        // to its own run, which waits for it: the gather does not spin.
        let get = crate::resp::table::find(b"GET");
        let open = self.acl_open;
        if self.quit
            || self.unreleased > 0
            || self.streamed.is_some()
            || !self.may_batch_reads()
            || (open && !gate::runs(sh, self, get, &[b"GET", b""]))
        {
            return 0;
        }
        let (limits, max_out) = (&sh.settings().limits, sh.settings().max_output);
        // As many as fit under the output limit, judging by this connection's replies so far.
        let per_reply = match self.reply_hint {
            0 => limits.max_value,
            n => n,
        };
        let want = ((max_out + 1 - out) / per_reply.max(1)).clamp(1, room);
        let first_key = keys.len();
        SPANS.with(|spans| {
            let spans = &mut *spans.borrow_mut();
            let mut at = 0;
            while keys.len() < want && starts_get(&input[at..]) {
                spans.clear();
                match resp::parse_command_spans(&input[at..], limits, spans) {
                    Ok(Some(used)) if spans.len() == 2 => {
                        let (x, y) = spans[1];
                        let key = &input[at + x..at + y];
                        // The first key passes the whole gate; the others, which share the
                        // connection's state, only the user's key patterns.
                        let pass = |first: bool| match first {
                            true => gate::runs(sh, self, get, &[b"GET", key]),
                            false => self.may_read(get, key),
                        };
                        if !open && !pass(keys.len() == first_key) {
                            break;
                        }
                        keys.push((at + x, at + y));
                        at += used;
                    }
                    _ => break, // incomplete or malformed: the normal run deals with it
                }
            }
            at
        })
    }

    fn gathered_reply(&self, _key: &[u8], found: Found<'_>, out: &mut Vec<u8>) {
        // Gathered GETs run inline: their answers carry flags.
        get_reply(out, found, self.proto, false, None);
    }

    fn gathered(&mut self, sh: &Shared, k: usize, bytes: usize, took: std::time::Duration) {
        self.reply_hint = bytes / k.max(1);
        if let Some(get) = crate::resp::table::find(b"GET") {
            self.last_cmd.set(get.name);
            let at = crate::resp::table::position(get);
            self.global.cmdstats.counted(at, k as u64, took);
        }
        sh.metrics()
            .hot()
            .resp_commands
            .fetch_add(k as u64, Ordering::Relaxed);
    }

    fn settle(
        &mut self,
        _sh: &Shared,
        mark: Option<usize>,
        result: Result<(), String>,
        out: &mut Vec<u8>,
    ) -> bool {
        withhold(mark, result, out, "-ERR")
    }

    fn deliver(&mut self, s: Settlement) {
        if let Settlement::Command(settled) = s {
            match settled {
                Settled::Reply(r) => self.cluster.answer = Some(r),
                Settled::Replies(r) => {
                    let mut r = std::collections::VecDeque::from(r);
                    self.cluster.answer = r.pop_front();
                    self.cluster.more = r;
                }
                Settled::Granted => self.cluster.barrier_ok = true,
                // Routed again from the start when the loop serves it.
                Settled::Again => {}
            }
        }
        // Settlement::Wake: the parked blocking command runs again when the loop serves it.
    }

    fn abandon_wait(&mut self) -> bool {
        // A parked blocking command, or a command CLIENT PAUSE holds (parked, no deadline
        // of its own).
        if self.block.until.is_none() && self.block.ticket.is_none() {
            return false;
        }
        self.block = Default::default();
        true
    }

    /// A command holding two values of the largest size, or a binary frame's limit.
    fn max_request(&self, limits: &accelkv_proto::Limits) -> usize {
        limits.max_resp_command()
    }

    fn too_large(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR Protocol error: command too large\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::starts_get;

    #[test]
    fn recognises_only_a_get_of_one_key() {
        assert!(starts_get(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"));
        assert!(starts_get(b"*2\r\n$3\r\nget\r\n$1\r\n"));
        assert!(!starts_get(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"));
        assert!(!starts_get(b"*3\r\n$3\r\nGET\r\n"));
        assert!(!starts_get(b"GET k\r\n"));
        assert!(!starts_get(b"*2\r\n$3\r\nGE"));
    }
}

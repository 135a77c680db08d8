//! The one boundary between the network layer and a protocol adapter. A listener's adapter
//! ([`Protocol`]) makes a [`Session`] for each connection it accepts; the event loop hands
//! the session the connection's buffered input with a [`LoopCtx`] and gets back a [`Ran`]:
//! how much input it used and what its replies rest on. A datagram port ([`Port`]) is the
//! same for a UDP socket. Nothing here knows a protocol; nothing in an adapter knows a
//! socket, a poll set or another connection.

use crate::core::counters::Proto;
use crate::core::reads::{Answered, Reads};
use crate::core::route::Settlement;
use crate::core::shared::Shared;
use crate::net::mailbox::{Mailbox, Release};
use accelkv_engine::Found;
use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;

/// What the loop lends a session for one run of its input.
pub struct LoopCtx<'a> {
    pub sh: &'a Arc<Shared>,
    /// The loop's read door.
    pub reads: &'a mut Reads,
    /// The connection's replies (append only).
    pub out: &'a mut Vec<u8>,
    /// Stop running requests once `out` holds more than this (backpressure).
    pub max_out: usize,
    /// Bytes at the front of `out` already written to the socket.
    pub sent: usize,
    /// Where another thread posts what this connection waits for.
    pub reply_to: ReplyTo<'a>,
}

/// A connection's address on its loop, for a message from another thread.
pub struct ReplyTo<'a> {
    pub(crate) mailbox: &'a Arc<Mailbox>,
    pub(crate) slot: usize,
    pub(crate) id: u64,
}

impl ReplyTo<'_> {
    /// A callback (for any thread) that hands its [`Settlement`] to the connection's
    /// session ([`Session::deliver`]) on its loop's thread and lets its input run again.
    pub fn sender(&self) -> impl FnOnce(Settlement) + Send + 'static {
        let (mb, slot, id) = (self.mailbox.clone(), self.slot, self.id);
        move |settled| mb.post(Release::Settled { slot, id, settled })
    }

    /// Two callbacks (for any thread): one asks the loop to send what the connection has
    /// queued ([`Session::pushed`]), the other to close it.
    #[allow(clippy::type_complexity)]
    pub fn pusher(&self) -> (Box<dyn Fn() + Send + Sync>, Box<dyn Fn() + Send + Sync>) {
        let (mb, slot, id) = (self.mailbox.clone(), self.slot, self.id);
        let kill = mb.clone();
        (
            Box::new(move || mb.post(Release::Push { slot, id })),
            Box::new(move || kill.post(Release::Kill { slot, id })),
        )
    }
}

/// What the replies a run appended rest on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Rests {
    /// Nothing: they may be sent at once.
    #[default]
    Nothing,
    /// The replies appended in this run wait for write `version` to be visible to readers
    /// (0: none) and, when the run `wrote` and the sync policy asks, to be durable.
    Stream { version: u64, wrote: bool },
    /// The session holds a reply of its own, not in `out` (a binary frame, encoded once
    /// settled): it is settled ([`Session::settle`]) once write `version` is visible and,
    /// when `durable`, durable.
    Held { version: u64, durable: bool },
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Ran {
    /// Input bytes consumed (complete requests).
    pub used: usize,
    /// Close the connection once its replies are written (QUIT, or malformed input).
    pub close: bool,
    /// The input was malformed (counted as bad input).
    pub bad: bool,
    pub rests: Rests,
    /// A request waits for a message another thread posts through [`LoopCtx::reply_to`]
    /// (cluster mode): nothing more of its input runs until then.
    pub waits: bool,
    /// Reads submitted to an engine's workers that the session took the wait of itself
    /// (otherwise the loop asks the read door): nothing more runs until they are answered.
    pub awaiting: Option<u64>,
    /// The next this many input bytes after `used` are one argument the session wants in
    /// memory of its own (a big value): the loop reads them into an allocation of exactly
    /// that size and hands it over ([`Session::streamed`]) before running the input again.
    pub stream: Option<usize>,
}

/// Whoever waited for reads an engine's workers answered, once they are back.
pub enum Resumed {
    /// Run the input again with these answers (reads have no side effects to repeat).
    Rerun(Answered),
    /// The session's held reply is complete: settle it as [`Rests::Held`] says.
    Held { version: u64, durable: bool },
}

/// What a connection's buffers hold at the end of its loop turn ([`Session::measured`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    /// Input read and not yet run, a big argument read into its own memory included.
    pub qbuf: usize,
    /// The input buffers' allocated size.
    pub input: usize,
    /// Replies in it not yet written.
    pub pending: usize,
}

/// One connection's protocol state: the adapter's side of a connection.
pub trait Session: Send {
    /// Runs the complete requests at the front of `input`, appending replies to `cx.out`.
    fn run(&mut self, input: &[u8], cx: &mut LoopCtx<'_>) -> Ran;
    /// The protocol it speaks (which latency histogram its batches go to).
    fn protocol(&self) -> Proto;

    /// Bytes arrived from the client (activity, and cluster mode's read barrier).
    fn on_input(&mut self, _now: std::time::Instant) {}

    /// The argument [`Ran::stream`] asked for, read whole.
    fn streamed(&mut self, _arg: Vec<u8>) {}

    /// Whether the session holds a complete request that waits to run (one whose input it
    /// has taken already): the loop runs it even with no input buffered.
    fn ready(&self) -> bool {
        false
    }

    /// Whether the loop may read this connection before gathering (protocols with GETs to
    /// gather).
    fn gathers(&self) -> bool {
        false
    }

    /// The GETs at the front of `input` the loop may answer in its batch across
    /// connections (net/gather.rs): pushes each key's offsets in `input` to `keys` (at most
    /// `room`, fewer when the replies would not fit beside the `out` bytes the connection's
    /// output already holds), and returns the input bytes they take. The same rule decides
    /// as this protocol's own run does; anything else is left for [`Session::run`].
    fn gather(
        &self,
        _sh: &Shared,
        _input: &[u8],
        _out: usize,
        _room: usize,
        _keys: &mut Vec<(usize, usize)>,
    ) -> usize {
        0
    }

    /// Appends the reply to one gathered GET of `key`.
    fn gathered_reply(&self, _key: &[u8], _found: Found<'_>, _out: &mut Vec<u8>) {}

    /// `k` gathered GETs were answered with `bytes` of replies in `took` (counters, reply
    /// sizes, their time).
    fn gathered(&mut self, _sh: &Shared, _k: usize, _bytes: usize, _took: std::time::Duration) {}

    /// Reads submitted for this connection (wait `wait`) were answered.
    fn answered(&mut self, _wait: u64, a: Answered) -> Resumed {
        Resumed::Rerun(a)
    }

    /// Settles the replies held since [`Rests`] said so: `Ok` once their writes are visible
    /// (and durable where asked), `Err` with the disk error. `mark`: where this run's
    /// replies start in `out` ([`Rests::Stream`]). Returns whether to close the connection.
    fn settle(
        &mut self,
        sh: &Shared,
        mark: Option<usize>,
        result: Result<(), String>,
        out: &mut Vec<u8>,
    ) -> bool;

    /// A message posted through [`ReplyTo`] (cluster mode, or a blocking command's wake).
    fn deliver(&mut self, _s: Settlement) {}

    /// Appends what other threads queued for the connection to send without a request of
    /// its own (pub/sub messages, posted through [`ReplyTo::pusher`]); the loop asks while
    /// the output is under its limit.
    fn pushed(&mut self, _out: &mut Vec<u8>) {}

    /// The client hung up while a request waits ([`Ran::waits`]): whether the wait may be
    /// dropped (a blocking command, whose wake may never come), dropping it if so. A wait
    /// whose request has effects to settle (cluster mode) answers `false`.
    fn abandon_wait(&mut self) -> bool {
        false
    }

    /// The error to send when a request is larger than the input limit (before closing).
    fn too_large(&self, _out: &mut Vec<u8>) {}

    /// Whether `pending` bytes of replies not yet written (and what the session holds for
    /// the connection to send) pass its output limit: the loop then closes it without
    /// writing them. Asked before each write, so what counts is what was produced.
    fn output_over(&mut self, _pending: usize) -> bool {
        false
    }

    /// The loop measured the connection's buffers at the end of its turn, or, with
    /// `before_run`, before its input runs (as Redis checks before each command, so a
    /// command's big arguments count): the session publishes what the connection holds
    /// (CLIENT LIST, client eviction) and returns whether client eviction chose it, which
    /// the loop then closes without more replies. Before a run it does nothing while no
    /// client memory limit is set.
    fn measured(&mut self, _sh: &Shared, _b: Buffers, _before_run: bool) -> bool {
        false
    }

    /// The largest incomplete request this protocol's input may hold (a binary frame's
    /// limit by default).
    fn max_request(&self, limits: &accelkv_proto::Limits) -> usize {
        limits.max_frame
    }
}

/// A listener's adapter: makes each accepted connection's session.
pub trait Protocol: Send + Sync {
    /// The session of a new connection (`slot`, `id`: its place on loop `loop_index`).
    fn session(&self, c: &NewConn) -> Box<dyn Session>;

    /// What a connection refused for `--max-connections` is told before it is closed.
    fn refusal(&self) -> &'static [u8] {
        b""
    }
}

/// A connection being accepted.
pub struct NewConn {
    pub loop_index: usize,
    pub slot: usize,
    pub id: u64,
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The socket's file descriptor (CLIENT LIST's `fd`).
    pub fd: i32,
}

/// What the loop lends a datagram port.
pub struct PortCtx<'a> {
    pub sh: &'a Arc<Shared>,
    pub reads: &'a mut Reads,
    pub mailbox: &'a Arc<Mailbox>,
    /// This port's number on the loop (for [`Release::Port`]).
    pub index: usize,
}

impl PortCtx<'_> {
    /// Calls [`Port::release`] with `held` on the loop's thread once every write up to
    /// `version` may be answered (see [`Shared::when_durable`]).
    pub fn when_durable(&self, version: u64, held: Box<dyn Any + Send>) {
        let (mb, port) = (self.mailbox.clone(), self.index);
        self.sh.when_durable(
            version,
            Box::new(move |result| mb.post(Release::Port { port, held, result })),
        );
    }
}

/// A UDP socket served by an adapter on every loop.
pub trait Port: Send {
    fn socket_mut(&mut self) -> &mut mio::net::UdpSocket;

    /// Answers every datagram waiting on the socket.
    fn drain(&mut self, cx: &mut PortCtx<'_>);

    /// Reads this port submitted (wait `wait`) were answered.
    fn complete(&mut self, _cx: &mut PortCtx<'_>, _wait: u64, _a: Answered) {}

    /// What the port parked with [`PortCtx::when_durable`] is settled.
    fn release(&mut self, _sh: &Shared, _held: Box<dyn Any + Send>, _result: Result<(), String>) {}
}

/// A listener's port's adapter: makes each loop's handle of a UDP socket.
pub trait Datagrams: Send + Sync {
    fn port(&self, socket: &std::net::UdpSocket) -> std::io::Result<Box<dyn Port>>;
}

/// Settles a text protocol's parked replies: on a disk error they are replaced from `mark`
/// by one error (they cannot be split by command) and the connection closes.
pub fn withhold(
    mark: Option<usize>,
    result: Result<(), String>,
    out: &mut Vec<u8>,
    prefix: &str,
) -> bool {
    let (Some(mark), Err(m)) = (mark, result) else {
        return false;
    };
    out.truncate(mark);
    out.extend_from_slice(
        format!(
            "{prefix} {m} (replies withheld: the writes of this pipeline may or may not be applied)\r\n"
        )
        .as_bytes(),
    );
    true
}

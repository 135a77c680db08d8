//! The memcached adapter's side of a connection: its listener's [`McProtocol`], and the
//! [`Session`] the event loop runs a connection's input through (its one-key `get`s at the
//! head of the input may be gathered with other connections' GETs).

use crate::core::counters::Proto;
use crate::core::shared::Shared;
use crate::memcache::state::{McGlobal, McSession};
use crate::memcache::text::{limits, McScratch};
use crate::net::session::{withhold, LoopCtx, NewConn, Protocol, Ran, Rests, Session};
use accelkv_engine::Found;
use accelkv_proto::memcache::{self as mc, reply as mc_reply};
use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

thread_local! {
    /// Each event loop's reusable buffers for memcached batches (a loop is a thread).
    static SCRATCH: RefCell<McScratch> = RefCell::default();
}

/// The memcached listener's adapter.
pub struct McProtocol(pub Arc<McGlobal>);

impl Protocol for McProtocol {
    fn session(&self, _: &NewConn) -> Box<dyn Session> {
        Box::new(McSession::new(self.0.clone()))
    }

    fn refusal(&self) -> &'static [u8] {
        b"SERVER_ERROR max number of clients reached\r\n"
    }
}

/// The key of a memcached `get` of exactly one key at the front of `b`, as offsets, and
/// the bytes the command takes; `None` for anything else (left to the connection's run).
fn get_one(b: &[u8], limits: &mc::McLimits) -> Option<((usize, usize), usize)> {
    if !b.starts_with(b"get ") {
        return None;
    }
    let Ok(Some((mc::Command::Get { mut keys, .. }, used))) = mc::parse(b, limits) else {
        return None;
    };
    let key = keys.next()?;
    if keys.next().is_some() {
        return None;
    }
    let x = key.as_ptr() as usize - b.as_ptr() as usize;
    Some(((x, x + key.len()), used))
}

impl Session for McSession {
    fn protocol(&self) -> Proto {
        Proto::Memcached
    }

    fn run(&mut self, input: &[u8], cx: &mut LoopCtx<'_>) -> Ran {
        let start = Instant::now();
        let sh = cx.sh;
        let ran = SCRATCH.with(|sc| {
            let sc = &mut *sc.borrow_mut();
            crate::memcache::text::run(sh, self, input, cx.reads, sc, cx.out, cx.max_out)
        });
        if ran.used > 0 {
            sh.record_latency(Proto::Memcached, start.elapsed());
        }
        Ran {
            used: ran.used,
            close: ran.close || self.quit,
            rests: Rests::Stream {
                version: std::mem::take(&mut self.unreleased),
                wrote: std::mem::take(&mut self.wrote),
            },
            ..Ran::default()
        }
    }

    fn gathers(&self) -> bool {
        true
    }

    fn gather(
        &self,
        sh: &Shared,
        input: &[u8],
        _out: usize,
        room: usize,
        keys: &mut Vec<(usize, usize)>,
    ) -> usize {
        if !self.gatherable(!sh.needs_auth()) {
            return 0;
        }
        let lim = limits(sh);
        let mut at = 0;
        while keys.len() < room {
            let Some(((x, y), used)) = get_one(&input[at..], &lim) else {
                break;
            };
            keys.push((at + x, at + y));
            at += used;
        }
        at
    }

    fn gathered_reply(&self, key: &[u8], found: Found<'_>, out: &mut Vec<u8>) {
        // A collection's metadata (a typed item) is nothing memcached can read.
        if let Found::Value(Some(v), flags) = found {
            if !crate::core::ops::typed::is_typed(flags) {
                mc_reply::value(out, key, flags, v, None);
            }
        }
        out.extend_from_slice(b"END\r\n");
    }

    fn gathered(&mut self, sh: &Shared, k: usize, _bytes: usize, _took: std::time::Duration) {
        sh.metrics()
            .hot()
            .memcached_commands
            .fetch_add(k as u64, Ordering::Relaxed);
    }

    fn settle(
        &mut self,
        _sh: &Shared,
        mark: Option<usize>,
        result: Result<(), String>,
        out: &mut Vec<u8>,
    ) -> bool {
        withhold(mark, result, out, "SERVER_ERROR")
    }
}

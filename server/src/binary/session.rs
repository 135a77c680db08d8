//! The binary protocol's side of a TCP connection: its listener's [`BinaryProtocol`], and
//! the [`Session`] the event loop runs a connection's frames through. Frames run in order,
//! one response frame each; a frame whose writes must become visible or durable first (or
//! whose reads went to an engine's workers) is held here, encoded once settled, and nothing
//! after it runs until then.

use crate::binary::execute::Transport;
use crate::binary::frame::{run_frame, Framed, Ran as FrameRan};
use crate::core::counters::Proto;
use crate::core::reads::Answered;
use crate::core::route::{Settled, Settlement};
use crate::core::shared::Shared;
use crate::net::session::{LoopCtx, NewConn, Protocol, Ran, Rests, Resumed, Session};
use accelkv_proto::frame::decode_header;
use accelkv_proto::FrameError;

/// The binary TCP listener's adapter.
pub struct BinaryProtocol;

impl Protocol for BinaryProtocol {
    fn session(&self, _: &NewConn) -> Box<dyn Session> {
        Box::new(BinarySession::default())
    }
}

/// A binary connection's state.
#[derive(Default)]
pub struct BinarySession {
    /// AUTH succeeded on this connection.
    authed: bool,
    /// Cluster mode: what the routed operations of the frame at the head of the input
    /// settled to (it runs again with them).
    settled: Vec<(usize, Settled)>,
    /// The frame whose response waits (for its reads, visibility or durability), with
    /// whether it waits for durability.
    held: Option<(FrameRan, bool)>,
}

impl BinarySession {
    /// Holds `ran`'s response: the run stops here.
    fn hold(&mut self, sh: &Shared, ran: FrameRan, out: &mut Ran) {
        let (version, durable) = (ran.version, ran.must_wait(sh));
        out.awaiting = ran.awaiting();
        out.rests = Rests::Held { version, durable };
        self.held = Some((ran, durable));
    }
}

impl Session for BinarySession {
    fn protocol(&self) -> Proto {
        Proto::Binary
    }

    fn run(&mut self, input: &[u8], cx: &mut LoopCtx<'_>) -> Ran {
        let sh = cx.sh;
        let limits = &sh.settings().limits;
        let mut r = Ran::default();
        while cx.out.len() - cx.sent <= cx.max_out {
            let rest = &input[r.used..];
            let h = match decode_header(rest, limits) {
                Err(FrameError::Incomplete { .. }) => break,
                Ok(h) if rest.len() < h.frame_len => break,
                Ok(h) => h,
                Err(_) => {
                    (r.bad, r.close) = (true, true);
                    break;
                }
            };
            let frame = &rest[..h.frame_len];
            let settled = std::mem::take(&mut self.settled);
            let ran = match run_frame(
                sh,
                frame,
                Transport::Tcp,
                &mut self.authed,
                cx.reads,
                settled,
            ) {
                Ok(Framed::Ran(ran)) => ran,
                Ok(Framed::Routed(forwards)) => {
                    // Cluster mode: the frame waits for its ranges' groups and runs
                    // again, whole, with what they settled to.
                    if let Some(cl) = sh.router() {
                        r.waits = true;
                        let send = cx.reply_to.sender();
                        crate::binary::cluster::submit(cl, forwards, move |s| {
                            send(Settlement::Frame(s))
                        });
                    }
                    break;
                }
                // A write's leaf is being read back: the frame stays in the input and runs
                // again, whole, when the wait is answered (the loop takes the wait).
                Ok(Framed::Later) => break,
                Err(_) => {
                    (r.bad, r.close) = (true, true);
                    break;
                }
            };
            r.used += h.frame_len;
            if ran.awaiting().is_some() || !ran.visible(sh) || ran.must_wait(sh) {
                // Its reads run on an engine's workers, or its writes are not settled yet.
                self.hold(sh, ran, &mut r);
                break;
            }
            ran.finish(sh, Ok(()), cx.out);
        }
        r
    }

    fn answered(&mut self, wait: u64, a: Answered) -> Resumed {
        match &mut self.held {
            Some((ran, durable)) if ran.awaiting() == Some(wait) => {
                // Its answers are complete; release it as any other held frame.
                ran.complete_reads(a.replies);
                Resumed::Held {
                    version: ran.version,
                    durable: *durable,
                }
            }
            _ => Resumed::Rerun(a),
        }
    }

    fn settle(
        &mut self,
        sh: &Shared,
        _mark: Option<usize>,
        result: Result<(), String>,
        out: &mut Vec<u8>,
    ) -> bool {
        if let Some((ran, _)) = self.held.take() {
            ran.finish(sh, result, out);
        }
        false
    }

    fn deliver(&mut self, s: Settlement) {
        if let Settlement::Frame(settled) = s {
            self.settled = settled;
        }
    }
}

//! The one read door of an event loop: every GET, MGET, SCAN, RANGE and FLOOR of a batch,
//! from either protocol, goes through here. With the CPU engine the batch runs inline, on
//! the loop's thread, through the interleaved walk; with the GPU engine it is submitted to
//! the engine's workers and the loop waits for its completions.

use accelkv_engine::{Found, InlineReader, ReadEngine, ReadRef, Sink};
use std::sync::Arc;
use std::time::Duration;

/// A loop's reader.
pub enum Reads {
    /// The CPU engine's interleaved walk on this thread.
    Inline(InlineReader),
    /// Submission to the GPU engine; completions arrive in this sink.
    Engine(Arc<Sink>),
}

impl Reads {
    /// Runs `reqs` and calls `emit(i, answer)` for each `reqs[i]`, in any order. `engine` is
    /// the server's engine (used by the `Engine` variant).
    pub fn run(
        &mut self,
        engine: &dyn ReadEngine,
        reqs: &[ReadRef<'_>],
        mut emit: impl FnMut(usize, Found<'_>),
    ) {
        if reqs.is_empty() {
            return;
        }
        match self {
            Reads::Inline(r) => {
                r.run(reqs, emit);
            }
            Reads::Engine(sink) => {
                let batch = reqs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| (i as u64, r.to_request()))
                    .collect();
                engine.submit(sink, batch);
                let mut done = Vec::with_capacity(reqs.len());
                while done.len() < reqs.len() {
                    let need = reqs.len() - done.len();
                    sink.wait(&mut done, need, Duration::from_secs(30));
                }
                for c in done {
                    emit(c.tag as usize, Found::Reply(c.reply));
                }
            }
        }
    }
}

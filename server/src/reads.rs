//! The one read door of an event loop: every GET, MGET, SCAN, RANGE and FLOOR of a batch,
//! from either protocol, goes through here. With the CPU engine the batch runs inline, on
//! the loop's thread, through the interleaved walk. With an engine that has workers of its
//! own (the GPU engine; the CPU engine with `--engine cpu-threads`) the loop never waits for
//! it: a batch is submitted ([`Ring::submit`]) and the loop goes on serving others; the
//! engine delivers completions into the loop's sink, which wakes the loop, and each turn
//! the loop collects them ([`Ring::poll`]) and resumes whoever waited.
//!
//! How a waiter resumes: a binary frame keeps its answers in its parked frame
//! (`exec::Ran`), filled from the completed wait. A RESP connection stops before the read
//! and leaves it in its input; when the wait completes, its answers are handed back
//! ([`Reads::resume`]) and the connection's input runs again: the same read asks for the
//! same requests and is answered from them ([`Reads::run`]) instead of being submitted.

use accelkv_engine::{Completion, Found, InlineReader, ReadEngine, ReadRef, Reply, Request, Sink};
use std::collections::HashMap;
use std::sync::Arc;

/// Who waits for a submitted batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// A connection of the loop (slot and id).
    Conn { slot: usize, id: u64 },
    /// A datagram parked in the loop's UDP port.
    Datagram,
}

/// The answers of a submitted batch, once all have come.
pub struct Answered {
    /// Who waited.
    pub who: Who,
    /// The requests, in submission order.
    pub reqs: Vec<Request>,
    /// Their replies, in the same order.
    pub replies: Vec<Reply>,
}

struct Wait {
    who: Who,
    reqs: Vec<Request>,
    replies: Vec<Option<Reply>>,
    left: usize,
}

/// Submission to an engine with workers of its own, and the waits in flight.
pub struct Ring {
    sink: Arc<Sink>,
    waits: HashMap<u64, Wait>,
    next: u64,
    taken: Vec<Completion>,
    /// Who the next submission is for (set by the loop before it runs someone's input).
    who: Option<Who>,
    /// The wait submitted since the loop last asked (`Reads::take_submitted`).
    submitted: Option<u64>,
    /// Answers handed back for a re-run (`Reads::resume`).
    ready: Option<(Vec<Request>, Vec<Reply>)>,
}

/// Bits of a tag that index a request within its batch.
const INDEX_BITS: u32 = 20;

impl Ring {
    /// A ring whose sink calls `wake` when completions arrive.
    pub fn new(wake: impl Fn() + Send + Sync + 'static) -> Ring {
        Ring {
            sink: Sink::with_notify(wake),
            waits: HashMap::new(),
            next: 1,
            taken: Vec::new(),
            who: None,
            submitted: None,
            ready: None,
        }
    }

    /// Submits `reqs` for `who` without waiting; returns the wait's id.
    pub fn submit(&mut self, engine: &dyn ReadEngine, who: Who, reqs: Vec<Request>) -> u64 {
        let id = self.next;
        self.next += 1;
        let batch = reqs
            .iter()
            .enumerate()
            .map(|(i, r)| ((id << INDEX_BITS) | i as u64, r.clone()))
            .collect();
        let n = reqs.len();
        self.waits.insert(
            id,
            Wait {
                who,
                reqs,
                replies: (0..n).map(|_| None).collect(),
                left: n,
            },
        );
        engine.submit(&self.sink, batch);
        id
    }

    /// Takes the completions delivered so far and returns every wait now fully answered.
    pub fn poll(&mut self, done: &mut Vec<(u64, Answered)>) {
        self.sink.poll(&mut self.taken);
        for c in self.taken.drain(..) {
            let (id, i) = (
                c.tag >> INDEX_BITS,
                (c.tag & ((1 << INDEX_BITS) - 1)) as usize,
            );
            let Some(w) = self.waits.get_mut(&id) else {
                continue;
            };
            if let Some(slot @ None) = w.replies.get_mut(i) {
                *slot = Some(c.reply);
                w.left -= 1;
            }
            if w.left == 0 {
                if let Some(w) = self.waits.remove(&id) {
                    let replies = w.replies.into_iter().flatten().collect();
                    done.push((
                        id,
                        Answered {
                            who: w.who,
                            reqs: w.reqs,
                            replies,
                        },
                    ));
                }
            }
        }
    }
}

/// A read that has been submitted and is not answered yet: the caller stops and resumes
/// when the loop hands the answers back.
#[derive(Debug, PartialEq, Eq)]
pub struct NotYet;

/// A loop's reader.
pub enum Reads {
    /// The CPU engine's interleaved walk on this thread.
    Inline(InlineReader),
    /// Submission to an engine with workers of its own.
    Ring(Ring),
}

fn same(reqs: &[Request], refs: &[ReadRef<'_>]) -> bool {
    reqs.len() == refs.len() && reqs.iter().zip(refs).all(|(a, b)| a.as_ref() == *b)
}

impl Reads {
    /// Runs `reqs` and calls `emit(i, answer)` for each `reqs[i]`, in any order. Inline, at
    /// once. Through a ring: from the answers handed back by [`Reads::resume`] if they are
    /// for these requests, else submitted for the current waiter ([`Reads::serve`]) and
    /// `Err(NotYet)`: the caller stops before this read and runs it again once resumed.
    pub fn run(
        &mut self,
        engine: &dyn ReadEngine,
        reqs: &[ReadRef<'_>],
        mut emit: impl FnMut(usize, Found<'_>),
    ) -> Result<(), NotYet> {
        if reqs.is_empty() {
            return Ok(());
        }
        match self {
            Reads::Inline(r) => {
                r.run(reqs, emit);
                Ok(())
            }
            Reads::Ring(ring) => {
                if ring.submitted.is_some() {
                    return Err(NotYet); // one wait per waiter at a time
                }
                if let Some((asked, replies)) = ring.ready.take() {
                    if same(&asked, reqs) {
                        for (i, r) in replies.into_iter().enumerate() {
                            emit(i, Found::Reply(r));
                        }
                        return Ok(());
                    }
                }
                let who = ring.who.unwrap_or(Who::Datagram);
                let owned = reqs.iter().map(ReadRef::to_request).collect();
                ring.submitted = Some(ring.submit(engine, who, owned));
                Err(NotYet)
            }
        }
    }

    /// Whether reads complete later (through a ring) rather than at once.
    pub fn is_ring(&self) -> bool {
        matches!(self, Reads::Ring(_))
    }

    /// Sets who the next submissions are for.
    pub fn serve(&mut self, who: Who) {
        if let Reads::Ring(r) = self {
            r.who = Some(who);
        }
    }

    /// The wait submitted since the last call, if any.
    pub fn take_submitted(&mut self) -> Option<u64> {
        match self {
            Reads::Ring(r) => r.submitted.take(),
            Reads::Inline(_) => None,
        }
    }

    /// Hands back a completed wait's answers for the re-run of its waiter's input; whatever
    /// that run does not use is dropped by [`Reads::forget`].
    pub fn resume(&mut self, a: Answered) {
        if let Reads::Ring(r) = self {
            r.ready = Some((a.reqs, a.replies));
        }
    }

    /// Drops answers handed back and not used.
    pub fn forget(&mut self) {
        if let Reads::Ring(r) = self {
            r.ready = None;
        }
    }

    /// Collects the waits fully answered since the last call (none when inline).
    pub fn poll(&mut self, done: &mut Vec<(u64, Answered)>) {
        if let Reads::Ring(r) = self {
            r.poll(done);
        }
    }

    /// Whether a read was submitted since the loop last took it: the current waiter must
    /// stop (and must not submit again) until it is answered.
    pub fn submitted(&self) -> bool {
        matches!(
            self,
            Reads::Ring(Ring {
                submitted: Some(_),
                ..
            })
        )
    }
}

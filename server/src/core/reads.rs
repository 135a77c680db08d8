//! The one read door of an event loop: every GET, MGET, SCAN, RANGE and FLOOR of a batch,
//! from either protocol, goes through here. With the CPU engine the batch runs inline, on
//! the loop's thread, through the interleaved walk. With an engine that has workers of its
//! own (the GPU engine; the CPU engine with `--engine cpu-threads`) the loop never waits for
//! it: a batch is submitted ([`Ring::submit`]) and the loop goes on serving others; the
//! engine delivers completions into the loop's sink, which wakes the loop, and each turn
//! the loop collects them ([`Ring::poll`]) and resumes whoever waited.
//!
//! Data larger than memory (a memory budget over a data directory): the inline walk does
//! not block on a leaf that lives only in the page file either. A batch in which a request
//! reaches one becomes a wait like a ring's: the LIDs go to the engine's loader threads
//! (`accelkv_engine::Loader`), the loop serves others, and when the leaves are back the
//! loop runs the waiting requests again ([`Reads::poll`]) and resumes the waiter with their
//! answers. A resumed run that misses again reads the leaf on the loop's thread, so every
//! waiter makes progress even when its leaves are evicted again in between.
//!
//! How a waiter resumes: a binary frame keeps its answers in its parked frame
//! (`exec::Ran`), filled from the completed wait. A RESP connection stops before the read
//! and leaves it in its input; when the wait completes, its answers are handed back
//! ([`Reads::resume`]) and the connection's input runs again: the same read asks for the
//! same requests and is answered from them ([`Reads::run`]) instead of being submitted.

use accelkv_engine::{
    Completion, Found, InlineReader, LoadSink, Loader, ReadEngine, ReadRef, Reply, Request, Sink,
};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// Who waits for a submitted batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// A connection of the loop (slot and id).
    Conn { slot: usize, id: u64 },
    /// A datagram parked in the loop's datagram port of this number.
    Port(usize),
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

/// Inline reads whose misses wait for the loader threads.
struct Loads {
    loader: Arc<Loader>,
    sink: Arc<LoadSink>,
    /// Per wait: who waits and the requests to run again.
    waits: HashMap<u64, (Who, Vec<Request>)>,
    next: u64,
    done: Vec<u64>,
}

impl Loads {
    /// Submits the leaves `reader`'s last batch missed for `who`, who runs `reqs` again
    /// when they are back; returns the wait's id.
    fn wait(&mut self, reader: &InlineReader, who: Who, reqs: Vec<Request>) -> u64 {
        let mut lids: Vec<u64> = reader.missed().iter().map(|m| m.1).collect();
        lids.sort_unstable();
        lids.dedup();
        let id = self.next;
        self.next += 1;
        self.waits.insert(id, (who, reqs));
        self.loader.submit(lids, id, self.sink.clone());
        id
    }
}

/// A read that has been submitted and is not answered yet: the caller stops and resumes
/// when the loop hands the answers back.
#[derive(Debug, PartialEq, Eq)]
pub struct NotYet;

// One door per loop, made once and never moved: boxing the inline reader would put an
// indirection on every read.
#[allow(clippy::large_enum_variant)]
enum Door {
    /// The CPU engine's interleaved walk on this thread; `loads` when leaves may be evicted.
    Inline {
        reader: InlineReader,
        loads: Option<Loads>,
    },
    /// Submission to an engine with workers of its own.
    Ring(Ring),
}

/// A loop's reader.
pub struct Reads {
    door: Door,
    /// Who the next submissions are for (set by the loop before it runs someone's input).
    who: Option<Who>,
    /// The wait submitted since the loop last asked (`Reads::take_submitted`).
    submitted: Option<u64>,
    /// Answers handed back for a re-run (`Reads::resume`).
    ready: Option<(Vec<Request>, Vec<Reply>)>,
    /// A resumed run is going on: an inline miss reads the leaf on this thread.
    resumed: bool,
}

fn same(reqs: &[Request], refs: &[ReadRef<'_>]) -> bool {
    reqs.len() == refs.len() && reqs.iter().zip(refs).all(|(a, b)| a.as_ref() == *b)
}

impl Reads {
    /// Inline reads through `reader`; with `loader` (a store whose leaves may be evicted),
    /// misses wait for it and `wake` wakes the loop when they may run again.
    pub fn inline(
        reader: InlineReader,
        loader: Option<Arc<Loader>>,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> Reads {
        let loads = loader.map(|loader| Loads {
            loader,
            sink: LoadSink::new(wake),
            waits: HashMap::new(),
            next: 1,
            done: Vec::new(),
        });
        Reads::with(Door::Inline { reader, loads })
    }

    /// Reads submitted to an engine with workers of its own.
    pub fn ring(ring: Ring) -> Reads {
        Reads::with(Door::Ring(ring))
    }

    fn with(door: Door) -> Reads {
        Reads {
            door,
            who: None,
            submitted: None,
            ready: None,
            resumed: false,
        }
    }

    /// Runs `reqs` and calls `emit(i, answer)` for each `reqs[i]`, in any order. Inline, at
    /// once, unless a request reaches a leaf that lives only in the page file. Through a
    /// ring, or after such a miss: from the answers handed back by [`Reads::resume`] if
    /// they are for these requests, else submitted for the current waiter
    /// ([`Reads::serve`]) and `Err(NotYet)`: the caller drops whatever `emit` gave it,
    /// stops before this read and runs it again once resumed.
    pub fn run(
        &mut self,
        engine: &dyn ReadEngine,
        reqs: &[ReadRef<'_>],
        mut emit: impl FnMut(usize, Found<'_>),
    ) -> Result<(), NotYet> {
        if reqs.is_empty() {
            return Ok(());
        }
        if self.submitted.is_some() {
            return Err(NotYet); // one wait per waiter at a time
        }
        if let Some((asked, replies)) = self.ready.take() {
            if same(&asked, reqs) {
                for (i, r) in replies.into_iter().enumerate() {
                    emit(i, Found::Reply(r));
                }
                return Ok(());
            }
        }
        let who = self.who.unwrap_or(Who::Port(0));
        let owned = || reqs.iter().map(ReadRef::to_request).collect();
        match &mut self.door {
            Door::Inline {
                reader,
                loads: None,
            } => {
                reader.run(reqs, emit);
                Ok(())
            }
            Door::Inline {
                reader,
                loads: Some(loads),
            } => {
                reader.set_defer(!self.resumed);
                reader.run(reqs, emit);
                if reader.missed().is_empty() {
                    return Ok(());
                }
                self.submitted = Some(loads.wait(reader, who, owned()));
                Err(NotYet)
            }
            Door::Ring(ring) => {
                self.submitted = Some(ring.submit(engine, who, owned()));
                Err(NotYet)
            }
        }
    }

    /// Before a write: whether the leaves of `keys` are resident. When one lives only in
    /// the page file (and misses wait: a budget, the inline reader), its read-back is
    /// submitted for the current waiter and `Err(NotYet)`: the caller stops before the
    /// write and runs it again once resumed, when the write finds its leaf resident (or, in
    /// that resumed run, reads it itself: a resumed run never waits again). The wait hands
    /// back no answers, so no later read of the same run can take one.
    pub fn probe_write<'k>(&mut self, keys: impl Iterator<Item = &'k [u8]>) -> Result<(), NotYet> {
        if self.resumed {
            return Ok(());
        }
        if self.submitted.is_some() {
            return Err(NotYet);
        }
        let Door::Inline {
            reader,
            loads: Some(loads),
        } = &mut self.door
        else {
            return Ok(());
        };
        let reqs: SmallVec<[ReadRef<'_>; 8]> = keys.map(ReadRef::Get).collect();
        reader.set_defer(true);
        reader.run(&reqs, |_, _| {});
        if reader.missed().is_empty() {
            return Ok(());
        }
        let id = loads.wait(reader, self.who.unwrap_or(Who::Port(0)), Vec::new());
        self.submitted = Some(id);
        Err(NotYet)
    }

    /// Runs `reqs` inline without ever waiting (the loop's gathered GETs, gather.rs): calls
    /// `emit(i, answer)` for each request answered and `missed(i)` for each that reached a
    /// leaf living only in the page file (the caller leaves it to its waiter's own run).
    /// Returns false, running nothing, when reads go through a ring.
    pub fn run_gathered(
        &mut self,
        reqs: &[ReadRef<'_>],
        emit: impl FnMut(usize, Found<'_>),
        mut missed: impl FnMut(usize),
    ) -> bool {
        let Door::Inline { reader, loads } = &mut self.door else {
            return false;
        };
        reader.set_defer(loads.is_some());
        reader.run(reqs, emit);
        for &(i, _) in reader.missed() {
            missed(i);
        }
        true
    }

    /// Whether reads complete later (through a ring) rather than at once.
    pub fn is_ring(&self) -> bool {
        matches!(self.door, Door::Ring(_))
    }

    /// Sets who the next submissions are for.
    pub fn serve(&mut self, who: Who) {
        self.who = Some(who);
    }

    /// The wait submitted since the last call, if any.
    pub fn take_submitted(&mut self) -> Option<u64> {
        self.submitted.take()
    }

    /// Hands back a completed wait's answers for the re-run of its waiter's input; whatever
    /// that run does not use is dropped by [`Reads::forget`].
    pub fn resume(&mut self, a: Answered) {
        self.ready = Some((a.reqs, a.replies));
        self.resumed = true;
    }

    /// Drops answers handed back and not used.
    pub fn forget(&mut self) {
        self.ready = None;
        self.resumed = false;
    }

    /// Collects the waits fully answered since the last call. Inline waits whose leaves
    /// are back run again here, on the loop's thread (a leaf evicted again meanwhile is
    /// read on this thread: the answers are complete).
    pub fn poll(&mut self, done: &mut Vec<(u64, Answered)>) {
        match &mut self.door {
            Door::Ring(r) => r.poll(done),
            Door::Inline { loads: None, .. } => {}
            Door::Inline {
                reader,
                loads: Some(loads),
            } => {
                loads.sink.take(&mut loads.done);
                reader.set_defer(false);
                for id in loads.done.drain(..) {
                    let Some((who, reqs)) = loads.waits.remove(&id) else {
                        continue;
                    };
                    let mut replies: Vec<Option<Reply>> = (0..reqs.len()).map(|_| None).collect();
                    if !reqs.is_empty() {
                        let refs: Vec<ReadRef<'_>> = reqs.iter().map(Request::as_ref).collect();
                        reader.run(&refs, |i, f| replies[i] = Some(f.into_reply()));
                    }
                    let replies = replies.into_iter().flatten().collect();
                    done.push((id, Answered { who, reqs, replies }));
                }
            }
        }
    }

    /// Whether a read was submitted since the loop last took it: the current waiter must
    /// stop (and must not submit again) until it is answered.
    pub fn submitted(&self) -> bool {
        self.submitted.is_some()
    }
}

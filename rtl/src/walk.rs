//! The simulated tree-walk engine (`sv/walk.sv` through Verilator and `csrc/walk_ffi.cpp`),
//! driven a cycle at a time from Rust, with the memory model that answers its page-table and
//! node reads after a configurable latency, one 64-byte beat per cycle, in the order they
//! become ready (so requests complete out of order).

use std::collections::BinaryHeap;
use std::ffi::c_void;

#[repr(C)]
struct WalkIn {
    in_rv: u64,
    in_now: u64,
    in_tag: u32,
    in_key_len: u32,
    mresp_tag: u32,
    mresp_idx: u32,
    in_key_valid: u8,
    in_key_idx: u8,
    in_valid: u8,
    mresp_valid: u8,
    mresp_pt: u8,
    mresp_last: u8,
    flush: u8,
    pad: u8,
    in_key_data: [u8; 64],
    mresp_data: [u8; 64],
}

#[repr(C)]
#[derive(Default)]
struct WalkOut {
    mreq_addr: u64,
    out_node: u64,
    out_tag: u32,
    out_value_off: u32,
    out_cycles: u32,
    in_ready: u8,
    in_slot: u8,
    mreq_valid: u8,
    mreq_pt: u8,
    mreq_tag: u8,
    out_valid: u8,
    out_status: u8,
    out_visits: u8,
}

extern "C" {
    fn walk_new(slots: u32, ksus: u32, root: u64) -> *mut c_void;
    fn walk_free(h: *mut c_void);
    fn walk_step(h: *mut c_void, i: *const WalkIn, o: *mut WalkOut);
    fn walk_counters(h: *mut c_void, c: *mut u64);
}

/// Most requests in the engine's table and most key search units (sv/walk.sv's `SLOTS` and
/// `NKSU`).
pub const MAX_SLOTS: usize = 64;
/// See [`MAX_SLOTS`].
pub const MAX_KSUS: usize = 32;
/// Longest key the engine takes (8 beats, and the key search unit's 9-bit length).
pub const MAX_KEY: usize = 460;
/// Largest node the engine's buffers hold.
pub const MAX_NODE: usize = 65536;
/// A page-table entry that maps nothing.
pub const UNMAPPED: u64 = u64::MAX;

/// How the engine and its memory are set up.
#[derive(Clone, Copy, Debug)]
pub struct WalkConfig {
    /// Request-table entries in use (1..=64).
    pub slots: usize,
    /// Key search units in use (1..=32).
    pub ksus: usize,
    /// Memory latency in cycles, from a request to its first beat.
    pub latency: u64,
    /// Extra latency, uniform in `0..=jitter` cycles per request (deterministic).
    pub jitter: u64,
    /// The root's LID.
    pub root: u64,
}

impl Default for WalkConfig {
    fn default() -> Self {
        WalkConfig {
            slots: 32,
            ksus: 8,
            latency: 60,
            jitter: 0,
            root: 1,
        }
    }
}

/// What the engine reads: the page table and node bytes.
pub trait Memory {
    /// Arena offset of `lid`'s newest buffer, or [`UNMAPPED`].
    fn page(&mut self, lid: u64) -> u64;
    /// The node at arena offset `off`: its bytes from 0 up to its `used` (the header's first
    /// word holding `used` in its high half), appended to `out`.
    fn node(&mut self, off: u64, out: &mut Vec<u8>);
}

/// One GET for the engine.
#[derive(Clone, Debug)]
pub struct Lookup<'a> {
    /// Returned with the answer.
    pub tag: u32,
    /// The key (at most [`MAX_KEY`] bytes).
    pub key: &'a [u8],
    /// Read version.
    pub rv: u64,
    /// The reader's clock in ms (0: expire nothing).
    pub now: u64,
}

impl<'a> Lookup<'a> {
    /// A lookup of each of `keys` at `rv` and `now`, tagged with its index.
    pub fn each<K: AsRef<[u8]>>(keys: &'a [K], rv: u64, now: u64) -> Vec<Lookup<'a>> {
        keys.iter()
            .enumerate()
            .map(|(i, k)| Lookup {
                tag: i as u32,
                key: k.as_ref(),
                rv,
                now,
            })
            .collect()
    }
}

/// The engine's answer to a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Walked {
    /// No visible value; `leaf` is the arena offset of the leaf the key routes to.
    NotFound { leaf: u64 },
    /// The value's header is at node offset `value_off` of the leaf at arena offset `leaf`.
    Found { leaf: u64, value_off: usize },
    /// A node the key search unit could not read, an unmapped LID or a walk too deep.
    Bad,
}

/// A finished lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Done {
    /// The lookup's tag.
    pub tag: u32,
    /// The answer.
    pub answer: Walked,
    /// Cycles from entering the engine to leaving it.
    pub cycles: u32,
    /// Nodes searched (older versions included).
    pub visits: u8,
}

/// The engine's counters over one [`WalkSim::run`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Cycles the run took.
    pub cycles: u64,
    /// Node reads sent to memory.
    pub node_reads: u64,
    /// Page-table reads sent to memory.
    pub pt_reads: u64,
    /// Node visits served from a unit that already held the node.
    pub cache_hits: u64,
    /// 64-byte beats the memory returned.
    pub beats: u64,
    /// Sum over cycles of key search units reserved by a request.
    pub busy_unit_cycles: u64,
    /// Sum over lookups of their cycles in the engine (mean lookups in flight =
    /// `latency_sum / cycles`, Little's law).
    pub latency_sum: u64,
}

/// The engine did not finish: a bug in the RTL or the driver, never a valid outcome.
#[derive(Debug, PartialEq, Eq)]
pub struct Stuck {
    /// Lookups answered before it stopped.
    pub answered: usize,
}

impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the RTL walk engine made no progress for a million cycles ({} answered)",
            self.answered
        )
    }
}

impl std::error::Error for Stuck {}

struct Pending {
    ready: u64,
    seq: u64,
    tag: u8,
    pt: bool,
    data: Vec<u8>,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.ready, self.seq) == (o.ready, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // earliest first in a max-heap
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.ready, o.seq).cmp(&(self.ready, self.seq))
    }
}

/// One simulated tree-walk engine (a Verilator model: one thread at a time).
pub struct WalkSim {
    h: *mut c_void,
    cfg: WalkConfig,
    rng: u64,
    seq: u64,
}

// SAFETY: the model is owned by this value and only reached through `&mut self`; Verilator
// models may move between threads when not used concurrently.
unsafe impl Send for WalkSim {}

impl WalkSim {
    /// An engine out of reset.
    pub fn new(cfg: WalkConfig) -> WalkSim {
        assert!((1..=MAX_SLOTS).contains(&cfg.slots) && (1..=MAX_KSUS).contains(&cfg.ksus));
        // SAFETY: plain constructor; the handle is freed once, in Drop.
        let h = unsafe { walk_new(cfg.slots as u32, cfg.ksus as u32, cfg.root) };
        WalkSim {
            h,
            cfg,
            rng: 0x9e37_79b9_7f4a_7c15,
            seq: 0,
        }
    }

    /// How it was set up.
    pub fn config(&self) -> WalkConfig {
        self.cfg
    }

    fn jitter(&mut self) -> u64 {
        if self.cfg.jitter == 0 {
            return 0;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % (self.cfg.jitter + 1)
    }

    fn counters(&self) -> [u64; 6] {
        let mut c = [0u64; 6];
        // SAFETY: `c` has the six entries the function writes.
        unsafe { walk_counters(self.h, c.as_mut_ptr()) };
        c
    }

    /// Runs `lookups` to completion against `mem`, calling `done` for each answer as it
    /// leaves the engine (in completion order). The engine first forgets the nodes it
    /// cached: the caller keeps the nodes of this run alive, not those of earlier ones.
    pub fn run(
        &mut self,
        mem: &mut dyn Memory,
        lookups: &[Lookup<'_>],
        mut done: impl FnMut(Done),
    ) -> Result<RunStats, Stuck> {
        let before = self.counters();
        let mut i = WalkIn {
            in_rv: 0,
            in_now: 0,
            in_tag: 0,
            in_key_len: 0,
            mresp_tag: 0,
            mresp_idx: 0,
            in_key_valid: 0,
            in_key_idx: 0,
            in_valid: 0,
            mresp_valid: 0,
            mresp_pt: 0,
            mresp_last: 0,
            flush: 1,
            pad: 0,
            in_key_data: [0; 64],
            mresp_data: [0; 64],
        };
        let mut o = WalkOut::default();
        let mut cycle = 0u64;
        let mut next = 0usize; // next lookup to feed
        let mut beat = 0usize; // next key beat of it
        let mut answered = 0usize;
        let mut idle = 0u64;
        let mut latency_sum = 0u64;
        let mut heap: BinaryHeap<Pending> = BinaryHeap::new();
        let mut bus: Option<Pending> = None; // the response streaming now
        let mut bus_beat = 0usize;
        let mut spare: Vec<Vec<u8>> = Vec::new();
        // The first step only flushes (and reports `in_ready`).
        // SAFETY: valid pointers to repr(C) structs the C side reads and writes.
        unsafe { walk_step(self.h, &i, &mut o) };
        i.flush = 0;
        while answered < lookups.len() {
            cycle += 1;
            // feed the next lookup, a key beat a cycle; start it with its last beat
            i.in_key_valid = 0;
            i.in_valid = 0;
            if next < lookups.len() && o.in_ready != 0 {
                let l = &lookups[next];
                let beats = l.key.len().div_ceil(64);
                if beat < beats {
                    let part = &l.key[beat * 64..l.key.len().min(beat * 64 + 64)];
                    i.in_key_data = [0; 64];
                    i.in_key_data[..part.len()].copy_from_slice(part);
                    i.in_key_valid = 1;
                    i.in_key_idx = beat as u8;
                }
                if beat + 1 >= beats {
                    i.in_valid = 1;
                    i.in_tag = l.tag;
                    i.in_key_len = l.key.len() as u32;
                    i.in_rv = l.rv;
                    i.in_now = l.now;
                    next += 1;
                    beat = 0;
                } else {
                    beat += 1;
                }
            }
            // the memory: one beat a cycle of the earliest response that is ready
            i.mresp_valid = 0;
            if bus.is_none() && heap.peek().is_some_and(|p| p.ready <= cycle) {
                bus = heap.pop();
                bus_beat = 0;
            }
            if let Some(p) = &bus {
                let n = p.data.len().div_ceil(64).max(1);
                let part = &p.data
                    [(bus_beat * 64).min(p.data.len())..p.data.len().min(bus_beat * 64 + 64)];
                i.mresp_data = [0; 64];
                i.mresp_data[..part.len()].copy_from_slice(part);
                i.mresp_valid = 1;
                i.mresp_pt = p.pt as u8;
                i.mresp_tag = u32::from(p.tag);
                i.mresp_idx = bus_beat as u32;
                i.mresp_last = (bus_beat + 1 == n) as u8;
                bus_beat += 1;
                if bus_beat == n {
                    if let Some(p) = bus.take() {
                        spare.push(p.data);
                    }
                }
            }
            // SAFETY: as above.
            unsafe { walk_step(self.h, &i, &mut o) };
            if o.mreq_valid != 0 {
                let mut data = spare.pop().unwrap_or_default();
                data.clear();
                if o.mreq_pt != 0 {
                    data.extend_from_slice(&mem.page(o.mreq_addr).to_le_bytes());
                } else {
                    mem.node(o.mreq_addr, &mut data);
                }
                let ready = cycle + self.cfg.latency + self.jitter();
                self.seq += 1;
                heap.push(Pending {
                    ready,
                    seq: self.seq,
                    tag: o.mreq_tag,
                    pt: o.mreq_pt != 0,
                    data,
                });
            }
            if o.out_valid != 0 {
                answered += 1;
                idle = 0;
                latency_sum += u64::from(o.out_cycles);
                let answer = match o.out_status {
                    0 => Walked::NotFound { leaf: o.out_node },
                    1 => Walked::Found {
                        leaf: o.out_node,
                        value_off: o.out_value_off as usize,
                    },
                    _ => Walked::Bad,
                };
                done(Done {
                    tag: o.out_tag,
                    answer,
                    cycles: o.out_cycles,
                    visits: o.out_visits,
                });
            } else {
                idle += 1;
                if idle > 1_000_000 {
                    return Err(Stuck { answered });
                }
            }
        }
        let after = self.counters();
        let d = |k: usize| after[k] - before[k];
        Ok(RunStats {
            cycles: d(0),
            node_reads: d(1),
            pt_reads: d(2),
            cache_hits: d(3),
            beats: d(4),
            busy_unit_cycles: d(5),
            latency_sum,
        })
    }
}

impl Drop for WalkSim {
    fn drop(&mut self) {
        // SAFETY: created by walk_new, freed once.
        unsafe { walk_free(self.h) }
    }
}

//! INFO's commandstats section: per command of the table, how many times it ran, how long it
//! took, how many of its runs answered an error (`failed_calls`) and how many were refused
//! before running (`rejected_calls`: wrong arity, no AUTH, maxmemory, a failing disk). One
//! set of counters per event loop (no cache line shared between loops on the hot path),
//! summed when read. Time is what the loop spent on each pipeline it ran (the latency it
//! already measures) split evenly among the pipeline's commands: one clock read per
//! pipeline, not two per command, so a cheap command in a pipeline with a costly one is
//! charged part of the costly one's time. GETs the event loop gathers from several
//! connections into one read batch (net/event_loop.rs) are counted without time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Counter sets: one per event loop (and one for other threads), wrapping past this.
const SHARDS: usize = 64;
/// Room for this many commands (the table has fewer; `table.rs` checks it).
pub const MAX_COMMANDS: usize = 512;

thread_local! {
    /// The commands this thread ran since its loop last charged their time: runs of one
    /// command (its index, how many).
    static RAN: std::cell::RefCell<Vec<(u16, u32)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Notes `n` runs of command `idx` to be charged with the pipeline's time.
fn note(idx: usize, n: u32) {
    RAN.with(|r| {
        let mut r = r.borrow_mut();
        let len = r.len();
        match r.last_mut() {
            Some((i, m)) if usize::from(*i) == idx => *m += n,
            _ if len < MAX_NOTED => r.push((idx as u16, n)),
            _ => {}
        }
    });
}

/// Most commands noted between two charges (a thread that is not a loop never charges).
const MAX_NOTED: usize = 1 << 16;

/// Latency histogram buckets (LATENCY HISTOGRAM): bucket `b` counts runs of at most
/// 1,024 · 2^b ns (the last, every longer one), Redis's power-of-two microsecond steps.
const BUCKETS: usize = 24;

#[derive(Default)]
struct Cell {
    calls: AtomicU64,
    nanos: AtomicU64,
    failed: AtomicU64,
    rejected: AtomicU64,
    hist: [AtomicU64; BUCKETS],
}

/// The histogram bucket of a run of `nanos`.
fn bucket(nanos: u64) -> usize {
    let units = nanos.div_ceil(1024).max(1);
    let b = (64 - (units - 1).leading_zeros()) as usize; // ceil(log2(units))
    b.min(BUCKETS - 1)
}

/// The counters, indexed by the command's position in the table.
pub struct CmdStats {
    shards: [OnceLock<Box<[Cell]>>; SHARDS],
}

impl Default for CmdStats {
    fn default() -> CmdStats {
        CmdStats {
            shards: std::array::from_fn(|_| OnceLock::new()),
        }
    }
}

impl CmdStats {
    fn cells(&self) -> &[Cell] {
        let i = crate::core::counters::shard() % SHARDS;
        self.shards[i].get_or_init(|| (0..MAX_COMMANDS).map(|_| Cell::default()).collect())
    }

    /// Command `idx` ran to its reply (`failed`: an error reply); its time is charged with
    /// the pipeline's ([`CmdStats::charge_noted`]).
    pub fn ran(&self, idx: usize, failed: bool) {
        note(idx, 1);
        if let Some(c) = self.cells().get(idx) {
            c.calls.fetch_add(1, Ordering::Relaxed);
            if failed {
                c.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `n` runs of command `idx` that all answered (a batch of GETs or SETs).
    pub fn ran_many(&self, idx: usize, n: u64) {
        note(idx, n as u32);
        self.count(idx, n);
    }

    /// `n` runs of command `idx` answered outside a pipeline's run (GETs the event loop
    /// gathered from several connections), which took `took` together: counted and
    /// charged at once.
    pub fn counted(&self, idx: usize, n: u64, took: Duration) {
        self.count(idx, n);
        self.charge(&[(idx as u16, n as u32)], took);
    }

    fn count(&self, idx: usize, n: u64) {
        if let Some(c) = self.cells().get(idx) {
            c.calls.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Command `idx` was refused before it ran.
    pub fn rejected(&self, idx: usize) {
        if let Some(c) = self.cells().get(idx) {
            c.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Charges `elapsed` evenly to the commands this thread ran since the last charge (the
    /// pipeline the loop just ran).
    pub fn charge_noted(&self, elapsed: Duration) {
        RAN.with(|r| {
            let mut r = r.borrow_mut();
            self.charge(&r, elapsed);
            r.clear();
        })
    }

    fn charge(&self, ran: &[(u16, u32)], elapsed: Duration) {
        let total: u64 = ran.iter().map(|r| u64::from(r.1)).sum();
        if total == 0 {
            return;
        }
        let each = elapsed.as_nanos() as u64 / total;
        let b = bucket(each);
        let cells = self.cells();
        for &(i, n) in ran {
            if let Some(c) = cells.get(usize::from(i)) {
                c.nanos.fetch_add(each * u64::from(n), Ordering::Relaxed);
                c.hist[b].fetch_add(u64::from(n), Ordering::Relaxed);
            }
        }
    }

    /// Zeroes every counter (CONFIG RESETSTAT).
    pub fn reset(&self) {
        for cells in self.shards.iter().filter_map(OnceLock::get) {
            for c in cells.iter() {
                for a in [&c.calls, &c.nanos, &c.failed, &c.rejected]
                    .into_iter()
                    .chain(c.hist.iter())
                {
                    a.store(0, Ordering::Relaxed);
                }
            }
        }
    }

    /// Command `idx`'s latency histogram (LATENCY HISTOGRAM): how many timed runs, and for
    /// each bucket where the count grows, its bound in microseconds and the runs up to it.
    pub fn histogram(&self, idx: usize) -> (u64, Vec<(u64, u64)>) {
        let mut counts = [0u64; BUCKETS];
        for cells in self.shards.iter().filter_map(OnceLock::get) {
            if let Some(c) = cells.get(idx) {
                for (n, h) in counts.iter_mut().zip(&c.hist) {
                    *n += h.load(Ordering::Relaxed);
                }
            }
        }
        let mut total = 0;
        let mut steps = Vec::new();
        for (b, n) in counts.iter().enumerate() {
            if *n > 0 {
                total += n;
                steps.push(((1024u64 << b) / 1000, total));
            }
        }
        (total, steps)
    }

    /// The section, `names[i]` naming command `i`: a line per command that ran or was
    /// refused, in Redis's form.
    pub fn section<S: AsRef<str>>(&self, names: impl Iterator<Item = S>) -> String {
        let mut t = String::from("# Commandstats\r\n");
        for (i, name) in names.enumerate() {
            let sum = |f: fn(&Cell) -> &AtomicU64| -> u64 {
                self.shards
                    .iter()
                    .filter_map(OnceLock::get)
                    .filter_map(|cells| cells.get(i))
                    .map(|c| f(c).load(Ordering::Relaxed))
                    .sum()
            };
            let (calls, rejected) = (sum(|c| &c.calls), sum(|c| &c.rejected));
            if calls == 0 && rejected == 0 {
                continue;
            }
            let usec = sum(|c| &c.nanos) / 1000;
            let per = if calls > 0 {
                usec as f64 / calls as f64
            } else {
                0.0
            };
            t.push_str(&format!(
                "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per:.2},rejected_calls={rejected},failed_calls={}\r\n",
                name.as_ref().to_ascii_lowercase(),
                sum(|c| &c.failed)
            ));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_step_by_powers_of_two_microseconds() {
        assert_eq!(
            (
                bucket(0),
                bucket(1024),
                bucket(1025),
                bucket(2048),
                bucket(5000)
            ),
            (0, 0, 1, 1, 3)
        );
        assert_eq!(bucket(u64::MAX / 2), BUCKETS - 1);
        let s = CmdStats::default();
        note(3, 2);
        s.charge_noted(Duration::from_micros(6)); // 3 µs each: the 4 µs bucket
        note(3, 1);
        s.charge_noted(Duration::from_nanos(900));
        assert_eq!(s.histogram(3), (3, vec![(1, 1), (4, 3)]));
        s.reset();
        assert_eq!(s.histogram(3), (0, vec![]));
    }

    #[test]
    fn counts_sum_over_loops_and_reset() {
        let s = CmdStats::default();
        s.ran(0, false);
        s.ran(0, true);
        s.ran_many(1, 5);
        s.rejected(2);
        RAN.with(|r| r.borrow_mut().clear());
        s.charge(&[(0, 2), (1, 2)], Duration::from_micros(40));
        std::thread::scope(|sc| {
            sc.spawn(|| {
                crate::core::counters::use_loop_counters(3);
                s.ran(0, false);
            });
        });
        let text = s.section(["GET", "SET", "DEL"].into_iter());
        assert!(text.contains("cmdstat_get:calls=3,usec=20,usec_per_call=6.67,rejected_calls=0,failed_calls=1\r\n"), "{text}");
        assert!(
            text.contains("cmdstat_set:calls=5,usec=20,usec_per_call=4.00,"),
            "{text}"
        );
        assert!(
            text.contains("cmdstat_del:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,"),
            "{text}"
        );
        s.reset();
        assert_eq!(
            s.section(["GET", "SET", "DEL"].into_iter()),
            "# Commandstats\r\n"
        );
    }
}

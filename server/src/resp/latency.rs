//! Redis's latency monitor (LATENCY LATEST, HISTORY, RESET, GRAPH, DOCTOR): events whose
//! duration passed `latency-monitor-threshold` milliseconds (CONFIG SET; 0, the default:
//! off). The event `command` is a command slower than that, `fast-command` one of the
//! table's fast commands; each event keeps its latest and largest sample and a history of
//! the last 160 seconds that had one (the largest of each second), as Redis does.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Seconds of history kept per event.
const HISTORY: usize = 160;

/// One event's samples.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// (Unix seconds, milliseconds), oldest first.
    pub samples: VecDeque<(u64, u64)>,
    /// The largest ever.
    pub max: u64,
}

/// The server's latency events.
#[derive(Default)]
pub struct Latency {
    events: Mutex<BTreeMap<String, Series>>,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Latency {
    /// Adds a sample of `ms` to `event`.
    pub fn add(&self, event: &str, ms: u64) {
        self.add_at(event, ms, now_secs());
    }

    fn add_at(&self, event: &str, ms: u64, now: u64) {
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        let s = ev.entry(event.to_string()).or_default();
        s.max = s.max.max(ms);
        match s.samples.back_mut() {
            Some((t, m)) if *t == now => *m = (*m).max(ms),
            _ => {
                s.samples.push_back((now, ms));
                if s.samples.len() > HISTORY {
                    s.samples.pop_front();
                }
            }
        }
    }

    /// Every event and its samples, by name.
    pub fn all(&self) -> Vec<(String, Series)> {
        let ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// One event's samples.
    pub fn get(&self, event: &str) -> Option<Series> {
        let ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        ev.get(event).cloned()
    }

    /// Forgets the named events (none named: all); how many it forgot.
    pub fn reset(&self, names: &[&str]) -> usize {
        let mut ev = self.events.lock().unwrap_or_else(|e| e.into_inner());
        if names.is_empty() {
            let n = ev.len();
            ev.clear();
            return n;
        }
        names.iter().filter(|n| ev.remove(**n).is_some()).count()
    }
}

/// LATENCY GRAPH's text of an event: Redis's header line, then one column per sample,
/// its height the sample's share of the highest (`#` marks, 8 rows), oldest left.
pub fn graph(event: &str, s: &Series) -> String {
    let high = s.samples.iter().map(|x| x.1).max().unwrap_or(0);
    let low = s.samples.iter().map(|x| x.1).min().unwrap_or(0);
    let mut t = format!(
        "{event} - high {high} ms, low {low} ms (all time high {} ms)\n",
        s.max
    );
    t.push_str(&"-".repeat(80));
    t.push('\n');
    const ROWS: u64 = 8;
    for row in (1..=ROWS).rev() {
        let line: String = s
            .samples
            .iter()
            .map(|&(_, ms)| {
                let h = if high == 0 {
                    0
                } else {
                    (ms * ROWS).div_ceil(high)
                };
                if h >= row {
                    '#'
                } else {
                    ' '
                }
            })
            .collect();
        t.push_str(line.trim_end());
        t.push('\n');
    }
    t
}

/// LATENCY DOCTOR's report.
pub fn doctor(events: &[(String, Series)]) -> String {
    if events.is_empty() {
        return "Dave, no latency spike was observed during the lifetime of this accelkv \
                instance, not in the slightest bit. I honestly think you ought to sleep tonight.\n"
            .into();
    }
    let mut t = String::from(
        "Dave, I have observed latency spikes in this accelkv instance. You don't mind \
         talking about it, do you Dave?\n\n",
    );
    for (i, (name, s)) in events.iter().enumerate() {
        let n = s.samples.len() as u64;
        let avg = s.samples.iter().map(|x| x.1).sum::<u64>() / n.max(1);
        t.push_str(&format!(
            "{}. {name}: {n} latency spikes (average {avg}ms, worst all time {}ms).\n",
            i + 1,
            s.max
        ));
    }
    t.push_str(
        "\nI have a few advices for you:\n\n- Check SLOWLOG for the commands that took \
         longest, and the keys they touched (a big collection read whole, a large SORT or \
         KEYS).\n- A long Lua script holds its event loop's other connections.\n",
    );
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_keep_the_largest_of_each_second_and_the_max() {
        let l = Latency::default();
        l.add_at("command", 300, 10);
        l.add_at("command", 500, 10);
        l.add_at("command", 400, 11);
        let s = l.get("command").unwrap();
        assert_eq!(s.samples, VecDeque::from(vec![(10, 500), (11, 400)]));
        assert_eq!(s.max, 500);
        for t in 0..200 {
            l.add_at("command", 1, 100 + t);
        }
        assert_eq!(l.get("command").unwrap().samples.len(), HISTORY);
        assert!(graph("command", &l.get("command").unwrap())
            .starts_with("command - high 1 ms, low 1 ms"));
        assert_eq!(l.reset(&["nope"]), 0);
        assert_eq!(l.reset(&[]), 1);
        assert!(doctor(&l.all()).contains("no latency spike"));
    }
}

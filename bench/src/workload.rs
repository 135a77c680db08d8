//! Workloads: YCSB's core workloads A–F with YCSB's proportions and distributions, and
//! Honeycomb's cloud-storage workload (short scans of 3–4 items, the rest inserts), and the
//! per-thread generator that turns a workload into operations exactly as YCSB's
//! `CoreWorkload.doTransaction` chooses them.

use crate::generator::{Hotspot, InsertCounter, ScrambledZipfian, SkewedLatest};
use rand::rngs::SmallRng;
use rand::Rng;

/// A workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    /// 50% read, 50% update.
    A,
    /// 95% read, 5% update.
    B,
    /// 100% read.
    C,
    /// 95% read, 5% insert, reads skewed to the latest inserts.
    D,
    /// 95% scan (1..=100 items), 5% insert.
    E,
    /// 50% read, 50% read-modify-write.
    F,
    /// Honeycomb's cloud-storage workload: this percentage of scans of 3–4 items, inserts
    /// for the rest.
    Cloud(u8),
}

/// Operation proportions (they sum to 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Mix {
    /// Reads.
    pub read: f64,
    /// Updates.
    pub update: f64,
    /// Inserts.
    pub insert: f64,
    /// Scans.
    pub scan: f64,
    /// Read-modify-writes.
    pub rmw: f64,
}

/// How keys of existing records are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dist {
    /// Every record equally likely.
    Uniform,
    /// Scrambled Zipfian, θ = 0.99.
    Zipfian,
    /// Skewed towards the newest inserts (workload D).
    Latest,
    /// Facebook's ETC skew: 10% of the records get 90% of the operations (YCSB's `hotspot`
    /// with `hotspotdatafraction=0.1`, `hotspotopnfraction=0.9`).
    Etc,
}

impl Dist {
    /// Parses `uniform`, `zipfian` (or `zipf`), `latest`, `etc` (or `hotspot`).
    pub fn parse(s: &str) -> Option<Dist> {
        match s {
            "uniform" => Some(Dist::Uniform),
            "zipfian" | "zipf" => Some(Dist::Zipfian),
            "latest" => Some(Dist::Latest),
            "etc" | "hotspot" => Some(Dist::Etc),
            _ => None,
        }
    }

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Dist::Uniform => "uniform",
            Dist::Zipfian => "zipfian",
            Dist::Latest => "latest",
            Dist::Etc => "etc",
        }
    }
}

impl Workload {
    /// Parses `a`..`f` and `cloud<read %>` (`cloud` alone is `cloud90`).
    pub fn parse(s: &str) -> Option<Workload> {
        let s = s.to_ascii_lowercase();
        Some(match s.as_str() {
            "a" => Workload::A,
            "b" => Workload::B,
            "c" => Workload::C,
            "d" => Workload::D,
            "e" => Workload::E,
            "f" => Workload::F,
            "cloud" => Workload::Cloud(90),
            _ => {
                let pct: u8 = s
                    .strip_prefix("cloud")?
                    .trim_start_matches('-')
                    .parse()
                    .ok()?;
                if !(50..=100).contains(&pct) {
                    return None;
                }
                Workload::Cloud(pct)
            }
        })
    }

    /// Every workload the suite runs by default.
    pub fn all() -> Vec<Workload> {
        use Workload::*;
        vec![A, B, C, D, E, F, Cloud(50), Cloud(90), Cloud(100)]
    }

    /// Name in reports.
    pub fn name(self) -> String {
        match self {
            Workload::A => "A".into(),
            Workload::B => "B".into(),
            Workload::C => "C".into(),
            Workload::D => "D".into(),
            Workload::E => "E".into(),
            Workload::F => "F".into(),
            Workload::Cloud(p) => format!("cloud-{p}"),
        }
    }

    /// YCSB's proportions.
    pub fn mix(self) -> Mix {
        let m = Mix::default();
        match self {
            Workload::A => Mix {
                read: 0.5,
                update: 0.5,
                ..m
            },
            Workload::B => Mix {
                read: 0.95,
                update: 0.05,
                ..m
            },
            Workload::C => Mix { read: 1.0, ..m },
            Workload::D => Mix {
                read: 0.95,
                insert: 0.05,
                ..m
            },
            Workload::E => Mix {
                scan: 0.95,
                insert: 0.05,
                ..m
            },
            Workload::F => Mix {
                read: 0.5,
                rmw: 0.5,
                ..m
            },
            Workload::Cloud(p) => Mix {
                scan: f64::from(p) / 100.0,
                insert: 1.0 - f64::from(p) / 100.0,
                ..m
            },
        }
    }

    /// The distribution this workload uses when the suite asks for `requested`: D always
    /// reads the latest records (that is what D is); the others use what was asked.
    pub fn dist(self, requested: Dist) -> Dist {
        match self {
            Workload::D => Dist::Latest,
            _ => requested,
        }
    }

    /// Scan lengths, inclusive (YCSB: uniform 1..=100; cloud storage: 3..=4).
    pub fn scan_len(self) -> (usize, usize) {
        match self {
            Workload::Cloud(_) => (3, 4),
            _ => (1, 100),
        }
    }

    /// Whether it scans.
    pub fn scans(self) -> bool {
        self.mix().scan > 0.0
    }
}

/// The kind of one YCSB operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Read.
    Read,
    /// Update.
    Update,
    /// Insert.
    Insert,
    /// Scan.
    Scan,
    /// Read-modify-write.
    Rmw,
}

impl Kind {
    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Update => "update",
            Kind::Insert => "insert",
            Kind::Scan => "scan",
            Kind::Rmw => "rmw",
        }
    }
}

enum Chooser {
    Uniform(u64),
    Zipf(ScrambledZipfian),
    Latest(SkewedLatest),
    Hotspot(Hotspot),
}

/// One thread's operation chooser for one run.
pub struct OpChooser {
    mix: Mix,
    chooser: Chooser,
    scan_len: (usize, usize),
}

impl OpChooser {
    /// For `workload` under `dist` with `records` present when the run starts and about
    /// `expected_ops` operations (YCSB sizes its Zipfian over the records plus twice the
    /// expected inserts; 0 when the run is timed).
    pub fn new(workload: Workload, dist: Dist, records: u64, expected_ops: u64) -> OpChooser {
        let mix = workload.mix();
        let chooser = match workload.dist(dist) {
            Dist::Uniform => Chooser::Uniform(records.max(1)),
            Dist::Zipfian => {
                let new_keys = (expected_ops as f64 * mix.insert * 2.0) as u64;
                Chooser::Zipf(ScrambledZipfian::new(0, records.max(1) - 1 + new_keys))
            }
            Dist::Latest => Chooser::Latest(SkewedLatest::new(records.max(1) - 1)),
            Dist::Etc => Chooser::Hotspot(Hotspot::etc(0, records.max(1) - 1)),
        };
        OpChooser {
            mix,
            chooser,
            scan_len: workload.scan_len(),
        }
    }

    /// The next operation's kind (YCSB's `DiscreteGenerator` over the proportions).
    pub fn kind(&self, rng: &mut SmallRng) -> Kind {
        let m = &self.mix;
        let mut u: f64 = rng.gen();
        for (p, k) in [
            (m.read, Kind::Read),
            (m.update, Kind::Update),
            (m.insert, Kind::Insert),
            (m.scan, Kind::Scan),
            (m.rmw, Kind::Rmw),
        ] {
            if u < p {
                return k;
            }
            u -= p;
        }
        if m.rmw > 0.0 {
            Kind::Rmw
        } else if m.scan > 0.0 {
            Kind::Scan
        } else if m.insert > 0.0 {
            Kind::Insert
        } else if m.update > 0.0 {
            Kind::Update
        } else {
            Kind::Read
        }
    }

    /// `nextKeynum()`: an existing record's key number, redrawn while it is above the last
    /// acknowledged insert.
    pub fn keynum(&mut self, rng: &mut SmallRng, inserts: &InsertCounter) -> u64 {
        loop {
            let last = inserts.last();
            let k = match &mut self.chooser {
                Chooser::Uniform(n) => rng.gen_range(0..*n),
                Chooser::Zipf(z) => z.next(rng),
                Chooser::Latest(l) => l.next_from(last, rng.gen()),
                Chooser::Hotspot(h) => h.next(rng),
            };
            if k <= last {
                return k;
            }
        }
    }

    /// A scan length.
    pub fn scan_len(&self, rng: &mut SmallRng) -> usize {
        rng.gen_range(self.scan_len.0..=self.scan_len.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn proportions_are_ycsbs() {
        let mut rng = SmallRng::seed_from_u64(1);
        for w in Workload::all() {
            let c = OpChooser::new(w, Dist::Uniform, 1000, 0);
            let mut counts = std::collections::BTreeMap::new();
            let n = 200_000;
            for _ in 0..n {
                *counts.entry(c.kind(&mut rng)).or_insert(0u32) += 1;
            }
            let m = w.mix();
            for (k, p) in [
                (Kind::Read, m.read),
                (Kind::Update, m.update),
                (Kind::Insert, m.insert),
                (Kind::Scan, m.scan),
                (Kind::Rmw, m.rmw),
            ] {
                let got = f64::from(*counts.get(&k).unwrap_or(&0)) / f64::from(n);
                assert!((got - p).abs() < 0.01, "{w:?} {k:?}: {got} vs {p}");
            }
        }
    }

    #[test]
    fn names_parse_back() {
        for w in Workload::all() {
            assert_eq!(Workload::parse(&w.name()), Some(w));
        }
        assert_eq!(Workload::parse("cloud40"), None);
        assert_eq!(Workload::parse("g"), None);
    }

    #[test]
    fn keys_stay_below_the_acknowledged_inserts() {
        let mut rng = SmallRng::seed_from_u64(2);
        let inserts = InsertCounter::new(100);
        for d in [Dist::Uniform, Dist::Zipfian, Dist::Latest, Dist::Etc] {
            let mut c = OpChooser::new(Workload::A, d, 100, 10_000);
            for _ in 0..10_000 {
                assert!(c.keynum(&mut rng, &inserts) < 100);
            }
        }
        let c = OpChooser::new(Workload::E, Dist::Uniform, 100, 0);
        for _ in 0..1000 {
            assert!((1..=100).contains(&c.scan_len(&mut rng)));
        }
    }
}

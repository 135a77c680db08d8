//! Writing samples through `prometheus-client`'s encoder ([`Out`]: counters, gauges, labelled
//! families, histograms from hdrhistogram), and the metric groups of the optional parts: the
//! leaf cache over the page file, the Raft groups, build info.

use crate::core::route::GroupSample;
use crate::core::shared::Shared;
use hdrhistogram::Histogram;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// Upper bounds, in seconds, of the request latency histograms' buckets: 10 µs to 10 s.
pub const BUCKETS: [f64; 19] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A scrape's encoder.
pub struct Out<'a>(pub DescriptorEncoder<'a>);

/// A counter's name without the `_total` the encoder appends.
fn stem(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

impl Out<'_> {
    pub fn counter(&mut self, name: &str, help: &str, v: u64) -> std::fmt::Result {
        let c = ConstCounter::new(v);
        c.encode(
            self.0
                .encode_descriptor(stem(name), help, None, c.metric_type())?,
        )
    }

    pub fn counter_f64(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let c = ConstCounter::new(v);
        c.encode(
            self.0
                .encode_descriptor(stem(name), help, None, c.metric_type())?,
        )
    }

    pub fn gauge(&mut self, name: &str, help: &str, v: f64) -> std::fmt::Result {
        let g = ConstGauge::new(v);
        g.encode(
            self.0
                .encode_descriptor(name, help, None, g.metric_type())?,
        )
    }

    /// Unlabelled counters: name, help, value.
    pub fn counters(&mut self, list: &[(&str, &str, u64)]) -> std::fmt::Result {
        list.iter()
            .try_for_each(|&(name, help, v)| self.counter(name, help, v))
    }

    /// Unlabelled gauges: name, help, value.
    pub fn gauges(&mut self, list: &[(&str, &str, f64)]) -> std::fmt::Result {
        list.iter()
            .try_for_each(|&(name, help, v)| self.gauge(name, help, v))
    }

    /// A counter with one label, a sample per value of it.
    pub fn counter_family(
        &mut self,
        name: &str,
        help: &str,
        label: &'static str,
        values: &[(&str, u64)],
    ) -> std::fmt::Result {
        let mut m = self
            .0
            .encode_descriptor(stem(name), help, None, MetricType::Counter)?;
        for &(l, v) in values {
            let labels = [(label, l)];
            ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// A gauge with labels, a sample per label set.
    pub fn gauge_family(
        &mut self,
        name: &str,
        help: &str,
        values: &[(Vec<(&'static str, String)>, f64)],
    ) -> std::fmt::Result {
        let mut m = self
            .0
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, v) in values {
            ConstGauge::new(*v).encode(m.encode_family(labels)?)?;
        }
        Ok(())
    }

    /// Histograms in seconds, one series per value of `label`, from hdrhistograms in
    /// microseconds: a bucket counts what hdrhistogram holds at or under its bound (to its
    /// 3 significant digits), the sum is count × mean.
    pub fn histograms(
        &mut self,
        name: &str,
        help: &str,
        label: &'static str,
        series: &[(&str, Histogram<u64>)],
    ) -> std::fmt::Result {
        let mut m = self
            .0
            .encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (l, h) in series {
            let mut below = 0;
            let mut buckets: Vec<(f64, u64)> = BUCKETS
                .iter()
                .map(|&b| {
                    let upto = h.count_between(0, (b * 1e6) as u64);
                    let here = upto.saturating_sub(below);
                    below = upto.max(below);
                    (b, here)
                })
                .collect();
            buckets.push((f64::INFINITY, h.len().saturating_sub(below)));
            let sum = h.mean() * h.len() as f64 / 1e6;
            let labels = [(label, *l)];
            m.encode_family(&labels)?
                .encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                    sum,
                    h.len(),
                    &buckets,
                    None,
                )?;
        }
        Ok(())
    }
}

/// The leaf cache over the page file (servers with a data directory).
pub fn leaf_cache(sh: &Shared, d: &accelkv_durable::DurableStats, o: &mut Out) -> std::fmt::Result {
    let m = sh.store().mirror_stats();
    let (deferred_loads, deferred_waits) = sh.engine().deferred_reads();
    o.counters(&[
        (
            "accelkv_leaf_cache_leaf_visits_total",
            "Leaf visits by reads and writes.",
            m.leaf_visits,
        ),
        (
            "accelkv_leaf_cache_loads_total",
            "Leaves loaded from the page file (misses).",
            m.loads,
        ),
        (
            "accelkv_leaf_cache_load_errors_total",
            "Leaf loads that failed.",
            m.load_errors,
        ),
        (
            "accelkv_leaf_cache_evictions_total",
            "Leaves evicted to hold the memory budget.",
            m.evictions,
        ),
        (
            "accelkv_leaf_cache_write_backs_total",
            "Dirty leaves written back before eviction.",
            d.write_backs,
        ),
        (
            "accelkv_leaf_cache_deferred_waits_total",
            "Reads that waited for a leaf load off the event loop.",
            deferred_waits,
        ),
        (
            "accelkv_leaf_cache_deferred_loads_total",
            "Leaf loads made off the event loop.",
            deferred_loads,
        ),
    ])?;
    o.gauges(&[
        (
            "accelkv_leaf_cache_resident_bytes",
            "Bytes of leaves in memory.",
            m.resident_bytes as f64,
        ),
        (
            "accelkv_leaf_cache_budget_bytes",
            "The memory budget for leaves (--max-memory).",
            m.budget_bytes as f64,
        ),
        (
            "accelkv_leaf_cache_evicted_leaves",
            "Leaves now only in the page file.",
            m.evicted_leaves as f64,
        ),
        (
            "accelkv_leaf_cache_hit_ratio",
            "Share of leaf visits that found the leaf in memory.",
            m.hit_ratio(),
        ),
        (
            "accelkv_leaf_cache_load_seconds_mean",
            "Mean time of a leaf load.",
            m.load_us_mean as f64 / 1e6,
        ),
    ])?;
    Ok(())
}

/// The Raft groups with a replica on this node (cluster mode), labelled by range.
pub fn raft(groups: &[GroupSample], o: &mut Out) -> std::fmt::Result {
    let by_range = |f: fn(&GroupSample) -> f64| -> Vec<(Vec<(&'static str, String)>, f64)> {
        groups
            .iter()
            .map(|g| (vec![("range", g.range.to_string())], f(g)))
            .collect()
    };
    type Field = fn(&GroupSample) -> f64;
    let gauges: [(&str, &str, Field); 5] = [
        (
            "accelkv_raft_term",
            "The group's current term, as this replica knows it.",
            |g| g.term as f64,
        ),
        (
            "accelkv_raft_last_log_index",
            "The last entry in this replica's log.",
            |g| g.last_log_index as f64,
        ),
        (
            "accelkv_raft_applied_index",
            "The last committed entry this replica applied to the store.",
            |g| g.applied_index as f64,
        ),
        (
            "accelkv_raft_leader",
            "1 where this replica leads the group.",
            |g| f64::from(u8::from(g.leader)),
        ),
        (
            "accelkv_raft_snapshot_bytes",
            "Bytes of the snapshot this replica keeps.",
            |g| g.snapshot_bytes as f64,
        ),
    ];
    for (name, help, f) in gauges {
        o.gauge_family(name, help, &by_range(f))?;
    }
    let sum = |f: fn(&GroupSample) -> u64| groups.iter().map(f).sum::<u64>();
    o.counter(
        "accelkv_raft_leader_changes_total",
        "Times a group with a replica here saw its leader change, since the replicas opened.",
        sum(|g| g.leader_changes),
    )?;
    o.counter(
        "accelkv_raft_snapshots_built_total",
        "Snapshots the replicas here built, since they opened.",
        sum(|g| g.snapshots_built),
    )?;
    o.gauge(
        "accelkv_raft_groups",
        "Raft groups with a replica on this node.",
        groups.len() as f64,
    )
}

/// `accelkv_build_info{version, profile, engine} 1`.
pub fn build_info(engine: &str, o: &mut Out) -> std::fmt::Result {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let labels = vec![
        ("version", env!("CARGO_PKG_VERSION").to_string()),
        ("profile", profile.to_string()),
        ("cluster", cfg!(feature = "cluster").to_string()),
        ("engine", engine.to_string()),
    ];
    o.gauge_family(
        "accelkv_build_info",
        "The server's version, build profile, whether cluster mode is built in, and the read engine running; always 1.",
        &[(labels, 1.0)],
    )
}

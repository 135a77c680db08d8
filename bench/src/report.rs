//! Reports of a suite: a markdown summary (throughput per workload and target, with the ratio
//! to a named baseline) and detail table (throughput, p50/p99/p999 latency), JSON with every
//! number, and an SVG bar chart of throughput per workload per target (plotters).

use crate::runner::RunResult;
use crate::suite::SuiteResult;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Rows of the report: (workload, distribution) in the order first run.
fn rows(runs: &[RunResult]) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    for r in runs {
        let k = (r.workload.clone(), r.dist.clone());
        if !seen.contains(&k) {
            seen.push(k);
        }
    }
    seen
}

/// Where a target's column goes: in-process targets, then accelkv over the network, then the
/// network peers, then anything else in the order first run.
const ORDER: [&str; 9] = [
    "accelkv",
    "accelkv-engine",
    "btreemap",
    "rocksdb",
    "accelkv-tcp",
    "accelkv-udp",
    "accelkv-resp",
    "redis",
    "memcached",
];

/// Targets in column order.
fn targets(runs: &[RunResult]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for r in runs {
        if !seen.contains(&r.target) {
            seen.push(r.target.clone());
        }
    }
    let rank = |t: &String| ORDER.iter().position(|o| o == t).unwrap_or(ORDER.len());
    seen.sort_by_key(rank); // stable: unknown targets keep their order
    seen
}

fn index(runs: &[RunResult]) -> BTreeMap<(String, String, String), &RunResult> {
    runs.iter()
        .map(|r| ((r.workload.clone(), r.dist.clone(), r.target.clone()), r))
        .collect()
}

fn kops(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else {
        format!("{:.1} K", x / 1e3)
    }
}

/// The markdown report; ratios are against `baseline` (a target name) when it ran.
pub fn markdown(result: &SuiteResult, baseline: Option<&str>) -> String {
    let runs = &result.runs;
    let ts = targets(runs);
    let by = index(runs);
    let mut md = String::new();
    let base = baseline.filter(|b| ts.iter().any(|t| t == b));
    let _ = writeln!(
        md,
        "Throughput (operations per second){}:\n",
        base.map_or(String::new(), |b| format!("; in brackets the ratio to {b}"))
    );
    let _ = writeln!(md, "| workload | keys | {} |", ts.join(" | "));
    let _ = writeln!(md, "|---|---|{}", "---:|".repeat(ts.len()));
    for (w, d) in rows(runs) {
        let mut line = format!("| {w} | {d} |");
        let base_tp = base
            .and_then(|b| by.get(&(w.clone(), d.clone(), b.to_string())))
            .filter(|r| r.error.is_none() && r.skipped.is_none())
            .map(|r| r.throughput);
        for t in &ts {
            let cell = match by.get(&(w.clone(), d.clone(), t.clone())) {
                None => "".to_string(),
                Some(r) if r.skipped.is_some() => "n/a".to_string(),
                Some(r) if r.error.is_some() => "FAILED".to_string(),
                Some(r) => match base_tp {
                    Some(b) if b > 0.0 && base != Some(t.as_str()) => {
                        format!("{} ({:.2}×)", kops(r.throughput), r.throughput / b)
                    }
                    _ => kops(r.throughput),
                },
            };
            let _ = write!(line, " {cell} |");
        }
        let _ = writeln!(md, "{line}");
    }
    let _ = writeln!(
        md,
        "\nLatency of every operation (a batch's operations share its latency), microseconds:\n"
    );
    let _ = writeln!(
        md,
        "| workload | keys | target | ops/s | p50 | p99 | p999 | validated | device bytes/op | note |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---:|---:|---|");
    for r in runs {
        let note = r
            .error
            .as_ref()
            .map(|e| format!("FAILED: {e}"))
            .or_else(|| r.skipped.clone())
            .unwrap_or_default();
        let (p50, p99, p999) = r
            .all
            .as_ref()
            .map_or((0.0, 0.0, 0.0), |l| (l.p50_us, l.p99_us, l.p999_us));
        let device = r
            .device_bytes_per_op
            .map_or_else(|| "-".to_string(), |b| format!("{b:.0}"));
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.1} | {} | {} | {} |",
            r.workload, r.dist, r.target, r.throughput, p50, p99, p999, r.validated, device, note
        );
    }
    if !result.loads.is_empty() {
        let _ = writeln!(
            md,
            "\nLoad phase:\n\n| target | records | inserts/s | note |"
        );
        let _ = writeln!(md, "|---|---:|---:|---|");
        for l in &result.loads {
            let _ = writeln!(
                md,
                "| {} | {} | {:.0} | {} |",
                l.target,
                l.records,
                l.rate,
                l.error.as_deref().unwrap_or("")
            );
        }
    }
    md
}

/// Every number as pretty JSON.
pub fn json(result: &SuiteResult) -> String {
    serde_json::to_string_pretty(result).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

const COLORS: [RGBColor; 9] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

/// A grouped bar chart (SVG) of throughput: one group per workload and distribution, one bar
/// per target.
pub fn plot(result: &SuiteResult, title: &str, path: &Path) -> Result<(), String> {
    let runs = &result.runs;
    let rs = rows(runs);
    let ts = targets(runs);
    if rs.is_empty() || ts.is_empty() {
        return Err("nothing to plot".into());
    }
    let by = index(runs);
    let ok = || {
        runs.iter()
            .filter(|r| r.error.is_none() && r.skipped.is_none() && r.throughput > 0.0)
            .map(|r| r.throughput / 1e3)
    };
    // Log scale: in-process and network targets differ by orders of magnitude.
    let max = ok().fold(1.0f64, f64::max) * 1.5;
    let floor = 10f64
        .powf(ok().fold(max, f64::min).log10().floor())
        .min(max / 10.0);
    let width = (140 + rs.len() * (ts.len() * 14 + 24).max(120)).max(640) as u32;
    let root = SVGBackend::new(path, (width, 480)).into_drawing_area();
    let e = |e: &dyn std::fmt::Display| e.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..rs.len() as f64, (floor..max).log_scale())
        .map_err(|x| e(&x))?;
    let labels: Vec<String> = rs.iter().map(|(w, d)| format!("{w} {d}")).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rs.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|y| {
            if *y >= 1.0 {
                format!("{y:.0}")
            } else {
                format!("{y}")
            }
        })
        .y_desc("thousand operations per second (log scale)")
        .draw()
        .map_err(|x| e(&x))?;
    let bar = 0.8 / ts.len() as f64;
    for (ti, t) in ts.iter().enumerate() {
        let color = COLORS[ti % COLORS.len()];
        let bars: Vec<Rectangle<(f64, f64)>> = rs
            .iter()
            .enumerate()
            .filter_map(|(ri, (w, d))| {
                let r = by.get(&(w.clone(), d.clone(), t.clone()))?;
                if r.error.is_some() || r.skipped.is_some() {
                    return None;
                }
                let x0 = ri as f64 + 0.1 + ti as f64 * bar;
                Some(Rectangle::new(
                    [(x0, floor), (x0 + bar * 0.9, r.throughput / 1e3)],
                    color.filled(),
                ))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|x| e(&x))?
            .label(t.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|x| e(&x))?;
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

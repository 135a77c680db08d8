//! LATENCY LATEST, HISTORY, RESET, GRAPH, DOCTOR, HISTOGRAM and HELP: the latency
//! monitor's events (`resp/latency.rs`) and each command's latency histogram
//! (`resp/cmdstats.rs`, the time of the pipelines it ran in).

use crate::resp::call::Call;
use crate::resp::latency::{doctor, graph};
use crate::resp::reply::upper;
use accelkv_proto::resp;

const HELP: &[&str] = &[
    "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
    "    If no commands are specified then all histograms are replied.",
    "HELP",
    "    Print this help.",
];

fn wrong_args(out: &mut Vec<u8>, sub: &str) {
    resp::error(
        out,
        &format!("ERR wrong number of arguments for 'latency|{sub}' command"),
    )
}

/// `LATENCY <subcommand> …`.
pub fn latency(x: &mut Call<'_, '_>) {
    let lat = &x.s.global.latency;
    let (n, v) = (x.args.len(), x.s.proto);
    let text = |a: &[u8]| String::from_utf8_lossy(a).into_owned();
    match upper(x.args[1]).as_slice() {
        b"LATEST" if n == 2 => {
            let all = lat.all();
            resp::array(x.out, all.len());
            for (name, s) in all {
                let (t, ms) = s.samples.back().copied().unwrap_or((0, 0));
                resp::array(x.out, 4);
                resp::bulk(x.out, Some(name.as_bytes()));
                resp::integer(x.out, t as i64);
                resp::integer(x.out, ms as i64);
                resp::integer(x.out, s.max as i64);
            }
        }
        b"HISTORY" if n == 3 => {
            let samples = lat
                .get(&text(x.args[2]))
                .map(|s| s.samples)
                .unwrap_or_default();
            resp::array(x.out, samples.len());
            for (t, ms) in samples {
                resp::array(x.out, 2);
                resp::integer(x.out, t as i64);
                resp::integer(x.out, ms as i64);
            }
        }
        b"RESET" => {
            let names: Vec<String> = x.args[2..].iter().map(|a| text(a)).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            resp::integer(x.out, lat.reset(&names) as i64)
        }
        b"GRAPH" if n == 3 => {
            let event = text(x.args[2]);
            match lat.get(&event) {
                Some(s) => resp::verbatim(x.out, graph(&event, &s).as_bytes(), v),
                None => resp::error(
                    x.out,
                    &format!("ERR No samples available for event '{event}'"),
                ),
            }
        }
        b"DOCTOR" if n == 2 => resp::verbatim(x.out, doctor(&lat.all()).as_bytes(), v),
        b"HISTOGRAM" => histogram(x),
        b"HELP" if n == 2 => {
            resp::array(x.out, HELP.len());
            for l in HELP {
                resp::simple(x.out, l);
            }
        }
        b"LATEST" | b"HISTORY" | b"GRAPH" | b"DOCTOR" | b"HELP" => {
            wrong_args(x.out, &text(x.args[1]).to_ascii_lowercase())
        }
        _ => resp::error(
            x.out,
            &format!(
                "ERR unknown subcommand '{}'. Try LATENCY HELP.",
                text(x.args[1])
            ),
        ),
    }
}

/// A command's runs and its cumulative counts by microseconds (`CmdStats::histogram`).
type Histogram = (u64, Vec<(u64, u64)>);

/// `LATENCY HISTOGRAM [command ...]`: for each command that ran (of those named; unknown
/// names skipped), its calls and cumulative counts by power-of-two microseconds.
fn histogram(x: &mut Call<'_, '_>) {
    let names = crate::resp::subcommands::names((x.dispatch.table)());
    // A container's name stands for each of its subcommands.
    let asked: Vec<String> = x.args[2..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    // Those asked for, in the order asked (all: the table's order), each once.
    let matches = |a: &str, n: &str| n == a || (n.starts_with(a) && n[a.len()..].starts_with('|'));
    let mut order: Vec<usize> = Vec::new();
    if asked.is_empty() {
        order.extend(0..names.len());
    }
    for a in &asked {
        for (i, n) in names.iter().enumerate() {
            if matches(a, n) && !order.contains(&i) {
                order.push(i);
            }
        }
    }
    let stats = &x.s.global.cmdstats;
    let rows: Vec<(&str, Histogram)> = order
        .into_iter()
        .map(|i| (names[i].as_str(), stats.histogram(i)))
        .filter(|(_, (calls, _))| *calls > 0)
        .collect();
    let v = x.s.proto;
    resp::map(x.out, rows.len(), v);
    for (name, (calls, steps)) in rows {
        resp::bulk(x.out, Some(name.as_bytes()));
        resp::map(x.out, 2, v);
        resp::bulk(x.out, Some(b"calls"));
        resp::integer(x.out, calls as i64);
        resp::bulk(x.out, Some(b"histogram_usec"));
        resp::map(x.out, steps.len(), v);
        for (us, n) in steps {
            resp::integer(x.out, us as i64);
            resp::integer(x.out, n as i64);
        }
    }
}

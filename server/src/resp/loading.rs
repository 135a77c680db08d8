//! RESP's answer while the data directory is recovered (net/loading.rs): `-LOADING` to
//! every command, as Redis answers while it loads its dataset, except INFO (its persistence
//! section with how far loading is) and QUIT: commands the gate's `loading` flag lets
//! through (`gate.rs`) that this door can serve without the store.

use crate::core::loading::Progress;
use crate::resp::gate;
use crate::resp::table::find;
use accelkv_proto::resp;
use accelkv_proto::Limits;

/// The message after `-LOADING` (Redis's words, with accelkv's name).
pub const LOADING: &str = "LOADING accelkv is loading the dataset in memory";

/// [`crate::core::loading::Answer`] for RESP.
pub fn answer(input: &[u8], p: &Progress, out: &mut Vec<u8>) -> Option<usize> {
    let limits = Limits::default();
    let mut at = 0;
    while let Some((args, used)) = resp::parse_command(&input[at..], &limits).ok()? {
        at += used;
        if args.is_empty() {
            continue;
        }
        // The gate's `loading` flag says what may run; of those this door, which has no
        // store yet, serves QUIT and INFO (the others, AUTH or CONFIG say, answer -LOADING
        // too, until the store is open).
        let spec = find(args[0]);
        match spec.map(|sp| sp.name) {
            _ if !gate::while_loading(spec) => resp::error(out, LOADING),
            Some("QUIT") => {
                resp::simple(out, "OK");
                return None;
            }
            Some("INFO") => resp::bulk(out, Some(info(p).as_bytes())),
            _ => resp::error(out, LOADING),
        }
    }
    Some(at)
}

/// INFO while loading: Redis's loading fields.
fn info(p: &Progress) -> String {
    let (read, total, perc) = p.read();
    let secs = p.since.elapsed().as_secs_f64();
    let eta = if read > 0 && total > read {
        (secs * (total - read) as f64 / read as f64).ceil() as u64
    } else {
        0
    };
    let start = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .saturating_sub(secs as u64);
    format!(
        "# Persistence\r\nloading:1\r\nasync_loading:0\r\nloading_start_time:{start}\r\nloading_total_bytes:{total}\r\nloading_loaded_bytes:{read}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n"
    )
}

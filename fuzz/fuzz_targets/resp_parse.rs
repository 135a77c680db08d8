//! Fuzz target for the RESP parsers: arbitrary bytes as a stream of commands and as a
//! reply; a parsed reply must re-encode and parse to the same value, and the reply framer
//! (`reply_len`, RESP3 included) must agree on a RESP2 reply's length and stay within the
//! input. The argument-by-argument reader (`resp_stream`), fed the same bytes in pieces
//! with every big bulk string streamed, must agree with the whole-command parser on the
//! first command: its arguments, its length, or that it is malformed. Nothing may panic.
//!
//! `cargo +nightly fuzz run resp_parse -- -max_total_time=60`

#![no_main]

use accelkv_proto::resp_stream::{Partial, Progress};
use accelkv_proto::{resp, Limits};
use libfuzzer_sys::fuzz_target;

/// Bulk strings of this many bytes or more are streamed (small, so short inputs reach it).
const MIN: usize = 8;

/// Reads the first command of `data` in pieces of `step` bytes through the streaming
/// reader: `Some(Ok((args, used)))`, `Some(Err(()))` if malformed, `None` if incomplete or
/// never streamed.
fn streamed(data: &[u8], step: usize, limits: &Limits) -> Option<Result<(Vec<Vec<u8>>, usize), ()>> {
    let (mut inb, mut next, mut taken) = (Vec::new(), 0, 0);
    let mut fill = |inb: &mut Vec<u8>| {
        let end = (next + step).min(data.len());
        inb.extend_from_slice(&data[next..end]);
        let more = end > next;
        next = end;
        more
    };
    let (mut p, mut prog) = loop {
        let more = fill(&mut inb);
        match Partial::start(&inb, limits, MIN) {
            Ok(Some(started)) => break started,
            Ok(None) if more => {}
            Ok(None) => return None,
            Err(_) => return Some(Err(())),
        }
        if resp::parse_command(&inb, limits).map_or(true, |c| c.is_some()) {
            return None; // the whole-command parser's from here
        }
    };
    loop {
        match prog {
            Progress::Complete { used } => return Some(Ok((p.args().to_vec(), taken + used))),
            Progress::More { used } => {
                inb.drain(..used);
                taken += used;
                if !fill(&mut inb) {
                    return None;
                }
            }
            Progress::Stream { used, len } => {
                inb.drain(..used);
                taken += used;
                let mut arg = Vec::with_capacity(len);
                while arg.len() < len {
                    if inb.is_empty() && !fill(&mut inb) {
                        return None;
                    }
                    let n = (len - arg.len()).min(inb.len());
                    arg.extend(inb.drain(..n));
                    taken += n;
                }
                p.streamed(arg);
            }
        }
        prog = match p.resume(&inb, limits, MIN) {
            Ok(prog) => prog,
            Err(_) => return Some(Err(())),
        };
    }
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits { max_bulk: 4096, max_array: 64, max_inline: 1024, ..Limits::default() };
    let mut at = 0;
    while at < data.len() {
        match resp::parse_command(&data[at..], &limits) {
            Ok(Some((_, used))) => {
                assert!(used > 0);
                at += used;
            }
            _ => break,
        }
    }
    let step = 1 + usize::from(data.first().copied().unwrap_or(0) % 32);
    match (streamed(data, step, &limits), resp::parse_command(data, &limits)) {
        (None, _) => {}
        (Some(Ok((args, used))), Ok(Some((whole, n)))) => {
            assert_eq!(used, n);
            assert!(args.iter().map(Vec::as_slice).eq(whole.iter().copied()));
        }
        (Some(Err(())), Err(_)) => {}
        (got, whole) => panic!("streamed {got:?}, whole {whole:?}"),
    }
    if let Ok(Some(n)) = resp::reply_len(data, &limits) {
        assert!(n > 0 && n <= data.len());
    }
    if let Ok(Some((v, used))) = resp::parse_reply(data, &limits) {
        assert_eq!(resp::reply_len(data, &limits), Ok(Some(used)));
        let mut out = Vec::new();
        resp::value(&mut out, &v);
        let back = resp::parse_reply(&out, &Limits::default()).expect("re-encoded reply parses");
        assert_eq!(back.map(|(v, _)| v), Some(v));
    }
});

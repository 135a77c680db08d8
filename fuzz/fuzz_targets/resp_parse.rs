//! Fuzz target for the RESP parsers: arbitrary bytes as a stream of commands and as a
//! reply; a parsed reply must re-encode and parse to the same value, and the reply framer
//! (`reply_len`, RESP3 included) must agree on a RESP2 reply's length and stay within the
//! input. Nothing may panic.
//!
//! `cargo +nightly fuzz run resp_parse -- -max_total_time=60`

#![no_main]

use accelkv_proto::{resp, Limits};
use libfuzzer_sys::fuzz_target;

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

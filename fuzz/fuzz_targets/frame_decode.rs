//! Decode-only fuzz target for binary frames: arbitrary bytes through the request and
//! response decoders with tight and default limits; a frame that decodes must re-encode to
//! a frame that decodes to the same operations. Nothing may panic.
//!
//! `cargo +nightly fuzz run frame_decode -- -max_total_time=60`

#![no_main]

use accelkv_proto::frame::{decode_request, decode_response, encode_request, encode_response};
use accelkv_proto::{Limits, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tight = Limits { max_key: 16, max_value: 64, max_ops: 8, max_frame: 512, ..Limits::default() };
    for limits in [Limits::default(), tight] {
        if let Ok((h, ops)) = decode_request(data, &limits) {
            // Operations the decoder could not represent are answered, not re-sent.
            let ok: Vec<Request> = ops
                .into_iter()
                .filter(|o| !matches!(o, Request::Unknown { .. } | Request::Invalid { .. }))
                .collect();
            let mut again = Vec::new();
            encode_request(&mut again, h.frame_id, h.token, &ok);
            let (_, back) = decode_request(&again, &Limits::default()).expect("re-encoded frame decodes");
            assert_eq!(back, ok);
        }
        if let Ok((h, ops)) = decode_response(data, &limits) {
            let mut again = Vec::new();
            encode_response(&mut again, h.frame_id, &ops);
            let (_, back) = decode_response(&again, &Limits::default()).expect("re-encoded frame decodes");
            assert_eq!(back, ops);
        }
    }
});

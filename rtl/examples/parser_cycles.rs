//! Cycles the simulated frame parser takes per frame (a byte a cycle plus a few per
//! operation), for frames of GETs (16-byte keys) and PUTs (16-byte keys, 100-byte values).
//!
//! `cargo run --release -p accelkv-rtl --features sim --example parser_cycles`

use accelkv_proto::frame::encode_request;
use accelkv_proto::{Limits, Request};
use accelkv_rtl::{FrameParser, Outcome, ParserLimits};

fn main() {
    let l = Limits::default();
    let limits = ParserLimits {
        max_frame: l.max_frame as u32,
        max_ops: l.max_ops as u16,
        max_key: l.max_key as u32,
        max_value: l.max_value as u32,
        max_token: l.max_token as u32,
    };
    let keys: Vec<Vec<u8>> = (0..256)
        .map(|i| format!("user{i:012}").into_bytes())
        .collect();
    let value = [b'v'; 100];
    let mut p = FrameParser::new();
    println!("| operations | op | frame bytes | cycles | cycles / op | M ops/s at 200 MHz |");
    println!("|---:|---|---:|---:|---:|---:|");
    for n in [1usize, 16, 64, 256] {
        for put in [false, true] {
            let ops: Vec<Request> = keys[..n]
                .iter()
                .enumerate()
                .map(|(i, k)| match put {
                    false => Request::Get {
                        id: i as u16,
                        key: k,
                    },
                    true => Request::Put {
                        id: i as u16,
                        key: k,
                        value: &value,
                    },
                })
                .collect();
            let mut f = Vec::new();
            encode_request(&mut f, 1, None, &ops);
            let r = p.parse(&f, limits).expect("finishes");
            assert_eq!(r.outcome, Outcome::Ok);
            assert_eq!(r.ops.len(), n);
            println!(
                "| {n} | {} | {} | {} | {:.1} | {:.1} |",
                if put { "PUT" } else { "GET" },
                f.len(),
                r.cycles,
                r.cycles as f64 / n as f64,
                n as f64 / r.cycles as f64 * 200.0
            );
        }
    }
}

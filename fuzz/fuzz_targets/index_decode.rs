//! The page file's index (durable/src/index.rs) and its close record, from untrusted bytes:
//! an error, never a panic; what decodes encodes back to the same bytes.
#![no_main]

use accelkv_durable::index::{decode, decode_close, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = decode_close(data);
    if let Ok(ix) = decode(data) {
        assert_eq!(encode(&ix), data, "an index that decodes re-encodes to its bytes");
    }
});

//! Fuzz target for Redis's DUMP payloads (accelkv-proto's `rdb`, docs/FORMAT.md "DUMP
//! payloads"): RESTORE's decoder gets any bytes, and, so the checksum does not stop every
//! input at the door, any type byte and body with a valid footer. Nothing may panic or
//! allocate past the input's size; a value that restores dumps and restores again to
//! itself. FUNCTION RESTORE's decoder gets the same bytes: libraries it reads dump and
//! read back to themselves.
//!
//! `cargo +nightly fuzz run rdb_restore -- -max_total_time=60`

#![no_main]

use accelkv_proto::rdb::{crc64, dump, dump_functions, restore, restore_functions, Value};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = restore(data);
    let _ = restore_functions(data);
    let mut framed = data.to_vec();
    framed.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    if let Ok(codes) = restore_functions(&framed) {
        let refs: Vec<&[u8]> = codes.iter().map(Vec::as_slice).collect();
        assert_eq!(restore_functions(&dump_functions(&refs)).ok(), Some(codes.clone()));
    }
    if let Ok(mut v) = restore(&framed) {
        // A group of a stream older than Redis 7.0 has its read counter estimated by the
        // server; DUMP writes it as unknown.
        if let Value::Stream(s) = &mut v {
            for g in &mut s.groups {
                g.entries_read.get_or_insert(-1);
            }
        }
        let again = restore(&dump(&v)).expect("a dump restores");
        let again = match again {
            // DUMP writes a sorted set from its highest score, as Redis does.
            Value::ZSet(mut items) => {
                items.reverse();
                Value::ZSet(items)
            }
            other => other,
        };
        assert_eq!(again, v);
    }
});

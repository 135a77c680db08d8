//! Fuzz target for whole RDB files (accelkv-proto's `rdb::load_file`: what `--import-rdb`
//! and REPLICAOF's full synchronization read): any bytes, and any body behind a valid
//! header and ahead of a valid checksum, so the checksum does not stop every input at the
//! door. Nothing may panic or allocate past the input's size; every entry read dumps and
//! restores (RESTORE's own decoder) to a value.
//!
//! `cargo +nightly fuzz run rdb_file -- -max_total_time=60`

#![no_main]

use accelkv_proto::rdb::{crc64, dump, load_file, restore, Item};
use libfuzzer_sys::fuzz_target;

fn check(b: &[u8]) {
    let _ = load_file(b, |item| {
        if let Item::Entry { value, .. } = &item {
            assert!(restore(&dump(value)).is_ok(), "a loaded value dumps and restores");
        }
        Ok(())
    });
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut framed = b"REDIS0011".to_vec();
    framed.extend_from_slice(data);
    framed.push(0xFF);
    let crc = crc64(&framed);
    framed.extend_from_slice(&crc.to_le_bytes());
    check(&framed);
});

//! Decode-only fuzz target for the page file: arbitrary bytes go through the superblock,
//! slab descriptor, page header and page decoders (leaf, delta, extension, clock pages) (what recovery runs on a torn or
//! corrupted device); a page that decodes is re-encoded and must round-trip. Nothing may
//! panic.
//!
//! `cargo +nightly fuzz run page_decode -- -max_total_time=60`

#![no_main]

use accelkv_durable::format::{
    class_for, decode_header, decode_page, decode_slab, decode_super, encode_clock,
    encode_delta, encode_ext, encode_leaf, Page, ALIVE, HEADER, PAGE_MAGIC,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // First byte odd: give the rest a valid magic, length, class and checksum, so the
    // fuzzer reaches the body's structural checks (a CRC is not something it can guess).
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let mut owned = rest.to_vec();
    if mode & 1 == 1 && owned.len() >= HEADER && owned.len() < (1 << 30) {
        owned[0..4].copy_from_slice(&PAGE_MAGIC);
        owned[5] |= ALIVE;
        owned[6] = class_for(owned.len());
        let len = owned.len() as u32;
        owned[12..16].copy_from_slice(&len.to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&owned[0..8]), &owned[12..]);
        owned[8..12].copy_from_slice(&crc.to_le_bytes());
    }
    let data = owned.as_slice();
    let _ = decode_super(data);
    let _ = decode_slab(data);
    let _ = decode_header(data);
    // The page's recorded offset is read from its header: decode at that offset so the
    // structural checks run, not only the misplacement check.
    let off = if data.len() >= 24 {
        u64::from_le_bytes(data[16..24].try_into().unwrap_or([0; 8]))
    } else {
        0
    };
    match decode_page(data, off) {
        Ok(Page::Leaf(p)) => {
            let b = encode_leaf(&p, off);
            assert_eq!(decode_page(&b, off), Ok(Page::Leaf(p)));
        }
        Ok(Page::Ext(p)) => {
            let b = encode_ext(&p, off);
            assert_eq!(decode_page(&b, off), Ok(Page::Ext(p)));
        }
        Ok(Page::Delta(p)) => {
            let b = encode_delta(&p, off);
            assert_eq!(decode_page(&b, off), Ok(Page::Delta(p)));
        }
        Ok(Page::Clock(lease)) => {
            let b = encode_clock(lease, off);
            assert_eq!(decode_page(&b, off), Ok(Page::Clock(lease)));
        }
        Err(_) => {}
    }
});

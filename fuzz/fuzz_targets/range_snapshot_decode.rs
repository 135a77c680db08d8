//! Decode-only fuzz target for a range's snapshot in cluster mode (accelkv-durable's
//! `range_snapshot.rs`, docs/FORMAT.md "Range snapshot"): what a replica accepts from a peer
//! or reads back from its snapshot directory. Arbitrary bytes go through the decoder; a
//! snapshot that decodes is written again and must decode to the same thing. Nothing may
//! panic.
//!
//! The first byte chooses: odd, the rest's checksums are made valid first (the head's CRC
//! and each page's length, class, offset and CRC), so the fuzzer reaches the structural
//! checks behind them (bounds, client table, fences that must tile the bounds).
//!
//! `cargo +nightly fuzz run range_snapshot_decode -- -max_total_time=60`

#![no_main]

use accelkv_durable::format::{class_for, PageValue, ALIVE, HEADER, PAGE_MAGIC};
use accelkv_durable::range_snapshot::{decode, Writer, MAGIC};
use libfuzzer_sys::fuzz_target;

fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (h, t) = (b.get(..n)?, b.get(n..)?);
    *b = t;
    Some(h)
}

fn u32_of(b: &mut &[u8]) -> Option<usize> {
    Some(u32::from_le_bytes(take(b, 4)?.try_into().ok()?) as usize)
}

/// Where an `AKV3` head's checksum sits: after the magic, bounds and client table.
fn head_len(all: &[u8]) -> Option<usize> {
    let mut b = all.get(4..)?;
    let n = u32_of(&mut b)?;
    take(&mut b, n)?;
    if take(&mut b, 1)?[0] == 1 {
        let n = u32_of(&mut b)?;
        take(&mut b, n)?;
    }
    for _ in 0..u32_of(&mut b)?.min(1 << 16) {
        take(&mut b, 24)?;
        let n = u32_of(&mut b)?;
        take(&mut b, n)?;
    }
    Some(all.len() - b.len())
}

/// Makes the head's and each page's checksum (and a page's length, class and offset) valid.
fn fix(data: &mut [u8]) {
    data[..4].copy_from_slice(MAGIC);
    let Some(head) = head_len(data) else {
        return;
    };
    if data.len() < head + 4 {
        return;
    }
    let crc = crc32c::crc32c(&data[..head]);
    data[head..head + 4].copy_from_slice(&crc.to_le_bytes());
    let base = head + 4;
    let mut at = base;
    while data.len() - at >= HEADER {
        let p = &mut data[at..];
        let want = u32::from_le_bytes(p[12..16].try_into().unwrap()) as usize;
        let len = want.clamp(HEADER, p.len());
        let p = &mut p[..len];
        p[0..4].copy_from_slice(&PAGE_MAGIC);
        p[5] |= ALIVE;
        p[6] = class_for(len);
        p[12..16].copy_from_slice(&(len as u32).to_le_bytes());
        p[16..24].copy_from_slice(&((at - base) as u64).to_le_bytes());
        let crc = crc32c::crc32c_append(crc32c::crc32c(&p[0..8]), &p[12..]);
        p[8..12].copy_from_slice(&crc.to_le_bytes());
        at += len;
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let mut owned = rest.to_vec();
    if mode & 1 == 1 && owned.len() >= 4 {
        fix(&mut owned);
    }
    let Ok(s) = decode(&owned) else {
        return;
    };
    assert!(s.high.is_none_or(|h| h > s.low));
    if !owned.starts_with(MAGIC) {
        return; // an older snapshot's items need not make valid pages
    }
    let mut w = Writer::new(s.low, s.high, &s.clients);
    for (i, p) in s.parts.iter().enumerate() {
        let items = p
            .items
            .iter()
            .map(|&(k, v, d, f)| (k, PageValue::Inline(v), d, f))
            .collect();
        let low = Some(p.low).filter(|l| !l.is_empty() || i > 0);
        w.page(i as u64, 1, low, p.high, items);
    }
    let again = w.finish();
    assert_eq!(
        decode(&again).as_ref(),
        Ok(&s),
        "written again, the snapshot decodes the same"
    );
});

//! Decode-only fuzz target for the collection format (accelkv-proto's `collection.rs`,
//! docs/FORMAT.md "Redis types"): what the server reads back from the store for a typed
//! item's metadata and for a subkey's owner. Arbitrary bytes and flags go through the
//! decoders; a record that decodes encodes to the same bytes, and a subkey's owner rebuilt
//! into a prefix starts the subkey; a sorted set's score bytes that decode encode back;
//! a stream entry's value that decodes encodes back to its bytes; a packed collection's
//! body that unpacks (`packed.rs`) packs back to the same item.
//! Nothing may panic.
//!
//! `cargo +nightly fuzz run collection_meta -- -max_total_time=60`

#![no_main]

use accelkv_proto::collection::{
    decode_entry, decode_score, encode_entry, encode_score, field_key, owner, prefix, Meta,
    StreamId,
};
use accelkv_proto::packed::{pack, unpack};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, rest)) = data.split_first_chunk::<4>() else {
        return;
    };
    let flags = u32::from_le_bytes(*head);
    if let Ok(m) = Meta::decode(rest, flags) {
        assert_eq!(&rest[..m.record_len()], m.encode(), "a decoded record encodes back to its bytes");
        assert!(m.packed || rest.len() == m.record_len());
        assert_eq!(m.kind.flags(), flags);
        if let Some(entries) = unpack(&m, m.body(rest)) {
            let again = pack(&m, entries.iter().map(|(k, v)| (&k[..], &v[..])));
            assert_eq!(again.as_deref(), Some(rest), "an unpacked body packs back to its item");
        }
    }
    if let Some((key, id)) = owner(rest) {
        let p = prefix(key, id);
        assert!(rest.starts_with(&p));
        assert!(field_key(&p, b"x").starts_with(&p));
    }
    // A sorted set's score: 8 bytes that decode (anything but a NaN) encode back, but for
    // a negative zero, which is stored as zero.
    if let Some(score) = rest.get(..8).and_then(decode_score) {
        assert!(!score.is_nan());
        if score != 0.0 {
            assert_eq!(&encode_score(score)[..], &rest[..8]);
        }
    }
    if let Some(items) = decode_entry(rest) {
        assert_eq!(encode_entry(&items), rest, "a stream entry encodes back to its bytes");
    }
    if let Some(id) = StreamId::from_bytes(rest) {
        assert_eq!(&id.to_bytes()[..], rest);
    }
});

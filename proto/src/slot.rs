//! Redis Cluster's hash slot of a key (`keyHashSlot`): CRC16 (XMODEM: polynomial 0x1021,
//! initial value 0) of the key, or of its hash tag — the bytes between the first `{` and the
//! first `}` after it, when there are some — modulo 16,384. Keys that share a tag share a
//! slot, which is how a client keeps a multi-key command on one node.

/// The number of hash slots.
pub const SLOTS: u16 = 16_384;

/// CRC16-XMODEM of `b`.
pub fn crc16(b: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in b {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The part of `key` that is hashed: its hash tag if it has a non-empty one, else itself.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS - 1)
}

/// Whether this process keeps keys placed by slot ([`place`]): a cluster in slot mode
/// (`--slots redis`, docs/CLUSTER.md) sets it once at start, before any key is written or
/// read, and it never changes after; everything else leaves it off.
static PLACED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Turns slot placement on for this process (cluster slot mode, at start).
pub fn set_placed() {
    PLACED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Whether keys are placed by slot in this process.
pub fn placed() -> bool {
    PLACED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The first key of slot `slot` in the store's order: its number, big-endian. In slot mode
/// every key of the slot, and every subkey of its collections, sorts from here to the next
/// slot's bound, so a range of the store is a run of whole slots.
pub fn bound(slot: u16) -> [u8; 2] {
    slot.to_be_bytes()
}

/// `key` as slot mode stores it: its slot's [`bound`], then the key.
pub fn place(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 2);
    k.extend_from_slice(&bound(key_slot(key)));
    k.extend_from_slice(key);
    k
}

/// The slot a stored key (or a range bound) of slot mode falls in: its first two bytes,
/// big-endian (a bound shorter than that is slot 0's start).
pub fn slot_of_stored(key: &[u8]) -> u16 {
    match key {
        [] => 0,
        [a] => u16::from_be_bytes([*a, 0]),
        [a, b, ..] => u16::from_be_bytes([*a, *b]),
    }
    .min(SLOTS)
}

/// The key as its client named it: a stored key of slot mode without its slot's bound.
pub fn unplace(stored: &[u8]) -> &[u8] {
    stored.get(2..).unwrap_or_default()
}

/// A split point of slot mode: the bound of the slot `at` falls in, or of the next slot
/// when that bound is not after `start` (a range's first key); `None` when no slot bound
/// lies strictly between `start` and `end` (a range of one slot cannot be split).
pub fn split_bound(at: &[u8], start: &[u8], end: Option<&[u8]>) -> Option<Vec<u8>> {
    let mut s = slot_of_stored(at);
    if bound(s).as_slice() <= start {
        s += 1;
    }
    (s < SLOTS && end.is_none_or(|e| bound(s).as_slice() < e)).then(|| bound(s).to_vec())
}

/// The slots a range `[start, end)` of slot mode holds, first and last (`None`: none).
pub fn slots_of_range(start: &[u8], end: Option<&[u8]>) -> Option<(u16, u16)> {
    // A range starts at a slot's bound (every split is at one) or at the empty key.
    let first = slot_of_stored(start) + u16::from(start.len() > 2);
    let past = end.map_or(SLOTS, slot_of_stored);
    (first < past.min(SLOTS)).then(|| (first, past.min(SLOTS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placed_keys_sort_by_slot_and_ranges_are_runs_of_slots() {
        let (a, b) = (place(b"foo"), place(b"bar"));
        assert_eq!(slot_of_stored(&a), 12182);
        assert_eq!(unplace(&a), b"foo");
        assert!(b < a, "slot 5061 sorts before slot 12182");
        assert!(bound(5061).as_slice() <= b.as_slice() && b.as_slice() < bound(5062).as_slice());
        // A split inside slot 12182 moves to its bound; at a range's first slot, to the next.
        assert_eq!(split_bound(&a, b"", None), Some(bound(12182).to_vec()));
        assert_eq!(
            split_bound(&a, &bound(12182), None),
            Some(bound(12183).to_vec())
        );
        assert_eq!(split_bound(&a, &bound(12182), Some(&bound(12183))), None);
        assert_eq!(split_bound(b"\x3f\xffk", &bound(16383), None), None);
        assert_eq!(slots_of_range(b"", None), Some((0, 16383)));
        assert_eq!(slots_of_range(b"", Some(&bound(100))), Some((0, 99)));
        assert_eq!(
            slots_of_range(&bound(100), Some(&bound(101))),
            Some((100, 100))
        );
        assert_eq!(slots_of_range(&bound(100), None), Some((100, 16383)));
        assert_eq!(slots_of_range(&bound(100), Some(&bound(100))), None);
    }

    #[test]
    fn slots_are_redis_cluster_s() {
        // The CRC's check value, and slots `CLUSTER KEYSLOT` answers on Redis 7.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        for (key, slot) in [
            ("foo", 12182),
            ("bar", 5061),
            ("hello", 866),
            ("somekey", 11058),
            ("", 0),
        ] {
            assert_eq!(key_slot(key.as_bytes()), slot, "{key}");
        }
        // Hash tags: the first `{…}` with something inside.
        let s = key_slot(b"user1000");
        assert_eq!(key_slot(b"{user1000}.following"), s);
        assert_eq!(key_slot(b"x{user1000}y{z}"), s);
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 16383);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") & 16383);
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"no{close"), crc16(b"no{close") & 16383);
    }
}

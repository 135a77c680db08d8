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

#[cfg(test)]
mod tests {
    use super::*;

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

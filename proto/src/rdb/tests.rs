use super::*;
use proptest::prelude::*;

#[test]
fn the_checksum_is_redis_crc64() {
    // Redis's crc64 test vector.
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
}

#[test]
fn a_string_dump_is_redis_bytes() {
    // DUMP of "hello" in Redis 5.0+ format: type 0, length 5, the bytes, version 9, CRC.
    let d = dump(&Value::String(b"hello".to_vec()));
    assert_eq!(&d[..8], b"\x00\x05hello\x09\x00"[..8].as_ref());
    assert_eq!(restore(&d), Ok(Value::String(b"hello".to_vec())));
}

#[test]
fn damaged_payloads_are_refused() {
    let mut d = dump(&Value::Set(vec![b"a".to_vec(), b"b".to_vec()]));
    let n = d.len();
    d[n - 1] ^= 1;
    assert_eq!(restore(&d), Err(RdbError::VersionOrChecksum));
    assert_eq!(restore(b"short"), Err(RdbError::VersionOrChecksum));
    // A newer RDB version than Redis 7.2's.
    let mut body = vec![T_STRING, 1, b'x'];
    body.extend_from_slice(&12u16.to_le_bytes());
    let crc = crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&body), Err(RdbError::VersionOrChecksum));
    // A module (type 7) is refused as unsupported; a forged count as malformed.
    for (body, want) in [
        (vec![7u8, 0], RdbError::Unsupported(7)),
        (
            vec![T_LIST, 0x80, 0xff, 0xff, 0xff, 0xff],
            RdbError::BadFormat,
        ),
    ] {
        let mut p = body;
        p.extend_from_slice(&9u16.to_le_bytes());
        let crc = crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore(&p), Err(want));
    }
}

/// A payload of `t` and `body` with a valid footer.
fn framed(t: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![t];
    p.extend_from_slice(body);
    p.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn compact_encodings_read_as_their_values() {
    // An intset of 16-bit members 1, -2.
    let is = [2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0xfe, 0xff];
    let mut body = vec![is.len() as u8];
    body.extend_from_slice(&is);
    assert_eq!(
        restore(&framed(T_SET_INTSET, &body)),
        Ok(Value::Set(vec![b"1".to_vec(), b"-2".to_vec()]))
    );
    // A listpack hash {f: 7, g: "-300"}: a 7-bit uint, a 6-bit string, a 13-bit int.
    let entries: &[&[u8]] = &[&[0x81, b'f'], &[0x07], &[0x81, b'g'], &[0xc0 | 0x1e, 0xd4]];
    let mut lp = vec![0, 0, 0, 0, 4, 0];
    for e in entries {
        lp.extend_from_slice(e);
        lp.push(e.len() as u8);
    }
    lp.push(0xff);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let mut body = vec![lp.len() as u8];
    body.extend_from_slice(&lp);
    assert_eq!(
        restore(&framed(T_HASH_LISTPACK, &body)),
        Ok(Value::Hash(vec![
            (b"f".to_vec(), b"7".to_vec()),
            (b"g".to_vec(), b"-300".to_vec())
        ]))
    );
    // Integer-encoded and LZF-compressed strings.
    assert_eq!(
        restore(&framed(T_STRING, &[0xc0, 0xfb])),
        Ok(Value::String(b"-5".to_vec()))
    );
    let text = vec![b'a'; 500];
    let c = lzf::compress(&text).unwrap();
    let mut body = vec![0xc3, 0x40 | (c.len() >> 8) as u8, c.len() as u8, 0x41, 0xf4];
    body.extend_from_slice(&c);
    assert_eq!(restore(&framed(T_STRING, &body)), Ok(Value::String(text)));
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..80)
}

proptest! {
    #[test]
    fn dumps_restore_to_their_values(
        s in bytes(),
        items in prop::collection::vec(bytes(), 0..70),
        scores in prop::collection::vec((bytes(), -1e300f64..1e300), 0..70),
    ) {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = items.iter().map(|i| (i.clone(), s.clone())).collect();
        for v in [
            Value::String(s.clone()),
            Value::List(items.clone()),
            Value::Set(items.clone()),
            Value::ZSet(scores.clone()),
            Value::Hash(pairs),
        ] {
            let d = dump(&v);
            let mut back = restore(&d).unwrap();
            if let (Value::ZSet(a), Value::ZSet(b)) = (&v, &mut back) {
                b.reverse();
                prop_assert_eq!(a, &*b);
            } else {
                prop_assert_eq!(&back, &v);
            }
        }
    }

    #[test]
    fn any_payload_restores_or_fails_cleanly(t in 0u8..24, body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = restore(&framed(t, &body));
    }
}

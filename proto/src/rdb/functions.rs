//! FUNCTION DUMP's payload, as Redis 7 writes it (`rdbSaveFunctions`): for each library the
//! opcode `RDB_OPCODE_FUNCTION2` (245) and its code (shebang line and body) as an RDB
//! string, then the RDB version and the CRC-64 footer every DUMP payload carries. Read back
//! by FUNCTION RESTORE, footer checked first; Redis 7.0's older opcode (246, with the
//! library's metadata apart) is refused as Redis 7.2 refuses it.

use super::read::{checked_body, Reader};
use super::*;

/// The payload of the libraries whose code is `codes`.
pub fn dump_functions(codes: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in codes {
        out.push(FUNCTION2);
        put_str(&mut out, c);
    }
    out.extend_from_slice(&DUMP_VERSION.to_le_bytes());
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The libraries' code in a FUNCTION DUMP payload.
pub fn restore_functions(payload: &[u8]) -> Result<Vec<Vec<u8>>, RdbError> {
    let mut r = Reader::new(checked_body(payload)?);
    let mut codes = Vec::new();
    while !r.done() {
        if r.take(1)?[0] != FUNCTION2 {
            return Err(RdbError::BadFormat);
        }
        codes.push(r.string()?);
    }
    Ok(codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libraries_round_trip_and_a_bad_footer_is_refused() {
        let a = b"#!lua name=a\nredis.register_function('f', function() return 1 end)";
        let b = vec![b'x'; 300];
        let p = dump_functions(&[a, &b]);
        assert_eq!(restore_functions(&p).unwrap(), vec![a.to_vec(), b.clone()]);
        assert_eq!(
            restore_functions(&dump_functions(&[])).unwrap(),
            Vec::<Vec<u8>>::new()
        );
        let mut bad = p.clone();
        bad[3] ^= 1;
        assert_eq!(restore_functions(&bad), Err(RdbError::VersionOrChecksum));
        let mut other = vec![246u8];
        put_str(&mut other, b"x");
        other.extend_from_slice(&DUMP_VERSION.to_le_bytes());
        let crc = crc64(&other);
        other.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(restore_functions(&other), Err(RdbError::BadFormat));
    }
}

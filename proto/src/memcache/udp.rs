//! memcached's UDP framing: every datagram starts with an 8-byte header (request id,
//! sequence number, datagram count, reserved; big-endian u16s). A request is one datagram
//! (sequence 0 of 1); a reply is split into datagrams of at most [`UDP_PAYLOAD`] bytes
//! after the header, each carrying the request's id, its sequence number and the count.

/// The frame header's size.
pub const UDP_HEADER: usize = 8;
/// Most reply bytes one datagram carries after its header (memcached's
/// `UDP_MAX_PAYLOAD_SIZE`).
pub const UDP_PAYLOAD: usize = 1400;

/// A datagram's frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpHeader {
    /// The request's id, echoed in every datagram of the reply.
    pub id: u16,
    /// This datagram's position in its message.
    pub seq: u16,
    /// Datagrams in the message.
    pub count: u16,
}

/// Why a request datagram is dropped (memcached drops these silently).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpError {
    /// Shorter than the header.
    Short,
    /// A request spread over more than one datagram, or a nonzero reserved field.
    Unsupported,
}

/// The header of a request datagram and its payload.
pub fn decode_request(dgram: &[u8]) -> Result<(UdpHeader, &[u8]), UdpError> {
    if dgram.len() < UDP_HEADER {
        return Err(UdpError::Short);
    }
    let u = |i: usize| u16::from_be_bytes([dgram[i], dgram[i + 1]]);
    let h = UdpHeader {
        id: u(0),
        seq: u(2),
        count: u(4),
    };
    if h.seq != 0 || h.count != 1 || u(6) != 0 {
        return Err(UdpError::Unsupported);
    }
    Ok((h, &dgram[UDP_HEADER..]))
}

/// Datagrams a reply of `len` bytes takes (at least one: an empty reply is one header).
pub fn datagrams(len: usize) -> usize {
    len.div_ceil(UDP_PAYLOAD).max(1)
}

/// Writes datagram `seq` of a reply to request `id` whose bytes are `reply` into `out`
/// (cleared first): the header, then that datagram's slice of the reply.
pub fn encode_datagram(out: &mut Vec<u8>, id: u16, seq: usize, reply: &[u8]) {
    let count = datagrams(reply.len());
    out.clear();
    for v in [id, seq as u16, count as u16, 0] {
        out.extend_from_slice(&v.to_be_bytes());
    }
    let start = (seq * UDP_PAYLOAD).min(reply.len());
    let end = (start + UDP_PAYLOAD).min(reply.len());
    out.extend_from_slice(&reply[start..end]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_headers() {
        let d = [0, 7, 0, 0, 0, 1, 0, 0, b'g', b'e', b't'];
        assert_eq!(
            decode_request(&d),
            Ok((
                UdpHeader {
                    id: 7,
                    seq: 0,
                    count: 1
                },
                &b"get"[..]
            ))
        );
        assert_eq!(decode_request(&d[..7]), Err(UdpError::Short));
        let mut multi = d;
        multi[5] = 2;
        assert_eq!(decode_request(&multi), Err(UdpError::Unsupported));
        let mut reserved = d;
        reserved[7] = 1;
        assert_eq!(decode_request(&reserved), Err(UdpError::Unsupported));
    }

    #[test]
    fn replies_split_into_numbered_datagrams() {
        let reply: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        assert_eq!(datagrams(reply.len()), 3);
        assert_eq!(datagrams(0), 1);
        assert_eq!(datagrams(UDP_PAYLOAD), 1);
        let mut joined = Vec::new();
        let mut out = Vec::new();
        for seq in 0..3 {
            encode_datagram(&mut out, 0x1234, seq, &reply);
            assert_eq!(&out[..8], &[0x12, 0x34, 0, seq as u8, 0, 3, 0, 0]);
            assert!(out.len() <= UDP_HEADER + UDP_PAYLOAD);
            joined.extend_from_slice(&out[8..]);
        }
        assert_eq!(joined, reply);
    }
}

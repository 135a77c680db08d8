//! The batched binary frame protocol, version 1 (docs/PROTOCOL.md): many compact operations
//! per frame (per UDP datagram, or length-delimited on TCP), in the spirit of Algo-Logic's
//! messages batched in datagrams and KV-Direct's client-side batching.
//!
//! Format:
//! ```text
//! frame     := header op*
//! header    := magic:u16=0x4BAC  version:u8=1  flags:u8  frame_len:u32  frame_id:u32
//!              op_count:u16  [token_len:u8 token]           (token when flags & AUTH)
//! request   := opcode:u8 op_flags:u8 op_id:u16 key_len:u16 val_len:u32 key value
//! response  := status:u8 opcode:u8 op_id:u16 body_len:u32 body
//! ```
//! All integers little-endian. Decoders never panic, and check every declared length and
//! count against [`Limits`] and the bytes present before allocating.

use crate::limits::Limits;
use std::fmt;

/// First two bytes of every frame (`AC 4B` on the wire).
pub const MAGIC: u16 = 0x4BAC;
/// Protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Header flag: the frame is a response.
pub const FLAG_RESPONSE: u8 = 0x01;
/// Header flag: an auth token follows the fixed header.
pub const FLAG_AUTH: u8 = 0x02;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 14;
/// Bytes of a request operation's fixed part.
pub const REQ_OP_LEN: usize = 10;
/// Bytes of a response operation's fixed part.
pub const RESP_OP_LEN: usize = 8;

/// Byte values of FETCH_ADD and VECTOR operands.
pub mod operand {
    /// Overflow policy: wrap around (two's complement).
    pub const WRAP: u8 = 0;
    /// Overflow policy: fail with `Status::Overflow`, value unchanged.
    pub const CHECKED: u8 = 1;
    /// Overflow policy: clamp to the type's range.
    pub const SATURATE: u8 = 2;
    /// Element types (FETCH_ADD takes `U64` or `I64`).
    pub const U8: u8 = 0;
    /// Unsigned 16-bit elements.
    pub const U16: u8 = 1;
    /// Unsigned 32-bit elements.
    pub const U32: u8 = 2;
    /// Unsigned 64-bit elements.
    pub const U64: u8 = 3;
    /// Signed 32-bit elements.
    pub const I32: u8 = 4;
    /// Signed 64-bit elements.
    pub const I64: u8 = 5;
    /// binary32 elements.
    pub const F32: u8 = 6;
    /// binary64 elements.
    pub const F64: u8 = 7;
    /// Vector operation: the value is one element, v = f(v, operand); answers the original.
    pub const UPDATE_SCALAR2SCALAR: u8 = 0;
    /// Vector operation: every element v_i = f(v_i, operand); answers the original vector.
    pub const UPDATE_SCALAR2VECTOR: u8 = 1;
    /// Vector operation: v_i = f(v_i, operand_i); answers the original vector.
    pub const UPDATE_VECTOR2VECTOR: u8 = 2;
    /// Vector operation: s = f(s, v_i) from s = operand; answers s.
    pub const REDUCE: u8 = 3;
    /// Vector operation: the elements with f(v_i, operand); answers them.
    pub const FILTER: u8 = 4;
}

/// Operation codes. 0x10–0x1F are reserved for atomics, 0x20–0x2F for vector operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// Value of a key.
    Get = 0x01,
    /// Insert or replace.
    Put = 0x02,
    /// Replace a present key.
    Update = 0x03,
    /// Remove a key.
    Delete = 0x04,
    /// Items in `[key, hi)`; value = limit:u32 hi.
    Scan = 0x05,
    /// Items from the largest key <= kl through ku; value = limit:u32 ku.
    ScanFloor = 0x06,
    /// Liveness; the value is echoed.
    Ping = 0x07,
    /// Authenticate; the key is the password.
    Auth = 0x08,
    /// Server statistics as `name:value` lines.
    Stats = 0x09,
    /// Padding: the value is ignored and the answer is an empty OK. Lets an unauthenticated
    /// UDP client make its datagram as large as the reply it expects (no amplification).
    Pad = 0x0A,
    /// Insert or replace with an expiry deadline; value = deadline:u64 (ms since the Unix
    /// epoch, 0: none) then the value. Answer: the write version.
    PutExpiring = 0x0B,
    /// Set a present key's deadline; value = deadline:u64 (0: remove it; at or before now:
    /// remove the key). Answer: the write version, or NOT_FOUND.
    Expire = 0x0C,
    /// A key's deadline. Answer: deadline:u64 (0: none), or NOT_FOUND.
    Ttl = 0x0D,
    /// Atomic fetch-and-add on a 64-bit value; value = kind:u8 (3 unsigned, 5 signed)
    /// overflow:u8 (0 wrap, 1 checked, 2 saturate) delta:i64. Answer: the original 8 bytes.
    FetchAdd = 0x10,
    /// Compare-and-swap of the whole value; value = expect_present:u8 expected_len:u32
    /// expected new. Answer: the write version, or MISMATCH.
    Cas = 0x11,
    /// A vector operation; value = op:u8 elem:u8 overflow:u8 name_len:u8 name operand.
    /// Answer: bytes (original vector, reduced scalar or filtered vector).
    Vector = 0x20,
}

impl Opcode {
    /// The opcode for a byte, if known.
    pub fn from_u8(b: u8) -> Option<Opcode> {
        Some(match b {
            0x01 => Opcode::Get,
            0x02 => Opcode::Put,
            0x03 => Opcode::Update,
            0x04 => Opcode::Delete,
            0x05 => Opcode::Scan,
            0x06 => Opcode::ScanFloor,
            0x07 => Opcode::Ping,
            0x08 => Opcode::Auth,
            0x09 => Opcode::Stats,
            0x0A => Opcode::Pad,
            0x0B => Opcode::PutExpiring,
            0x0C => Opcode::Expire,
            0x0D => Opcode::Ttl,
            0x10 => Opcode::FetchAdd,
            0x11 => Opcode::Cas,
            0x20 => Opcode::Vector,
            _ => return None,
        })
    }
}

/// Per-operation status codes of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Status {
    /// Done.
    Ok = 0,
    /// The key is absent (GET, UPDATE, DELETE).
    NotFound = 1,
    /// The key is already present (reserved for insert-only operations).
    Exists = 2,
    /// A key, value, reply or frame is over a limit.
    TooLarge = 3,
    /// The operation could not be decoded.
    Malformed = 4,
    /// The server has too much in flight; retry later.
    Busy = 5,
    /// Authentication is required or failed.
    Unauthorized = 6,
    /// Unknown opcode, or not allowed on this transport (e.g. UPDATE over UDP).
    Unsupported = 7,
    /// The server failed (out of memory, internal error); the message says why.
    Error = 8,
    /// Compare-and-swap: the value was not the expected one (nothing written).
    Mismatch = 9,
    /// An integer result left its type's range under the `checked` policy (nothing written).
    Overflow = 10,
    /// A value or operand is not a whole number of elements, or not one element where one
    /// is needed (an atomic on a value that is not 8 bytes).
    BadLength = 11,
    /// A vector operation names a function the server does not have.
    UnknownFunction = 12,
    /// The function does not apply to the element type (for example `xor` on floats).
    TypeMismatch = 13,
    /// The write could not be made durable (disk full, I/O error): it may or may not be
    /// applied, and the server refuses writes until the disk works again; reads go on.
    Disk = 14,
    /// Cluster mode: this node does not lead the key's range. The body is
    /// `<range> <host:port>`, the binary address of the node that leads it (or holds it);
    /// nothing was done: send the operation there.
    Moved = 15,
    /// Cluster mode: the key's range is splitting, moving or electing a leader; nothing was
    /// done: retry after a short pause.
    TryAgain = 16,
    /// The server is recovering its data directory and serves nothing yet; nothing was
    /// done: retry after a short pause (Redis's `-LOADING`).
    Loading = 17,
}

impl Status {
    /// The status for a byte, if known.
    pub fn from_u8(b: u8) -> Option<Status> {
        Some(match b {
            0 => Status::Ok,
            1 => Status::NotFound,
            2 => Status::Exists,
            3 => Status::TooLarge,
            4 => Status::Malformed,
            5 => Status::Busy,
            6 => Status::Unauthorized,
            7 => Status::Unsupported,
            8 => Status::Error,
            9 => Status::Mismatch,
            10 => Status::Overflow,
            11 => Status::BadLength,
            12 => Status::UnknownFunction,
            13 => Status::TypeMismatch,
            14 => Status::Disk,
            15 => Status::Moved,
            16 => Status::TryAgain,
            17 => Status::Loading,
            _ => return None,
        })
    }
}

/// Why a frame could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Fewer bytes than the frame needs (on TCP: wait for more).
    Incomplete {
        /// Bytes needed in all, when known.
        needed: Option<usize>,
    },
    /// The first two bytes are not the magic number.
    BadMagic,
    /// A protocol version this decoder does not speak.
    BadVersion(u8),
    /// A declared size is over its limit.
    TooLarge {
        /// What was too large.
        what: &'static str,
        /// Declared size.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The bytes do not follow the grammar.
    Malformed(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Incomplete { needed: Some(n) } => {
                write!(f, "incomplete frame: need {n} bytes")
            }
            FrameError::Incomplete { needed: None } => write!(f, "incomplete frame"),
            FrameError::BadMagic => write!(f, "not an accelkv frame (bad magic)"),
            FrameError::BadVersion(v) => write!(f, "unsupported protocol version {v}"),
            FrameError::TooLarge { what, len, max } => {
                write!(f, "{what} of {len} exceeds the limit of {max}")
            }
            FrameError::Malformed(why) => write!(f, "malformed frame: {why}"),
        }
    }
}

impl std::error::Error for FrameError {}

/// The fixed header of a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header<'a> {
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Total frame length in bytes.
    pub frame_len: usize,
    /// Chosen by the client, echoed in the response.
    pub frame_id: u32,
    /// Operations that follow.
    pub op_count: usize,
    /// Auth token, when `flags & FLAG_AUTH`.
    pub token: Option<&'a [u8]>,
}

/// A request operation, borrowing its bytes from the frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// GET key.
    Get { id: u16, key: &'a [u8] },
    /// PUT key value.
    Put {
        id: u16,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// UPDATE key value.
    Update {
        id: u16,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// DELETE key.
    Delete { id: u16, key: &'a [u8] },
    /// PUT_EXPIRING key value with a deadline (ms since the Unix epoch, 0: none).
    PutExpiring {
        id: u16,
        key: &'a [u8],
        value: &'a [u8],
        deadline: u64,
    },
    /// EXPIRE key: set its deadline (0: none).
    Expire {
        id: u16,
        key: &'a [u8],
        deadline: u64,
    },
    /// TTL key: its deadline.
    Ttl { id: u16, key: &'a [u8] },
    /// SCAN `[lo, hi)` (`hi` empty: unbounded), at most `limit` items.
    Scan {
        id: u16,
        lo: &'a [u8],
        hi: &'a [u8],
        limit: u32,
    },
    /// SCAN_FLOOR from the largest key <= `kl` through `ku`, at most `limit` items.
    ScanFloor {
        id: u16,
        kl: &'a [u8],
        ku: &'a [u8],
        limit: u32,
    },
    /// PING with a payload to echo.
    Ping { id: u16, payload: &'a [u8] },
    /// AUTH with a password.
    Auth { id: u16, password: &'a [u8] },
    /// STATS.
    Stats { id: u16 },
    /// PAD with `len` ignored bytes.
    Pad { id: u16, len: usize },
    /// FETCH_ADD: add `delta` to the 64-bit value (absent: 0), answer the original.
    FetchAdd {
        id: u16,
        key: &'a [u8],
        /// Element type byte: 3 (u64) or 5 (i64).
        kind: u8,
        /// Overflow policy byte: 0 wrap, 1 checked, 2 saturate.
        overflow: u8,
        delta: i64,
    },
    /// CAS: replace the value with `new` if it equals `expected` (`None`: if absent).
    Cas {
        id: u16,
        key: &'a [u8],
        expected: Option<&'a [u8]>,
        new: &'a [u8],
    },
    /// A vector operation (docs/PROTOCOL.md, "Atomics and vector operations").
    Vector {
        id: u16,
        key: &'a [u8],
        /// 0 update_scalar2scalar, 1 update_scalar2vector, 2 update_vector2vector,
        /// 3 reduce, 4 filter.
        op: u8,
        /// Element type byte (0 u8, 1 u16, 2 u32, 3 u64, 4 i32, 5 i64, 6 f32, 7 f64).
        elem: u8,
        /// Overflow policy byte.
        overflow: u8,
        function: &'a [u8],
        operand: &'a [u8],
    },
    /// An opcode this decoder does not know (answered with `Status::Unsupported`).
    Unknown { id: u16, opcode: u8 },
    /// An operation over a limit or malformed, answered with that status; the frame's
    /// other operations are unaffected.
    Invalid { id: u16, opcode: u8, status: Status },
}

impl Request<'_> {
    /// The operation id.
    pub fn id(&self) -> u16 {
        match *self {
            Request::Get { id, .. }
            | Request::Put { id, .. }
            | Request::Update { id, .. }
            | Request::Delete { id, .. }
            | Request::PutExpiring { id, .. }
            | Request::Expire { id, .. }
            | Request::Ttl { id, .. }
            | Request::Scan { id, .. }
            | Request::ScanFloor { id, .. }
            | Request::Ping { id, .. }
            | Request::Auth { id, .. }
            | Request::Stats { id }
            | Request::Pad { id, .. }
            | Request::FetchAdd { id, .. }
            | Request::Cas { id, .. }
            | Request::Vector { id, .. }
            | Request::Unknown { id, .. }
            | Request::Invalid { id, .. } => id,
        }
    }

    /// The opcode byte.
    pub fn opcode(&self) -> u8 {
        match self {
            Request::Get { .. } => Opcode::Get as u8,
            Request::Put { .. } => Opcode::Put as u8,
            Request::Update { .. } => Opcode::Update as u8,
            Request::Delete { .. } => Opcode::Delete as u8,
            Request::PutExpiring { .. } => Opcode::PutExpiring as u8,
            Request::Expire { .. } => Opcode::Expire as u8,
            Request::Ttl { .. } => Opcode::Ttl as u8,
            Request::Scan { .. } => Opcode::Scan as u8,
            Request::ScanFloor { .. } => Opcode::ScanFloor as u8,
            Request::Ping { .. } => Opcode::Ping as u8,
            Request::Auth { .. } => Opcode::Auth as u8,
            Request::Stats { .. } => Opcode::Stats as u8,
            Request::Pad { .. } => Opcode::Pad as u8,
            Request::FetchAdd { .. } => Opcode::FetchAdd as u8,
            Request::Cas { .. } => Opcode::Cas as u8,
            Request::Vector { .. } => Opcode::Vector as u8,
            Request::Unknown { opcode, .. } | Request::Invalid { opcode, .. } => *opcode,
        }
    }

    /// (key, value) bytes as they travel.
    fn parts(&self, scratch: &mut Vec<u8>) -> (&[u8], usize) {
        scratch.clear();
        let key: &[u8] = match self {
            Request::Get { key, .. } | Request::Delete { key, .. } | Request::Ttl { key, .. } => {
                key
            }
            Request::PutExpiring {
                key,
                value,
                deadline,
                ..
            } => {
                scratch.extend_from_slice(&deadline.to_le_bytes());
                scratch.extend_from_slice(value);
                key
            }
            Request::Expire { key, deadline, .. } => {
                scratch.extend_from_slice(&deadline.to_le_bytes());
                key
            }
            Request::Put { key, value, .. } | Request::Update { key, value, .. } => {
                scratch.extend_from_slice(value);
                key
            }
            Request::Scan { lo, hi, limit, .. } => {
                scratch.extend_from_slice(&limit.to_le_bytes());
                scratch.extend_from_slice(hi);
                lo
            }
            Request::ScanFloor { kl, ku, limit, .. } => {
                scratch.extend_from_slice(&limit.to_le_bytes());
                scratch.extend_from_slice(ku);
                kl
            }
            Request::Ping { payload, .. } => {
                scratch.extend_from_slice(payload);
                &[]
            }
            Request::Auth { password, .. } => password,
            Request::Pad { len, .. } => {
                scratch.resize(*len, 0);
                &[]
            }
            Request::FetchAdd {
                key,
                kind,
                overflow,
                delta,
                ..
            } => {
                scratch.push(*kind);
                scratch.push(*overflow);
                scratch.extend_from_slice(&delta.to_le_bytes());
                key
            }
            Request::Cas {
                key, expected, new, ..
            } => {
                scratch.push(u8::from(expected.is_some()));
                let e = expected.unwrap_or(&[]);
                scratch.extend_from_slice(&(e.len() as u32).to_le_bytes());
                scratch.extend_from_slice(e);
                scratch.extend_from_slice(new);
                key
            }
            Request::Vector {
                key,
                op,
                elem,
                overflow,
                function,
                operand,
                ..
            } => {
                scratch.extend_from_slice(&[*op, *elem, *overflow, function.len() as u8]);
                scratch.extend_from_slice(function);
                scratch.extend_from_slice(operand);
                key
            }
            Request::Stats { .. } | Request::Unknown { .. } | Request::Invalid { .. } => &[],
        };
        (key, scratch.len())
    }
}

/// A response operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response<'a> {
    /// The request's operation id.
    pub id: u16,
    /// The request's opcode.
    pub opcode: u8,
    /// Outcome.
    pub status: Status,
    /// Body, by opcode and status (see docs/PROTOCOL.md).
    pub body: Body<'a>,
}

/// Response bodies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// GET, PING, STATS: bytes.
    Bytes(&'a [u8]),
    /// PUT, UPDATE, DELETE: the write version.
    Version(u64),
    /// SCAN, SCAN_FLOOR: items, and whether the reply was cut at a limit.
    Items {
        truncated: bool,
        items: Vec<(&'a [u8], &'a [u8])>,
    },
    /// A status other than OK: a UTF-8 message (may be empty).
    Message(&'a [u8]),
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes a frame header from the start of `buf`. On TCP, call it on the bytes received
/// so far: `Incomplete` means wait for more; otherwise `frame_len` says where the frame ends.
pub fn decode_header<'a>(buf: &'a [u8], limits: &Limits) -> Result<Header<'a>, FrameError> {
    if buf.len() < 2 {
        return Err(FrameError::Incomplete {
            needed: Some(HEADER_LEN),
        });
    }
    if u16_at(buf, 0) != MAGIC {
        return Err(FrameError::BadMagic);
    }
    if buf.len() < HEADER_LEN {
        return Err(FrameError::Incomplete {
            needed: Some(HEADER_LEN),
        });
    }
    if buf[2] != VERSION {
        return Err(FrameError::BadVersion(buf[2]));
    }
    let flags = buf[3];
    if flags & !(FLAG_RESPONSE | FLAG_AUTH) != 0 {
        return Err(FrameError::Malformed("unknown header flags"));
    }
    let frame_len = u32_at(buf, 4) as usize;
    if frame_len > limits.max_frame {
        return Err(FrameError::TooLarge {
            what: "frame",
            len: frame_len,
            max: limits.max_frame,
        });
    }
    let op_count = usize::from(u16_at(buf, 12));
    if op_count > limits.max_ops {
        return Err(FrameError::TooLarge {
            what: "operation count",
            len: op_count,
            max: limits.max_ops,
        });
    }
    let mut end = HEADER_LEN;
    let token = if flags & FLAG_AUTH != 0 {
        let Some(&tlen) = buf.get(HEADER_LEN) else {
            return Err(FrameError::Incomplete {
                needed: Some(HEADER_LEN + 1),
            });
        };
        let tlen = usize::from(tlen);
        if tlen > limits.max_token {
            return Err(FrameError::TooLarge {
                what: "token",
                len: tlen,
                max: limits.max_token,
            });
        }
        end = HEADER_LEN + 1 + tlen;
        if buf.len() < end {
            return Err(FrameError::Incomplete { needed: Some(end) });
        }
        Some(&buf[HEADER_LEN + 1..end])
    } else {
        None
    };
    if frame_len < end {
        return Err(FrameError::Malformed(
            "frame length shorter than its header",
        ));
    }
    Ok(Header {
        flags,
        frame_len,
        frame_id: u32_at(buf, 8),
        op_count,
        token,
    })
}

fn header_end(h: &Header<'_>) -> usize {
    HEADER_LEN + h.token.map_or(0, |t| 1 + t.len())
}

/// The header of a whole frame at the start of `buf` of the expected direction, its bytes,
/// and where its operations start, after checking that `op_count` operations of at least
/// `min_op` bytes each fit (so the caller may allocate for `op_count`).
fn frame_body<'a>(
    buf: &'a [u8],
    limits: &Limits,
    response: bool,
    min_op: usize,
) -> Result<(Header<'a>, &'a [u8], usize), FrameError> {
    let h = decode_header(buf, limits)?;
    if (h.flags & FLAG_RESPONSE != 0) != response {
        return Err(FrameError::Malformed(if response {
            "request frame where a response was expected"
        } else {
            "response frame where a request was expected"
        }));
    }
    if buf.len() < h.frame_len {
        return Err(FrameError::Incomplete {
            needed: Some(h.frame_len),
        });
    }
    let at = header_end(&h);
    if h.op_count > (h.frame_len - at) / min_op {
        return Err(FrameError::Malformed(
            "operation count larger than the frame",
        ));
    }
    Ok((h.clone(), &buf[..h.frame_len], at))
}

/// Decodes a whole request frame at the start of `buf`; returns it and its length.
pub fn decode_request<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<(Header<'a>, Vec<Request<'a>>), FrameError> {
    let (h, body, mut at) = frame_body(buf, limits, false, REQ_OP_LEN)?;
    let mut ops = Vec::with_capacity(h.op_count);
    for _ in 0..h.op_count {
        if body.len() < at + REQ_OP_LEN {
            return Err(FrameError::Malformed("truncated operation header"));
        }
        let opcode = body[at];
        let id = u16_at(body, at + 2);
        let klen = usize::from(u16_at(body, at + 4));
        let vlen = u32_at(body, at + 6) as usize;
        let kstart = at + REQ_OP_LEN;
        let end = kstart
            .checked_add(klen)
            .and_then(|x| x.checked_add(vlen))
            .filter(|&e| e <= body.len())
            .ok_or(FrameError::Malformed(
                "operation runs past the end of the frame",
            ))?;
        let key = &body[kstart..kstart + klen];
        let value = &body[kstart + klen..end];
        at = end;
        ops.push(decode_op(id, opcode, key, value, limits));
    }
    if at != h.frame_len {
        return Err(FrameError::Malformed("bytes after the last operation"));
    }
    Ok((h, ops))
}

fn decode_op<'a>(
    id: u16,
    opcode: u8,
    key: &'a [u8],
    value: &'a [u8],
    limits: &Limits,
) -> Request<'a> {
    let invalid = |status| Request::Invalid { id, opcode, status };
    let Some(op) = Opcode::from_u8(opcode) else {
        return Request::Unknown { id, opcode };
    };
    let needs_key = matches!(
        op,
        Opcode::Get
            | Opcode::Put
            | Opcode::Update
            | Opcode::Delete
            | Opcode::PutExpiring
            | Opcode::Expire
            | Opcode::Ttl
            | Opcode::FetchAdd
            | Opcode::Cas
            | Opcode::Vector
    );
    if needs_key && key.is_empty() {
        return invalid(Status::Malformed);
    }
    if !matches!(op, Opcode::Auth) && key.len() > limits.max_key {
        return invalid(Status::TooLarge);
    }
    let scan_args = |v: &'a [u8]| -> Option<(u32, &'a [u8])> {
        let (l, rest) = v.split_first_chunk::<4>()?;
        Some((u32::from_le_bytes(*l), rest))
    };
    match op {
        Opcode::Get => Request::Get { id, key },
        Opcode::Delete => Request::Delete { id, key },
        Opcode::Put | Opcode::Update if value.len() > limits.max_value => invalid(Status::TooLarge),
        Opcode::Put => Request::Put { id, key, value },
        Opcode::PutExpiring | Opcode::Expire => match value.split_first_chunk::<8>() {
            None => invalid(Status::Malformed),
            Some((_, v)) if v.len() > limits.max_value => invalid(Status::TooLarge),
            Some((_, v)) if op == Opcode::Expire && !v.is_empty() => invalid(Status::Malformed),
            Some((d, value)) if op == Opcode::PutExpiring => Request::PutExpiring {
                id,
                key,
                value,
                deadline: u64::from_le_bytes(*d),
            },
            Some((d, _)) => Request::Expire {
                id,
                key,
                deadline: u64::from_le_bytes(*d),
            },
        },
        Opcode::Ttl => Request::Ttl { id, key },
        Opcode::Update => Request::Update { id, key, value },
        Opcode::Scan | Opcode::ScanFloor => match scan_args(value) {
            None => invalid(Status::Malformed),
            Some((_, rest)) if rest.len() > limits.max_key => invalid(Status::TooLarge),
            Some((limit, rest)) if op == Opcode::Scan => Request::Scan {
                id,
                lo: key,
                hi: rest,
                limit,
            },
            Some((limit, rest)) => Request::ScanFloor {
                id,
                kl: key,
                ku: rest,
                limit,
            },
        },
        Opcode::Ping if value.len() > limits.max_value => invalid(Status::TooLarge),
        Opcode::Ping => Request::Ping { id, payload: value },
        Opcode::Auth => Request::Auth { id, password: key },
        Opcode::Stats => Request::Stats { id },
        Opcode::Pad => Request::Pad {
            id,
            len: value.len(),
        },
        Opcode::FetchAdd => match value {
            [kind @ (3 | 5), overflow @ 0..=2, d @ ..] if d.len() == 8 => Request::FetchAdd {
                id,
                key,
                kind: *kind,
                overflow: *overflow,
                delta: i64::from_le_bytes(d.try_into().unwrap_or([0; 8])),
            },
            _ => invalid(Status::Malformed),
        },
        Opcode::Cas => {
            let parsed = (|| {
                let (&present, rest) = value.split_first()?;
                let (l, rest) = rest.split_first_chunk::<4>()?;
                let l = u32::from_le_bytes(*l) as usize;
                if present > 1 || l > rest.len() || (present == 0 && l != 0) {
                    return None;
                }
                let (e, new) = rest.split_at(l);
                Some((if present == 1 { Some(e) } else { None }, new))
            })();
            match parsed {
                None => invalid(Status::Malformed),
                Some((_, new)) if new.len() > limits.max_value => invalid(Status::TooLarge),
                Some((expected, new)) => Request::Cas {
                    id,
                    key,
                    expected,
                    new,
                },
            }
        }
        Opcode::Vector => match value {
            [op @ 0..=4, elem @ 0..=7, overflow @ 0..=2, n, rest @ ..]
                if usize::from(*n) <= rest.len() =>
            {
                let (function, operand) = rest.split_at(usize::from(*n));
                if operand.len() > limits.max_value {
                    invalid(Status::TooLarge)
                } else {
                    Request::Vector {
                        id,
                        key,
                        op: *op,
                        elem: *elem,
                        overflow: *overflow,
                        function,
                        operand,
                    }
                }
            }
            _ => invalid(Status::Malformed),
        },
    }
}

fn put_header(
    out: &mut Vec<u8>,
    flags: u8,
    frame_id: u32,
    op_count: usize,
    token: Option<&[u8]>,
) -> usize {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(flags | if token.is_some() { FLAG_AUTH } else { 0 });
    out.extend_from_slice(&0u32.to_le_bytes()); // frame_len, patched below
    out.extend_from_slice(&frame_id.to_le_bytes());
    out.extend_from_slice(&(op_count as u16).to_le_bytes());
    if let Some(t) = token {
        out.push(t.len() as u8);
        out.extend_from_slice(t);
    }
    start
}

fn patch_len(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start + 4..start + 8].copy_from_slice(&len.to_le_bytes());
}

/// Appends a request frame to `out`. The caller keeps within the limits it negotiated
/// (at most 65,535 operations, tokens of at most 255 bytes, keys of at most 65,535 bytes).
pub fn encode_request(out: &mut Vec<u8>, frame_id: u32, token: Option<&[u8]>, ops: &[Request<'_>]) {
    let start = put_header(out, 0, frame_id, ops.len(), token);
    let mut scratch = Vec::new();
    for op in ops {
        let (key, vlen) = op.parts(&mut scratch);
        out.push(op.opcode());
        out.push(0);
        out.extend_from_slice(&op.id().to_le_bytes());
        out.extend_from_slice(&(key.len() as u16).to_le_bytes());
        out.extend_from_slice(&(vlen as u32).to_le_bytes());
        out.extend_from_slice(key);
        out.extend_from_slice(&scratch);
    }
    patch_len(out, start);
}

/// Appends a response frame to `out`.
pub fn encode_response(out: &mut Vec<u8>, frame_id: u32, ops: &[Response<'_>]) {
    let start = put_header(out, FLAG_RESPONSE, frame_id, ops.len(), None);
    for op in ops {
        encode_response_op(out, op);
    }
    patch_len(out, start);
}

/// Bytes [`encode_response_op`] will append for `op`.
pub fn response_op_len(op: &Response<'_>) -> usize {
    RESP_OP_LEN
        + match &op.body {
            Body::Empty => 0,
            Body::Bytes(b) | Body::Message(b) => b.len(),
            Body::Version(_) => 8,
            Body::Items { items, .. } => {
                5 + items
                    .iter()
                    .map(|(k, v)| 6 + k.len() + v.len())
                    .sum::<usize>()
            }
        }
}

/// Appends one response operation (for servers that assemble a frame piece by piece; the
/// frame header's length and count are the caller's).
pub fn encode_response_op(out: &mut Vec<u8>, op: &Response<'_>) {
    out.push(op.status as u8);
    out.push(op.opcode);
    out.extend_from_slice(&op.id.to_le_bytes());
    let len = response_op_len(op) - RESP_OP_LEN;
    out.extend_from_slice(&(len as u32).to_le_bytes());
    match &op.body {
        Body::Empty => {}
        Body::Bytes(b) | Body::Message(b) => out.extend_from_slice(b),
        Body::Version(v) => out.extend_from_slice(&v.to_le_bytes()),
        Body::Items { truncated, items } => {
            out.push(u8::from(*truncated));
            out.extend_from_slice(&(items.len() as u32).to_le_bytes());
            for (k, v) in items {
                out.extend_from_slice(&(k.len() as u16).to_le_bytes());
                out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                out.extend_from_slice(k);
                out.extend_from_slice(v);
            }
        }
    }
}

/// Starts a response frame whose operations the caller appends with
/// [`encode_response_op`]; finish it with [`finish_response`]. Returns the frame's start.
pub fn begin_response(out: &mut Vec<u8>, frame_id: u32, op_count: usize) -> usize {
    put_header(out, FLAG_RESPONSE, frame_id, op_count, None)
}

/// Writes the length of a frame started with [`begin_response`].
pub fn finish_response(out: &mut [u8], start: usize) {
    patch_len(out, start);
}

/// Decodes a whole response frame at the start of `buf`.
pub fn decode_response<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<(Header<'a>, Vec<Response<'a>>), FrameError> {
    let (h, body, mut at) = frame_body(buf, limits, true, RESP_OP_LEN)?;
    let mut ops = Vec::with_capacity(h.op_count);
    for _ in 0..h.op_count {
        if body.len() < at + RESP_OP_LEN {
            return Err(FrameError::Malformed("truncated operation header"));
        }
        let status = Status::from_u8(body[at]).ok_or(FrameError::Malformed("unknown status"))?;
        let opcode = body[at + 1];
        let id = u16_at(body, at + 2);
        let len = u32_at(body, at + 4) as usize;
        let start = at + RESP_OP_LEN;
        let end =
            start
                .checked_add(len)
                .filter(|&e| e <= body.len())
                .ok_or(FrameError::Malformed(
                    "operation runs past the end of the frame",
                ))?;
        let b = &body[start..end];
        at = end;
        let body = if status != Status::Ok {
            Body::Message(b)
        } else {
            match Opcode::from_u8(opcode) {
                Some(
                    Opcode::Get
                    | Opcode::Ping
                    | Opcode::Stats
                    | Opcode::FetchAdd
                    | Opcode::Vector
                    | Opcode::Ttl,
                ) => Body::Bytes(b),
                Some(
                    Opcode::Put
                    | Opcode::Update
                    | Opcode::Delete
                    | Opcode::Cas
                    | Opcode::PutExpiring
                    | Opcode::Expire,
                ) => {
                    let v = b
                        .first_chunk::<8>()
                        .ok_or(FrameError::Malformed("short version"))?;
                    if b.len() != 8 {
                        return Err(FrameError::Malformed("version body is not 8 bytes"));
                    }
                    Body::Version(u64::from_le_bytes(*v))
                }
                Some(Opcode::Scan | Opcode::ScanFloor) => decode_items(b, limits)?,
                Some(Opcode::Auth | Opcode::Pad) | None => {
                    if !b.is_empty() {
                        return Err(FrameError::Malformed("unexpected body"));
                    }
                    Body::Empty
                }
            }
        };
        ops.push(Response {
            id,
            opcode,
            status,
            body,
        });
    }
    if at != h.frame_len {
        return Err(FrameError::Malformed("bytes after the last operation"));
    }
    Ok((h, ops))
}

fn decode_items<'a>(b: &'a [u8], limits: &Limits) -> Result<Body<'a>, FrameError> {
    if b.len() < 5 {
        return Err(FrameError::Malformed("short item list"));
    }
    let truncated = match b[0] {
        0 => false,
        1 => true,
        _ => return Err(FrameError::Malformed("bad truncated flag")),
    };
    let count = u32_at(b, 1) as usize;
    if count > limits.max_scan_items {
        return Err(FrameError::TooLarge {
            what: "scan items",
            len: count,
            max: limits.max_scan_items,
        });
    }
    if count > (b.len() - 5) / 6 {
        return Err(FrameError::Malformed("item count larger than the body"));
    }
    let mut items = Vec::with_capacity(count);
    let mut at = 5;
    for _ in 0..count {
        if b.len() < at + 6 {
            return Err(FrameError::Malformed("truncated item"));
        }
        let klen = usize::from(u16_at(b, at));
        let vlen = u32_at(b, at + 2) as usize;
        let ks = at + 6;
        let end = ks
            .checked_add(klen)
            .and_then(|x| x.checked_add(vlen))
            .filter(|&e| e <= b.len())
            .ok_or(FrameError::Malformed("item runs past the body"))?;
        items.push((&b[ks..ks + klen], &b[ks + klen..end]));
        at = end;
    }
    if at != b.len() {
        return Err(FrameError::Malformed("bytes after the last item"));
    }
    Ok(Body::Items { truncated, items })
}

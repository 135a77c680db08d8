//! The simulated frame parser (`sv/frame_parser.sv` through Verilator and
//! `csrc/parser_ffi.cpp`): a request frame's bytes in, a byte a cycle; its operations and
//! its outcome out, in the terms of `accelkv_proto::frame::decode_request`.

use std::ffi::c_void;

#[repr(C)]
struct RawLimits {
    max_frame: u32,
    max_ops: u32,
    max_key: u32,
    max_value: u32,
    max_token: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawOp {
    key_off: u32,
    val_off: u32,
    val_len: u32,
    id: u16,
    key_len: u16,
    opcode: u8,
    verdict: u8,
    status: u8,
    pad: u8,
}

#[repr(C)]
#[derive(Default)]
struct RawOutcome {
    err: u32,
    why: u32,
    arg: u32,
    ops: u32,
    cycles: u64,
}

extern "C" {
    fn fp_new() -> *mut c_void;
    fn fp_free(h: *mut c_void);
    fn fp_parse(
        h: *mut c_void,
        buf: *const u8,
        len: usize,
        lim: *const RawLimits,
        ops: *mut RawOp,
        cap: usize,
        max_cycles: u64,
        out: *mut RawOutcome,
    ) -> i32;
}

/// The limits the parser enforces (those of `accelkv_proto::Limits` a request frame uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParserLimits {
    /// Largest frame, header included.
    pub max_frame: u32,
    /// Most operations in a frame.
    pub max_ops: u16,
    /// Longest key.
    pub max_key: u32,
    /// Largest value.
    pub max_value: u32,
    /// Longest auth token.
    pub max_token: u32,
}

/// How an operation decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It decodes to a request.
    Ok,
    /// Unknown opcode (`Request::Unknown`).
    Unknown,
    /// `Request::Invalid` with this status byte (3 too large, 4 malformed).
    Invalid(u8),
}

/// One operation as the parser emitted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedOp {
    /// Opcode byte.
    pub opcode: u8,
    /// Operation id.
    pub id: u16,
    /// Offset of the key in the buffer, and its length.
    pub key: (usize, usize),
    /// Offset of the value in the buffer, and its length.
    pub value: (usize, usize),
    /// The verdict.
    pub verdict: Verdict,
}

/// The frame's outcome, as `decode_request`'s result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The frame decodes.
    Ok,
    /// `FrameError::Incomplete { needed: Some(n) }`.
    Incomplete(usize),
    /// `FrameError::BadMagic`.
    BadMagic,
    /// `FrameError::BadVersion(v)`.
    BadVersion(u8),
    /// `FrameError::TooLarge`: 1 frame, 2 operation count, 3 token; and the declared size.
    TooLarge(u8, usize),
    /// `FrameError::Malformed`, by message number (see sv/frame_parser.sv).
    Malformed(u8),
}

/// A parse: the outcome, the operations (they count only when the outcome is `Ok`), and
/// the cycles it took.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parse {
    /// The outcome.
    pub outcome: Outcome,
    /// The operations, in frame order.
    pub ops: Vec<ParsedOp>,
    /// Cycles from the first byte to `done`.
    pub cycles: u64,
}

/// One simulated frame parser (a Verilator model: one thread at a time).
pub struct FrameParser {
    h: *mut c_void,
}

// SAFETY: the model is owned by this value and only reached through `&mut self`.
unsafe impl Send for FrameParser {}

impl Default for FrameParser {
    fn default() -> Self {
        FrameParser::new()
    }
}

impl FrameParser {
    /// A parser.
    pub fn new() -> FrameParser {
        // SAFETY: plain constructor; freed once, in Drop.
        FrameParser {
            h: unsafe { fp_new() },
        }
    }

    /// Parses the request frame at the start of `buf` under `limits`. `None` when the
    /// parser did not finish within a cycle per byte plus a margin (a bug, never an answer).
    pub fn parse(&mut self, buf: &[u8], limits: ParserLimits) -> Option<Parse> {
        let lim = RawLimits {
            max_frame: limits.max_frame,
            max_ops: u32::from(limits.max_ops),
            max_key: limits.max_key,
            max_value: limits.max_value,
            max_token: limits.max_token,
        };
        let cap = usize::from(limits.max_ops) + 1;
        let mut ops = vec![RawOp::default(); cap];
        let mut out = RawOutcome::default();
        // SAFETY: the pointers are valid for the lengths given; `ops` has `cap` entries.
        let rc = unsafe {
            fp_parse(
                self.h,
                buf.as_ptr(),
                buf.len(),
                &lim,
                ops.as_mut_ptr(),
                cap,
                4 * buf.len() as u64 + 100_000,
                &mut out,
            )
        };
        if rc != 0 {
            return None;
        }
        let outcome = match out.err {
            0 => Outcome::Ok,
            1 => Outcome::Incomplete(out.arg as usize),
            2 => Outcome::BadMagic,
            3 => Outcome::BadVersion(out.arg as u8),
            4 => Outcome::TooLarge(out.why as u8, out.arg as usize),
            _ => Outcome::Malformed(out.why as u8),
        };
        let ops = ops[..out.ops as usize]
            .iter()
            .map(|o| ParsedOp {
                opcode: o.opcode,
                id: o.id,
                key: (o.key_off as usize, usize::from(o.key_len)),
                value: (o.val_off as usize, o.val_len as usize),
                verdict: match o.verdict {
                    0 => Verdict::Ok,
                    1 => Verdict::Unknown,
                    _ => Verdict::Invalid(o.status),
                },
            })
            .collect();
        Some(Parse {
            outcome,
            ops,
            cycles: out.cycles,
        })
    }
}

impl Drop for FrameParser {
    fn drop(&mut self) {
        // SAFETY: created by fp_new, freed once.
        unsafe { fp_free(self.h) }
    }
}

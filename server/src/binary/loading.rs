//! The binary protocol's answer while the data directory is recovered (net/loading.rs):
//! every operation of every frame gets status LOADING; nothing is done.

use crate::core::loading::Progress;
use accelkv_proto::frame::{decode_header, decode_request, encode_response, Body, Response};
use accelkv_proto::{FrameError, Limits, Status};

/// [`crate::core::loading::Answer`] for binary frames.
pub fn answer(input: &[u8], _p: &Progress, out: &mut Vec<u8>) -> Option<usize> {
    let limits = Limits::default();
    let mut at = 0;
    loop {
        let rest = &input[at..];
        match decode_header(rest, &limits) {
            Err(FrameError::Incomplete { .. }) => return Some(at),
            Err(_) => return None,
            Ok(h) if rest.len() < h.frame_len => return Some(at),
            Ok(_) => {}
        }
        let (h, ops) = decode_request(rest, &limits).ok()?;
        let answers: Vec<Response> = ops
            .iter()
            .map(|op| Response {
                id: op.id(),
                opcode: op.opcode(),
                status: Status::Loading,
                body: Body::Message(b"the server is loading its data directory"),
            })
            .collect();
        encode_response(out, h.frame_id, &answers);
        at += h.frame_len;
    }
}

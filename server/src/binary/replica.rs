#![cfg_attr(not(feature = "cluster"), allow(dead_code))]
//! A replicated binary operation applied on a replica (cluster mode, docs/CLUSTER.md):
//! `ACCELKV.OP <one-op frame>` runs through the same operation code and write door as a
//! standalone server, so its answer, write version included, is the one it would give.

use crate::binary::answer::{encode_answer, Answer};
use crate::binary::cluster::keyed;
use crate::binary::execute::run_replicated;
use crate::core::shared::Shared;
use accelkv_proto::Status;
use std::sync::Arc;

/// Applies a replicated binary operation (the one-op request `frame` of `ACCELKV.OP`) on
/// a replica, answering its response operation; `refuse` says why its key is not this
/// range's to write (then nothing changes, on every replica alike).
pub(crate) fn apply(
    sh: &Arc<Shared>,
    frame: &[u8],
    refuse: impl Fn(&[u8]) -> Option<String>,
) -> Vec<u8> {
    let limits = &sh.settings().limits;
    let decoded = accelkv_proto::frame::decode_request(frame, limits).ok();
    let op = decoded.and_then(|(_, ops)| (ops.len() == 1).then(|| ops[0].clone()));
    let Some(op) = op else {
        let a = Answer::Fail(
            Status::Error,
            "a replicated operation could not be decoded".into(),
        );
        return encode_answer(0, 0, &a);
    };
    let answer = match keyed(&op).map(|k| refuse(k.key)) {
        Some(Some(m)) => Answer::Fail(Status::TryAgain, m),
        _ => run_replicated(sh, &op),
    };
    encode_answer(op.id(), op.opcode(), &answer)
}

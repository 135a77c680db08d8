//! A binary operation's answer ([`Answer`]) from a read, a write's outcome or a store
//! error, and how answers are encoded into a response frame (docs/PROTOCOL.md).

use crate::core::ops::vector::VectorError;
use crate::core::ops::{Failure, Outcome};
use crate::core::shared::Shared;
use crate::core::station::Done;
use accelkv_engine::{Found, Items, Reply};
use accelkv_proto::frame::{begin_response, encode_response_op, finish_response};
use accelkv_proto::{Body, Response, Status};
use accelkv_tree::Error;
use std::sync::atomic::Ordering;

/// An answer owning its bytes until the response frame is encoded.
pub(crate) enum Answer {
    Fail(Status, String),
    Empty,
    Bytes(Vec<u8>),
    Word([u8; 8]),
    Version(u64),
    Items(Items, bool),
}

/// Maps a store error to a status and message.
pub fn status_of(e: &Error) -> (Status, String) {
    let s = match e {
        Error::KeyTooLong { .. } | Error::ValueTooLarge { .. } => Status::TooLarge,
        Error::EmptyKey => Status::Malformed,
        Error::NotFound => Status::NotFound,
        _ => Status::Error,
    };
    (s, e.to_string())
}

/// A binary answer for a read.
pub(crate) fn read_answer(found: Found<'_>, max_items: usize, max_bytes: usize) -> Answer {
    match found {
        Found::Value(Some(v), _) => Answer::Bytes(v.to_vec()),
        Found::Value(None, _) => Answer::Fail(Status::NotFound, String::new()),
        Found::Reply(Reply::Value(Some(v))) => Answer::Bytes(v),
        Found::Reply(Reply::Value(None)) => Answer::Fail(Status::NotFound, String::new()),
        Found::Reply(Reply::Items(items)) => {
            // The engine was asked for one item more than the server's limit.
            let truncated = items.len() > max_items;
            let items = cap_items(items, max_items, max_bytes);
            Answer::Items(items.0, truncated || items.1)
        }
        Found::Reply(Reply::Error(e)) => {
            let (s, m) = status_of(&e);
            Answer::Fail(s, m)
        }
    }
}

/// A binary answer for a write's outcome.
pub(crate) fn answer_of(sh: &Shared, d: Done) -> Answer {
    match d.outcome {
        Err(e) => fail_store(sh, &e),
        Ok(Outcome::Done) => Answer::Version(d.version),
        Ok(Outcome::Skipped) => Answer::Fail(Status::NotFound, String::new()),
        Ok(Outcome::Fetched(b)) => Answer::Word(b),
        Ok(Outcome::Bytes(b)) => Answer::Bytes(b),
        Ok(Outcome::Old(b)) => Answer::Bytes(b.unwrap_or_default()),
        Ok(Outcome::Int(n)) => Answer::Bytes(n.to_le_bytes().to_vec()),
        // memcached outcomes (the binary protocol sends no memcached write).
        Ok(Outcome::Uint(n) | Outcome::Created(n)) => Answer::Word(n.to_le_bytes()),
        Ok(Outcome::Item(i)) => Answer::Bytes(i.value),
        Ok(Outcome::Deadline(Some(d))) => Answer::Word(d.to_le_bytes()),
        Ok(Outcome::Deadline(None)) => Answer::Fail(Status::NotFound, String::new()),
        Ok(Outcome::Mismatch { absent }) => {
            let m = if absent {
                "the key is absent"
            } else {
                "the value differs"
            };
            Answer::Fail(Status::Mismatch, m.into())
        }
        Ok(Outcome::Failed(Failure::Vector(e))) => Answer::Fail(vector_status(&e), e.to_string()),
        Ok(Outcome::Failed(f)) => {
            sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
            Answer::Fail(Status::Error, f.to_string())
        }
    }
}

fn fail_store(sh: &Shared, e: &Error) -> Answer {
    if !matches!(e, Error::NotFound) {
        sh.metrics().errors.fetch_add(1, Ordering::Relaxed);
    }
    let (s, m) = status_of(e);
    Answer::Fail(s, m)
}

fn vector_status(e: &VectorError) -> Status {
    match e {
        VectorError::BadLength(_) => Status::BadLength,
        VectorError::UnknownFunction(_) => Status::UnknownFunction,
        VectorError::TypeMismatch(_) => Status::TypeMismatch,
        VectorError::Overflow => Status::Overflow,
    }
}

/// Keeps at most `max_items` items and `max_bytes` key and value bytes; says if it cut.
fn cap_items(items: Items, max_items: usize, max_bytes: usize) -> (Items, bool) {
    let mut bytes = 0;
    let mut kept = Items::default();
    let mut cut = false;
    for (k, v) in items.iter() {
        if kept.len() == max_items || bytes + k.len() + v.len() > max_bytes {
            cut = true;
            break;
        }
        bytes += k.len() + v.len();
        kept.push(k, v);
    }
    (kept, cut)
}

pub(crate) fn encode(
    frame_id: u32,
    heads: &[(u16, u8)],
    answers: &[Option<Answer>],
    out: &mut Vec<u8>,
) {
    let start = begin_response(out, frame_id, heads.len());
    for (&(id, opcode), a) in heads.iter().zip(answers) {
        encode_response_op(out, &response(id, opcode, a.as_ref()));
    }
    finish_response(out, start);
}

/// The response operation of an answer (`None`: none was given).
fn response<'a>(id: u16, opcode: u8, a: Option<&'a Answer>) -> Response<'a> {
    let (status, body) = match a {
        Some(Answer::Fail(s, m)) => (*s, Body::Message(m.as_bytes())),
        Some(Answer::Empty) => (Status::Ok, Body::Empty),
        Some(Answer::Bytes(b)) => (Status::Ok, Body::Bytes(b)),
        Some(Answer::Word(b)) => (Status::Ok, Body::Bytes(b)),
        Some(Answer::Version(v)) => (Status::Ok, Body::Version(*v)),
        Some(Answer::Items(items, truncated)) => (
            Status::Ok,
            Body::Items {
                truncated: *truncated,
                items: items.iter().collect(),
            },
        ),
        None => (Status::Error, Body::Message(b"no answer")),
    };
    Response {
        id,
        opcode,
        status,
        body,
    }
}

/// One response operation, alone: a replicated operation's reply (`crate::binary::cluster`).
#[cfg_attr(not(feature = "cluster"), allow(dead_code))]
pub(crate) fn encode_answer(id: u16, opcode: u8, a: &Answer) -> Vec<u8> {
    let mut out = Vec::new();
    encode_response_op(&mut out, &response(id, opcode, Some(a)));
    out
}

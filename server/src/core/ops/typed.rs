//! Typed items: values a protocol adapter keeps in an encoding of its own, marked by client
//! flags in a reserved range (`accelkv_proto::collection`). The RESP adapter keeps a
//! hash's or set's metadata record under the user's key this way (`resp/commands/types/`), with its
//! fields or members in subkeys in the reserved part of the key space.
//!
//! What the core does with them: byte-level writes (INCR and friends, APPEND, SETRANGE,
//! SETBIT, GETSET, GETDEL, GETEX, a read of the bytes, compare-and-swap, fetch-and-add,
//! vector operations, item concatenation and arithmetic) refuse them with
//! [`Failure::WrongType`](super::Failure::WrongType) and change nothing; whole-value writes
//! (SET, PUT, UPDATE, a memcached set) replace them with a plain value, as Redis's SET
//! replaces a key of any type; key-level writes (DEL, EXPIRE and friends, TTL) treat them
//! as any other key. An item read ([`super::ItemWrite::Read`], memcached's get) finds
//! nothing there; [`super::Write::ReadItem`] answers them with their flags.

pub use accelkv_proto::collection::{is_typed, user_key_ok};

//! Redis's collection types on the ordered store (docs/FORMAT.md, "Redis types"): the
//! encoding (`encoding.rs`: a metadata record under the user's key, one subkey per field
//! or member in a reserved part of the key space), one command's access to a collection
//! (`access.rs`, `run.rs`), the command families (`hash.rs`, `set.rs`, and what they share
//! in `members.rs`; lists, sorted sets, streams and their consumer groups), small collections packed in one item
//! (`packed.rs`), what the key-level commands need to know about types (`keyspace.rs`:
//! TYPE, OBJECT ENCODING, copying for RENAME and COPY), and the background reclaim of the
//! subkeys of collections that are gone (`gc.rs`).

pub mod access;
pub mod blocking;
pub mod encoding;
pub mod gc;
pub mod hash;
pub mod keyspace;
pub mod list;
pub mod list_move;
pub mod members;
pub mod pack;
pub mod packed;
pub mod run;
pub mod sample;
pub mod set;
pub mod sort;
pub mod stream;
pub mod stream_claim;
pub mod stream_dump;
pub mod stream_groups;
pub mod stream_pel;
pub mod stream_read;
pub mod stream_xgroup;
pub mod zset;
pub mod zset_ops;
pub mod zset_range;

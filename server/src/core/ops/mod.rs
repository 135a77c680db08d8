//! The semantics of writes, apart from how they arrive and how they are ordered: every write
//! the server accepts as one [`Write`] value ([`write`]), item writes with client flags and
//! compare-and-swap on the key's version ([`item`]), KV-Direct's vector operations
//! ([`vector`]), what they do and answer ([`outcome`]), and typed items that byte-level writes refuse ([`typed`]). The reservation station (`station.rs`) runs them atomically per key; the
//! protocol adapters decode into them and encode their [`Outcome`]s.

pub mod item;
mod lanes;
pub mod outcome;
pub mod typed;
pub mod vector;
pub mod write;

pub use item::{ItemCond, ItemTtl, ItemWrite};
pub use write::{Cond, Effect, ExpireCond, Failure, Outcome, Ttl, Write};

//! The protocol-neutral core: what every protocol adapter calls and nothing in it knows a
//! protocol. The shared state and its counters (`shared.rs`), the one write door (the
//! reservation station, `station.rs`, with its bursts and transactions), the operations it
//! runs (`ops/`), the read door (`reads.rs`) over the read engines (`engines.rs`), the
//! client registry, the expiry sweep, the users and their permissions (`acl/`), and the
//! interface the cluster layer implements (`route.rs`). Imports go one way: adapters and
//! the network layer call the core; the core imports none of them.

pub mod acl;
pub mod blocked;
pub mod burst;
pub mod clients;
pub mod counters;
pub mod engines;
pub mod glob;
pub mod loading;
pub mod op;
pub mod ops;
pub mod read_door;
pub mod reads;
pub mod route;
pub mod shared;
pub mod station;
pub mod station_one;
pub mod station_tx;
pub mod stats;
pub mod sweep;
pub mod write_door;

//! Support for the cluster tests (server/tests/cluster.rs): a real etcd and real server
//! processes on loopback (`harness.rs`), a client that follows redirects and records what
//! it saw (`client.rs`), TCP proxies the test controls between replicas (`proxy.rs`), and
//! a linearizability checker (`linearizable.rs`).

#![allow(dead_code)]

pub mod client;
pub mod harness;
pub mod linearizable;
pub mod proxy;

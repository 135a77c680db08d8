//! accelkv-bench: a YCSB driver (workloads A–F with YCSB's own generators, and Honeycomb's
//! cloud-storage scan workload) with targets behind one trait — accelkv in process (reference
//! reader and CPU engine) and over the network (binary protocol over TCP and UDP, RESP), a
//! `BTreeMap`, RocksDB, Redis and memcached — that validates every answer and reports
//! throughput and latency as markdown, JSON and an SVG plot.

pub mod generator;
pub mod record;
pub mod report;
pub mod runner;
pub mod suite;
pub mod target;
pub mod workload;

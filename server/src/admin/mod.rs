//! The admin HTTP endpoint (`http.rs`) and its Prometheus metrics (`prometheus.rs`, written
//! through `samples.rs`).

pub mod http;
pub mod prometheus;
pub mod samples;

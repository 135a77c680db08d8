//! The admin HTTP endpoint (`http.rs`) and its Prometheus text (`prometheus.rs`).

pub mod http;
pub mod prometheus;

//! Embedding the server with a vector function of your own: `clamp_add` adds the operand
//! and keeps every element within 0..=1000, and the filter `odd` keeps odd elements. Run it
//! and call the functions with the CLI:
//!
//! ```text
//! cargo run --release -p accelkv-server --example custom_function -- --port 7717 --resp-port 7389 --admin-port 7718
//! accelkv --addr 127.0.0.1:7717 vput v 1 2 999
//! accelkv --addr 127.0.0.1:7717 vector s2v v clamp_add 5     # answers 1 2 999
//! accelkv --addr 127.0.0.1:7717 vector filter v odd 0        # answers 7 (the value is 6 7 1000)
//! ```

use accelkv_server::config::{Args, Settings};
use accelkv_server::{Elem, FilterFn, Registry, Scalar, VectorError};
use clap::Parser;

/// A filter: keeps the odd integers (the parameter is unused).
struct Odd;

impl FilterFn for Odd {
    fn keep(&self, _elem: Elem, v: Scalar, _param: Scalar) -> bool {
        matches!(v, Scalar::Int(i) if i % 2 != 0)
    }
}

fn main() {
    let settings = Settings::resolve(Args::parse()).unwrap_or_else(|e| {
        eprintln!("custom_function: {e}");
        std::process::exit(2);
    });
    let mut registry = Registry::default();
    // An update function is any `Fn(Elem, Scalar, Scalar) -> Result<Scalar, VectorError>`.
    registry.register_update("clamp_add", |_elem: Elem, v: Scalar, d: Scalar| {
        match (v, d) {
            (Scalar::Int(a), Scalar::Int(b)) => Ok(Scalar::Int((a + b).clamp(0, 1000))),
            _ => Err(VectorError::TypeMismatch("clamp_add takes integers".into())),
        }
    });
    registry.register_filter("odd", Odd);
    if let Err(e) = accelkv_server::serve_with(settings, registry) {
        eprintln!("custom_function: {e}");
        std::process::exit(1);
    }
}

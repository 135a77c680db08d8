//! VECTOR update_scalar2vector `add` over u32 elements, 64 to 1,024 bytes: the built-in's
//! typed loop (server/src/core/ops/lanes.rs) against the general path (the same `add`
//! registered as a plain function, called once per element with exact arithmetic), side by
//! side in one process.
//!
//! `cargo bench -p accelkv-server --bench vector` (results: docs/BENCHMARKS.md, "VECTOR
//! updates").

use accelkv_server::vector::{self, VectorCall, VectorOp};
use accelkv_server::{Elem, Overflow, Registry, Scalar, VectorError};
use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};

/// The default registry with `add` replaced by the same arithmetic as a plain function,
/// which the typed loops do not take.
fn general() -> Registry {
    let mut r = Registry::default();
    r.register_update("add", |_: Elem, v: Scalar, d: Scalar| match (v, d) {
        (Scalar::Int(a), Scalar::Int(b)) => Ok(Scalar::Int(a + b)),
        (Scalar::Float(a), Scalar::Float(b)) => Ok(Scalar::Float(a + b)),
        _ => Err(VectorError::TypeMismatch("mixed".into())),
    });
    r
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("vector_s2v_add_u32");
    let one = 1u32.to_le_bytes();
    let call = VectorCall {
        op: VectorOp::UpdateScalarToVector,
        elem: Elem::U32,
        overflow: Overflow::Wrap,
        function: "add".into(),
        operand: one[..].into(),
    };
    for bytes in [64usize, 256, 1024] {
        let value: Vec<u8> = (0..bytes).map(|i| i as u8).collect();
        for (name, registry) in [("typed", Registry::default()), ("general", general())] {
            g.bench_with_input(BenchmarkId::new(name, bytes), &value, |b, v| {
                b.iter(|| black_box(vector::run(&registry, &call, black_box(v))))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! KV-Direct's vector operations (table 1 of the KV-Direct seed): a value read as an array
//! of fixed-width little-endian elements, updated with a scalar or a vector, reduced to a
//! scalar, or filtered, with functions taken from a [`Registry`]. Built-ins: `add`, `sub`,
//! `min`, `max`, `and`, `or`, `xor`, `set` for updates and reductions; `eq`, `ne`, `lt`,
//! `le`, `gt`, `ge` (against a parameter) for filters. A program embedding the server adds
//! its own through [`UpdateFn`] and [`FilterFn`] (docs/VECTOR_FUNCTIONS.md).
//!
//! Everything here is a pure function of bytes; the server runs it atomically per key.

use crate::core::ops::lanes::{self, Builtin, Operand};
pub use accelkv_proto::operand::{Elem, OutOfRange, Overflow, Scalar, VectorOp};
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Why a vector operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VectorError {
    /// The value (or a vector parameter) is not a whole number of elements, or a scalar
    /// operand is not exactly one element.
    BadLength(String),
    /// No function of that name is registered.
    UnknownFunction(String),
    /// The function does not apply to this element type (for example `xor` on floats).
    TypeMismatch(String),
    /// An integer result left its type's range under the `checked` policy.
    Overflow,
}

impl From<OutOfRange> for VectorError {
    fn from(_: OutOfRange) -> VectorError {
        VectorError::Overflow
    }
}

impl fmt::Display for VectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VectorError::BadLength(m) | VectorError::TypeMismatch(m) => f.write_str(m),
            VectorError::UnknownFunction(n) => write!(f, "unknown function '{n}'"),
            VectorError::Overflow => f.write_str("integer overflow (policy: checked)"),
        }
    }
}

/// An update or reduction function λ(v, Δ) → v.
pub trait UpdateFn: Send + Sync {
    /// Combines an element with the operand. Integers arrive as exact i128 values and the
    /// result is brought into range by the operation's overflow policy.
    fn apply(&self, elem: Elem, v: Scalar, operand: Scalar) -> Result<Scalar, VectorError>;
}

/// A filter predicate λ(v, p) → bool.
pub trait FilterFn: Send + Sync {
    /// Whether the element is kept.
    fn keep(&self, elem: Elem, v: Scalar, param: Scalar) -> bool;
}

impl<F> UpdateFn for F
where
    F: Fn(Elem, Scalar, Scalar) -> Result<Scalar, VectorError> + Send + Sync,
{
    fn apply(&self, elem: Elem, v: Scalar, operand: Scalar) -> Result<Scalar, VectorError> {
        self(elem, v, operand)
    }
}

/// The functions vector operations may name.
#[derive(Clone)]
pub struct Registry {
    /// Each function, and which built-in it is while it has not been replaced (built-ins
    /// over integer elements run as typed loops, lanes.rs).
    updates: HashMap<String, (Arc<dyn UpdateFn>, Option<Builtin>)>,
    filters: HashMap<String, Arc<dyn FilterFn>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut u: Vec<_> = self.updates.keys().collect();
        let mut p: Vec<_> = self.filters.keys().collect();
        u.sort();
        p.sort();
        f.debug_struct("Registry")
            .field("updates", &u)
            .field("filters", &p)
            .finish()
    }
}

fn int_only(
    name: &'static str,
    op: fn(i128, i128) -> i128,
) -> impl Fn(Elem, Scalar, Scalar) -> Result<Scalar, VectorError> {
    move |elem, v, d| match (v, d) {
        (Scalar::Int(a), Scalar::Int(b)) => Ok(Scalar::Int(op(a, b))),
        _ => Err(VectorError::TypeMismatch(format!(
            "'{name}' applies to integer elements, not {elem:?}"
        ))),
    }
}

fn arith(
    int: fn(i128, i128) -> i128,
    float: fn(f64, f64) -> f64,
) -> impl Fn(Elem, Scalar, Scalar) -> Result<Scalar, VectorError> {
    move |_, v, d| match (v, d) {
        (Scalar::Int(a), Scalar::Int(b)) => Ok(Scalar::Int(int(a, b))),
        (Scalar::Float(a), Scalar::Float(b)) => Ok(Scalar::Float(float(a, b))),
        _ => Err(VectorError::TypeMismatch("mixed integer and float".into())),
    }
}

struct Compare(fn(std::cmp::Ordering) -> bool);

impl FilterFn for Compare {
    fn keep(&self, _: Elem, v: Scalar, p: Scalar) -> bool {
        v.partial_cmp(&p).is_some_and(self.0)
    }
}

impl Default for Registry {
    /// The built-in functions.
    fn default() -> Registry {
        use std::cmp::Ordering as O;
        let mut r = Registry {
            updates: HashMap::new(),
            filters: HashMap::new(),
        };
        r.register_update("add", arith(|a, b| a + b, |a, b| a + b));
        r.register_update("sub", arith(|a, b| a - b, |a, b| a - b));
        r.register_update("min", arith(i128::min, f64::min));
        r.register_update("max", arith(i128::max, f64::max));
        r.register_update("set", |_: Elem, _: Scalar, d: Scalar| Ok(d));
        r.register_update("and", int_only("and", |a, b| a & b));
        r.register_update("or", int_only("or", |a, b| a | b));
        r.register_update("xor", int_only("xor", |a, b| a ^ b));
        r.register_filter("eq", Compare(|o| o == O::Equal));
        r.register_filter("ne", Compare(|o| o != O::Equal));
        r.register_filter("lt", Compare(|o| o == O::Less));
        r.register_filter("le", Compare(|o| o != O::Greater));
        r.register_filter("gt", Compare(|o| o == O::Greater));
        r.register_filter("ge", Compare(|o| o != O::Less));
        for (name, f) in r.updates.iter_mut() {
            f.1 = Builtin::named(name);
        }
        r
    }
}

impl Registry {
    /// Adds (or replaces) an update/reduction function.
    pub fn register_update(&mut self, name: &str, f: impl UpdateFn + 'static) {
        self.updates.insert(name.to_string(), (Arc::new(f), None));
    }

    /// Adds (or replaces) a filter predicate.
    pub fn register_filter(&mut self, name: &str, f: impl FilterFn + 'static) {
        self.filters.insert(name.to_string(), Arc::new(f));
    }

    /// The update function `name`, and the built-in it is unless it was replaced.
    fn update_entry(
        &self,
        name: &str,
    ) -> Result<&(Arc<dyn UpdateFn>, Option<Builtin>), VectorError> {
        self.updates
            .get(name)
            .ok_or_else(|| VectorError::UnknownFunction(name.to_string()))
    }

    fn update(&self, name: &str) -> Result<&Arc<dyn UpdateFn>, VectorError> {
        self.update_entry(name).map(|f| &f.0)
    }

    fn filter(&self, name: &str) -> Result<&Arc<dyn FilterFn>, VectorError> {
        self.filters
            .get(name)
            .ok_or_else(|| VectorError::UnknownFunction(name.to_string()))
    }
}

/// A decoded vector operation (what `Write::Vector` carries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorCall<'a> {
    /// Which operation.
    pub op: VectorOp,
    /// Element type.
    pub elem: Elem,
    /// Overflow policy for integer results.
    pub overflow: Overflow,
    /// The function's name in the registry.
    pub function: Cow<'a, str>,
    /// Δ (one element), the vector of Δ_i, the initial Σ or the filter parameter.
    pub operand: Cow<'a, [u8]>,
}

impl VectorCall<'_> {
    /// The same call, owning its function name and operand.
    pub fn into_owned(self) -> VectorCall<'static> {
        VectorCall {
            function: Cow::Owned(self.function.into_owned()),
            operand: Cow::Owned(self.operand.into_owned()),
            ..self
        }
    }
}

/// What a vector operation produced: the reply, and the new value if it changes the value.
#[derive(Clone, Debug, PartialEq)]
pub struct VectorResult {
    /// The reply bytes.
    pub reply: Vec<u8>,
    /// The value to store, if the operation updates it.
    pub new_value: Option<Vec<u8>>,
}

fn elements(elem: Elem, bytes: &[u8], what: &str) -> Result<usize, VectorError> {
    let w = elem.width();
    if !bytes.len().is_multiple_of(w) {
        return Err(VectorError::BadLength(format!(
            "{what} of {} bytes is not a whole number of {w}-byte {elem:?} elements",
            bytes.len()
        )));
    }
    Ok(bytes.len() / w)
}

fn one(elem: Elem, bytes: &[u8], what: &str) -> Result<Scalar, VectorError> {
    if bytes.len() != elem.width() {
        return Err(VectorError::BadLength(format!(
            "{what} must be one {}-byte {elem:?} element, not {} bytes",
            elem.width(),
            bytes.len()
        )));
    }
    Ok(elem.read(bytes))
}

fn store(elem: Elem, overflow: Overflow, s: Scalar, out: &mut Vec<u8>) -> Result<(), VectorError> {
    let s = match s {
        Scalar::Int(i) if !elem.is_float() => Scalar::Int(overflow.fit(elem, i)?),
        Scalar::Int(i) => Scalar::Float(i as f64),
        Scalar::Float(f) if elem.is_float() => Scalar::Float(f),
        Scalar::Float(_) => {
            return Err(VectorError::TypeMismatch(format!(
                "a float result for {elem:?} elements"
            )))
        }
    };
    elem.write(s, out);
    Ok(())
}

/// The new value of an update (s2s, s2v, v2v) of `value`, `n` elements: built-in integer
/// functions as typed loops (lanes.rs), the rest one registered call per element.
fn update(
    registry: &Registry,
    call: &VectorCall<'_>,
    value: &[u8],
    n: usize,
) -> Result<Vec<u8>, VectorError> {
    let e = call.elem;
    let w = e.width();
    if call.op == VectorOp::UpdateScalarToScalar && n != 1 {
        return Err(VectorError::BadLength(format!(
            "update_scalar2scalar needs a value of one {w}-byte element, not {} bytes",
            value.len()
        )));
    }
    let (f, builtin) = registry.update_entry(&call.function)?;
    let operand = if call.op == VectorOp::UpdateVectorToVector {
        let m = elements(e, &call.operand, "the operand vector")?;
        if m != n {
            return Err(VectorError::BadLength(format!(
                "the operand vector has {m} elements and the value {n}"
            )));
        }
        Operand::Vector(&call.operand)
    } else {
        one(e, &call.operand, "the scalar operand")?;
        Operand::Scalar(&call.operand)
    };
    let mut out = Vec::with_capacity(value.len());
    let fast = builtin.and_then(|b| lanes::update(b, e, call.overflow, value, operand, &mut out));
    if let Some(r) = fast {
        r.map_err(|_| VectorError::Overflow)?;
        return Ok(out);
    }
    for i in 0..n {
        let d = match operand {
            Operand::Scalar(s) => e.read(s),
            Operand::Vector(v) => e.read(&v[i * w..]),
        };
        store(
            e,
            call.overflow,
            f.apply(e, e.read(&value[i * w..]), d)?,
            &mut out,
        )?;
    }
    Ok(out)
}

/// Runs `call` on `value` with the functions of `registry`.
pub fn run(
    registry: &Registry,
    call: &VectorCall<'_>,
    value: &[u8],
) -> Result<VectorResult, VectorError> {
    let e = call.elem;
    let w = e.width();
    let n = elements(e, value, "the value")?;
    let each = |i: usize| e.read(&value[i * w..]);
    match call.op {
        VectorOp::UpdateScalarToScalar
        | VectorOp::UpdateScalarToVector
        | VectorOp::UpdateVectorToVector => Ok(VectorResult {
            reply: value.to_vec(),
            new_value: Some(update(registry, call, value, n)?),
        }),
        VectorOp::Reduce => {
            let f = registry.update(&call.function)?;
            let mut acc = one(e, &call.operand, "the initial value")?;
            for i in 0..n {
                acc = f.apply(e, acc, each(i))?;
                // Keep the accumulator in the element type as it goes.
                let mut b = Vec::with_capacity(w);
                store(e, call.overflow, acc, &mut b)?;
                acc = e.read(&b);
            }
            let mut reply = Vec::with_capacity(w);
            store(e, call.overflow, acc, &mut reply)?;
            Ok(VectorResult {
                reply,
                new_value: None,
            })
        }
        VectorOp::Filter => {
            let f = registry.filter(&call.function)?;
            let p = one(e, &call.operand, "the filter parameter")?;
            let mut reply = Vec::new();
            for i in 0..n {
                if f.keep(e, each(i), p) {
                    reply.extend_from_slice(&value[i * w..(i + 1) * w]);
                }
            }
            Ok(VectorResult {
                reply,
                new_value: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call<'a>(op: VectorOp, elem: Elem, f: &'a str, operand: &'a [u8]) -> VectorCall<'a> {
        VectorCall {
            op,
            elem,
            overflow: Overflow::Wrap,
            function: Cow::Borrowed(f),
            operand: Cow::Borrowed(operand),
        }
    }

    fn u32s(v: &[u32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn table_of_kv_direct() {
        let r = Registry::default();
        let v = u32s(&[1, 2, 3, 4]);
        // update_scalar2vector returns the original vector and adds to every element.
        let out = run(
            &r,
            &call(
                VectorOp::UpdateScalarToVector,
                Elem::U32,
                "add",
                &u32s(&[10]),
            ),
            &v,
        )
        .unwrap();
        assert_eq!(out.reply, v);
        assert_eq!(out.new_value.unwrap(), u32s(&[11, 12, 13, 14]));
        // update_vector2vector pairs the elements.
        let out = run(
            &r,
            &call(
                VectorOp::UpdateVectorToVector,
                Elem::U32,
                "max",
                &u32s(&[0, 5, 0, 5]),
            ),
            &v,
        )
        .unwrap();
        assert_eq!(out.new_value.unwrap(), u32s(&[1, 5, 3, 5]));
        // reduce returns the scalar.
        let out = run(
            &r,
            &call(VectorOp::Reduce, Elem::U32, "add", &u32s(&[100])),
            &v,
        )
        .unwrap();
        assert_eq!(out.reply, u32s(&[110]));
        assert_eq!(out.new_value, None);
        // filter returns the kept elements.
        let out = run(
            &r,
            &call(VectorOp::Filter, Elem::U32, "ge", &u32s(&[3])),
            &v,
        )
        .unwrap();
        assert_eq!(out.reply, u32s(&[3, 4]));
        // update_scalar2scalar needs a one-element value.
        let one = 7u64.to_le_bytes();
        let out = run(
            &r,
            &call(
                VectorOp::UpdateScalarToScalar,
                Elem::U64,
                "xor",
                &3u64.to_le_bytes(),
            ),
            &one,
        )
        .unwrap();
        assert_eq!(out.reply, one);
        assert_eq!(out.new_value.unwrap(), 4u64.to_le_bytes());
    }

    #[test]
    fn clear_errors() {
        let r = Registry::default();
        let bad_len = run(
            &r,
            &call(VectorOp::Reduce, Elem::U32, "add", &u32s(&[0])),
            &[1, 2, 3],
        );
        assert!(matches!(bad_len, Err(VectorError::BadLength(_))));
        let unknown = run(
            &r,
            &call(VectorOp::Reduce, Elem::U32, "median", &u32s(&[0])),
            &u32s(&[1]),
        );
        assert_eq!(unknown, Err(VectorError::UnknownFunction("median".into())));
        let f = 1.5f64.to_le_bytes();
        let mismatch = run(
            &r,
            &call(VectorOp::UpdateScalarToVector, Elem::F64, "xor", &f),
            &f,
        );
        assert!(matches!(mismatch, Err(VectorError::TypeMismatch(_))));
        let mut c = call(VectorOp::UpdateScalarToVector, Elem::U8, "add", &[1]);
        c.overflow = Overflow::Checked;
        assert_eq!(run(&r, &c, &[255]), Err(VectorError::Overflow));
        c.overflow = Overflow::Saturate;
        assert_eq!(run(&r, &c, &[255]).unwrap().new_value.unwrap(), vec![255]);
        c.overflow = Overflow::Wrap;
        assert_eq!(run(&r, &c, &[255]).unwrap().new_value.unwrap(), vec![0]);
        let vlen = run(
            &r,
            &call(VectorOp::UpdateVectorToVector, Elem::U8, "add", &[1]),
            &[1, 2],
        );
        assert!(matches!(vlen, Err(VectorError::BadLength(_))));
    }

    #[test]
    fn embedders_register_functions() {
        let mut r = Registry::default();
        r.register_update("double_plus", |_: Elem, v: Scalar, d: Scalar| {
            match (v, d) {
                (Scalar::Int(a), Scalar::Int(b)) => Ok(Scalar::Int(2 * a + b)),
                _ => Err(VectorError::TypeMismatch("integers only".into())),
            }
        });
        let out = run(
            &r,
            &call(
                VectorOp::UpdateScalarToVector,
                Elem::I64,
                "double_plus",
                &1i64.to_le_bytes(),
            ),
            &(-5i64).to_le_bytes(),
        )
        .unwrap();
        assert_eq!(out.new_value.unwrap(), (-9i64).to_le_bytes());
    }

    /// The default registry with every built-in taken as a plain registered function, so
    /// `run` takes the general path for all of them.
    fn general() -> Registry {
        let mut r = Registry::default();
        for f in r.updates.values_mut() {
            f.1 = None;
        }
        r
    }

    proptest! {
        // The typed loops (lanes.rs) give what the general path gives, errors included, for
        // every built-in, integer type and overflow policy, with scalar and vector operands.
        #[test]
        fn typed_loops_match_the_general_path(
            f in proptest::sample::select(vec!["add", "sub", "min", "max", "set", "and", "or", "xor"]),
            e in proptest::sample::select(vec![Elem::U8, Elem::U16, Elem::U32, Elem::U64, Elem::I32, Elem::I64]),
            o in proptest::sample::select(vec![Overflow::Wrap, Overflow::Checked, Overflow::Saturate]),
            n in 0usize..40,
            seed in any::<u64>(),
            edge in any::<bool>(),
        ) {
            let w = e.width();
            // Random bytes, or bytes near the type's edges so overflow is common.
            let mut x = seed | 1;
            let mut byte = || {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                if edge { [0u8, 1, 0x7f, 0x80, 0xfe, 0xff][(x % 6) as usize] } else { x as u8 }
            };
            let value: Vec<u8> = (0..n * w).map(|_| byte()).collect();
            let vector: Vec<u8> = (0..n * w).map(|_| byte()).collect();
            let scalar: Vec<u8> = (0..w).map(|_| byte()).collect();
            let (fast, slow) = (Registry::default(), general());
            for (op, operand) in [(VectorOp::UpdateScalarToVector, &scalar), (VectorOp::UpdateVectorToVector, &vector)] {
                let c = VectorCall { op, elem: e, overflow: o, function: Cow::Borrowed(f), operand: Cow::Borrowed(operand) };
                prop_assert_eq!(run(&fast, &c, &value), run(&slow, &c, &value));
            }
        }

        // Updates, reductions and filters agree with plain loops over i32 and f64.
        #[test]
        fn matches_plain_loops(v in proptest::collection::vec(any::<i32>(), 0..64), d in any::<i32>(), fx in proptest::collection::vec(-1e6f64..1e6, 1..32), p in -1e6f64..1e6) {
            let r = Registry::default();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let db = d.to_le_bytes();
            let out = run(&r, &call(VectorOp::UpdateScalarToVector, Elem::I32, "add", &db), &bytes).unwrap();
            let want: Vec<u8> = v.iter().flat_map(|x| x.wrapping_add(d).to_le_bytes()).collect();
            prop_assert_eq!(out.new_value.unwrap(), want);
            let out = run(&r, &call(VectorOp::Reduce, Elem::I32, "max", &i32::MIN.to_le_bytes()), &bytes).unwrap();
            prop_assert_eq!(out.reply, v.iter().copied().max().unwrap_or(i32::MIN).to_le_bytes().to_vec());
            let out = run(&r, &call(VectorOp::Reduce, Elem::I32, "xor", &0i32.to_le_bytes()), &bytes).unwrap();
            prop_assert_eq!(out.reply, v.iter().fold(0, |a, x| a ^ x).to_le_bytes().to_vec());
            let out = run(&r, &call(VectorOp::Filter, Elem::I32, "lt", &db), &bytes).unwrap();
            let want: Vec<u8> = v.iter().filter(|&&x| x < d).flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(out.reply, want);
            let fb: Vec<u8> = fx.iter().flat_map(|x| x.to_le_bytes()).collect();
            let out = run(&r, &call(VectorOp::Reduce, Elem::F64, "add", &0f64.to_le_bytes()), &fb).unwrap();
            prop_assert_eq!(out.reply, fx.iter().fold(0.0, |a, x| a + x).to_le_bytes().to_vec());
            let out = run(&r, &call(VectorOp::Filter, Elem::F64, "gt", &p.to_le_bytes()), &fb).unwrap();
            let want: Vec<u8> = fx.iter().filter(|&&x| x > p).flat_map(|x| x.to_le_bytes()).collect();
            prop_assert_eq!(out.reply, want);
        }
    }
}

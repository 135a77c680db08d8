//! KV-Direct's vector operations (table 1 of the KV-Direct seed): a value read as an array
//! of fixed-width little-endian elements, updated with a scalar or a vector, reduced to a
//! scalar, or filtered, with functions taken from a [`Registry`]. Built-ins: `add`, `sub`,
//! `min`, `max`, `and`, `or`, `xor`, `set` for updates and reductions; `eq`, `ne`, `lt`,
//! `le`, `gt`, `ge` (against a parameter) for filters. A program embedding the server adds
//! its own through [`UpdateFn`] and [`FilterFn`] (docs/VECTOR_FUNCTIONS.md).
//!
//! Everything here is a pure function of bytes; the server runs it atomically per key.

use accelkv_proto::frame::operand;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// Element types (discriminants are the wire bytes of `accelkv_proto::frame::operand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Elem {
    /// Unsigned 8-bit.
    U8 = operand::U8,
    /// Unsigned 16-bit.
    U16 = operand::U16,
    /// Unsigned 32-bit.
    U32 = operand::U32,
    /// Unsigned 64-bit.
    U64 = operand::U64,
    /// Signed 32-bit.
    I32 = operand::I32,
    /// Signed 64-bit.
    I64 = operand::I64,
    /// IEEE 754 binary32.
    F32 = operand::F32,
    /// IEEE 754 binary64.
    F64 = operand::F64,
}

impl Elem {
    /// The type for its wire byte.
    pub fn from_u8(b: u8) -> Option<Elem> {
        use Elem::*;
        [U8, U16, U32, U64, I32, I64, F32, F64]
            .into_iter()
            .find(|e| *e as u8 == b)
    }

    /// Bytes per element.
    pub fn width(self) -> usize {
        match self {
            Elem::U8 => 1,
            Elem::U16 => 2,
            Elem::U32 | Elem::I32 | Elem::F32 => 4,
            Elem::U64 | Elem::I64 | Elem::F64 => 8,
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64)
    }

    fn is_signed(self) -> bool {
        matches!(self, Elem::I32 | Elem::I64)
    }

    /// The largest and smallest values, as i128, of an integer type.
    fn int_range(self) -> (i128, i128) {
        match self {
            Elem::U8 => (0, u8::MAX.into()),
            Elem::U16 => (0, u16::MAX.into()),
            Elem::U32 => (0, u32::MAX.into()),
            Elem::U64 => (0, u64::MAX.into()),
            Elem::I32 => (i32::MIN.into(), i32::MAX.into()),
            Elem::I64 => (i64::MIN.into(), i64::MAX.into()),
            Elem::F32 | Elem::F64 => (0, 0),
        }
    }

    /// Reads the element at the start of `b` (which holds at least `width` bytes).
    pub fn read(self, b: &[u8]) -> Scalar {
        let mut w = [0u8; 8];
        w[..self.width()].copy_from_slice(&b[..self.width()]);
        let raw = u64::from_le_bytes(w);
        match self {
            Elem::U8 | Elem::U16 | Elem::U32 | Elem::U64 => Scalar::Int(raw.into()),
            Elem::I32 => Scalar::Int((raw as u32 as i32).into()),
            Elem::I64 => Scalar::Int((raw as i64).into()),
            Elem::F32 => Scalar::Float(f32::from_bits(raw as u32).into()),
            Elem::F64 => Scalar::Float(f64::from_bits(raw)),
        }
    }

    /// Appends `s` (already in range for this type) as one element.
    pub fn write(self, s: Scalar, out: &mut Vec<u8>) {
        match (self, s) {
            (Elem::F32, Scalar::Float(f)) => out.extend_from_slice(&(f as f32).to_le_bytes()),
            (Elem::F64, Scalar::Float(f)) => out.extend_from_slice(&f.to_le_bytes()),
            (_, Scalar::Int(i)) => out.extend_from_slice(&(i as u64).to_le_bytes()[..self.width()]),
            (_, Scalar::Float(f)) => {
                out.extend_from_slice(&(f as i128 as u64).to_le_bytes()[..self.width()])
            }
        }
    }
}

/// An element's value, widened: integers of every width as i128, floats as f64.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub enum Scalar {
    /// An integer.
    Int(i128),
    /// A float.
    Float(f64),
}

/// What to do when an integer result leaves its type's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Overflow {
    /// Two's-complement wrap-around (the default, as CPU and SIMD integer arithmetic).
    Wrap = operand::WRAP,
    /// Fail with [`VectorError::Overflow`]; the value is left unchanged.
    Checked = operand::CHECKED,
    /// Clamp to the type's range.
    Saturate = operand::SATURATE,
}

impl Overflow {
    /// The policy for its wire byte.
    pub fn from_u8(b: u8) -> Option<Overflow> {
        [Overflow::Wrap, Overflow::Checked, Overflow::Saturate]
            .into_iter()
            .find(|o| *o as u8 == b)
    }

    /// Brings an exact integer result into `elem`'s range.
    pub fn fit(self, elem: Elem, v: i128) -> Result<i128, VectorError> {
        let (lo, hi) = elem.int_range();
        if (lo..=hi).contains(&v) {
            return Ok(v);
        }
        match self {
            Overflow::Checked => Err(VectorError::Overflow),
            Overflow::Saturate => Ok(v.clamp(lo, hi)),
            Overflow::Wrap => {
                let bits = elem.width() as u32 * 8;
                let m = v & ((1i128 << bits) - 1);
                Ok(if elem.is_signed() && m >= 1i128 << (bits - 1) {
                    m - (1i128 << bits)
                } else {
                    m
                })
            }
        }
    }
}

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
    updates: HashMap<String, Arc<dyn UpdateFn>>,
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
        r
    }
}

impl Registry {
    /// Adds (or replaces) an update/reduction function.
    pub fn register_update(&mut self, name: &str, f: impl UpdateFn + 'static) {
        self.updates.insert(name.to_string(), Arc::new(f));
    }

    /// Adds (or replaces) a filter predicate.
    pub fn register_filter(&mut self, name: &str, f: impl FilterFn + 'static) {
        self.filters.insert(name.to_string(), Arc::new(f));
    }

    fn update(&self, name: &str) -> Result<&Arc<dyn UpdateFn>, VectorError> {
        self.updates
            .get(name)
            .ok_or_else(|| VectorError::UnknownFunction(name.to_string()))
    }

    fn filter(&self, name: &str) -> Result<&Arc<dyn FilterFn>, VectorError> {
        self.filters
            .get(name)
            .ok_or_else(|| VectorError::UnknownFunction(name.to_string()))
    }
}

/// The vector operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum VectorOp {
    /// The value is one element: v ← λ(v, Δ); returns the original value.
    UpdateScalarToScalar = operand::UPDATE_SCALAR2SCALAR,
    /// Every element: v_i ← λ(v_i, Δ); returns the original vector.
    UpdateScalarToVector = operand::UPDATE_SCALAR2VECTOR,
    /// Every element with its own operand: v_i ← λ(v_i, Δ_i); returns the original vector.
    UpdateVectorToVector = operand::UPDATE_VECTOR2VECTOR,
    /// Σ ← λ(Σ, v_i) over the elements from the initial Σ; returns Σ (the value unchanged).
    Reduce = operand::REDUCE,
    /// The elements v_i with λ(v_i, p); returns them (the value unchanged).
    Filter = operand::FILTER,
}

impl VectorOp {
    /// The operation for its wire byte.
    pub fn from_u8(b: u8) -> Option<VectorOp> {
        use VectorOp::*;
        [
            UpdateScalarToScalar,
            UpdateScalarToVector,
            UpdateVectorToVector,
            Reduce,
            Filter,
        ]
        .into_iter()
        .find(|o| *o as u8 == b)
    }

    /// Whether it changes the value (not idempotent: a retried datagram would apply twice).
    pub fn updates(self) -> bool {
        !matches!(self, VectorOp::Reduce | VectorOp::Filter)
    }
}

/// A decoded vector operation.
#[derive(Clone, Debug)]
pub struct VectorCall<'a> {
    /// Which operation.
    pub op: VectorOp,
    /// Element type.
    pub elem: Elem,
    /// Overflow policy for integer results.
    pub overflow: Overflow,
    /// Function name.
    pub function: &'a str,
    /// Δ (one element), the vector of Δ_i, the initial Σ or the filter parameter.
    pub operand: &'a [u8],
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
        VectorOp::UpdateScalarToScalar | VectorOp::UpdateScalarToVector => {
            if call.op == VectorOp::UpdateScalarToScalar && n != 1 {
                return Err(VectorError::BadLength(format!(
                    "update_scalar2scalar needs a value of one {w}-byte element, not {} bytes",
                    value.len()
                )));
            }
            let f = registry.update(call.function)?;
            let d = one(e, call.operand, "the scalar operand")?;
            let mut out = Vec::with_capacity(value.len());
            for i in 0..n {
                store(e, call.overflow, f.apply(e, each(i), d)?, &mut out)?;
            }
            Ok(VectorResult {
                reply: value.to_vec(),
                new_value: Some(out),
            })
        }
        VectorOp::UpdateVectorToVector => {
            let f = registry.update(call.function)?;
            let m = elements(e, call.operand, "the operand vector")?;
            if m != n {
                return Err(VectorError::BadLength(format!(
                    "the operand vector has {m} elements and the value {n}"
                )));
            }
            let mut out = Vec::with_capacity(value.len());
            for i in 0..n {
                let d = e.read(&call.operand[i * w..]);
                store(e, call.overflow, f.apply(e, each(i), d)?, &mut out)?;
            }
            Ok(VectorResult {
                reply: value.to_vec(),
                new_value: Some(out),
            })
        }
        VectorOp::Reduce => {
            let f = registry.update(call.function)?;
            let mut acc = one(e, call.operand, "the initial value")?;
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
            let f = registry.filter(call.function)?;
            let p = one(e, call.operand, "the filter parameter")?;
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
            function: f,
            operand,
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

    proptest! {
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

//! The typed operands of atomics and vector operations (docs/PROTOCOL.md, "Operands"):
//! element types, overflow policies and vector operations, with their wire bytes
//! ([`crate::frame::operand`]) and how an element is laid out in a value (little-endian,
//! fixed width). What the operations compute lives with the server's reservation station.

use crate::frame;

/// Element types (discriminants are the wire bytes of `accelkv_proto::frame::operand`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Elem {
    /// Unsigned 8-bit.
    U8 = frame::operand::U8,
    /// Unsigned 16-bit.
    U16 = frame::operand::U16,
    /// Unsigned 32-bit.
    U32 = frame::operand::U32,
    /// Unsigned 64-bit.
    U64 = frame::operand::U64,
    /// Signed 32-bit.
    I32 = frame::operand::I32,
    /// Signed 64-bit.
    I64 = frame::operand::I64,
    /// IEEE 754 binary32.
    F32 = frame::operand::F32,
    /// IEEE 754 binary64.
    F64 = frame::operand::F64,
}

impl Elem {
    /// The type for its name (`u8`, `u16`, `u32`, `u64`, `i32`, `i64`, `f32`, `f64`, any
    /// case), as RESP commands and the CLI write it.
    pub fn from_name(name: &[u8]) -> Option<Elem> {
        use Elem::*;
        Some(match name.to_ascii_lowercase().as_slice() {
            b"u8" => U8,
            b"u16" => U16,
            b"u32" => U32,
            b"u64" => U64,
            b"i32" => I32,
            b"i64" => I64,
            b"f32" => F32,
            b"f64" => F64,
            _ => return None,
        })
    }

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

    pub fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64)
    }

    pub fn is_signed(self) -> bool {
        matches!(self, Elem::I32 | Elem::I64)
    }

    /// The largest and smallest values, as i128, of an integer type.
    pub fn int_range(self) -> (i128, i128) {
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
    Wrap = frame::operand::WRAP,
    /// Fail (status OVERFLOW); the value is left unchanged.
    Checked = frame::operand::CHECKED,
    /// Clamp to the type's range.
    Saturate = frame::operand::SATURATE,
}

impl Overflow {
    /// The policy for its name (`wrap`, `checked`, `saturate`, any case).
    pub fn from_name(name: &[u8]) -> Option<Overflow> {
        Some(match name.to_ascii_lowercase().as_slice() {
            b"wrap" => Overflow::Wrap,
            b"checked" => Overflow::Checked,
            b"saturate" => Overflow::Saturate,
            _ => return None,
        })
    }

    /// The policy for its wire byte.
    pub fn from_u8(b: u8) -> Option<Overflow> {
        [Overflow::Wrap, Overflow::Checked, Overflow::Saturate]
            .into_iter()
            .find(|o| *o as u8 == b)
    }

    /// Brings an exact integer result into `elem`'s range (`Err` only under `Checked`).
    pub fn fit(self, elem: Elem, v: i128) -> Result<i128, OutOfRange> {
        let (lo, hi) = elem.int_range();
        if (lo..=hi).contains(&v) {
            return Ok(v);
        }
        match self {
            Overflow::Checked => Err(OutOfRange),
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

/// The vector operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum VectorOp {
    /// The value is one element: v ← λ(v, Δ); returns the original value.
    UpdateScalarToScalar = frame::operand::UPDATE_SCALAR2SCALAR,
    /// Every element: v_i ← λ(v_i, Δ); returns the original vector.
    UpdateScalarToVector = frame::operand::UPDATE_SCALAR2VECTOR,
    /// Every element with its own operand: v_i ← λ(v_i, Δ_i); returns the original vector.
    UpdateVectorToVector = frame::operand::UPDATE_VECTOR2VECTOR,
    /// Σ ← λ(Σ, v_i) over the elements from the initial Σ; returns Σ (the value unchanged).
    Reduce = frame::operand::REDUCE,
    /// The elements v_i with λ(v_i, p); returns them (the value unchanged).
    Filter = frame::operand::FILTER,
}

impl VectorOp {
    /// The operation for its name (`s2s`, `s2v`, `v2v`, `reduce`, `filter`, any case).
    pub fn from_name(name: &[u8]) -> Option<VectorOp> {
        use VectorOp::*;
        Some(match name.to_ascii_lowercase().as_slice() {
            b"s2s" => UpdateScalarToScalar,
            b"s2v" => UpdateScalarToVector,
            b"v2v" => UpdateVectorToVector,
            b"reduce" => Reduce,
            b"filter" => Filter,
            _ => return None,
        })
    }

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

/// An integer result outside its type's range under [`Overflow::Checked`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfRange;

//! Typed loops for the built-in integer update functions of vector operations (`add`, `sub`,
//! `min`, `max`, `set`, `and`, `or`, `xor` over `u8`..`i64`). The general path reads each
//! element into an exact `i128`, calls the registered function through a trait object and
//! brings the result into range by the overflow policy: about 20 ns an element, which made a
//! 1 KiB VECTOR update slower than the client's own read-modify-write. These loops do the
//! same arithmetic on the element type itself (wrapping, checked or saturating, which is
//! what the policy's fit of the exact result gives), so the compiler can vectorise them.
//! `vector.rs` uses them only for functions the registry still holds as built-ins; a test
//! checks them against the general path.

use accelkv_proto::operand::{Elem, Overflow};

/// An integer result left its type's range under the `checked` policy.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Overflowed;

/// A built-in integer update function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Builtin {
    Add,
    Sub,
    Min,
    Max,
    Set,
    And,
    Or,
    Xor,
}

impl Builtin {
    /// The built-in registered under `name`.
    pub(crate) fn named(name: &str) -> Option<Builtin> {
        Some(match name {
            "add" => Builtin::Add,
            "sub" => Builtin::Sub,
            "min" => Builtin::Min,
            "max" => Builtin::Max,
            "set" => Builtin::Set,
            "and" => Builtin::And,
            "or" => Builtin::Or,
            "xor" => Builtin::Xor,
            _ => return None,
        })
    }
}

/// The second argument of each element's update: one scalar or a vector of as many elements.
#[derive(Clone, Copy)]
pub(crate) enum Operand<'a> {
    Scalar(&'a [u8]),
    Vector(&'a [u8]),
}

macro_rules! lanes {
    ($t:ty, $f:expr, $overflow:expr, $value:expr, $operand:expr, $out:expr) => {{
        const W: usize = std::mem::size_of::<$t>();
        let rd = |b: &[u8]| <$t>::from_le_bytes(b.try_into().unwrap_or([0; W]));
        let scalar = match $operand {
            Operand::Scalar(s) => Some(rd(s)),
            Operand::Vector(_) => None,
        };
        let vector = match $operand {
            Operand::Vector(v) => v,
            Operand::Scalar(_) => &[][..],
        };
        for (i, c) in $value.chunks_exact(W).enumerate() {
            let a = rd(c);
            let d = scalar.unwrap_or_else(|| rd(&vector[i * W..(i + 1) * W]));
            let r: $t = match $f {
                Builtin::Add => match $overflow {
                    Overflow::Wrap => a.wrapping_add(d),
                    Overflow::Saturate => a.saturating_add(d),
                    Overflow::Checked => a.checked_add(d).ok_or(Overflowed)?,
                },
                Builtin::Sub => match $overflow {
                    Overflow::Wrap => a.wrapping_sub(d),
                    Overflow::Saturate => a.saturating_sub(d),
                    Overflow::Checked => a.checked_sub(d).ok_or(Overflowed)?,
                },
                Builtin::Min => a.min(d),
                Builtin::Max => a.max(d),
                Builtin::Set => d,
                Builtin::And => a & d,
                Builtin::Or => a | d,
                Builtin::Xor => a ^ d,
            };
            $out.extend_from_slice(&r.to_le_bytes());
        }
        Ok(())
    }};
}

/// Appends to `out` each element of `value` updated by `f` with the operand (one element, or
/// as many as `value` has: the caller checked the lengths). `None` for float elements, which
/// take the general path.
pub(crate) fn update(
    f: Builtin,
    elem: Elem,
    overflow: Overflow,
    value: &[u8],
    operand: Operand<'_>,
    out: &mut Vec<u8>,
) -> Option<Result<(), Overflowed>> {
    // The macro's `?` returns from this closure, not from `update`.
    let run = || match elem {
        Elem::U8 => lanes!(u8, f, overflow, value, operand, out),
        Elem::U16 => lanes!(u16, f, overflow, value, operand, out),
        Elem::U32 => lanes!(u32, f, overflow, value, operand, out),
        Elem::U64 => lanes!(u64, f, overflow, value, operand, out),
        Elem::I32 => lanes!(i32, f, overflow, value, operand, out),
        Elem::I64 => lanes!(i64, f, overflow, value, operand, out),
        // Not reached: floats take the general path (`None` below).
        Elem::F32 | Elem::F64 => Ok(()),
    };
    (!elem.is_float()).then(run)
}

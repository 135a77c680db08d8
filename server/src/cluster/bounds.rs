//! A range's keys as bounds, and the tests on them the state machine and the router make.

/// A range's keys: `start <= key < end` (`end` `None`: no upper bound).
pub(crate) type Bounds = (Vec<u8>, Option<Vec<u8>>);

pub(crate) fn inside(b: &Bounds, key: &[u8]) -> bool {
    key >= b.0.as_slice() && b.1.as_deref().is_none_or(|e| key < e)
}

/// Whether a command's keys (and the bound a ranged read stops at) lie within `b`.
pub(crate) fn covers(b: &Bounds, keys: &[&[u8]], upto: Option<Option<&[u8]>>) -> bool {
    keys.iter().all(|k| inside(b, k))
        && match (upto, &b.1) {
            (None, _) | (Some(_), None) => true,
            (Some(Some(hi)), Some(e)) => hi <= e.as_slice(),
            (Some(None), Some(_)) => false,
        }
}

pub(crate) fn overlap(a: &Bounds, b: &Bounds) -> bool {
    let a_before_b = a.1.as_deref().is_some_and(|e| e <= b.0.as_slice());
    let b_before_a = b.1.as_deref().is_some_and(|e| e <= a.0.as_slice());
    !a_before_b && !b_before_a
}

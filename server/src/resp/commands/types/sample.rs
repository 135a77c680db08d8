//! Random members without reading the whole collection (SPOP, SRANDMEMBER, HRANDFIELD):
//! each pick probes a random point between the collection's first and last field (byte by
//! byte, uniform between theirs) and takes the first field at or after it, wrapping to the
//! first. O(log n) a pick; the distribution follows how the fields spread over that byte
//! range (fields of one shape, `user:1234`, come out close to uniform; a field far from
//! the others is picked more often), as Redis's own picks are uniform only
//! approximately. A packed collection (`packed.rs`), a collection of at most 128 fields (Redis's small encodings' size), a
//! count of at least half the collection, or a count with repeats of at least its size
//! reads it all and picks uniformly.

use crate::core::shared::Shared;
use crate::resp::commands::types::access::{Fail, Field, Src};
use crate::resp::commands::types::encoding::{field_key, fields_range, Meta};
use crate::resp::session::Session;
use rand::seq::SliceRandom;
use rand::Rng;
use std::collections::BTreeSet;

/// Collections up to this many fields are read whole and picked from uniformly.
const UNIFORM_UP_TO: u64 = 128;

/// `count` random fields of the collection `m` at `key` with their values: distinct ones
/// (all of them when `count` is at least its size), or with `repeat`, exactly `count`
/// with repeats allowed.
pub(crate) fn sample(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (key, m): (&[u8], &Meta),
    count: usize,
    repeat: bool,
) -> Result<Vec<Field>, Fail> {
    if m.len == 0 || count == 0 {
        return Ok(Vec::new());
    }
    let mut rng = rand::thread_rng();
    let n = count as u64;
    if m.packed || m.len <= UNIFORM_UP_TO || (!repeat && n * 2 >= m.len) || (repeat && n >= m.len) {
        let mut all = src.fields(sh, s, key, m)?;
        if repeat && !all.is_empty() {
            return Ok((0..count)
                .map(|_| all[rng.gen_range(0..all.len())].clone())
                .collect());
        }
        all.shuffle(&mut rng);
        all.truncate(count);
        return Ok(all);
    }
    let p = m.prefix(key);
    let (lo, hi) = fields_range(&p);
    let Some(first) = first_at(sh, s, src, &lo, &hi)? else {
        return Ok(Vec::new());
    };
    let last = last_field(sh, &lo, &hi).unwrap_or_else(|| first.0.clone());
    let mut picked: Vec<Field> = Vec::with_capacity(count);
    let mut seen: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut tries = 0;
    while picked.len() < count {
        let probe = field_key(&p, &between(&mut rng, &first.0, &last));
        let f = first_at(sh, s, src, &probe, &hi)?.unwrap_or_else(|| first.clone());
        tries += 1;
        if repeat || seen.insert(f.0.clone()) {
            picked.push(f);
        } else if tries > count * 4 {
            // Unlucky probes: take the fields after the last pick in order.
            fill_in_order(sh, s, src, (&p, &hi), &mut seen, &mut picked, count)?;
        }
    }
    Ok(picked)
}

/// The first field in `[from, hi)` (`lo.len()` bytes of prefix), through `src`.
fn first_at(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    from: &[u8],
    hi: &[u8],
) -> Result<Option<Field>, Fail> {
    let skip = hi.len(); // the prefix and its part byte
    let mut found = None;
    src.scan(sh, s, (from, hi), 1, |k, v| {
        found = Some((k[skip..].to_vec(), v.to_vec()))
    })?;
    Ok(found)
}

/// The last field of the range at the read version (a probe's upper end only: the pick
/// itself is read through `src`).
fn last_field(sh: &Shared, lo: &[u8], hi: &[u8]) -> Option<Vec<u8>> {
    // The backward scan's one descent: a floor search read about twice as much.
    let items = sh.view().try_scan_rev(lo, hi, 1).ok()?;
    let (k, _) = items.into_iter().next()?;
    Some(k[lo.len()..].to_vec())
}

/// Takes fields in order, wrapping around, until `count` are picked or none is left.
fn fill_in_order(
    sh: &Shared,
    s: &mut Session,
    src: &Src<'_>,
    (p, hi): (&[u8], &[u8]),
    seen: &mut BTreeSet<Vec<u8>>,
    picked: &mut Vec<Field>,
    count: usize,
) -> Result<(), Fail> {
    let (lo, _) = fields_range(p);
    let mut all = Vec::new();
    src.scan(sh, s, (&lo, hi), usize::MAX, |k, v| {
        all.push((k[lo.len()..].to_vec(), v.to_vec()))
    })?;
    for f in all {
        if picked.len() >= count {
            break;
        }
        if seen.insert(f.0.clone()) {
            picked.push(f);
        }
    }
    Ok(())
}

/// A random byte string between `a` and `b` (`a < b`): the common prefix, then at each
/// position a byte uniform between theirs (a missing byte counting as 0 for `a` and 255
/// for `b`).
fn between(rng: &mut impl Rng, a: &[u8], b: &[u8]) -> Vec<u8> {
    let c = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let mut out = a[..c].to_vec();
    for i in c..a.len().max(b.len()) {
        let (x, y) = (
            a.get(i).copied().unwrap_or(0),
            b.get(i).copied().unwrap_or(255),
        );
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        out.push(rng.gen_range(lo..=hi));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::between;

    #[test]
    fn a_probe_lies_between_its_ends() {
        let mut rng = rand::thread_rng();
        for _ in 0..1000 {
            let p = between(&mut rng, b"element:10", b"element:99");
            assert!(
                p.as_slice() >= b"element:10".as_slice()
                    && p.as_slice() <= b"element:99".as_slice()
            );
        }
        assert_eq!(between(&mut rng, b"same", b"same"), b"same");
    }
}

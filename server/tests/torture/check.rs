//! The checks the crash-torture harness applies after each restart, as pure code over a
//! history of writes: (a) the recovered state is exactly the state after some prefix of the
//! writes sent (one connection, so the order is the server's version order); (b) what was
//! lost of the acknowledged writes, and when each was acknowledged relative to the kill.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A value id: the crash cycle and the write's index in it (0 = no value: absent).
pub type Id = u64;

/// Packs a cycle and an index into an id.
pub fn id(cycle: u32, index: u32) -> Id {
    (u64::from(cycle) << 32) | u64::from(index) | (1 << 63)
}

/// One write of a cycle's history.
#[derive(Clone, Debug)]
pub struct Write {
    pub key: u32,
    /// The value's id, or 0 for a delete.
    pub value: Id,
    /// When its acknowledgement was read (`None`: sent, never acknowledged).
    pub acked: Option<Instant>,
    /// Refused with an error (not applied): left out of the history judged.
    pub refused: bool,
}

/// What one crash cost.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Writes sent in the cycle, and how many of them were acknowledged.
    pub sent: usize,
    pub acked: usize,
    /// The recovered state is the state after this many of the cycle's writes.
    pub prefix: usize,
    /// Acknowledged writes after the prefix: lost.
    pub lost: usize,
    /// How long before the kill the oldest lost write was acknowledged.
    pub oldest_lost_age: Option<Duration>,
    /// Time between the first and the last lost acknowledgement.
    pub lost_span: Option<Duration>,
}

/// Finds the longest prefix of `history` that turns `base` into `recovered` (key → value
/// id; absent keys are missing from the maps), or says why there is none.
pub fn longest_prefix(
    base: &HashMap<u32, Id>,
    history: &[Write],
    recovered: &HashMap<u32, Id>,
) -> Result<usize, String> {
    let mut cur = base.clone();
    let differs = |cur: &HashMap<u32, Id>, k: u32| cur.get(&k) != recovered.get(&k);
    let mut mismatched: usize = base
        .keys()
        .chain(recovered.keys())
        .copied()
        .collect::<std::collections::HashSet<u32>>()
        .into_iter()
        .filter(|&k| differs(&cur, k))
        .count();
    let mut best = (mismatched == 0).then_some(0);
    let mut fewest = (mismatched, 0);
    for (i, w) in history.iter().enumerate() {
        let before = differs(&cur, w.key);
        if w.value == 0 {
            cur.remove(&w.key);
        } else {
            cur.insert(w.key, w.value);
        }
        let after = differs(&cur, w.key);
        match (before, after) {
            (true, false) => mismatched -= 1,
            (false, true) => mismatched += 1,
            _ => {}
        }
        if mismatched == 0 {
            best = Some(i + 1);
        }
        if mismatched < fewest.0 {
            fewest = (mismatched, i + 1);
        }
    }
    best.ok_or_else(|| {
        format!(
            "the recovered state is no prefix of the {} writes sent: the closest, after {} writes, differs in {} keys",
            history.len(),
            fewest.1,
            fewest.0
        )
    })
}

/// Checks a recovery: the prefix, and what it lost of the acknowledged writes.
pub fn judge(
    base: &HashMap<u32, Id>,
    history: &[Write],
    recovered: &HashMap<u32, Id>,
    killed: Instant,
) -> Result<Outcome, String> {
    let prefix = longest_prefix(base, history, recovered)?;
    let lost: Vec<Instant> = history[prefix..].iter().filter_map(|w| w.acked).collect();
    let first = lost.iter().min().copied();
    let last = lost.iter().max().copied();
    Ok(Outcome {
        sent: history.len(),
        acked: history.iter().filter(|w| w.acked.is_some()).count(),
        prefix,
        lost: lost.len(),
        oldest_lost_age: first.map(|f| killed.saturating_duration_since(f)),
        lost_span: first.zip(last).map(|(f, l)| l - f),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(key: u32, value: Id, acked: bool) -> Write {
        Write {
            key,
            value,
            acked: acked.then(Instant::now),
            refused: false,
        }
    }

    fn map(items: &[(u32, Id)]) -> HashMap<u32, Id> {
        items.iter().copied().collect()
    }

    #[test]
    fn finds_the_longest_prefix() {
        let base = map(&[(1, 10)]);
        let h = vec![
            w(1, 11, true),
            w(2, 20, true),
            w(2, 0, true),
            w(3, 30, false),
        ];
        assert_eq!(longest_prefix(&base, &h, &map(&[(1, 10)])), Ok(0));
        assert_eq!(longest_prefix(&base, &h, &map(&[(1, 11)])), Ok(3));
        assert_eq!(longest_prefix(&base, &h, &map(&[(1, 11), (2, 20)])), Ok(2));
        assert_eq!(longest_prefix(&base, &h, &map(&[(1, 11), (3, 30)])), Ok(4));
    }

    #[test]
    fn a_state_that_never_existed_is_refused() {
        let base = map(&[]);
        let h = vec![w(1, 10, true), w(2, 20, true), w(3, 30, true)];
        // Key 3's write without key 2's: no prefix gives it.
        assert!(longest_prefix(&base, &h, &map(&[(1, 10), (3, 30)])).is_err());
        // A value nobody wrote.
        assert!(longest_prefix(&base, &h, &map(&[(1, 99)])).is_err());
        // A key that came back after its delete.
        let h = vec![w(1, 0, true), w(2, 20, true)];
        assert!(longest_prefix(&map(&[(1, 10)]), &h, &map(&[(1, 10), (2, 20)])).is_err());
    }

    #[test]
    fn judges_what_was_lost() {
        let t0 = Instant::now();
        let h = vec![
            Write {
                key: 1,
                value: 10,
                acked: Some(t0),
                refused: false,
            },
            Write {
                key: 2,
                value: 20,
                acked: Some(t0 + Duration::from_millis(5)),
                refused: false,
            },
            Write {
                key: 3,
                value: 30,
                acked: Some(t0 + Duration::from_millis(8)),
                refused: false,
            },
            w(4, 40, false),
        ];
        let o = judge(
            &map(&[]),
            &h,
            &map(&[(1, 10)]),
            t0 + Duration::from_millis(20),
        )
        .unwrap();
        assert_eq!((o.prefix, o.lost, o.acked, o.sent), (1, 2, 3, 4));
        assert_eq!(o.oldest_lost_age, Some(Duration::from_millis(15)));
        assert_eq!(o.lost_span, Some(Duration::from_millis(3)));
    }
}

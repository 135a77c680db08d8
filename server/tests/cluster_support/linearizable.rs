//! A linearizability checker in the style of Porcupine (Wing & Gong's search with Lowe's
//! memoization): a recorded history of concurrent operations on a key-value map is
//! linearizable if some order of them, consistent with real time (an operation that
//! returned before another was invoked comes first), gives every read the answer it got
//! from a plain map. Scans read the whole map at one point. An operation whose outcome is
//! unknown (the client lost its connection, say) may take effect at any point after it was
//! invoked, or never; reads with an unknown outcome constrain nothing and are dropped.

use std::collections::{BTreeMap, HashSet};

/// What an operation did, with what it returned.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Set { key: String, value: String },
    Get { key: String, got: Option<String> },
    Scan { got: Vec<(String, String)> },
}

/// One operation of the history.
#[derive(Clone, Debug)]
pub struct Record {
    pub op: Op,
    /// When it was invoked (ns since the test began).
    pub call: u64,
    /// When it returned; `None`: unknown (it may or may not have taken effect).
    pub ret: Option<u64>,
}

type State = BTreeMap<String, String>;

fn step(s: &State, op: &Op) -> Option<State> {
    match op {
        Op::Set { key, value } => {
            let mut n = s.clone();
            n.insert(key.clone(), value.clone());
            Some(n)
        }
        Op::Get { key, got } => (s.get(key) == got.as_ref()).then(|| s.clone()),
        Op::Scan { got } => {
            let same =
                s.len() == got.len() && s.iter().zip(got).all(|(a, b)| a.0 == &b.0 && a.1 == &b.1);
            same.then(|| s.clone())
        }
    }
}

/// Whether `history` is linearizable; on failure, a description of the longest prefix
/// that could be linearized.
pub fn check(history: &[Record]) -> Result<(), String> {
    let ops: Vec<&Record> = history
        .iter()
        .filter(|r| r.ret.is_some() || matches!(r.op, Op::Set { .. }))
        .collect();
    let n = ops.len();
    // Events: (time, is_return, op). Calls sort before returns at the same instant (the
    // more permissive reading: they overlap).
    let mut ev: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, r) in ops.iter().enumerate() {
        ev.push((r.call, false, i));
        ev.push((r.ret.unwrap_or(u64::MAX), true, i));
    }
    ev.sort();
    // A doubly linked list over the events (index m+1; 0 is the head sentinel).
    let m = ev.len();
    let mut next: Vec<usize> = (0..=m).map(|i| i + 1).collect();
    let mut prev: Vec<usize> = (0..=m).map(|i| i.wrapping_sub(1)).collect();
    let mut ret_of = vec![0; n];
    for (j, e) in ev.iter().enumerate() {
        if e.1 {
            ret_of[e.2] = j + 1;
        }
    }
    let end = m + 1;
    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, node: usize| {
        let (p, q) = (prev[node], next[node]);
        next[p] = q;
        if q != end {
            prev[q] = p;
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, node: usize| {
        let (p, q) = (prev[node], next[node]);
        next[p] = node;
        if q != end {
            prev[q] = node;
        }
    };
    let mut state = State::new();
    let mut done = vec![false; n];
    let mut cache: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut stack: Vec<(usize, State)> = Vec::new();
    let mut best = 0;
    let mut entry = next[0];
    let bits = |done: &[bool]| -> Vec<u64> {
        let mut b = vec![0u64; done.len().div_ceil(64)];
        for (i, d) in done.iter().enumerate() {
            if *d {
                b[i / 64] |= 1 << (i % 64);
            }
        }
        b
    };
    while next[0] != end {
        if entry == end {
            return Err("ran off the end of the history".into());
        }
        let (_, is_ret, i) = ev[entry - 1];
        if !is_ret {
            if let Some(s2) = step(&state, &ops[i].op) {
                done[i] = true;
                if cache.insert((bits(&done), s2.clone())) {
                    stack.push((entry, std::mem::replace(&mut state, s2)));
                    best = best.max(stack.len());
                    lift(&mut next, &mut prev, entry);
                    lift(&mut next, &mut prev, ret_of[i]);
                    entry = next[0];
                    continue;
                }
                done[i] = false;
            }
            entry = next[entry];
        } else {
            // An operation returned before any order could place it: undo the last choice.
            let Some((e, s)) = stack.pop() else {
                return Err(format!(
                    "not linearizable: at most {best} of {n} operations could be ordered; \
                     stuck at {:?}",
                    ops[i]
                ));
            };
            let j = ev[e - 1].2;
            done[j] = false;
            state = s;
            unlift(&mut next, &mut prev, ret_of[j]);
            unlift(&mut next, &mut prev, e);
            entry = next[e];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(k: &str, v: &str, call: u64, ret: Option<u64>) -> Record {
        Record {
            op: Op::Set {
                key: k.into(),
                value: v.into(),
            },
            call,
            ret,
        }
    }

    fn get(k: &str, v: Option<&str>, call: u64, ret: u64) -> Record {
        Record {
            op: Op::Get {
                key: k.into(),
                got: v.map(Into::into),
            },
            call,
            ret: Some(ret),
        }
    }

    #[test]
    fn the_checker_tells_good_histories_from_bad() {
        // Sequential and right.
        assert!(check(&[set("a", "1", 0, Some(1)), get("a", Some("1"), 2, 3)]).is_ok());
        // A read of a value never written, or a stale read after a completed write.
        assert!(check(&[get("a", Some("1"), 0, 1)]).is_err());
        assert!(check(&[
            set("a", "1", 0, Some(1)),
            set("a", "2", 2, Some(3)),
            get("a", Some("1"), 4, 5)
        ])
        .is_err());
        // Concurrent writes: either order, but reads must agree with one.
        assert!(check(&[
            set("a", "1", 0, Some(10)),
            set("a", "2", 0, Some(10)),
            get("a", Some("1"), 11, 12),
            get("a", Some("1"), 13, 14)
        ])
        .is_ok());
        assert!(check(&[
            set("a", "1", 0, Some(10)),
            set("a", "2", 0, Some(10)),
            get("a", Some("1"), 11, 12),
            get("a", Some("2"), 13, 14)
        ])
        .is_err());
        // A write of unknown outcome may apply late, or never.
        assert!(check(&[
            set("a", "1", 0, None),
            get("a", None, 1, 2),
            get("a", Some("1"), 3, 4)
        ])
        .is_ok());
        assert!(check(&[set("a", "1", 0, None), get("a", None, 5, 6)]).is_ok());
        // Scans read everything at one point.
        let scan = |got: &[(&str, &str)], call, ret| Record {
            op: Op::Scan {
                got: got
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            },
            call,
            ret: Some(ret),
        };
        assert!(check(&[
            set("a", "1", 0, Some(1)),
            set("b", "1", 2, Some(3)),
            scan(&[("a", "1"), ("b", "1")], 4, 5)
        ])
        .is_ok());
        // b was written after a, so a scan cannot see b without a.
        assert!(check(&[
            set("a", "1", 0, Some(1)),
            set("b", "1", 2, Some(3)),
            scan(&[("b", "1")], 0, 5)
        ])
        .is_err());
    }
}

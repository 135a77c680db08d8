//! Redis's glob patterns (KEYS, SCAN MATCH), byte for byte as `stringmatchlen` in Redis's
//! util.c matches them: `*` any run, `?` one byte, `[abc]`, `[^a]` (or `[!a]`), `[a-z]`
//! (either order), `\x` a literal `x`. Iterative with one backtrack point per `*`, so a
//! pattern cannot make it exponential.

/// Whether `s` matches `pat`.
pub fn matches(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0, 0);
    // Where to resume after the last `*`: the pattern position after it and the string
    // position it has consumed up to.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    // Collapse runs of stars.
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                c if i < s.len() => {
                    let (ok, next) = match c {
                        b'?' => (true, p + 1),
                        b'[' => class(pat, p + 1, s[i]),
                        b'\\' if p + 1 < pat.len() => (pat[p + 1] == s[i], p + 2),
                        c => (c == s[i], p + 1),
                    };
                    if ok {
                        p = next;
                        i += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if i == s.len() {
            return true;
        }
        // Mismatch: let the last `*` take one more byte, or fail.
        match star {
            Some((sp, si)) if si < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

/// Matches byte `c` against the class starting after `[` at `p`; returns whether it
/// matched and the pattern position after the class (an unterminated class runs to the
/// end of the pattern, as in Redis).
fn class(pat: &[u8], mut p: usize, c: u8) -> (bool, usize) {
    let not = p < pat.len() && (pat[p] == b'^' || pat[p] == b'!');
    if not {
        p += 1;
    }
    let mut hit = false;
    while p < pat.len() && pat[p] != b']' {
        if pat[p] == b'\\' && p + 1 < pat.len() {
            hit |= pat[p + 1] == c;
            p += 2;
        } else if p + 2 < pat.len() && pat[p + 1] == b'-' && pat[p + 2] != b']' {
            let (a, b) = (pat[p].min(pat[p + 2]), pat[p].max(pat[p + 2]));
            hit |= (a..=b).contains(&c);
            p += 3;
        } else {
            hit |= pat[p] == c;
            p += 1;
        }
    }
    (hit != not, (p + 1).min(pat.len()))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_examples() {
        let m = |p: &str, s: &str| matches(p.as_bytes(), s.as_bytes());
        for s in ["hello", "hallo", "hxllo"] {
            assert!(m("h?llo", s));
        }
        assert!(m("h*llo", "hllo") && m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hello") && m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
        assert!(!m("h[^e]llo", "hello") && m("h[^e]llo", "hallo") && m("h[!e]llo", "hbllo"));
        assert!(m("h[a-b]llo", "hallo") && m("h[a-b]llo", "hbllo") && !m("h[a-b]llo", "hcllo"));
        assert!(m("h[b-a]llo", "hallo"));
        assert!(m("user:*", "user:1") && !m("user:*", "use") && m("*", ""));
        assert!(m("a\\*b", "a*b") && !m("a\\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx") && !m("*a*b*c*", "xxaxxcxxbxx"));
        assert!(!m("?", "") && m("", "") && !m("", "a"));
        assert!(m("[abc", "b") && !m("[abc", "d"));
    }

    /// Against a plain recursive matcher of the same rules (without classes) on random
    /// inputs over a small alphabet.
    #[test]
    fn agrees_with_a_recursive_matcher() {
        fn slow(p: &[u8], s: &[u8]) -> bool {
            match (p.first(), s.first()) {
                (None, _) => s.is_empty(),
                (Some(b'*'), _) => slow(&p[1..], s) || (!s.is_empty() && slow(p, &s[1..])),
                (Some(b'?'), Some(_)) => slow(&p[1..], &s[1..]),
                (Some(c), Some(d)) if c == d => slow(&p[1..], &s[1..]),
                _ => false,
            }
        }
        let mut x: u32 = 12345;
        let mut next = |n: u32| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x % n
        };
        for _ in 0..20_000 {
            let pat: Vec<u8> = (0..next(7)).map(|_| b"ab*?"[next(4) as usize]).collect();
            let s: Vec<u8> = (0..next(8)).map(|_| b"ab"[next(2) as usize]).collect();
            assert_eq!(matches(&pat, &s), slow(&pat, &s), "{pat:?} {s:?}");
        }
    }
}

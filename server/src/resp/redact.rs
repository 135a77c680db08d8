//! Which arguments of a command are secrets, shown as `(redacted)` by MONITOR and SLOWLOG,
//! as Redis redacts them: AUTH's, HELLO's after AUTH, MIGRATE's after AUTH (a password) or
//! AUTH2 (a user and a password), CONFIG SET's values of `requirepass` and `masterauth`
//! (each pair of a multi-parameter CONFIG SET), and ACL SETUSER's rules. One rule for both
//! views, so neither shows what the other hides.

/// The positions in `args` (the name first) of the arguments that are secrets.
pub fn secrets(args: &[&[u8]]) -> Vec<usize> {
    let is = |i: usize, w: &[u8]| args.get(i).is_some_and(|a| a.eq_ignore_ascii_case(w));
    let n = args.len();
    if is(0, b"AUTH") {
        return (1..n).collect();
    }
    if is(0, b"HELLO") {
        return match (1..n).find(|&i| is(i, b"AUTH")) {
            Some(at) => (at + 1..(at + 3).min(n)).collect(),
            None => Vec::new(),
        };
    }
    if is(0, b"MIGRATE") {
        return match (6..n).find(|&i| is(i, b"AUTH") || is(i, b"AUTH2")) {
            Some(at) if is(at, b"AUTH") => (at + 1..(at + 2).min(n)).collect(),
            Some(at) => (at + 1..(at + 3).min(n)).collect(),
            None => Vec::new(),
        };
    }
    if is(0, b"CONFIG") && is(1, b"SET") {
        return (2..n)
            .step_by(2)
            .filter(|&i| is(i, b"requirepass") || is(i, b"masterauth"))
            .map(|i| i + 1)
            .filter(|&i| i < n)
            .collect();
    }
    if is(0, b"ACL") && is(1, b"SETUSER") {
        return (3..n).collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::secrets;

    fn of(line: &str) -> Vec<usize> {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        secrets(&args)
    }

    #[test]
    fn each_secret_and_nothing_else() {
        assert_eq!(of("AUTH user pass"), [1, 2]);
        assert_eq!(of("HELLO 3 AUTH user pass SETNAME n"), [3, 4]);
        assert_eq!(of("HELLO 3 SETNAME n"), Vec::<usize>::new());
        // MIGRATE's AUTH takes one word: the key names after KEYS are not hidden.
        assert_eq!(of("MIGRATE h 1 k 0 10 AUTH pw KEYS a b"), [7]);
        assert_eq!(of("migrate h 1 k 0 10 COPY AUTH2 u pw"), [8, 9]);
        assert_eq!(of("CONFIG SET maxmemory 1 requirepass pw"), [5]);
        assert_eq!(of("CONFIG SET requirepass"), Vec::<usize>::new());
        assert_eq!(of("ACL SETUSER u on >pw"), [3, 4]);
        assert_eq!(of("SET AUTH x"), Vec::<usize>::new());
    }
}

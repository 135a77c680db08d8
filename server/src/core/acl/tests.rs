//! The rules against a small command table: what a user's description says is what it
//! allows (a user rebuilt from its ACL LIST line describes itself the same and allows the
//! same requests, for any sequence of rules: Redis's "ACL list idempotency"), passwords,
//! and the registry's epoch and default user.

use super::*;
use proptest::prelude::*;

/// get (read), set (write), config (admin, a container of get and set), select.
struct Table;

const NAMES: [&str; 6] = ["get", "set", "config", "select", "config|get", "config|set"];

impl Commands for Table {
    fn count(&self) -> usize {
        NAMES.len()
    }
    fn command(&self, name: &str) -> Option<usize> {
        NAMES[..4].iter().position(|n| *n == name)
    }
    fn subcommands(&self, id: usize) -> std::ops::Range<usize> {
        if id == 2 {
            4..6
        } else {
            0..0
        }
    }
    fn subcommand(&self, id: usize, sub: &str) -> Option<usize> {
        (id == 2)
            .then(|| NAMES[4..].iter().position(|n| n[7..] == *sub))?
            .map(|i| i + 4)
    }
    fn category(&self, name: &str) -> Option<u32> {
        ["read", "write", "admin"]
            .iter()
            .position(|c| *c == name)
            .map(|i| 1 << i)
    }
    fn categories(&self, id: usize) -> u32 {
        [1, 2, 4, 0, 4, 4][id]
    }
}

fn user(rules: &[&str]) -> Result<User, (Vec<u8>, RuleError)> {
    let rules: Vec<Vec<u8>> = rules.iter().map(|r| r.as_bytes().to_vec()).collect();
    edit(User::new(b"u", false), &rules, &Table, false)
}

/// The user ACL LIST's line describes, read back as an ACL file reads it.
fn reread(u: &User) -> User {
    let line = u.describe();
    let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    let rules = merge_selectors(&words).expect("balanced");
    edit(User::new(b"u", false), &rules, &Table, false).expect("its own description applies")
}

fn allowed(
    u: &User,
    id: usize,
    first: Option<&str>,
    key: &str,
    need: u8,
    ch: Option<(&str, bool)>,
) -> bool {
    let keys = [(key.as_bytes(), need)];
    let chans: Vec<(&[u8], bool)> = ch.iter().map(|(c, p)| (c.as_bytes(), *p)).collect();
    u.check(&Request {
        id,
        first_arg: first.map(str::as_bytes),
        keys: &keys,
        channels: &chans,
    })
    .is_ok()
}

#[test]
fn rules_allow_what_they_say() {
    let u = user(&[
        "on",
        "~app:*",
        "%R~ro:*",
        "&news",
        "+@read",
        "-get",
        "+config|get",
        "+select|0",
    ])
    .unwrap();
    assert!(
        !allowed(&u, 0, None, "app:1", READ, None),
        "-get after +@read"
    );
    assert!(allowed(&u, 4, None, "app:1", 0, None));
    assert!(!allowed(&u, 5, None, "app:1", 0, None));
    assert!(allowed(&u, 3, Some("0"), "app:1", 0, None));
    assert!(!allowed(&u, 3, Some("1"), "app:1", 0, None));
    let w = user(&["+set", "%R~ro:*", "~rw:*"]).unwrap();
    assert!(!allowed(&w, 1, None, "ro:1", WRITE, None));
    assert!(allowed(&w, 1, None, "rw:1", WRITE, None));
    let c = user(&["+set", "~*", "&news*"]).unwrap();
    assert!(allowed(&c, 1, None, "k", WRITE, Some(("news:1", false))));
    assert!(
        !allowed(&c, 1, None, "k", WRITE, Some(("news:*", true))),
        "a pattern must be named literally"
    );
    assert!(allowed(&c, 1, None, "k", WRITE, Some(("news*", true))));
    // A selector allows what the root does not; the most relevant refusal is reported.
    let s = user(&["+get", "~a", "(+set ~b)"]).unwrap();
    assert!(allowed(&s, 1, None, "b", WRITE, None));
    let keys = [(&b"x"[..], READ)];
    let r = Request {
        id: 0,
        first_arg: None,
        keys: &keys,
        channels: &[],
    };
    assert_eq!(s.check(&r), Err(Denied::Key(0)));
}

#[test]
fn passwords_are_checked_against_every_digest() {
    let u = user(&["on", ">one", ">two"]).unwrap();
    assert!(u.password_ok(b"one") && u.password_ok(b"two") && !u.password_ok(b"three"));
    let u = user(&["on", ">one", "<one"]).unwrap();
    assert!(!u.password_ok(b"one"));
    assert_eq!(user(&["<none"]).unwrap_err().1, RuleError::NoSuchPassword);
    let off = user(&[">one"]).unwrap();
    assert!(!off.password_ok(b"one"), "a user that is off cannot log in");
    let any = user(&["on", "nopass"]).unwrap();
    assert!(any.password_ok(b"whatever"));
    let hashed = user(&["on", &format!("#{}", user::hex(&sha2_digest(b"pw")))]).unwrap();
    assert!(hashed.password_ok(b"pw"));
}

#[test]
fn the_registry_keeps_a_default_user_and_moves_its_epoch() {
    let acl = Acl::new(Some("pw"));
    assert!(acl.needs_auth());
    assert!(acl.authenticate(DEFAULT_USER, b"pw").is_some());
    assert!(acl.default_user().open);
    let e = acl.epoch();
    acl.put(user(&["on"]).unwrap());
    assert!(acl.epoch() > e);
    assert_eq!(acl.delete(&[DEFAULT_USER, b"u"]), 1);
    assert!(acl.get(DEFAULT_USER).is_some());
    acl.replace_all(vec![]);
    assert!(
        acl.needs_auth(),
        "a file without a default user keeps the one there was"
    );
    let open = Acl::new(None);
    assert!(!open.needs_auth());
}

const POOL: &[&str] = &[
    "on",
    "off",
    "nopass",
    "resetpass",
    ">a",
    ">b",
    "~k*",
    "%R~r*",
    "%W~w*",
    "%RW~x",
    "allkeys",
    "resetkeys",
    "&c*",
    "&d",
    "allchannels",
    "resetchannels",
    "+@all",
    "-@all",
    "+@read",
    "-@read",
    "+@write",
    "+@admin",
    "-@admin",
    "+get",
    "-get",
    "+set",
    "-set",
    "+config",
    "-config",
    "+config|get",
    "-config|set",
    "+select|0",
    "+select|1",
    "+select",
    "-select",
    "(+get ~s*)",
    "(+@write &e)",
    "clearselectors",
    "reset",
    "skip-sanitize-payload",
    "sanitize-payload",
];

proptest! {
    #[test]
    fn a_user_is_what_its_description_says(picks in prop::collection::vec(0..POOL.len(), 0..24)) {
        let rules: Vec<&str> = picks.iter().map(|&i| POOL[i]).collect();
        // A rule refused leaves a user unchanged; apply those that are accepted.
        let mut u = User::new(b"u", false);
        for r in &rules {
            if let Ok(next) = edit(u.clone(), &[r.as_bytes().to_vec()], &Table, false) {
                u = next;
            }
        }
        let again = reread(&u);
        prop_assert_eq!(again.describe(), u.describe());
        for id in 0..NAMES.len() {
            for first in [None, Some("0"), Some("1")] {
                for (key, need) in [("k1", READ), ("r1", READ | WRITE), ("w1", WRITE), ("x", READ), ("s1", 0)] {
                    for ch in [None, Some(("c1", false)), Some(("d", true)), Some(("e", false))] {
                        prop_assert_eq!(
                            allowed(&u, id, first, key, need, ch),
                            allowed(&again, id, first, key, need, ch),
                            "{:?} id {} {:?} {} {:?}", rules, id, first, key, ch
                        );
                    }
                }
            }
        }
    }
}

proptest! {
    /// Any bytes as rules (the ACL file and ACL SETUSER take them from clients): no panic,
    /// a refusal or a user whose description reads back as itself.
    #[test]
    fn any_rule_bytes_are_refused_or_described(
        rules in prop::collection::vec(
            (prop::sample::select(vec!["", "~", "%", "%R", "&", "+", "-", "+@", "-@", ">", "<", "#", "!", "("]),
             prop::collection::vec(any::<u8>(), 0..12)),
            0..8,
        )
    ) {
        let mut u = User::new(b"u", false);
        for (prefix, tail) in &rules {
            let mut rule = prefix.as_bytes().to_vec();
            rule.extend_from_slice(tail);
            // The ACL file splits on spaces: a rule never holds one.
            if rule.is_empty() || rule.contains(&b' ') {
                continue;
            }
            if let Ok(next) = edit(u.clone(), &[rule], &Table, false) {
                u = next;
            }
        }
        let line = u.describe();
        // Patterns are shown as text: a user whose patterns are not UTF-8 is described
        // lossily (as Redis prints bytes), so only those that are read back.
        let utf8 = u.root.keys.iter().all(|k| std::str::from_utf8(&k.pattern).is_ok())
            && u.root.channels.iter().all(|c| std::str::from_utf8(c).is_ok())
            && u.selectors.is_empty();
        if utf8 && !line.contains('(') {
            prop_assert_eq!(reread(&u).describe(), line);
        }
    }
}

//! One ACL user, as Redis 7 has them: enabled or not, its passwords (SHA-256 digests,
//! compared in constant time), and its selectors (`selector.rs`). [`User::apply`] takes
//! ACL SETUSER's rules one at a time; ACL LIST's line is [`User::describe`].

use crate::core::acl::selector::{Denied, Request, Selector};
use crate::core::acl::{Commands, RuleError};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// One user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: Vec<u8>,
    pub enabled: bool,
    /// Any password logs in.
    pub nopass: bool,
    /// `skip-sanitize-payload` (accelkv checks every RESTORE payload either way).
    pub skip_sanitize: bool,
    /// The passwords' SHA-256 digests, in the order added.
    pub passwords: Vec<[u8; 32]>,
    pub root: Selector,
    pub selectors: Vec<Selector>,
    /// Whether it may run anything (computed by [`User::finish`]): the gate checks
    /// nothing more for its connections.
    pub open: bool,
}

impl User {
    /// A new user as ACL SETUSER makes one: off, no passwords, nothing allowed (channels
    /// per `all_channels`, the `acl-pubsub-default` setting).
    pub fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            enabled: false,
            nopass: false,
            skip_sanitize: false,
            passwords: Vec::new(),
            root: Selector::new(all_channels),
            selectors: Vec::new(),
            open: false,
        }
    }

    /// Applies one rule of ACL SETUSER (a `(...)` selector whole).
    pub fn apply(
        &mut self,
        op: &[u8],
        cmds: &dyn Commands,
        all_channels: bool,
    ) -> Result<(), RuleError> {
        let lower = op.to_ascii_lowercase();
        match lower.as_slice() {
            b"on" => self.enabled = true,
            b"off" => self.enabled = false,
            b"nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            b"resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            b"skip-sanitize-payload" => self.skip_sanitize = true,
            b"sanitize-payload" => self.skip_sanitize = false,
            b"clearselectors" => self.selectors.clear(),
            b"reset" => {
                self.enabled = false;
                self.nopass = false;
                self.passwords.clear();
                self.skip_sanitize = false;
                self.selectors.clear();
                self.root = Selector::new(all_channels);
            }
            _ => match op.first() {
                Some(b'>') => self.add_password(Sha256::digest(&op[1..]).into()),
                Some(b'#') => self.add_password(parse_hash(&op[1..])?),
                Some(b'<') => self.remove_password(&Sha256::digest(&op[1..]).into())?,
                Some(b'!') => self.remove_password(&parse_hash(&op[1..])?)?,
                Some(b'(') if op.ends_with(b")") => {
                    let mut s = Selector::new(all_channels);
                    for rule in op[1..op.len() - 1].split(|b| *b == b' ') {
                        if !rule.is_empty() {
                            s.apply(rule, cmds)?;
                        }
                    }
                    self.selectors.push(s);
                }
                Some(b'(') => return Err(RuleError::UnmatchedParenthesis),
                _ => self.root.apply(op, cmds)?,
            },
        }
        Ok(())
    }

    fn add_password(&mut self, digest: [u8; 32]) {
        self.nopass = false;
        if !self.passwords.contains(&digest) {
            self.passwords.push(digest);
        }
    }

    fn remove_password(&mut self, digest: &[u8; 32]) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != digest);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    /// Notes what the gate needs after rules were applied.
    pub fn finish(mut self) -> User {
        self.open = self.root.open();
        self
    }

    /// Whether `given` logs in as this user: it is enabled, and `given` is one of its
    /// passwords (each compared in constant time, all of them always) or it has none
    /// needed.
    pub fn password_ok(&self, given: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        let digest: [u8; 32] = Sha256::digest(given).into();
        let mut found = subtle::Choice::from(0);
        for p in &self.passwords {
            found |= p.ct_eq(&digest);
        }
        self.nopass || bool::from(found)
    }

    /// Its flags as ACL GETUSER lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        f.push(if self.skip_sanitize {
            "skip-sanitize-payload"
        } else {
            "sanitize-payload"
        });
        f
    }

    /// The passwords' digests in hexadecimal.
    pub fn password_hexes(&self) -> Vec<String> {
        self.passwords.iter().map(|p| hex(p)).collect()
    }

    /// ACL LIST's line after `user <name> `: flags, password digests, the root selector,
    /// then the others in parentheses.
    pub fn describe(&self) -> String {
        let mut s = self.flags().join(" ");
        for h in self.password_hexes() {
            s.push_str(" #");
            s.push_str(&h);
        }
        s.push(' ');
        s.push_str(&self.root.describe());
        for sel in &self.selectors {
            s.push_str(" (");
            s.push_str(&sel.describe());
            s.push(')');
        }
        s
    }

    /// Checks a request: allowed when any selector allows it; otherwise the most relevant
    /// refusal (the one that got furthest: channel, then key, then command; between two of
    /// a kind, the later argument), as Redis picks it.
    pub fn check(&self, r: &Request<'_>) -> Result<(), Denied> {
        let mut worst = match self.root.check(r) {
            Ok(()) => return Ok(()),
            Err(d) => d,
        };
        for s in &self.selectors {
            match s.check(r) {
                Ok(()) => return Ok(()),
                Err(d) if d > worst => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }
}

/// A `#<hash>` rule's digest: exactly 64 lower-case hexadecimal digits.
fn parse_hash(h: &[u8]) -> Result<[u8; 32], RuleError> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    if h.len() != 64 {
        return Err(RuleError::BadHash);
    }
    let mut out = [0u8; 32];
    for (i, pair) in h.chunks(2).enumerate() {
        let (Some(a), Some(b)) = (digit(pair[0]), digit(pair[1])) else {
            return Err(RuleError::BadHash);
        };
        out[i] = a << 4 | b;
    }
    Ok(out)
}

/// Bytes as lower-case hexadecimal.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

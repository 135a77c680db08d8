//! One ACL selector, as Redis 7 has them: which commands (a bit per command and
//! subcommand, and whether commands added later are allowed), which keys (glob patterns,
//! each for reading, writing or both) and which pub/sub channels a user may use. A user
//! has a root selector and may have more (`(...)` in ACL SETUSER); a command is allowed
//! when one of them allows it whole.
//!
//! The command rules are also kept as text, in the order given (`+@hash -hdel +get`):
//! ACL LIST and GETUSER show them so, with a later rule for the same command or category
//! replacing an earlier one, as Redis 7.2 does.

use crate::core::acl::{Commands, RuleError};
use crate::core::glob;

/// A key pattern's permissions.
pub const READ: u8 = 1;
pub const WRITE: u8 = 2;

/// A key pattern (`~pat`, `%R~pat`, `%W~pat`, `%RW~pat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    pub flags: u8,
}

/// What a command being checked names: its command id, its first argument (for a
/// `+cmd|arg` rule), its keys with the permissions each needs, its channels (`true`: a
/// PSUBSCRIBE pattern, allowed only when a rule names it literally).
pub struct Request<'a> {
    pub id: usize,
    pub first_arg: Option<&'a [u8]>,
    pub keys: &'a [(&'a [u8], u8)],
    pub channels: &'a [(&'a [u8], bool)],
}

/// Why a command is refused, ordered by relevance as Redis ranks them (command, key,
/// channel; between two keys or two channels, the later one): with several selectors the
/// most relevant is given. The index is into the request's keys or channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Denied {
    Command,
    Key(usize),
    Channel(usize),
}

/// One selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    /// Allowed command ids; an id past the end is allowed when `all_commands` is.
    bits: Vec<u64>,
    /// `+@all` (or `allcommands`): commands this table does not know yet are allowed too.
    pub all_commands: bool,
    /// The command rules as given, lower case, a later one for the same name replacing
    /// the earlier (`+get`, `-@hash`, `+config|get`, `+select|0`).
    rules: Vec<String>,
    /// `+cmd|arg` rules: command id and the first arguments allowed.
    first_args: Vec<(usize, Vec<Vec<u8>>)>,
    pub keys: Vec<KeyPattern>,
    pub all_keys: bool,
    pub channels: Vec<Vec<u8>>,
    pub all_channels: bool,
}

impl Selector {
    /// A selector allowing nothing (`-@all`, no keys, no channels unless `all_channels`).
    pub fn new(all_channels: bool) -> Selector {
        Selector {
            all_channels,
            ..Selector::default()
        }
    }

    /// A selector allowing everything (`~* &* +@all`).
    pub fn everything() -> Selector {
        Selector {
            all_commands: true,
            all_keys: true,
            all_channels: true,
            ..Selector::default()
        }
    }

    /// Whether command `id` is allowed by its bit.
    pub fn allowed(&self, id: usize) -> bool {
        self.bits
            .get(id / 64)
            .map_or(self.all_commands, |w| w & (1 << (id % 64)) != 0)
    }

    fn set(&mut self, id: usize, on: bool) {
        let fill = if self.all_commands { u64::MAX } else { 0 };
        if self.bits.len() <= id / 64 {
            self.bits.resize(id / 64 + 1, fill);
        }
        if on {
            self.bits[id / 64] |= 1 << (id % 64);
        } else {
            self.bits[id / 64] &= !(1 << (id % 64));
        }
    }

    /// Whether it allows everything: every command (and future ones), key and channel.
    pub fn open(&self) -> bool {
        self.all_commands
            && self.bits.iter().all(|w| *w == u64::MAX)
            && self.all_keys
            && self.all_channels
    }

    /// Whether it lets every key be read (`~*`, `%R~*`).
    pub fn reads_every_key(&self) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|k| k.pattern == b"*" && k.flags & READ != 0)
    }

    /// Applies one rule that is not a user's own (`on`, passwords...: `user.rs`).
    pub fn apply(&mut self, op: &[u8], cmds: &dyn Commands) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" => return self.apply(b"~*", cmds),
            "resetkeys" => {
                self.keys.clear();
                self.all_keys = false;
            }
            "allchannels" => return self.apply(b"&*", cmds),
            "resetchannels" => {
                self.channels.clear();
                self.all_channels = false;
            }
            "allcommands" | "+@all" => self.all(true),
            "nocommands" | "-@all" => self.all(false),
            _ => match op.first() {
                Some(b'~') | Some(b'%') => self.key_rule(op)?,
                Some(b'&') => self.channel_rule(&op[1..])?,
                Some(b'+') | Some(b'-') if op.get(1) == Some(&b'@') => {
                    self.category_rule(op[0] == b'+', &lower[2..], cmds)?
                }
                Some(b'+') | Some(b'-') => self.command_rule(op[0] == b'+', &lower[1..], cmds)?,
                _ => return Err(RuleError::Syntax),
            },
        }
        Ok(())
    }

    fn all(&mut self, on: bool) {
        self.bits.clear();
        self.all_commands = on;
        self.rules.clear();
        self.first_args.clear();
    }

    /// `~pat`, `%R~pat`, `%W~pat`, `%RW~pat`.
    fn key_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let (flags, pat) = if op[0] == b'~' {
            (READ | WRITE, &op[1..])
        } else {
            let tilde = op
                .iter()
                .position(|b| *b == b'~')
                .ok_or(RuleError::Syntax)?;
            let mut flags = 0;
            for b in &op[1..tilde] {
                flags |= match b.to_ascii_uppercase() {
                    b'R' => READ,
                    b'W' => WRITE,
                    _ => return Err(RuleError::Syntax),
                };
            }
            if flags == 0 {
                return Err(RuleError::Syntax);
            }
            (flags, &op[tilde + 1..])
        };
        if self.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        if pat == b"*" && flags == READ | WRITE {
            self.keys.clear();
            self.all_keys = true;
            return Ok(());
        }
        match self.keys.iter_mut().find(|k| k.pattern == pat) {
            Some(k) => k.flags |= flags,
            None => self.keys.push(KeyPattern {
                pattern: pat.to_vec(),
                flags,
            }),
        }
        Ok(())
    }

    /// `&pat`.
    fn channel_rule(&mut self, pat: &[u8]) -> Result<(), RuleError> {
        if self.all_channels {
            return Err(RuleError::AfterAllChannels);
        }
        if pat == b"*" {
            self.channels.clear();
            self.all_channels = true;
        } else if !self.channels.iter().any(|c| c == pat) {
            self.channels.push(pat.to_vec());
        }
        Ok(())
    }

    /// `+@cat` or `-@cat`.
    fn category_rule(&mut self, on: bool, cat: &str, cmds: &dyn Commands) -> Result<(), RuleError> {
        let bit = cmds.category(cat).ok_or(RuleError::Unknown)?;
        for id in 0..cmds.count() {
            if cmds.categories(id) & bit != 0 {
                self.set(id, on);
                self.drop_first_args(id);
            }
        }
        self.note(on, &format!("@{cat}"));
        Ok(())
    }

    /// `+cmd`, `-cmd`, `+cmd|sub`, `-cmd|sub`, `+cmd|firstarg`.
    fn command_rule(&mut self, on: bool, name: &str, cmds: &dyn Commands) -> Result<(), RuleError> {
        let Some((cmd, sub)) = name.rsplit_once('|') else {
            let id = cmds.command(name).ok_or(RuleError::Unknown)?;
            self.set(id, on);
            self.drop_first_args(id);
            for s in cmds.subcommands(id) {
                self.set(s, on);
            }
            // The command's own rules, and those for its subcommands, give way.
            let prefix = format!("{name}|");
            self.rules.retain(|r| !r[1..].starts_with(&prefix));
            self.note(on, name);
            return Ok(());
        };
        if let Some((container, sub)) = cmd.split_once('|') {
            // `+config|get|x`: a first argument of a subcommand.
            let id = cmds.command(container).ok_or(RuleError::Unknown)?;
            return Err(match cmds.subcommand(id, sub) {
                Some(_) if on => RuleError::FirstArgOfSubcommand,
                _ => RuleError::Unknown,
            });
        }
        let id = cmds.command(cmd).ok_or(RuleError::Unknown)?;
        if !cmds.subcommands(id).is_empty() {
            let s = cmds.subcommand(id, sub).ok_or(RuleError::Unknown)?;
            self.set(s, on);
        } else {
            // A first argument of a command without subcommands: only allowed, and only
            // while the command itself is not.
            if sub.is_empty() {
                return Err(RuleError::Syntax);
            }
            if !on {
                return Err(RuleError::Unknown);
            }
            if self.allowed(id) {
                return Ok(());
            }
            let arg = sub.as_bytes().to_vec();
            match self.first_args.iter_mut().find(|(i, _)| *i == id) {
                Some((_, args)) if args.contains(&arg) => {}
                Some((_, args)) => args.push(arg),
                None => self.first_args.push((id, vec![arg])),
            }
        }
        self.note(on, name);
        Ok(())
    }

    fn drop_first_args(&mut self, id: usize) {
        self.first_args.retain(|(i, _)| *i != id);
    }

    /// Keeps rule `name` (a later one for the same name replaces an earlier one).
    fn note(&mut self, on: bool, name: &str) {
        self.rules.retain(|r| &r[1..] != name);
        self.rules
            .push(format!("{}{name}", if on { '+' } else { '-' }));
    }

    /// The command rules as ACL GETUSER shows them (`-@all +get`).
    pub fn commands_text(&self) -> String {
        let mut s = String::from(if self.all_commands { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// The key patterns as ACL GETUSER shows them (`~a* %R~b`).
    pub fn keys_text(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let pats: Vec<String> = self.keys.iter().map(key_text).collect();
        pats.join(" ")
    }

    /// The channel patterns as ACL GETUSER shows them (`&a &b`).
    pub fn channels_text(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        let pats: Vec<String> = self
            .channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect();
        pats.join(" ")
    }

    /// The selector as ACL LIST shows it: keys, channels, commands.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        if self.all_keys {
            s.push_str("~* ");
        } else {
            for k in &self.keys {
                s.push_str(&key_text(k));
                s.push(' ');
            }
        }
        if self.all_channels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s + &self.commands_text()
    }

    /// Checks a request against this selector: the command, then its keys, then its
    /// channels.
    pub fn check(&self, r: &Request<'_>) -> Result<(), Denied> {
        if !self.allowed(r.id) && !self.first_arg_allowed(r) {
            return Err(Denied::Command);
        }
        if !self.all_keys {
            for (i, (key, need)) in r.keys.iter().enumerate() {
                let ok = self
                    .keys
                    .iter()
                    .any(|p| p.flags & need == *need && glob::matches(&p.pattern, key));
                if !ok {
                    return Err(Denied::Key(i));
                }
            }
        }
        if !self.all_channels {
            for (i, (ch, pattern)) in r.channels.iter().enumerate() {
                let ok = self.channels.iter().any(|p| {
                    if *pattern {
                        p == ch
                    } else {
                        glob::matches(p, ch)
                    }
                });
                if !ok {
                    return Err(Denied::Channel(i));
                }
            }
        }
        Ok(())
    }

    fn first_arg_allowed(&self, r: &Request<'_>) -> bool {
        let Some(arg) = r.first_arg else {
            return false;
        };
        self.first_args
            .iter()
            .find(|(i, _)| *i == r.id)
            .is_some_and(|(_, args)| args.iter().any(|a| a.eq_ignore_ascii_case(arg)))
    }
}

fn key_text(k: &KeyPattern) -> String {
    let p = String::from_utf8_lossy(&k.pattern);
    match k.flags {
        READ => format!("%R~{p}"),
        WRITE => format!("%W~{p}"),
        _ => format!("~{p}"),
    }
}

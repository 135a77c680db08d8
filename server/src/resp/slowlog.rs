//! Redis's slow log (SLOWLOG): the commands that ran longer than
//! `slowlog-log-slower-than` microseconds (CONFIG SET; default 10,000; negative: off; 0:
//! every command), newest first, at most `slowlog-max-len` (default 128). Each entry keeps
//! what Redis's does: an id, the Unix time, the duration, the arguments (at most 32, the
//! last then saying how many more; each at most 128 bytes, then how many more bytes), the
//! client's address and name. A command is timed around its handler in the dispatcher
//! (`dispatch.rs`), two clock reads, only while the log is on; AUTH, HELLO and EXEC are not
//! logged (EXEC's commands are, one by one), and a password CONFIG SET sets, or ACL SETUSER's rules, are redacted.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// Most arguments an entry keeps.
const MAX_ARGS: usize = 32;
/// Most bytes an argument keeps.
const MAX_ARG_LEN: usize = 128;

/// One slow command.
#[derive(Clone, Debug)]
pub struct Entry {
    pub id: u64,
    /// Unix seconds when it ended.
    pub time: u64,
    pub micros: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

#[derive(Default)]
struct Log {
    entries: VecDeque<Entry>,
    next_id: u64,
}

/// The server's slow log.
#[derive(Default)]
pub struct SlowLog {
    log: Mutex<Log>,
}

/// The arguments as an entry keeps them (trimmed, a secret redacted).
fn kept(args: &[&[u8]]) -> Vec<Vec<u8>> {
    let hidden = crate::resp::redact::secrets(args);
    let shown = if args.len() > MAX_ARGS {
        MAX_ARGS - 1
    } else {
        args.len()
    };
    let mut out: Vec<Vec<u8>> = args[..shown]
        .iter()
        .enumerate()
        .map(|(i, a)| {
            if hidden.contains(&i) {
                return b"(redacted)".to_vec();
            }
            if a.len() > MAX_ARG_LEN {
                let mut t = a[..MAX_ARG_LEN].to_vec();
                t.extend_from_slice(
                    format!("... ({} more bytes)", a.len() - MAX_ARG_LEN).as_bytes(),
                );
                return t;
            }
            a.to_vec()
        })
        .collect();
    if args.len() > MAX_ARGS {
        out.push(format!("... ({} more arguments)", args.len() - shown).into_bytes());
    }
    out
}

/// Whether a command is never logged (its arguments hold a password, or it only runs
/// others that are logged themselves).
pub fn skipped(name: &str) -> bool {
    matches!(name, "AUTH" | "HELLO" | "EXEC")
}

impl SlowLog {
    /// Logs a command that took `took`, keeping at most `max_len` entries.
    pub fn record(&self, args: &[&[u8]], took: Duration, who: (String, Vec<u8>), max_len: usize) {
        let time = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let id = log.next_id;
        log.next_id += 1;
        log.entries.push_front(Entry {
            id,
            time,
            micros: took.as_micros() as u64,
            args: kept(args),
            addr: who.0,
            name: who.1,
        });
        log.entries.truncate(max_len);
    }

    /// The newest `n` entries (all: `None`).
    pub fn get(&self, n: Option<usize>) -> Vec<Entry> {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        log.entries
            .iter()
            .take(n.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }

    /// Empties the log (ids go on).
    pub fn reset(&self) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_trimmed_and_secrets_redacted() {
        let long = vec![b'x'; 200];
        let k = kept(&[b"SET", b"k", &long]);
        assert_eq!(k[2].len(), 128 + "... (72 more bytes)".len());
        let many: Vec<&[u8]> = std::iter::repeat_n(b"a".as_slice(), 40).collect();
        let k = kept(&many);
        assert_eq!(k.len(), 32);
        assert_eq!(k[31], b"... (9 more arguments)");
        let k = kept(&[b"config", b"set", b"masterauth", b"pw"]);
        assert_eq!(k[3], b"(redacted)");
    }

    #[test]
    fn the_newest_come_first_and_the_length_is_bounded() {
        let l = SlowLog::default();
        for i in 0..5u8 {
            let a = [i];
            l.record(
                &[&a],
                Duration::from_micros(u64::from(i)),
                (String::new(), Vec::new()),
                3,
            );
        }
        let e = l.get(None);
        assert_eq!(e.iter().map(|e| e.id).collect::<Vec<_>>(), vec![4, 3, 2]);
        assert_eq!(l.get(Some(1)).len(), 1);
        l.reset();
        assert_eq!(l.len(), 0);
    }
}

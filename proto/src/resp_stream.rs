//! A RESP command read across several inputs, argument by argument, so that a big bulk
//! string (a large value) is read straight into memory of its own instead of the
//! connection's input buffer: the reader says how many bytes the argument takes
//! ([`Progress::Stream`]), the caller reads exactly that many into an allocation of that
//! size and hands it over ([`Partial::streamed`]), and the command then runs with that
//! allocation as its argument (which a SET moves into the store as the value: held once).
//! Redis reads arguments of 32 KiB and more the same way (`PROTO_MBULK_BIG_ARG`).
//!
//! A command becomes partial only where the whole-command parser ([`crate::resp`]) needs
//! more input and the element it stopped in is a bulk string of at least the streaming
//! threshold ([`Partial::start`]); every other command is parsed whole, in place, as
//! before. The same limits hold: each bulk string's length is checked before anything is
//! allocated, and the arguments together may not pass
//! [`Limits::max_resp_command`](crate::Limits::max_resp_command).

use crate::limits::Limits;
use crate::resp::{length_line, RespError};

/// The smallest bulk string that is streamed when a command is incomplete in it.
pub const STREAM_MIN: usize = 64 * 1024;

/// A command whose arguments are being read.
#[derive(Debug, Default)]
pub struct Partial {
    /// The arguments read so far, in order (the name first).
    args: Vec<Vec<u8>>,
    /// Arguments still to come.
    left: usize,
    /// The CRLF after a streamed argument comes next in the input.
    crlf: bool,
    /// Bytes of the arguments so far (the streamed one included once announced).
    bytes: usize,
}

/// What reading more of a partial command did. `used`: the input bytes it took (copied
/// into the arguments, or a bulk string's header); the caller drops them from its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Every argument is read.
    Complete { used: usize },
    /// More input is needed.
    More { used: usize },
    /// The next `len` input bytes after `used` are one argument: read them into an
    /// allocation of their own and hand it over with [`Partial::streamed`].
    Stream { used: usize, len: usize },
}

fn bulk_len(e: RespError) -> RespError {
    match e {
        RespError::Protocol(_) => RespError::Protocol("invalid bulk length"),
        e => e,
    }
}

impl Partial {
    /// Starts reading the command at the front of `buf` argument by argument, if it is an
    /// array of bulk strings that is incomplete inside a bulk string of at least `min`
    /// bytes: the arguments before it are copied, and the answer is
    /// [`Progress::Stream`] for it. `None` when the whole-command parser should go on
    /// with it (not an array, complete, malformed, or incomplete elsewhere).
    pub fn start(
        buf: &[u8],
        limits: &Limits,
        min: usize,
    ) -> Result<Option<(Partial, Progress)>, RespError> {
        if buf.first() != Some(&b'*') {
            return Ok(None);
        }
        let Ok(Some((Some(n), mut at))) = length_line(buf, 1, "array", limits.max_array) else {
            return Ok(None);
        };
        let mut spans = Vec::new();
        for i in 0..n {
            if buf.get(at) != Some(&b'$') {
                return Ok(None);
            }
            let Ok(Some((Some(len), start))) =
                length_line(buf, at + 1, "bulk string", limits.max_bulk)
            else {
                return Ok(None);
            };
            if buf.len() >= start + len + 2 {
                if buf.get(start + len..start + len + 2) != Some(b"\r\n") {
                    return Ok(None);
                }
                spans.push((start, start + len));
                at = start + len + 2;
                continue;
            }
            if len < min {
                return Ok(None);
            }
            let mut p = Partial {
                args: Vec::with_capacity(n.min(64)),
                left: n - i - 1,
                crlf: false,
                bytes: 0,
            };
            for (a, b) in spans {
                p.args.push(buf[a..b].to_vec());
                p.bytes += b - a;
            }
            p.announce(len, limits)?;
            return Ok(Some((p, Progress::Stream { used: start, len })));
        }
        Ok(None)
    }

    /// Reads what `buf` holds of the rest of the command (`min`: the streaming threshold).
    pub fn resume(
        &mut self,
        buf: &[u8],
        limits: &Limits,
        min: usize,
    ) -> Result<Progress, RespError> {
        let mut at = 0;
        if self.crlf {
            match buf.get(..2) {
                None => return Ok(Progress::More { used: 0 }),
                Some(b"\r\n") => {}
                Some(_) => return Err(RespError::Protocol("bulk string not followed by CRLF")),
            }
            self.crlf = false;
            at = 2;
        }
        while self.left > 0 {
            match buf.get(at) {
                None => return Ok(Progress::More { used: at }),
                Some(b'$') => {}
                Some(&c) => return Err(RespError::Expected(c)),
            }
            let Some((len, start)) =
                length_line(buf, at + 1, "bulk string", limits.max_bulk).map_err(bulk_len)?
            else {
                return Ok(Progress::More { used: at });
            };
            let Some(len) = len else {
                return Err(RespError::Protocol("invalid bulk length"));
            };
            if buf.len() >= start + len + 2 {
                if buf.get(start + len..start + len + 2) != Some(b"\r\n") {
                    return Err(RespError::Protocol("bulk string not followed by CRLF"));
                }
                self.announce(len, limits)?;
                self.args.push(buf[start..start + len].to_vec());
                self.left -= 1;
                at = start + len + 2;
            } else if len >= min {
                self.announce(len, limits)?;
                self.left -= 1;
                return Ok(Progress::Stream { used: start, len });
            } else {
                return Ok(Progress::More { used: at });
            }
        }
        Ok(Progress::Complete { used: at })
    }

    /// Counts `len` more bytes of arguments against the command's limit.
    fn announce(&mut self, len: usize, limits: &Limits) -> Result<(), RespError> {
        self.bytes += len;
        let max = limits.max_resp_command();
        if self.bytes > max {
            return Err(RespError::TooLarge {
                what: "command",
                len: self.bytes,
                max,
            });
        }
        Ok(())
    }

    /// The argument [`Progress::Stream`] asked for, read whole: its CRLF comes next.
    pub fn streamed(&mut self, arg: Vec<u8>) {
        self.args.push(arg);
        self.crlf = true;
    }

    /// The arguments read so far (all of them once [`Progress::Complete`]).
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args
    }

    /// Takes argument `i` out, leaving it empty (a value moved into the store).
    pub fn take(&mut self, i: usize) -> Option<Vec<u8>> {
        self.args.get_mut(i).map(std::mem::take)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::parse_command;

    fn limits() -> Limits {
        Limits {
            max_bulk: 1 << 20,
            ..Limits::default()
        }
    }

    fn command(args: &[&[u8]]) -> Vec<u8> {
        let mut v = Vec::new();
        crate::resp::command(&mut v, args);
        v
    }

    /// Feeds `wire` to a partial reader in pieces of `step` bytes, the way a connection
    /// would: streamed arguments are collected from the input as the caller would read
    /// them. Returns the arguments and how many were streamed.
    fn read_in_pieces(wire: &[u8], step: usize, min: usize) -> (Vec<Vec<u8>>, usize) {
        let l = limits();
        let (mut inb, mut next) = (Vec::new(), 0);
        let mut fill = |inb: &mut Vec<u8>| {
            let end = (next + step).min(wire.len());
            inb.extend_from_slice(&wire[next..end]);
            next = end;
            next < wire.len()
        };
        let (mut p, mut prog) = loop {
            let more = fill(&mut inb);
            if let Some(started) = Partial::start(&inb, &l, min).unwrap() {
                break started;
            }
            if !more {
                // Never incomplete in a big argument: the whole-command parser's.
                let (args, _) = parse_command(&inb, &l).unwrap().unwrap();
                return (args.iter().map(|a| a.to_vec()).collect(), 0);
            }
        };
        let mut streamed = 0;
        loop {
            match prog {
                Progress::Complete { used } => {
                    inb.drain(..used);
                    assert!(inb.is_empty());
                    return (p.args().to_vec(), streamed);
                }
                Progress::More { used } => {
                    inb.drain(..used);
                    fill(&mut inb);
                }
                Progress::Stream { used, len } => {
                    inb.drain(..used);
                    let mut arg = Vec::with_capacity(len);
                    while arg.len() < len {
                        if inb.is_empty() {
                            fill(&mut inb);
                        }
                        let take = (len - arg.len()).min(inb.len());
                        arg.extend(inb.drain(..take));
                    }
                    assert_eq!(arg.capacity(), len, "exactly its own size");
                    p.streamed(arg);
                    streamed += 1;
                }
            }
            prog = p.resume(&inb, &l, min).unwrap();
        }
    }

    #[test]
    fn a_command_read_in_pieces_has_the_whole_commands_arguments() {
        let big = vec![b'x'; 100_000];
        let other: Vec<u8> = (0..70_000u32).map(|i| i as u8).collect();
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![b"SET", b"key", &big],
            vec![b"SET", b"key", &big, b"EX", b"100"],
            vec![b"MSET", b"a", &big, b"b", b"small", b"c", &other],
            vec![b"HSET", b"h", b"f", &other, b"g", &big],
        ];
        for args in cases {
            let wire = command(&args);
            let (whole, _) = parse_command(&wire, &limits()).unwrap().unwrap();
            let bigs = args.iter().filter(|a| a.len() >= 65536).count();
            for step in [1, 7, 1000, 16384, 65536 + 3, wire.len() - 1] {
                if step == 1 && wire.len() > 100_000 {
                    continue; // re-parsing one byte at a time is quadratic in the header
                }
                let (got, streamed) = read_in_pieces(&wire, step, STREAM_MIN);
                assert_eq!(got, whole, "step {step}");
                assert!(streamed <= bigs, "step {step}: {streamed}");
                if step <= 16384 {
                    assert!(streamed >= 1, "step {step}");
                }
            }
        }
    }

    #[test]
    fn only_a_command_incomplete_in_a_big_bulk_string_starts() {
        let l = limits();
        let big = command(&[b"SET", b"k", &vec![b'v'; 100_000]]);
        assert!(Partial::start(&big[..30], &l, STREAM_MIN)
            .unwrap()
            .is_some());
        assert!(
            Partial::start(&big[..15], &l, STREAM_MIN)
                .unwrap()
                .is_none(),
            "header"
        );
        assert!(
            Partial::start(&big, &l, STREAM_MIN).unwrap().is_none(),
            "complete"
        );
        let small = command(&[b"SET", b"k", &vec![b'v'; 1000]]);
        assert!(Partial::start(&small[..30], &l, STREAM_MIN)
            .unwrap()
            .is_none());
        assert!(Partial::start(b"SET k v\r\n", &l, STREAM_MIN)
            .unwrap()
            .is_none());
        assert!(Partial::start(b"*2\r\n+x\r\n", &l, STREAM_MIN)
            .unwrap()
            .is_none());
        // Over the bulk string limit: the whole-command parser refuses it.
        let huge = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$99999999\r\nab";
        assert!(Partial::start(huge, &l, STREAM_MIN).unwrap().is_none());
        let (_, prog) = Partial::start(&big[..30], &l, STREAM_MIN).unwrap().unwrap();
        let header = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000\r\n".len();
        assert_eq!(
            prog,
            Progress::Stream {
                used: header,
                len: 100_000
            }
        );
    }

    #[test]
    fn bad_input_after_a_streamed_argument_is_an_error() {
        let l = limits();
        let wire = command(&[b"SET", b"k", &vec![b'v'; 70_000], b"EX", b"5"]);
        let (mut p, prog) = Partial::start(&wire[..40], &l, STREAM_MIN)
            .unwrap()
            .unwrap();
        let Progress::Stream { used, len } = prog else {
            panic!("{prog:?}")
        };
        p.streamed(wire[used..used + len].to_vec());
        assert_eq!(
            p.resume(b"xx$2\r\nEX\r\n", &l, STREAM_MIN),
            Err(RespError::Protocol("bulk string not followed by CRLF"))
        );
        let (mut p, _) = Partial::start(&wire[..40], &l, STREAM_MIN)
            .unwrap()
            .unwrap();
        p.streamed(wire[used..used + len].to_vec());
        assert_eq!(
            p.resume(b"\r\n+EX\r\n", &l, STREAM_MIN),
            Err(RespError::Expected(b'+'))
        );
        let (mut p, _) = Partial::start(&wire[..40], &l, STREAM_MIN)
            .unwrap()
            .unwrap();
        p.streamed(wire[used..used + len].to_vec());
        assert!(p.resume(b"\r\n$-1\r\n", &l, STREAM_MIN).is_err());
        assert!(p.resume(b"$9999999999\r\n", &l, STREAM_MIN).is_err());
    }

    #[test]
    fn the_arguments_together_stay_under_the_command_limit() {
        let l = Limits {
            max_bulk: 100_000,
            max_frame: 150_000,
            ..Limits::default()
        };
        // Three bulk strings of 100,000 bytes: 300,000 > max(150,000, 2 × 100,000 + 64 KiB).
        let mut wire = b"*4\r\n$4\r\nMSET\r\n$100000\r\n".to_vec();
        let (mut p, prog) = Partial::start(&wire, &l, STREAM_MIN).unwrap().unwrap();
        assert!(matches!(prog, Progress::Stream { len: 100_000, .. }));
        p.streamed(vec![0; 100_000]);
        wire = b"\r\n$100000\r\n".to_vec();
        assert!(matches!(
            p.resume(&wire, &l, STREAM_MIN),
            Ok(Progress::Stream { len: 100_000, .. })
        ));
        p.streamed(vec![0; 100_000]);
        assert!(matches!(
            p.resume(&wire, &l, STREAM_MIN),
            Err(RespError::TooLarge {
                what: "command",
                ..
            })
        ));
    }
}

//! The memcached decoder against memcached 1.6's documented commands, errors and limits.

use super::meta::SetMode;
use super::reply::{self, ItemInfo};
use super::*;

fn p(input: &[u8]) -> Result<Option<(Command<'_>, usize)>, McError> {
    parse(input, &McLimits::default())
}

fn one(input: &[u8]) -> Command<'_> {
    let (c, used) = p(input).unwrap().unwrap();
    assert_eq!(used, input.len(), "{:?}", String::from_utf8_lossy(input));
    c
}

fn keys<'a>(c: &Command<'a>) -> Vec<&'a [u8]> {
    match c {
        Command::Get { keys, .. } => keys.clone().collect(),
        _ => panic!("not a get: {c:?}"),
    }
}

fn client_err(input: &[u8]) -> &'static str {
    match p(input) {
        Err(McError::Client { msg, skip }) => {
            assert!(skip <= input.len());
            msg
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn retrievals_take_many_keys() {
    let c = one(b"get a bb  ccc\r\n");
    assert_eq!(keys(&c), vec![&b"a"[..], b"bb", b"ccc"]);
    assert!(matches!(
        c,
        Command::Get {
            cas: false,
            touch: None,
            ..
        }
    ));
    assert!(matches!(one(b"gets k\r\n"), Command::Get { cas: true, .. }));
    let c = one(b"gat 100 k1 k2\r\n");
    assert!(matches!(
        c,
        Command::Get {
            cas: false,
            touch: Some(Exptime(100)),
            ..
        }
    ));
    assert_eq!(keys(&c).len(), 2);
    assert!(matches!(
        one(b"gats -1 k\r\n"),
        Command::Get {
            cas: true,
            touch: Some(Exptime(-1)),
            ..
        }
    ));
    // a bare LF ends a line too
    assert_eq!(keys(&one(b"get k\n")), vec![&b"k"[..]]);
    // no key: memcached answers ERROR
    assert_eq!(p(b"get\r\n"), Err(McError::Unknown { skip: 5 }));
    assert_eq!(p(b"gat 10\r\n"), Err(McError::Unknown { skip: 8 }));
    assert_eq!(client_err(b"gat x k\r\n"), "invalid exptime argument");
    // 100 keys on one line
    let line: String = (0..100).map(|i| format!(" key:{i:04}")).collect();
    let input = format!("get{line}\r\n");
    assert_eq!(keys(&one(input.as_bytes())).len(), 100);
}

#[test]
fn storage_commands_read_their_data_block() {
    let c = one(b"set k 5 0 3\r\nabc\r\n");
    assert_eq!(
        c,
        Command::Store {
            op: StoreOp::Set,
            key: b"k",
            flags: 5,
            exptime: Exptime(0),
            data: b"abc",
            cas: 0,
            noreply: false
        }
    );
    for (name, op) in [
        ("add", StoreOp::Add),
        ("replace", StoreOp::Replace),
        ("append", StoreOp::Append),
        ("prepend", StoreOp::Prepend),
    ] {
        let input = format!("{name} key 4294967295 -1 0 noreply\r\n\r\n");
        match one(input.as_bytes()) {
            Command::Store {
                op: o,
                flags,
                exptime,
                data,
                noreply,
                ..
            } => {
                assert_eq!(
                    (o, flags, exptime, data, noreply),
                    (op, u32::MAX, Exptime(-1), &b""[..], true)
                );
            }
            c => panic!("{c:?}"),
        }
    }
    match one(b"cas k 0 60 2 18446744073709551615\r\nhi\r\n") {
        Command::Store {
            op: StoreOp::Cas,
            cas,
            data,
            ..
        } => assert_eq!((cas, data), (u64::MAX, &b"hi"[..])),
        c => panic!("{c:?}"),
    }
    // data holding CRLF and binary bytes is taken by length
    match one(b"set k 0 0 4\r\n\r\n\x00\xff\r\n") {
        Command::Store { data, .. } => assert_eq!(data, b"\r\n\x00\xff"),
        c => panic!("{c:?}"),
    }
}

#[test]
fn incomplete_input_waits() {
    let full: &[u8] = b"set k 0 0 5\r\nhello\r\nget k\r\n";
    for cut in 0..20 {
        assert_eq!(p(&full[..cut]), Ok(None), "cut at {cut}");
    }
    let (_, used) = p(full).unwrap().unwrap();
    assert_eq!(used, 20);
    let (c, used2) = p(&full[used..]).unwrap().unwrap();
    assert_eq!((keys(&c), used2), (vec![&b"k"[..]], 7));
    assert_eq!(p(b"mg k v"), Ok(None));
    assert_eq!(p(b"ms k 3 T0\r\nab"), Ok(None));
}

#[test]
fn malformed_commands_get_memcacheds_errors() {
    assert_eq!(p(b"bogus k\r\n"), Err(McError::Unknown { skip: 9 }));
    assert_eq!(p(b"\r\n"), Err(McError::Unknown { skip: 2 }));
    assert_eq!(client_err(b"set k 0 0\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"set k x 0 1\r\na\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"set k 0 0 -1\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"set k 4294967296 0 1\r\na\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"set k 0 0 1 extra\r\na\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"cas k 0 0 1\r\na\r\n"), BAD_FORMAT);
    // data not followed by CRLF: the line and the declared bytes are dropped
    assert_eq!(
        p(b"set k 0 0 2\r\nabcd\r\n"),
        Err(McError::Client {
            msg: BAD_CHUNK,
            skip: 17
        })
    );
    assert_eq!(
        client_err(b"incr k x\r\n"),
        "invalid numeric delta argument"
    );
    assert_eq!(
        client_err(b"incr k -1\r\n"),
        "invalid numeric delta argument"
    );
    assert_eq!(client_err(b"incr k\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"touch k\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"touch k soon\r\n"), "invalid exptime argument");
    assert_eq!(
        client_err(b"delete k 10\r\n"),
        "bad command line format.  Usage: delete <key> [noreply]"
    );
    assert_eq!(client_err(b"flush_all soon\r\n"), BAD_FORMAT);
    // As memcached 1.6.18 answers them (memcapable checks these).
    assert_eq!(p(b"verbosity\r\n"), Err(McError::Unknown { skip: 11 }));
    assert_eq!(
        p(b"verbosity a b c\r\n"),
        Err(McError::Unknown { skip: 17 })
    );
    assert_eq!(
        one(b"verbosity noreply\r\n"),
        Command::Verbosity { noreply: true }
    );
    assert_eq!(one(b"version foo bar\r\n"), Command::Version);
}

#[test]
fn keys_follow_memcacheds_rules() {
    let k250 = "k".repeat(250);
    assert_eq!(keys(&one(format!("get {k250}\r\n").as_bytes())).len(), 1);
    assert_eq!(
        client_err(format!("get {k250}x\r\n").as_bytes()),
        BAD_FORMAT
    );
    assert_eq!(
        client_err(format!("set {k250}x 0 0 1\r\na\r\n").as_bytes()),
        BAD_FORMAT
    );
    // memcached 1.6 splits on spaces only: control characters and tabs are key bytes.
    for k in [&b"a\x01b"[..], b"a\x7fb", b"a\tb"] {
        let mut line = b"get ".to_vec();
        line.extend_from_slice(k);
        line.extend_from_slice(b"\r\n");
        assert_eq!(keys(&one(&line)), vec![k.to_vec()]);
    }
}

#[test]
fn limits_bound_lines_and_values() {
    let limits = McLimits {
        max_value: 10,
        ..McLimits::default()
    };
    assert_eq!(
        parse(b"set k 0 0 11\r\n", &limits),
        Err(McError::TooLarge {
            skip: 14,
            swallow: 13
        })
    );
    assert!(matches!(
        parse(b"set k 0 0 10\r\n0123456789\r\n", &limits),
        Ok(Some(_))
    ));
    assert_eq!(
        parse(b"ms k 11 T0\r\n", &limits),
        Err(McError::TooLarge {
            skip: 12,
            swallow: 13
        })
    );
    // a line past 2048 bytes without its end closes the connection, unless it is a get
    let long = vec![b'x'; 2100];
    assert_eq!(p(&long), Err(McError::LineTooLong));
    let mut get = b"get".to_vec();
    while get.len() < 3000 {
        get.extend_from_slice(b" somekey");
    }
    assert_eq!(p(&get), Ok(None));
    get.extend_from_slice(b"\r\n");
    assert!(matches!(p(&get), Ok(Some(_))));
    let mut huge = b"get".to_vec();
    huge.resize(70_000, b'k');
    assert_eq!(p(&huge), Err(McError::LineTooLong));
    // a complete line of exactly the limit is fine; one byte more is not
    let limits = McLimits {
        max_line: 16,
        ..McLimits::default()
    };
    assert!(matches!(
        parse(
            b"delete 0123456789\r\n",
            &McLimits {
                max_line: 17,
                ..limits.clone()
            }
        ),
        Ok(Some(_))
    ));
    assert_eq!(
        parse(b"delete 0123456789\r\n", &limits),
        Err(McError::LineTooLong)
    );
}

#[test]
fn other_commands() {
    assert_eq!(
        one(b"delete k\r\n"),
        Command::Delete {
            key: b"k",
            noreply: false
        }
    );
    assert_eq!(
        one(b"delete k 0 noreply\r\n"),
        Command::Delete {
            key: b"k",
            noreply: true
        }
    );
    assert_eq!(
        one(b"incr k 18446744073709551615\r\n"),
        Command::Arith {
            key: b"k",
            delta: u64::MAX,
            incr: true,
            noreply: false
        }
    );
    assert_eq!(
        one(b"decr k 3 noreply\r\n"),
        Command::Arith {
            key: b"k",
            delta: 3,
            incr: false,
            noreply: true
        }
    );
    assert_eq!(
        one(b"touch k 10 noreply\r\n"),
        Command::Touch {
            key: b"k",
            exptime: Exptime(10),
            noreply: true
        }
    );
    assert_eq!(
        one(b"flush_all\r\n"),
        Command::FlushAll {
            delay: Exptime(0),
            noreply: false
        }
    );
    assert_eq!(
        one(b"flush_all 30 noreply\r\n"),
        Command::FlushAll {
            delay: Exptime(30),
            noreply: true
        }
    );
    assert_eq!(
        one(b"flush_all noreply\r\n"),
        Command::FlushAll {
            delay: Exptime(0),
            noreply: true
        }
    );
    assert_eq!(one(b"version\r\n"), Command::Version);
    assert_eq!(
        one(b"verbosity 1 noreply\r\n"),
        Command::Verbosity { noreply: true }
    );
    assert_eq!(one(b"quit\r\n"), Command::Quit);
    assert_eq!(one(b"shutdown\r\n"), Command::Shutdown);
    match one(b"stats settings\r\n") {
        Command::Stats { args } => assert_eq!(args.collect::<Vec<_>>(), vec![&b"settings"[..]]),
        c => panic!("{c:?}"),
    }
    assert!(matches!(one(b"stats\r\n"), Command::Stats { args } if args.is_empty()));
}

fn meta(input: &[u8]) -> Meta<'_> {
    match one(input) {
        Command::Meta(m) => m,
        c => panic!("{c:?}"),
    }
}

#[test]
fn meta_commands_and_flags() {
    let m = meta(b"mg foo v c f s t k O123 q\r\n");
    assert_eq!((m.cmd, m.key), (MetaCmd::Get, &b"foo"[..]));
    let f = &m.flags;
    assert!(
        f.ret_value && f.ret_cas && f.ret_flags && f.ret_size && f.ret_ttl && f.ret_key && f.quiet
    );
    assert_eq!(f.opaque, Some(&b"123"[..]));
    let m = meta(b"mg foo T30 N60 E99\r\n");
    assert_eq!(
        (m.flags.ttl, m.flags.vivify, m.flags.new_cas),
        (Some(Exptime(30)), Some(Exptime(60)), Some(99))
    );

    let m = meta(b"ms foo 3 T10 F7 C5 MA I\r\nbar\r\n");
    assert_eq!((m.cmd, m.data), (MetaCmd::Set, &b"bar"[..]));
    assert_eq!(
        (
            m.flags.ttl,
            m.flags.set_flags,
            m.flags.compare_cas,
            m.flags.set_mode,
            m.flags.invalidate
        ),
        (Some(Exptime(10)), Some(7), Some(5), SetMode::Append, true)
    );
    for (tok, mode) in [
        ("ME", SetMode::Add),
        ("Mr", SetMode::Replace),
        ("MP", SetMode::Prepend),
        ("MS", SetMode::Set),
    ] {
        let input = format!("ms k 0 {tok}\r\n\r\n");
        assert_eq!(meta(input.as_bytes()).flags.set_mode, mode);
    }

    let m = meta(b"md foo q C12 x\r\n");
    assert_eq!(m.cmd, MetaCmd::Delete);
    assert!(m.flags.quiet && m.flags.remove_value);
    let m = meta(b"ma foo MD D5 J10 N0 v\r\n");
    assert_eq!(m.cmd, MetaCmd::Arith);
    assert!(m.flags.decr && m.flags.ret_value);
    assert_eq!(
        (m.flags.delta, m.flags.initial, m.flags.vivify),
        (Some(5), Some(10), Some(Exptime(0)))
    );
    assert_eq!(meta(b"me foo\r\n").cmd, MetaCmd::Debug);
    assert_eq!(meta(b"mn\r\n").cmd, MetaCmd::Noop);
}

#[test]
fn meta_errors() {
    assert_eq!(client_err(b"mg\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"mg k z\r\n"), "invalid flag");
    assert_eq!(client_err(b"mg k C1\r\n"), "invalid flag");
    assert_eq!(client_err(b"mg k 1\r\n"), "invalid flag");
    assert_eq!(client_err(b"mg k v v\r\n"), "duplicate flag");
    assert_eq!(
        client_err(b"mg k Tx\r\n"),
        "bad token in command line format"
    );
    assert_eq!(
        client_err(b"ms k 1 F-1\r\na\r\n"),
        "bad token in command line format"
    );
    assert_eq!(
        client_err(b"ms k 1 MX\r\na\r\n"),
        "invalid mode for ms STORE"
    );
    assert_eq!(client_err(b"ma k MX\r\n"), "invalid mode for ma");
    assert_eq!(client_err(b"ms k\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"ms k x\r\n"), "bad data chunk");
    assert_eq!(
        client_err(format!("mg k O{}\r\n", "o".repeat(33)).as_bytes()),
        "opaque token too long"
    );
    assert_eq!(client_err(b"mn x\r\n"), BAD_FORMAT);
    assert_eq!(client_err(b"me k v\r\n"), "invalid flag");
}

#[test]
fn base64_keys_decode_and_are_checked() {
    // "a b" (a space: not allowed as a plain key) in base64
    let m = meta(b"mg YSBi b v\r\n");
    let mut buf = [0u8; 256];
    assert_eq!(m.key_into(&mut buf), b"a b");
    assert_eq!(meta(b"mg plain v\r\n").key_into(&mut buf), b"plain");
    assert_eq!(client_err(b"mg !!!! b\r\n"), BAD_FORMAT);
    let long = "a".repeat(251);
    let b64 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, long);
    assert_eq!(client_err(format!("mg {b64} b\r\n").as_bytes()), BAD_FORMAT);
}

#[test]
fn exptime_follows_memcached() {
    let now = 1_700_000_000_000u64;
    assert_eq!(Exptime(0).at(now), Expiry::Never);
    assert_eq!(Exptime(-1).at(now), Expiry::Past);
    assert_eq!(Exptime(10).at(now), Expiry::At(now + 10_000));
    assert_eq!(
        Exptime(REALTIME_MAXDELTA).at(now),
        Expiry::At(now + REALTIME_MAXDELTA as u64 * 1000)
    );
    // past 30 days it is a Unix time
    assert_eq!(Exptime(REALTIME_MAXDELTA + 1).at(now), Expiry::Past);
    assert_eq!(
        Exptime(1_800_000_000).at(now),
        Expiry::At(1_800_000_000_000)
    );
    assert_eq!(Exptime(1_700_000_000).at(now), Expiry::Past);
}

#[test]
fn replies() {
    let mut out = Vec::new();
    reply::value(&mut out, b"k", 7, b"ab", None);
    reply::value(&mut out, b"k2", 0, b"", Some(42));
    reply::line(&mut out, "END");
    reply::number(&mut out, 18446744073709551615);
    assert_eq!(
        out,
        b"VALUE k 7 2\r\nab\r\nVALUE k2 0 0 42\r\n\r\nEND\r\n18446744073709551615\r\n"
    );

    let m = meta(b"mg Zm9v s v Oop k f c t b\r\n");
    let item = ItemInfo {
        flags: 3,
        size: 2,
        cas: 9,
        ttl: -1,
    };
    let mut out = Vec::new();
    reply::meta(&mut out, "HD", &m.flags, m.key, Some(&item), Some(b"hi"));
    assert_eq!(out, b"VA 2 s2 Oop kZm9v f3 c9 t-1 b\r\nhi\r\n");
    out.clear();
    reply::meta(&mut out, "EN", &m.flags, m.key, None, None);
    assert_eq!(out, b"EN Oop kZm9v b\r\n");
    out.clear();
    let m = meta(b"md foo q\r\n");
    reply::meta(&mut out, "HD", &m.flags, m.key, None, None);
    assert_eq!(out, b"HD\r\n");
}

#[test]
fn errors_say_what_memcached_says() {
    let reply = |e: McError| {
        let mut out = Vec::new();
        e.write_reply(&mut out)
            .then(|| String::from_utf8(out).unwrap())
    };
    assert_eq!(reply(McError::Unknown { skip: 1 }).unwrap(), "ERROR\r\n");
    assert_eq!(
        reply(McError::Client {
            msg: BAD_FORMAT,
            skip: 1
        })
        .unwrap(),
        "CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        reply(McError::TooLarge {
            skip: 1,
            swallow: 3
        })
        .unwrap(),
        "SERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(reply(McError::LineTooLong), None);
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Any input: no panic, and a parsed command uses a nonzero prefix of it; every
        /// prefix of a complete command is incomplete or the same error.
        #[test]
        fn never_panics(input in proptest::collection::vec(any::<u8>(), 0..300)) {
            let limits = McLimits { max_line: 64, max_get_line: 128, max_value: 64, ..McLimits::default() };
            if let Ok(Some((_, used))) = parse(&input, &limits) {
                prop_assert!(used > 0 && used <= input.len());
            }
        }

        /// A well-formed storage command parses back to what was encoded, whatever its
        /// data bytes, however it is cut.
        #[test]
        fn storage_round_trips(
            key in "[!-~]{1,40}",
            flags in any::<u32>(),
            exp in -100i64..5_000_000,
            data in proptest::collection::vec(any::<u8>(), 0..100),
            noreply in any::<bool>(),
            cut in 0usize..200,
        ) {
            let mut input = format!("set {key} {flags} {exp} {}{}\r\n", data.len(), if noreply { " noreply" } else { "" }).into_bytes();
            input.extend_from_slice(&data);
            input.extend_from_slice(b"\r\n");
            let cut = cut.min(input.len() - 1);
            prop_assert_eq!(p(&input[..cut]), Ok(None));
            let (c, used) = p(&input).unwrap().unwrap();
            prop_assert_eq!(used, input.len());
            prop_assert_eq!(c, Command::Store {
                op: StoreOp::Set, key: key.as_bytes(), flags, exptime: Exptime(exp),
                data: &data, cas: 0, noreply,
            });
        }
    }
}

//! Fuzz target for the memcached text and meta decoder: arbitrary bytes as a stream of
//! commands, skipping past errors as the server does. Nothing may panic; a parsed command
//! uses a nonzero prefix; an error never skips past the input it saw; a meta key decodes.
//!
//! `cargo +nightly fuzz run memcache_parse -- -max_total_time=60`

#![no_main]

use accelkv_proto::memcache::{self, Command, McError, McLimits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = McLimits { max_line: 256, max_get_line: 512, max_value: 256, ..McLimits::default() };
    let mut at = 0;
    while at < data.len() {
        let rest = &data[at..];
        match memcache::parse(rest, &limits) {
            Ok(Some((cmd, used))) => {
                assert!(used > 0 && used <= rest.len());
                match cmd {
                    Command::Get { keys, .. } => assert!(keys.count() > 0),
                    Command::Meta(m) => {
                        let mut buf = [0u8; 256];
                        let k = m.key_into(&mut buf);
                        assert!(m.cmd == memcache::MetaCmd::Noop || !k.is_empty());
                    }
                    _ => {}
                }
                at += used;
            }
            Ok(None) | Err(McError::LineTooLong) => break,
            Err(McError::Unknown { skip }) | Err(McError::Client { skip, .. }) => {
                assert!(skip > 0 && skip <= rest.len());
                at += skip;
            }
            Err(McError::TooLarge { skip, swallow }) => {
                assert!(skip > 0 && skip <= rest.len());
                at += skip + swallow;
            }
        }
    }
});

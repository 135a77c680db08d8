//! memcached's answer while the data directory is recovered (net/loading.rs): every command
//! is answered `SERVER_ERROR loading` (a storage command's data block is skipped whole),
//! `quit` closes.

use crate::core::loading::Progress;

/// The reply to every command while loading.
pub const LOADING: &[u8] = b"SERVER_ERROR loading\r\n";

/// [`crate::core::loading::Answer`] for memcached.
pub fn answer(input: &[u8], _p: &Progress, out: &mut Vec<u8>) -> Option<usize> {
    let mut at = 0;
    while let Some(eol) = input[at..].iter().position(|&b| b == b'\n') {
        let line = &input[at..at + eol];
        let words: Vec<&[u8]> = line
            .split(|&b| b == b' ' || b == b'\r')
            .filter(|w| !w.is_empty())
            .collect();
        let mut end = at + eol + 1;
        // The data block's length: `set k flags exptime bytes`, `cas … bytes cas`, `ms k bytes`.
        let data = match words.first().copied() {
            Some(b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas") => words.get(4),
            Some(b"ms") => words.get(2),
            Some(b"quit") => return None,
            Some(b"mn") => {
                out.extend_from_slice(b"MN\r\n");
                at = end;
                continue;
            }
            _ => None,
        };
        if let Some(n) = data {
            let n: usize = std::str::from_utf8(n).ok()?.parse().ok()?;
            end += n + 2;
            if input.len() < end {
                break;
            }
        }
        out.extend_from_slice(LOADING);
        at = end;
    }
    Some(at)
}

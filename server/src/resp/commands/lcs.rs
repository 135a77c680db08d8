//! LCS: the longest common subsequence of two strings (Redis 7), as the string, its length
//! (LEN), or the matching ranges (IDX, with MINMATCHLEN and WITHMATCHLEN), by Redis's own
//! dynamic programme and walk back, so the ranges come out as Redis lists them. The table
//! takes 4 bytes per pair of positions and is refused past 64 MiB.

use crate::core::counters::OpClass;
use crate::resp::call::Call;
use crate::resp::commands::types::access::{fail, Fail};
use crate::resp::commands::types::run::{int_arg, read};
use accelkv_proto::resp::{self, Version};

/// Most bytes the table may take.
const MAX_TABLE: usize = 64 << 20;

#[derive(Default, Clone, Copy)]
struct Opts {
    len: bool,
    idx: bool,
    min: u64,
    with_len: bool,
}

fn opts(args: &[&[u8]]) -> Result<Opts, Fail> {
    let mut o = Opts::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.to_ascii_uppercase().as_slice() {
            b"LEN" => o.len = true,
            b"IDX" => o.idx = true,
            b"WITHMATCHLEN" => o.with_len = true,
            b"MINMATCHLEN" => {
                let n = args
                    .get(i + 1)
                    .ok_or_else(|| Fail::Reply("ERR syntax error".into()))?;
                o.min = int_arg(n)?.max(0) as u64;
                i += 1;
            }
            _ => return Err(Fail::Reply("ERR syntax error".into())),
        }
        i += 1;
    }
    if o.len && o.idx {
        return Err(Fail::Reply(
            "ERR If you want both the length and indexes, please just use IDX.".into(),
        ));
    }
    Ok(o)
}

/// One match: the range in each string, and its length.
type Range = ((usize, usize), (usize, usize), usize);

/// The LCS string, its length and the ranges (from the end, as Redis emits them).
fn lcs(a: &[u8], b: &[u8], min: u64) -> (Vec<u8>, usize, Vec<Range>) {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let mut t = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            t[i * w + j] = if a[i - 1] == b[j - 1] {
                t[(i - 1) * w + j - 1] + 1
            } else {
                t[(i - 1) * w + j].max(t[i * w + j - 1])
            };
        }
    }
    let total = t[alen * w + blen] as usize;
    let mut result = vec![0u8; total];
    let mut ranges = Vec::new();
    let (mut i, mut j, mut idx) = (alen, blen, total);
    // `a_start == alen` means no range is open.
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (alen, 0, 0, 0);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if a_start == alen {
                (a_start, a_end, b_start, b_end) = (i - 1, i - 1, j - 1, j - 1);
            } else if a_start == i && b_start == j {
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if t[(i - 1) * w + j] > t[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != alen {
                emit = true;
            }
        }
        if emit {
            let len = a_end - a_start + 1;
            if min == 0 || len as u64 >= min {
                ranges.push(((a_start, a_end), (b_start, b_end), len));
            }
            a_start = alen;
        }
    }
    (result, total, ranges)
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`.
pub fn lcs_command(x: &mut Call<'_, '_>) {
    let (ka, kb) = (x.args[1], x.args[2]);
    let o = match opts(&x.args[3..]) {
        Ok(o) => o,
        Err(e) => return fail(x.out, &e),
    };
    x.sh.count(OpClass::Get);
    read(
        x,
        |sh, s, src| {
            let mut vals = Vec::with_capacity(2);
            for k in [ka, kb] {
                match src.item(sh, s, k)? {
                    None => vals.push(Vec::new()),
                    Some((_, f)) if crate::core::ops::typed::is_typed(f) => {
                        return Err(Fail::Reply(
                            "ERR The specified keys must contain string values".into(),
                        ))
                    }
                    Some((v, _)) => vals.push(v),
                }
            }
            let cells = (vals[0].len() + 1).saturating_mul(vals[1].len() + 1);
            if cells.saturating_mul(4) > MAX_TABLE {
                return Err(Fail::Reply(format!(
                    "ERR Insufficient memory, transient memory for LCS exceeds {} MiB",
                    MAX_TABLE >> 20
                )));
            }
            Ok(lcs(&vals[0], &vals[1], o.min))
        },
        move |out, (text, len, ranges), v| {
            if o.idx {
                reply_idx(out, &ranges, len, o.with_len, v)
            } else if o.len {
                resp::integer(out, len as i64)
            } else {
                resp::bulk(out, Some(&text))
            }
        },
    )
}

fn reply_idx(out: &mut Vec<u8>, ranges: &[Range], len: usize, with_len: bool, v: Version) {
    resp::map(out, 2, v);
    resp::bulk(out, Some(b"matches"));
    resp::array(out, ranges.len());
    for ((a0, a1), (b0, b1), n) in ranges {
        resp::array(out, 2 + usize::from(with_len));
        for (x, y) in [(a0, a1), (b0, b1)] {
            resp::array(out, 2);
            resp::integer(out, *x as i64);
            resp::integer(out, *y as i64);
        }
        if with_len {
            resp::integer(out, *n as i64);
        }
    }
    resp::bulk(out, Some(b"len"));
    resp::integer(out, len as i64);
}

#[cfg(test)]
mod tests {
    use super::lcs;

    #[test]
    fn finds_redis_documented_answer() {
        let (s, n, ranges) = lcs(b"ohmytext", b"mynewtext", 0);
        assert_eq!((s.as_slice(), n), (&b"mytext"[..], 6));
        assert_eq!(ranges, vec![((4, 7), (5, 8), 4), ((2, 3), (0, 1), 2)]);
        let (_, _, long) = lcs(b"ohmytext", b"mynewtext", 4);
        assert_eq!(long.len(), 1);
        assert_eq!(lcs(b"", b"abc", 0).1, 0);
    }
}

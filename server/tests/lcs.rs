//! LCS against a real `redis-server`: the string, LEN, IDX with MINMATCHLEN and
//! WITHMATCHLEN, missing keys, and the errors, every reply compared.

mod common;

const SCRIPT: &[&str] = &[
    "MSET a ohmytext b mynewtext c ACCGGTCGAGTGCGCGGAAGCCGGCCGAA d GTCGTTCGGAATGCCGTTGCTCTGTAAA",
    "LCS a b",
    "LCS a b LEN",
    "LCS a b IDX",
    "LCS a b IDX MINMATCHLEN 4",
    "LCS a b IDX WITHMATCHLEN",
    "LCS a b IDX MINMATCHLEN 3 WITHMATCHLEN",
    "LCS c d",
    "LCS c d IDX WITHMATCHLEN",
    "LCS a nothing",
    "LCS nothing nothing2 LEN",
    "LCS a a",
    "LCS a b LEN IDX",
    "LCS a b FOO",
    "RPUSH l x",
    "LCS a l",
];

#[test]
fn lcs_answers_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

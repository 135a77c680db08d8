//! BITFIELD and BITFIELD_RO against a real `redis-server`: signed and unsigned fields of
//! many widths at bit and `#` offsets, SET, GET and INCRBY with WRAP, SAT and FAIL, growth
//! of the string, the TTL kept, and the errors, every reply compared.

mod common;

const SCRIPT: &[&str] = &[
    "BITFIELD bf SET i8 0 100 GET i8 0",
    "BITFIELD bf SET u4 #1 15 GET u4 4 GET u8 0",
    "GET bf",
    "BITFIELD bf INCRBY i8 0 50",
    "BITFIELD bf OVERFLOW SAT INCRBY i8 0 100 INCRBY i8 0 -300",
    "BITFIELD bf OVERFLOW FAIL INCRBY i8 0 -1 INCRBY u4 4 100 GET u4 4",
    "BITFIELD bf OVERFLOW WRAP INCRBY u4 4 3",
    "BITFIELD bf SET i64 64 -1 GET i64 64 GET u63 65 INCRBY i64 64 1",
    "BITFIELD bf SET i64 64 9223372036854775807 INCRBY i64 64 1",
    "BITFIELD bf SET u63 0 9223372036854775807 INCRBY u63 0 1",
    "BITFIELD bf SET i1 200 1 GET i1 200 GET u1 200 GET i2 199",
    "STRLEN bf",
    "BITFIELD bf SET u8 0 300 GET u8 0",
    "BITFIELD bf SET i8 0 -129 GET i8 0",
    "BITFIELD bf OVERFLOW SAT SET i8 0 1000 GET i8 0",
    "BITFIELD bf OVERFLOW FAIL SET u2 0 7",
    "BITFIELD nothing GET u8 0 GET i16 #3",
    "EXISTS nothing",
    "BITFIELD_RO bf GET u8 0 GET i8 #2",
    "BITFIELD_RO bf SET u8 0 1",
    "SET withttl abc EX 100",
    "BITFIELD withttl SET u8 0 65",
    "GET withttl",
    "TTL withttl",
    "BITFIELD bf GET u64 0",
    "BITFIELD bf GET i65 0",
    "BITFIELD bf GET x8 0",
    "BITFIELD bf GET u8 -1",
    "BITFIELD bf GET u8 abc",
    "BITFIELD bf SET u8 0 abc",
    "BITFIELD bf OVERFLOW NOPE GET u8 0",
    "BITFIELD bf FOO u8 0",
    "BITFIELD bf GET u8",
    "RPUSH l x",
    "BITFIELD l GET u8 0",
    "BITFIELD bf",
];

#[test]
fn bitfield_answers_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

//! SORT and SORT_RO against a real `redis-server`: numeric and ALPHA order, ASC and DESC,
//! LIMIT, BY string keys and hash fields (and `nosort`), GET patterns with `#`, STORE into
//! a list, over lists, sets and sorted sets, and the errors, every reply compared.

mod common;

const SCRIPT: &[&str] = &[
    "RPUSH nums 3 1 10 2 2.5 -4",
    "SORT nums",
    "SORT nums DESC",
    "SORT nums LIMIT 1 3",
    "SORT nums LIMIT 2 -1 DESC",
    "SORT nums ALPHA",
    "SORT nums ALPHA DESC LIMIT 0 2",
    "RPUSH words banana apple cherry",
    "SORT words",
    "SORT words ALPHA",
    "SORT_RO words ALPHA DESC",
    "SADD s 5 3 9 1",
    "SORT s",
    "SORT s DESC",
    "ZADD z 3 c 1 a 2 b",
    "SORT z ALPHA DESC",
    "SORT z BY nosort",
    "SORT z BY nosort LIMIT 0 2",
    "MSET w_1 30 w_3 10 w_5 20 w_9 40",
    "SORT s BY w_*",
    "SORT s BY w_* DESC",
    "SORT s BY missing_*",
    "SORT s BY w_* GET #",
    "SORT s BY w_* GET w_* GET #",
    "SORT s GET nothing_*",
    "HSET obj_1 name one rank 3",
    "HSET obj_3 name three rank 1",
    "HSET obj_5 name five rank 2",
    "SORT s BY obj_*->rank GET obj_*->name GET #",
    "SORT s BY obj_*->rank ALPHA DESC GET obj_*->name",
    "SORT s BY w_* STORE out",
    "LRANGE out 0 -1",
    "SORT s BY nosort GET obj_*->name STORE out2",
    "LRANGE out2 0 -1",
    "SORT nothing",
    "SORT nothing STORE out3",
    "EXISTS out3",
    "SET str v",
    "SORT str",
    "HSET h f v",
    "SORT h",
    "SORT s LIMIT 1",
    "SORT s FOO",
    "SORT_RO s STORE x",
    "SORT s LIMIT a b",
];

#[test]
fn sort_answers_as_redis_does() {
    common::answers_as_redis_does(SCRIPT);
}

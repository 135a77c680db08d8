use super::*;
use proptest::prelude::*;

fn header_of(v: &[u8]) -> &[u8] {
    &v[..HDR]
}

#[test]
fn a_new_hll_is_one_xzero_run_with_a_valid_cache_of_zero() {
    let v = new();
    assert_eq!(header_of(&v), b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0");
    assert_eq!(&v[HDR..], &[0x7f, 0xff]);
    assert_eq!(check(&v), Ok(Encoding::Sparse));
    assert_eq!(cached(&v), Some(0));
    assert_eq!(count(&v), Ok(0));
}

#[test]
fn murmur_hashes_tails_and_words() {
    // Every tail length goes through its own branch; equal inputs hash equal, and the
    // length is part of the hash.
    let data = b"0123456789abcdef";
    let hashes: Vec<u64> = (0..=16)
        .map(|n| murmur64a(&data[..n], 0xadc8_3b19))
        .collect();
    let mut sorted = hashes.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), hashes.len());
    assert_ne!(murmur64a(b"\0", 1), murmur64a(b"\0\0", 1));
}

#[test]
fn setting_registers_splits_runs_as_redis_does() {
    let mut v = new();
    assert_eq!(sparse::set(&mut v, 0, 3, SPARSE_MAX_BYTES), Ok(true));
    // VAL(3,1) then XZERO(16383).
    assert_eq!(&v[HDR..], &[0x80 | (2 << 2), 0x7f, 0xfe]);
    assert_eq!(sparse::set(&mut v, 0, 2, SPARSE_MAX_BYTES), Ok(false));
    assert_eq!(sparse::set(&mut v, 1, 3, SPARSE_MAX_BYTES), Ok(true));
    // The two VAL(3,1) merge into VAL(3,2).
    assert_eq!(&v[HDR..], &[0x80 | (2 << 2) | 1, 0x7f, 0xfd]);
    assert_eq!(sparse::set(&mut v, 16383, 1, SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(sparse::decode_text(&v[HDR..]), "v:3,2 Z:16381 v:1,1");
    assert_eq!(sparse::set(&mut v, 100, 5, SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(
        sparse::decode_text(&v[HDR..]),
        "v:3,2 Z:98 v:5,1 Z:16282 v:1,1"
    );
    assert_eq!(sparse::set(&mut v, 3, 5, SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(
        sparse::decode_text(&v[HDR..]),
        "v:3,2 z:1 v:5,1 Z:96 v:5,1 Z:16282 v:1,1"
    );
}

#[test]
fn a_register_past_32_or_a_full_string_promotes_to_dense() {
    let mut v = new();
    assert_eq!(sparse::set(&mut v, 7, 33, SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(check(&v), Ok(Encoding::Dense));
    assert_eq!(v.len(), DENSE_SIZE);
    assert_eq!(registers(&v).unwrap()[7], 33);
    let mut v = new();
    let mut i = 0;
    while check(&v) == Ok(Encoding::Sparse) {
        assert!(v.len() <= 40);
        set_register(&mut v, i, 1, 40).unwrap();
        i += 7;
    }
    let regs = registers(&v).unwrap();
    assert!((0..i).step_by(7).all(|j| regs[j] == 1));
}

#[test]
fn the_cache_is_stale_after_a_change_and_the_dense_copy_keeps_it() {
    let mut v = new();
    assert_eq!(add(&mut v, b"a", SPARSE_MAX_BYTES), Ok(true));
    assert_eq!(cached(&v), None);
    set_cached(&mut v, 1);
    assert_eq!(cached(&v), Some(1));
    assert_eq!(add(&mut v, b"a", SPARSE_MAX_BYTES), Ok(false));
    assert_eq!(cached(&v), Some(1));
    assert_eq!(to_dense(&mut v), Ok(true));
    assert_eq!(cached(&v), Some(1));
    assert_eq!(to_dense(&mut v), Ok(false));
}

#[test]
fn counts_are_close_and_sparse_agrees_with_dense() {
    let mut s = new();
    let mut d = new();
    to_dense(&mut d).unwrap();
    for i in 0..20_000u32 {
        add(&mut s, &i.to_le_bytes(), SPARSE_MAX_BYTES).unwrap();
        add(&mut d, &i.to_le_bytes(), SPARSE_MAX_BYTES).unwrap();
        if i % 997 == 0 {
            assert_eq!(count(&s), count(&d));
        }
    }
    let c = count(&d).unwrap() as f64;
    assert!((c - 20_000.0).abs() < 20_000.0 * 0.05, "{c}");
    assert_eq!(selftest(0x1234_5678_9abc_def0, SPARSE_MAX_BYTES), Ok(()));
}

#[test]
fn bad_strings_are_refused_as_redis_refuses_them() {
    assert_eq!(check(b"HYLL"), Err(Invalid::NotHll));
    let mut v = new();
    v[0] = b'h';
    assert_eq!(count(&v), Err(Invalid::NotHll));
    let mut v = new();
    v[4] = 2;
    assert_eq!(count(&v), Err(Invalid::NotHll));
    let mut v = new();
    v[4] = 0; // dense of the wrong length
    assert_eq!(count(&v), Err(Invalid::NotHll));
    let mut v = new();
    v.extend_from_slice(b"hello"); // runs past the registers
    assert_eq!(count(&v), Err(Invalid::Corrupt));
    assert_eq!(to_dense(&mut v), Err(Invalid::Corrupt));
}

proptest! {
    #[test]
    fn sparse_sets_match_a_plain_array(
        sets in prop::collection::vec((0usize..REGISTERS, 1u8..=40), 0..400),
        max in prop::sample::select(vec![30usize, 300, 3000]),
    ) {
        let mut v = new();
        let mut model = [0u8; REGISTERS];
        for (i, c) in sets {
            if check(&v).unwrap() == Encoding::Sparse {
                prop_assert_eq!(sparse::get(&v[HDR..], i), Some(model[i]));
            }
            let changed = set_register(&mut v, i, c, max).unwrap();
            prop_assert_eq!(changed, model[i] < c);
            model[i] = model[i].max(c);
            if check(&v).unwrap() == Encoding::Sparse {
                prop_assert!(v.len() <= max.max(HDR + 2));
            }
        }
        prop_assert_eq!(&registers(&v).unwrap()[..], &model[..]);
        prop_assert_eq!(count(&v).unwrap(), count_registers(&model));
    }

    #[test]
    fn would_change_predicts_add(elements in prop::collection::vec(any::<u32>(), 0..300)) {
        let mut v = new();
        for e in elements {
            let e = e.to_le_bytes();
            let predicted = would_change(&v, &e).unwrap();
            prop_assert_eq!(add(&mut v, &e, SPARSE_MAX_BYTES).unwrap(), predicted);
        }
    }

    #[test]
    fn any_bytes_after_a_header_never_panic(
        enc in 0u8..3,
        body in prop::collection::vec(any::<u8>(), 0..64),
        i in 0usize..REGISTERS,
    ) {
        let mut v = b"HYLL\0\0\0\0\0\0\0\0\0\0\0\0".to_vec();
        v[4] = enc;
        v.extend_from_slice(&body);
        let _ = count(&v);
        let _ = registers(&v);
        let _ = sparse::decode_text(&v[HDR..]);
        let mut w = v.clone();
        let _ = set_register(&mut w, i, 5, 100);
        let _ = to_dense(&mut v);
    }
}

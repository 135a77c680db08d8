//! PFSELFTEST: the dense registers' bit packing against plain bytes, and the estimate's
//! error at cardinalities 1, 10, … 1,000,000 with a sparse and a dense HLL fed the same
//! elements (Redis's test runs on to 10 million; the error bound is the same).

use super::{
    add, count, dense_get, dense_set, new, to_dense, Encoding, DENSE_SIZE, HDR, REGISTERS,
    REGISTER_MAX,
};

/// Runs the self test with `seed` (`sparse_max`: `hll-sparse-max-bytes`): `Err` with
/// Redis's `TESTFAILED …` text.
pub fn selftest(seed: u64, sparse_max: usize) -> Result<(), String> {
    bit_packing(seed)?;
    estimates(seed, sparse_max)
}

/// A xorshift generator: the test's values, repeatable from the seed.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn bit_packing(seed: u64) -> Result<(), String> {
    let mut rng = seed | 1;
    let mut regs = vec![0u8; DENSE_SIZE - HDR];
    let mut plain = vec![0u8; REGISTERS];
    for _ in 0..100 {
        for (i, p) in plain.iter_mut().enumerate() {
            *p = (next(&mut rng) % u64::from(REGISTER_MAX + 1)) as u8;
            dense_set(&mut regs, i, *p);
        }
        for (i, &p) in plain.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != p {
                return Err(format!(
                    "TESTFAILED Register error, {got} != {p} at register {i}"
                ));
            }
        }
    }
    Ok(())
}

fn estimates(seed: u64, sparse_max: usize) -> Result<(), String> {
    let mut dense = new();
    to_dense(&mut dense).map_err(|e| e.text().to_string())?;
    let mut sparse = new();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    for j in 1..=1_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let failed = |e: super::Invalid| e.text().to_string();
        add(&mut dense, &ele, sparse_max).map_err(failed)?;
        add(&mut sparse, &ele, sparse_max).map_err(failed)?;
        if j != checkpoint {
            continue;
        }
        if (j as usize) < sparse_max / 2 && super::check(&sparse) != Ok(Encoding::Sparse) {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count(&dense).map_err(failed)?;
        if count(&sparse).map_err(failed)? != card {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = checkpoint.abs_diff(card);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

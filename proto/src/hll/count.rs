//! An HLL's cardinality: the registers' histogram and Ertl's estimator ("New cardinality
//! estimation algorithms for HyperLogLog sketches", arXiv:1702.01284), as Redis 7
//! computes it (`hllCount`), so both answer the same number for the same registers.

use super::{check, dense_get, sparse, Encoding, Invalid, HDR, Q, REGISTERS};

/// Every register's value, one byte each (PFCOUNT's and PFMERGE's union).
pub type Registers = [u8; REGISTERS];

/// The cardinality of an HLL string, ignoring its cache.
pub fn count(v: &[u8]) -> Result<u64, Invalid> {
    let mut histo = [0u32; 64];
    match check(v)? {
        Encoding::Dense => {
            let regs = &v[HDR..];
            for i in 0..REGISTERS {
                histo[usize::from(dense_get(regs, i))] += 1;
            }
        }
        Encoding::Sparse => sparse::histogram(&v[HDR..], &mut histo)?,
    }
    Ok(estimate(&histo))
}

/// The cardinality of raw registers (a union's).
pub fn count_registers(regs: &Registers) -> u64 {
    let mut histo = [0u32; 64];
    for &r in regs {
        histo[usize::from(r & 63)] += 1;
    }
    estimate(&histo)
}

fn estimate(histo: &[u32; 64]) -> u64 {
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTERS as f64;
    let q = Q as usize;
    let mut z = m * tau((m - f64::from(histo[q + 1])) / m);
    for j in (1..=q).rev() {
        z += f64::from(histo[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histo[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let prev = z;
        z += x * y;
        y += y;
        if prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let prev = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if prev == z {
            return z / 3.0;
        }
    }
}

//! Fuzz target for Redis's HyperLogLog format (accelkv-proto's `hll`, docs/FORMAT.md
//! "HyperLogLog"): any string a user could have written with SET or SETRANGE goes through
//! the checks, the count, the conversion to dense, the register walk and PFADD's register
//! update. Nothing may panic; a sparse HLL that counts converts to dense with the same
//! registers and count; an update leaves a valid HLL whose registers are the old ones
//! raised at one place.
//!
//! `cargo +nightly fuzz run hll -- -max_total_time=60`

#![no_main]

use accelkv_proto::hll::{self, Encoding};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&op, v)) = data.split_first() else {
        return;
    };
    // Half the inputs get a valid header, so the bodies are reached.
    let mut v = if op & 1 == 1 && v.len() >= 16 {
        let mut h = b"HYLL".to_vec();
        h.push((op >> 1) & 1);
        h.extend_from_slice(&v[5..]);
        h
    } else {
        v.to_vec()
    };
    let _ = hll::sparse::decode_text(v.get(hll::HDR..).unwrap_or(&[]));
    let counted = hll::count(&v);
    let regs = hll::registers(&v);
    if let (Ok(n), Ok(regs)) = (counted, &regs) {
        assert_eq!(n, hll::count_registers(regs));
        let mut dense = v.clone();
        assert!(hll::to_dense(&mut dense).is_ok());
        assert_eq!(hll::check(&dense), Ok(Encoding::Dense));
        assert_eq!(hll::count(&dense), Ok(n));
        assert_eq!(hll::registers(&dense).as_deref(), Ok(&**regs));
    }
    let index = usize::from(op) * 64 % hll::REGISTERS;
    let count = (op >> 2) % 52 + 1;
    match regs {
        Ok(before) => {
            let changed = hll::set_register(&mut v, index, count, 300);
            let changed = changed.expect("a valid HLL takes an update");
            let mut want = *before;
            assert_eq!(changed, want[index] < count);
            want[index] = want[index].max(count);
            assert_eq!(hll::registers(&v).as_deref(), Ok(&want));
        }
        Err(_) => {
            let _ = hll::set_register(&mut v, index, count, 300);
        }
    }
});

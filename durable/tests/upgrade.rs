//! Page files written by every earlier format version open in this build: the fixtures in
//! `tests/fixtures/` were written by the builds that wrote formats 1 to 4 (how: the
//! fixtures' README), each holding the same data set (small and extension values,
//! overwrites, deletes; deadlines from format 3, client flags from format 4). Each must
//! open with exactly that data, be upgraded to the current format, take new writes, and
//! reopen with everything.

use accelkv_durable::fault::FaultStorage;
use accelkv_durable::format::{decode_super, FORMAT_VERSION};
use accelkv_durable::{Store, SyncPolicy};
use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

mod common;

/// The deadline the fixtures give their expiring keys: 2100-01-01.
const DEADLINE: u64 = 4_102_444_800_000;

/// An item as the fixture generator wrote it: value, deadline, client flags.
type Item = (Vec<u8>, u64, u32);

/// What the generator (tests/fixtures/gen_fixture.py) wrote into a file of format `v`.
fn model(v: u32) -> BTreeMap<Vec<u8>, Item> {
    let mut m = BTreeMap::new();
    for i in 0..400u32 {
        let unit = format!("v{i}-");
        let n = if i % 13 == 0 { 3000 } else { 24 };
        let mut value: Vec<u8> = unit.bytes().cycle().take(n).collect();
        if i % 5 == 0 {
            value = format!("second-{i}").into_bytes();
        }
        if i % 17 != 0 {
            m.insert(format!("key{i:04}").into_bytes(), (value, 0, 0));
        }
    }
    if v >= 3 {
        for i in 0..20u32 {
            let k = format!("exp{i:02}").into_bytes();
            m.insert(k, (b"until 2100".to_vec(), DEADLINE, 0));
        }
    }
    if v >= 4 {
        for i in 0..20u32 {
            m.insert(
                format!("flag{i:02}").into_bytes(),
                (b"flagged".to_vec(), 0, i + 1),
            );
        }
    }
    m
}

fn fixture(v: u32) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/format-v{v}.pages.gz",
        env!("CARGO_MANIFEST_DIR")
    );
    let gz = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut img = Vec::new();
    flate2::read::GzDecoder::new(gz.as_slice())
        .read_to_end(&mut img)
        .unwrap();
    img
}

/// Every item of `s` with its deadline and flags.
fn contents(s: &Store) -> BTreeMap<Vec<u8>, Item> {
    s.scan(b"", None, usize::MAX)
        .into_iter()
        .map(|(k, _)| {
            let item = s.tree().get_item_with(&k, 0, |v, d, f| (v.to_vec(), d, f));
            (k, item.unwrap().unwrap())
        })
        .collect()
}

fn open(img: Vec<u8>) -> (Arc<FaultStorage>, Store) {
    let dev = Arc::new(FaultStorage::from_image(img));
    let s = Store::open_storage(dev.clone(), common::test_options(SyncPolicy::Sync)).unwrap();
    (dev, s)
}

#[test]
fn files_of_every_older_format_open_upgrade_and_take_writes() {
    for v in 1..FORMAT_VERSION {
        let img = fixture(v);
        assert_eq!(
            decode_super(&img[..4096]).unwrap().version,
            v,
            "fixture {v}"
        );
        let mut want = model(v);
        let (dev, s) = open(img);
        let rep = s.recovery().clone();
        assert_eq!(contents(&s), want, "format {v}: {rep}");
        assert_eq!(rep.lease == 0, v < 5, "format {v}: clock pages came in 5");
        assert_eq!(rep.commit == 0, v == 1, "format {v}: {rep}");
        assert!(
            rep.ext_pages > 0 && rep.torn_pages == 0,
            "format {v}: {rep}"
        );
        let sup = decode_super(&dev.durable_image()[..4096]).unwrap();
        assert_eq!(
            sup.version, FORMAT_VERSION,
            "format {v} upgraded when opened"
        );
        // New writes on the upgraded file, in every shape the old data has.
        let mut last = 0;
        for i in 0..60u32 {
            let k = format!("key{:04}", i * 7).into_bytes();
            let big = i % 4 == 0;
            let value = if big {
                vec![b'n'; 5000]
            } else {
                b"new".to_vec()
            };
            last = s.put(&k, &value).unwrap().version;
            want.insert(k, (value, 0, 0));
        }
        s.delete(b"key0001").unwrap();
        want.remove(&b"key0001"[..]);
        assert!(last > rep.version, "format {v}");
        drop(s);
        let (_, again) = open(dev.durable_image());
        assert_eq!(contents(&again), want, "format {v} reopened");
        assert!(again.recovery().lease > last, "{}", again.recovery());
        assert!(again.put(b"after", b"x").unwrap().version > again.recovery().lease);
    }
}

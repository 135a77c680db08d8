//! The batch layout shared with the kernels (gpu/kernels/akv_batch.h): request descriptors,
//! the key area, per-request output areas, and decoding of what a kernel wrote back into
//! replies — or into a continuation when a request ran out of output room.
//!
//! Pure host logic: no device, unit tested here.

use accelkv_engine::{Items, Reply, Request};

pub(crate) const GET: u8 = 0;
pub(crate) const SCAN: u8 = 1;
pub(crate) const SCAN_FLOOR: u8 = 2;
pub(crate) const HAS_HI: u8 = 1;
pub(crate) const LO_EXCL: u8 = 2;
pub(crate) const HI_INCL: u8 = 4;

/// Status words of an output area.
pub(crate) const OK: u32 = 0;
pub(crate) const TRUNCATED: u32 = 1;
pub(crate) const BAD_NODE: u32 = 2;

/// Bytes of the output header (`struct akv_out`).
pub(crate) const OUT_HEADER: usize = 16;
/// Bytes of an item header in an output area.
pub(crate) const ITEM_HEADER: usize = 8;
/// Most output bytes a scan reserves per launch; longer scans continue in the next one.
const SCAN_CAP: usize = 64 << 10;

/// `struct akv_req` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Req {
    pub rv: u64,
    pub key_off: u32,
    pub key_len: u16,
    pub kind: u8,
    pub flags: u8,
    pub hi_off: u32,
    pub hi_len: u16,
    pub pad0: u16,
    pub limit: u32,
    pub out_off: u32,
    pub out_cap: u32,
    pub pad1: u32,
    /// The reader's clock (ms since the Unix epoch): items whose deadline is before it are
    /// absent.
    pub now: u64,
}
const _: () = assert!(std::mem::size_of::<Req>() == 48);

/// What a request still has to do: the original request, or a scan's remainder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Work {
    pub req: Request,
    pub rv: u64,
    pub now: u64,
    /// A scan continuing after this key (exclusive), with these items already found.
    pub after: Option<Vec<u8>>,
    pub found: Items,
}

impl Work {
    pub(crate) fn new(req: Request, rv: u64, now: u64) -> Work {
        Work {
            req,
            rv,
            now,
            after: None,
            found: Items::default(),
        }
    }

    /// Items the scan may still return.
    fn remaining(&self) -> usize {
        match &self.req {
            Request::Scan { limit, .. } | Request::ScanFloor { limit, .. } => {
                limit - self.found.len()
            }
            Request::Get { .. } => 1,
        }
    }
}

/// A batch laid out for a launch.
pub(crate) struct Batch {
    pub reqs: Vec<Req>,
    pub keys: Vec<u8>,
    pub out_len: usize,
    /// The store's longest key and longest inline value: every output area holds one
    /// largest item, so every launch makes progress.
    max_key: usize,
    max_inline: usize,
}

impl Batch {
    pub(crate) fn new(max_key: usize, max_inline: usize) -> Batch {
        Batch {
            reqs: Vec::new(),
            keys: Vec::new(),
            out_len: 0,
            max_key,
            max_inline,
        }
    }

    /// Output room to reserve for `w`.
    fn out_cap(&self, w: &Work) -> usize {
        let one = OUT_HEADER + ITEM_HEADER + 8 + self.max_key + self.max_inline;
        match &w.req {
            Request::Get { key } => OUT_HEADER + ITEM_HEADER + 8 + key.len() + self.max_inline,
            Request::Scan { lo, limit, .. } | Request::ScanFloor { kl: lo, limit, .. } => {
                let per = ITEM_HEADER + 8 + 2 * lo.len().max(16) + 16;
                (OUT_HEADER + per * (*limit).min(64)).clamp(one, SCAN_CAP.max(one))
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        self.reqs.clear();
        self.keys.clear();
        self.out_len = 0;
    }

    fn key(&mut self, k: &[u8]) -> (u32, u16) {
        let off = self.keys.len() as u32;
        self.keys.extend_from_slice(k);
        (off, k.len() as u16)
    }

    /// Appends `w` and reserves its output area.
    pub(crate) fn push(&mut self, w: &Work) {
        let cap = self.out_cap(w);
        let mut r = Req {
            rv: w.rv,
            now: w.now,
            out_off: self.out_len as u32,
            out_cap: cap as u32,
            ..Req::default()
        };
        match (&w.req, &w.after) {
            (Request::Get { key }, _) => {
                r.kind = GET;
                (r.key_off, r.key_len) = self.key(key);
            }
            (Request::Scan { lo, hi, .. }, after) => {
                r.kind = SCAN;
                (r.key_off, r.key_len) = self.key(after.as_deref().unwrap_or(lo));
                if after.is_some() {
                    r.flags |= LO_EXCL;
                }
                if let Some(hi) = hi {
                    r.flags |= HAS_HI;
                    (r.hi_off, r.hi_len) = self.key(hi);
                }
                r.limit = w.remaining() as u32;
            }
            (Request::ScanFloor { kl, ku, .. }, None) => {
                r.kind = SCAN_FLOOR;
                (r.key_off, r.key_len) = self.key(kl);
                (r.hi_off, r.hi_len) = self.key(ku);
                r.limit = w.remaining() as u32;
            }
            // A SCAN_FLOOR that ran out of room continues as a plain scan through ku.
            (Request::ScanFloor { ku, .. }, Some(after)) => {
                r.kind = SCAN;
                r.flags = LO_EXCL | HAS_HI | HI_INCL;
                (r.key_off, r.key_len) = self.key(after);
                (r.hi_off, r.hi_len) = self.key(ku);
                r.limit = w.remaining() as u32;
            }
        }
        // Output areas start 8-byte aligned (the header is read as words).
        self.out_len += cap.next_multiple_of(8);
        self.reqs.push(r);
    }

    /// The request descriptors as bytes, for a copy to the device.
    pub(crate) fn req_bytes(&self) -> &[u8] {
        // SAFETY: `Req` is repr(C), 40 bytes with no padding (asserted), plain integers.
        unsafe {
            std::slice::from_raw_parts(
                self.reqs.as_ptr() as *const u8,
                self.reqs.len() * std::mem::size_of::<Req>(),
            )
        }
    }
}

/// An item a kernel returned: its value inline, or an out-of-line handle for the host to
/// resolve.
pub(crate) enum Value<'a> {
    Inline(&'a [u8]),
    OutOfLine { handle: u64, len: u32 },
}

/// What became of one request after a launch.
pub(crate) enum Outcome {
    /// Finished.
    Done(Reply),
    /// Out of room: run `Work` again.
    Again,
    /// A node did not check; the host must answer it another way.
    BadNode,
}

/// Malformed output (a kernel wrote past its area): never expected, reported as a bad node.
fn items<'a>(area: &'a [u8], count: usize) -> Option<Vec<(&'a [u8], Value<'a>)>> {
    let mut out = Vec::with_capacity(count);
    let mut at = 0usize;
    for _ in 0..count {
        let h = area.get(at..at + ITEM_HEADER)?;
        let klen = usize::from(u16::from_le_bytes([h[0], h[1]]));
        let tag = h[2];
        let vlen = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        at += ITEM_HEADER;
        let v = if tag == 1 {
            let b = area.get(at..at + 8)?;
            at += 8;
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            Some(u64::from_le_bytes(a))
        } else {
            None
        };
        let key = area.get(at..at + klen)?;
        at += klen;
        let value = match v {
            Some(handle) => Value::OutOfLine { handle, len: vlen },
            None => {
                let b = area.get(at..at + vlen as usize)?;
                at += vlen as usize;
                Value::Inline(b)
            }
        };
        out.push((key, value));
    }
    Some(out)
}

fn word(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Reads request `r`'s output area from `out`, updating `w`; `resolve` copies out-of-line
/// values (while the batch's epoch still protects them). Returns the outcome and the bytes
/// the kernel read from host memory for it.
pub(crate) fn decode(
    w: &mut Work,
    r: &Req,
    out: &[u8],
    resolve: &mut dyn FnMut(u64, u32) -> Vec<u8>,
) -> (Outcome, u64) {
    let Some(area) = out.get(r.out_off as usize..(r.out_off + r.out_cap) as usize) else {
        return (Outcome::BadNode, 0);
    };
    let (status, count, bytes, fetched) = (
        word(area, 0),
        word(area, 4) as usize,
        word(area, 8) as usize,
        u64::from(word(area, 12)),
    );
    let body = &area[OUT_HEADER..];
    let Some(found) = (bytes <= body.len())
        .then(|| items(&body[..bytes], count))
        .flatten()
    else {
        return (Outcome::BadNode, fetched);
    };
    if status == BAD_NODE {
        return (Outcome::BadNode, fetched);
    }
    let mut value = |v: &Value<'_>| match v {
        Value::Inline(b) => b.to_vec(),
        Value::OutOfLine { handle, len } => resolve(*handle, *len),
    };
    if let Request::Get { .. } = w.req {
        return match (status, found.first()) {
            (OK, f) => (
                Outcome::Done(Reply::Value(f.map(|(_, v)| value(v)))),
                fetched,
            ),
            // Every area holds one largest item, so a GET never runs out of room: what the
            // kernel wrote does not make sense.
            _ => (Outcome::BadNode, fetched),
        };
    }
    for (k, v) in &found {
        let v = value(v);
        w.found.push(k, &v);
    }
    match status {
        TRUNCATED if w.remaining() > 0 => match found.last() {
            Some((k, _)) => {
                w.after = Some(k.to_vec());
                (Outcome::Again, fetched)
            }
            // Out of room before one item, though every area holds one largest item.
            None => (Outcome::BadNode, fetched),
        },
        _ => (
            Outcome::Done(Reply::Items(std::mem::take(&mut w.found))),
            fetched,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn area(status: u32, items: &[(&[u8], &[u8])], ool: Option<(u64, u32)>) -> Vec<u8> {
        let mut body = Vec::new();
        for (k, v) in items {
            body.extend_from_slice(&(k.len() as u16).to_le_bytes());
            body.push(0);
            body.push(0);
            body.extend_from_slice(&(v.len() as u32).to_le_bytes());
            body.extend_from_slice(k);
            body.extend_from_slice(v);
        }
        if let Some((h, len)) = ool {
            body.extend_from_slice(&3u16.to_le_bytes());
            body.push(1);
            body.push(0);
            body.extend_from_slice(&len.to_le_bytes());
            body.extend_from_slice(&h.to_le_bytes());
            body.extend_from_slice(b"ool");
        }
        let count = items.len() as u32 + u32::from(ool.is_some());
        let mut a = Vec::new();
        for x in [status, count, body.len() as u32, 99] {
            a.extend_from_slice(&x.to_le_bytes());
        }
        a.extend_from_slice(&body);
        a
    }

    fn one(w: &Work, a: &[u8]) -> (Batch, Vec<u8>) {
        let mut b = Batch::new(460, 469);
        b.push(w);
        let mut out = vec![0u8; b.out_len];
        out[..a.len()].copy_from_slice(a);
        (b, out)
    }

    #[test]
    fn layout_of_requests() {
        let mut b = Batch::new(460, 469);
        b.push(&Work::new(Request::get(b"k1"), 5, 1));
        b.push(&Work::new(Request::scan(b"a", Some(b"z"), 4), 6, 1));
        b.push(&Work::new(Request::scan_floor(b"m", b"q", 3), 7, 1));
        assert_eq!(b.keys, b"k1azmq");
        let r = &b.reqs;
        assert_eq!(
            (r[0].kind, r[0].key_off, r[0].key_len, r[0].rv),
            (GET, 0, 2, 5)
        );
        assert_eq!(
            (r[1].kind, r[1].flags, r[1].hi_off, r[1].limit),
            (SCAN, HAS_HI, 3, 4)
        );
        assert_eq!(
            (r[2].kind, r[2].hi_off, r[2].hi_len, r[2].limit),
            (SCAN_FLOOR, 5, 1, 3)
        );
        // Areas are disjoint, in order, 8-byte aligned, and hold at least one largest item.
        for w in r.windows(2) {
            assert!(w[0].out_off + w[0].out_cap <= w[1].out_off);
            assert_eq!(w[1].out_off % 8, 0);
        }
        assert!(r[1].out_cap as usize >= OUT_HEADER + ITEM_HEADER + 8 + 460 + 469);
        assert_eq!(b.req_bytes().len(), 144);
        assert_eq!(&b.req_bytes()[0..8], &5u64.to_le_bytes());
        // The reader's clock is the last field.
        assert_eq!(&b.req_bytes()[40..48], &1u64.to_le_bytes());
    }

    #[test]
    fn get_outcomes() {
        let mut w = Work::new(Request::get(b"k"), 1, 1);
        let (b, out) = one(&w, &area(OK, &[(b"k", b"v")], None));
        let (o, fetched) = decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!());
        assert!(matches!(o, Outcome::Done(Reply::Value(Some(ref v))) if v == b"v"));
        assert_eq!(fetched, 99);
        let (b, out) = one(&w, &area(OK, &[], None));
        let (o, _) = decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!());
        assert!(matches!(o, Outcome::Done(Reply::Value(None))));
        // A GET out of room cannot happen (its area holds the largest value): the output is
        // not trusted and the host answers instead, rather than retrying with more room.
        let (b, out) = one(&w, &area(TRUNCATED, &[], None));
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::BadNode
        ));
        let (b, out) = one(&w, &area(BAD_NODE, &[], None));
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::BadNode
        ));
    }

    #[test]
    fn scans_continue_after_the_last_key_and_resolve_out_of_line_values() {
        let mut w = Work::new(Request::scan_floor(b"c", b"z", 4), 9, 1);
        let (b, out) = one(&w, &area(TRUNCATED, &[(b"b", b"1"), (b"c", b"2")], None));
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::Again
        ));
        assert_eq!(w.after.as_deref(), Some(&b"c"[..]));
        // The continuation is a plain scan after "c" through "z", for the 2 items left.
        let mut b = Batch::new(460, 469);
        b.push(&w);
        let r = b.reqs[0];
        assert_eq!(
            (r.kind, r.flags, r.limit),
            (SCAN, LO_EXCL | HAS_HI | HI_INCL, 2)
        );
        assert_eq!(&b.keys, b"cz");
        let (b, out) = one(&w, &area(OK, &[(b"d", b"3")], Some((0xfeed, 7))));
        let (o, _) = decode(&mut w, &b.reqs[0], &out, &mut |h, len| {
            assert_eq!((h, len), (0xfeed, 7));
            b"seven!!".to_vec()
        });
        let Outcome::Done(Reply::Items(items)) = o else {
            panic!("not done")
        };
        let got: Vec<_> = items.to_vec();
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], (b"ool".to_vec(), b"seven!!".to_vec()));
    }

    #[test]
    fn malformed_output_is_a_bad_node_not_a_panic() {
        let mut w = Work::new(Request::scan(b"a", None, 4), 1, 1);
        // Out of room before a single item, though the area holds the largest one.
        let (b, out) = one(&w, &area(TRUNCATED, &[], None));
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::BadNode
        ));
        let mut a = area(OK, &[(b"k", b"v")], None);
        a[4] = 9; // claims nine items
        let (b, out) = one(&w, &a);
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::BadNode
        ));
        let mut a = area(OK, &[(b"k", b"v")], None);
        a[8] = 0xff; // more bytes than the area
        a[9] = 0xff;
        let (b, out) = one(&w, &a);
        assert!(matches!(
            decode(&mut w, &b.reqs[0], &out, &mut |_, _| unreachable!()).0,
            Outcome::BadNode
        ));
    }
}

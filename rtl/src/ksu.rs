//! The simulated key search unit (`sv/ksu.sv` through Verilator and `csrc/ksu_ffi.cpp`).

use std::ffi::c_void;

#[repr(C)]
#[derive(Default)]
struct RawAnswer {
    status: u32,
    value_off: u32,
    next: u64,
    cycles: u32,
}

/// One model's C ABI (csrc/ksu_ffi.cpp's `KSU_ABI`).
struct Abi {
    new: unsafe extern "C" fn() -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    load_node: unsafe extern "C" fn(*mut c_void, *const u8, usize),
    load_key: unsafe extern "C" fn(*mut c_void, *const u8, usize),
    search: unsafe extern "C" fn(*mut c_void, u32, u64, u64, u64, *mut RawAnswer) -> i32,
}

/// Declares a model's C functions and its [`Abi`].
macro_rules! model {
    ($abi:ident: $new:ident, $free:ident, $node:ident, $key:ident, $search:ident) => {
        extern "C" {
            fn $new() -> *mut c_void;
            fn $free(h: *mut c_void);
            fn $node(h: *mut c_void, node: *const u8, len: usize);
            fn $key(h: *mut c_void, key: *const u8, len: usize);
            fn $search(
                h: *mut c_void,
                key_len: u32,
                rv: u64,
                now: u64,
                max_cycles: u64,
                out: *mut RawAnswer,
            ) -> i32;
        }
        static $abi: Abi = Abi {
            new: $new,
            free: $free,
            load_node: $node,
            load_key: $key,
            search: $search,
        };
    };
}

model!(FULL: ksu_new, ksu_free, ksu_load_node, ksu_load_key, ksu_search);
model!(SHORT: ksu64_new, ksu64_free, ksu64_load_node, ksu64_load_key, ksu64_search);

/// What the unit answered for one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// A leaf without a visible value for the key (absent, deleted, expired, newer than the
    /// read version).
    NotFound,
    /// A leaf's visible value: the node offset of its value header (FORMAT.md `value`).
    Value(usize),
    /// An interior node: the child LID the key routes to.
    Child(u64),
    /// The header does not describe a node the unit can search.
    BadNode,
    /// The node is newer than the read version: search its previous version, at this arena
    /// offset, instead.
    Older(u64),
}

/// An answer and the cycles from `start` to `done`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Search {
    pub answer: Answer,
    pub cycles: u32,
}

/// One simulated key search unit (a Verilator model: one thread at a time).
pub struct Ksu {
    h: *mut c_void,
    abi: &'static Abi,
}

// SAFETY: the model is owned by this value and only reached through `&mut self`; Verilator
// models may move between threads when not used concurrently.
unsafe impl Send for Ksu {}

impl Default for Ksu {
    fn default() -> Self {
        Ksu::new()
    }
}

impl Ksu {
    /// A unit out of reset, with the default parameters (keys up to 512 bytes).
    pub fn new() -> Ksu {
        Ksu::of(&FULL)
    }

    /// A unit built with `KEY_BYTES = 64`, the configuration `rtl/synth/ksu.sh` places and
    /// routes: a longer key answers [`Answer::BadNode`].
    pub fn short_keys() -> Ksu {
        Ksu::of(&SHORT)
    }

    fn of(abi: &'static Abi) -> Ksu {
        // SAFETY: plain constructor; the handle is freed once, in Drop, by the same model.
        Ksu {
            h: unsafe { (abi.new)() },
            abi,
        }
    }

    /// Searches `node` (its published bytes: at least up to its `used`, at most 64 KiB) for
    /// `key` (1–460 bytes) at read version `rv` and clock `now` (0: expire nothing). `None`
    /// when the unit did not answer within a million cycles (a bug, never a valid answer).
    pub fn search(&mut self, node: &[u8], key: &[u8], rv: u64, now: u64) -> Option<Search> {
        assert!(node.len() <= 65536 && !key.is_empty() && key.len() <= 460);
        let mut out = RawAnswer::default();
        // SAFETY: the pointers are valid for the lengths given; the model copies the bytes.
        let rc = unsafe {
            (self.abi.load_node)(self.h, node.as_ptr(), node.len());
            (self.abi.load_key)(self.h, key.as_ptr(), key.len());
            (self.abi.search)(self.h, key.len() as u32, rv, now, 1_000_000, &mut out)
        };
        if rc != 0 {
            return None;
        }
        let answer = match out.status {
            0 => Answer::NotFound,
            1 => Answer::Value(out.value_off as usize),
            2 => Answer::Child(out.next),
            4 => Answer::Older(out.next),
            _ => Answer::BadNode,
        };
        Some(Search {
            answer,
            cycles: out.cycles,
        })
    }
}

impl Drop for Ksu {
    fn drop(&mut self) {
        // SAFETY: created by this model's constructor, freed once.
        unsafe { (self.abi.free)(self.h) }
    }
}

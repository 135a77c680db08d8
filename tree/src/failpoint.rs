//! Test-only pauses at named points of the write path (feature `failpoints`, off in every
//! other build): a test installs a hook that runs on the writing thread when it reaches a
//! point, so it can hold a writer exactly there while it races another operation against
//! it. Without the feature `hit` is empty and compiles to nothing (raft-engine's
//! `tests/failpoints/` is the model).

/// The fast path has appended and unlocked its leaf; the write is not complete yet (its
/// version is not visible) and nothing after the unlock has run.
pub const WRITE_UNLOCKED: &str = "write-unlocked";

#[cfg(feature = "failpoints")]
mod imp {
    use std::sync::{Arc, RwLock};

    type Hook = Arc<dyn Fn(&'static str) + Send + Sync>;

    static HOOK: RwLock<Option<Hook>> = RwLock::new(None);

    /// Installs `hook`, called with the point's name on every thread that reaches one.
    pub fn set(hook: impl Fn(&'static str) + Send + Sync + 'static) {
        *HOOK.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hook));
    }

    /// Removes the hook.
    pub fn clear() {
        *HOOK.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(crate) fn hit(point: &'static str) {
        let hook = HOOK.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(h) = hook {
            h(point);
        }
    }
}

#[cfg(feature = "failpoints")]
pub use imp::{clear, set};

/// Runs the installed hook at `point` (nothing without the feature).
#[inline(always)]
pub(crate) fn hit(_point: &'static str) {
    #[cfg(feature = "failpoints")]
    imp::hit(_point);
}

//! Waiting for another thread: spin briefly, then yield the core (2-core machines run more
//! threads than cores, and a spinning waiter would starve the thread it waits for).

pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(0)
    }

    pub(crate) fn snooze(&mut self) {
        self.0 = self.0.saturating_add(1);
        if self.0 < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

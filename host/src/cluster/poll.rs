//! The loop every polling thread runs, and how a panic in it is caught and
//! turned into a report (the thread's name and the panic's message).

use splitkv_nic::Nanos;
use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Idle passes over a thread's components before it yields the CPU.
pub const IDLE_PASSES_BEFORE_YIELD: u32 = 16;

/// A panic caught on a polling thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caught {
    /// The thread's name.
    pub thread: String,
    /// The panic's message.
    pub message: String,
}

/// The message of a panic payload (`&str` or `String`, as `panic!` makes).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(panic payload is not a string)".to_string()
    }
}

/// Calls `pass(now)` (one pass over the thread's components; returns whether
/// any did work) until `stop` is set, passing the nanoseconds since `clock_origin`.
/// Backs off when passes find nothing to do. A panic in `pass` sets `stop`
/// (so the other threads leave promptly) and is returned as [`Caught`].
pub(crate) fn poll_until_stopped(
    thread: &str,
    clock_origin: Instant,
    stop: &AtomicBool,
    mut pass: impl FnMut(Nanos) -> bool,
) -> Result<(), Caught> {
    let run = catch_unwind(AssertUnwindSafe(|| {
        let mut idle = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let now = clock_origin.elapsed().as_nanos() as Nanos;
            if pass(now) {
                idle = 0;
            } else {
                idle += 1;
                if idle >= IDLE_PASSES_BEFORE_YIELD {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }));
    run.map_err(|payload| {
        stop.store(true, Ordering::Relaxed);
        Caught {
            thread: thread.to_string(),
            message: panic_message(payload.as_ref()),
        }
    })
}

//! The workspace's one loom shim (tokio's pattern): the synchronisation
//! primitives of splitkv's shared-memory code come from here — `std`'s atomics
//! normally, `loom`'s under `--cfg loom` — so `scripts/loom` can model-check
//! code built on [`Region`](crate::Region) (the host Robinhood table racing a
//! simulated DMA read, `host/tests/robinhood_loom.rs`) and the host's DLHT
//! (`host/tests/dlht_loom.rs`) without touching any call site.
//!
//! Downstream crates re-export this module in an internal module of their own
//! (`splitkv_host`'s `table::sync`) and take every atomic and fence from there,
//! so their fences are the ones loom sees. A crate cannot share another
//! crate's private module, hence this one is public.
//!
//! [`Ordering`] is the same type in both builds (loom re-exports `std`'s).

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicIsize, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

/// Called in retry loops that wait for another thread's short step: a spin
/// hint and a yield normally, a loom yield (so the model lets the other thread
/// run) under `--cfg loom`.
#[inline]
pub fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    {
        std::hint::spin_loop();
        std::thread::yield_now();
    }
}

/// Runs the loom model `f` with at most `preemptions` preemptions per
/// execution and at most 100,000 branches (only under `--cfg loom`): the one
/// set-up every loom test of the workspace uses.
#[cfg(loom)]
pub fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.max_branches = 100_000;
    b.check(f);
}

//! The one place splitkv's shared-memory formats get their synchronisation
//! primitives from (tokio's loom-shim pattern): `std` atomics normally,
//! `loom`'s under `--cfg loom`, so `scripts/loom` can model-check code built on
//! [`Region`](crate::Region) — the host Robinhood table racing a simulated DMA
//! read (`host/tests/robinhood_loom.rs`) — without touching any call site.
//!
//! Downstream crates that order their own accesses to a region (fences in the
//! host table's slot seqlock) import from here too, so their fences are the
//! ones loom sees.
//!
//! [`Ordering`] is the same type in both builds (loom re-exports `std`'s).

#[cfg(not(loom))]
pub use std::sync::atomic::{fence, AtomicU64, Ordering};

#[cfg(loom)]
pub use loom::sync::atomic::{fence, AtomicU64, Ordering};

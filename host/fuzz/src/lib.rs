//! Harness shared by the fuzz targets of the NIC runtime and the host worker
//! (fuzzing: bad input is refused, never a panic), and by the seed-corpus
//! generator (`examples/seed_corpus.rs`, which holds the encoders of the
//! seeds):
//!
//! - [`input`] — a cursor that turns fuzz bytes into choices, and the length-
//!   prefixed chunk framing every multi-part input uses;
//! - [`fixture`] — the small tables, host-memory images and node the targets
//!   run against, built the same way for fuzzing and for seeding.
//!
//! Only public APIs of `splitkv-layout`, `splitkv-nic` and `splitkv-host` are
//! used: the targets see what a driver or a DMA engine sees.

pub mod fixture;
pub mod input;

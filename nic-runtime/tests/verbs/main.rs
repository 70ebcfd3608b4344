//! The RDMA verbs transport without a device (none exists where CI runs):
//! the registered pool's accounting, work-request building and the
//! signalling cadence, peer descriptions parsed from text, receive checks
//! (GRH, truncation, QKey, source), and opening a device where none
//! exists. Nothing here waits; every property test has a bounded case
//! count.
#![cfg(target_os = "linux")]

mod addr;
mod device;
mod fake;
mod pool;
mod recv;
mod transport;
mod wr;

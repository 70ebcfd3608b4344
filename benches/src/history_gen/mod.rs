//! The history-recording generator (`splitkv_workloads::history_gen`,
//! re-exported here): a `TxGenerator` over list-append or register micro-op
//! transactions that records what its client saw as a Jepsen history.

pub use splitkv_workloads::history_gen::*;

#[cfg(test)]
mod tests;

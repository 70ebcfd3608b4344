//! splitkv workloads (in progress)

//! splitkv simulation driver (in progress)

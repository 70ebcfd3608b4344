//! splitkv protocol engine (in progress)

//! splitkv host side (in progress)

pub mod table;

//! splitkv host side (in progress)

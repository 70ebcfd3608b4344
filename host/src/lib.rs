//! # splitkv-host
//!
//! The host side of a splitkv node: it owns all data. Here live the Robinhood
//! host table ([`table`], Xenic §4.1.2), the host log and the workers that apply
//! it ([`log`], Xenic §4.2 step 7), the application API ([`client`], L5-style
//! rings), node assembly ([`node`]) and the local-cluster driver ([`cluster`]).
#![warn(missing_docs)]

pub mod client;
pub mod cluster;
pub mod log;
pub mod node;
pub mod table;

pub use client::{Client, ClientError};
pub use log::HostWorker;
pub use node::{build_node, Node, NodeConfig, NodeError, NODE_VALUE_BYTES_MAX};

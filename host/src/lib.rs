//! # splitkv-host
//!
//! The host side of a splitkv node: it owns all data. Here live the Robinhood
//! host table ([`table`], Xenic §4.1.2), the host log and the workers that apply
//! it ([`log`], Xenic §4.2 step 7), the application API ([`client`], L5-style
//! rings), node assembly ([`node`]) and the embedding API with its local-cluster
//! driver ([`cluster`]): `Cluster::builder()...build()` starts an in-process
//! cluster, hands each application thread a [`Client`], loads rows, reports
//! [`ClusterStats`] and shuts down into [`ClusterParts`] for checks; with
//! `observe_calls` every client reports its calls and their outcomes to a
//! [`CallObserver`] ([`observe`]), from which a Jepsen history is recorded.
#![warn(missing_docs)]

pub mod client;
pub mod cluster;
pub mod deploy;
pub mod log;
#[cfg(feature = "etcd")]
pub mod membership_etcd;
pub mod node;
pub mod observe;
pub mod table;

pub use client::{Client, ClientError, TxOutcome};
pub use cluster::{
    Cluster, ClusterBuilder, ClusterError, ClusterParts, ClusterStats, LoadError, LoadProgress,
    NodeParts, NodeStats,
};
pub use log::HostWorker;
pub use node::{build_node, Node, NodeConfig, NodeError};
pub use observe::{CallObserver, CallOutcome, CallRecord};

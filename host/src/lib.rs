//! # splitkv-host
//!
//! The host side of a splitkv node: it owns all data, and assembles the node
//! around its NIC runtime (`splitkv-nic`). Modules, in the order data flows:
//!
//! - [`table`]: the host tables the NIC runtime reads by DMA — Xenic's
//!   Robinhood table (`table/robinhood/`, Xenic §4.1.2) and Dandelion's DLHT
//!   (`table/dlht/`, Dandelion §6), behind one [`table::HostTable`];
//! - [`log`]: the host log and the [`HostWorker`] that applies it (Xenic §4.2
//!   step 7; Rowan's receiver-placed log);
//! - [`client`]: the application API over the request and outcome rings
//!   (L5 §3): [`Client`], blocking or submit-then-poll;
//! - [`observe`]: a hook that sees every call of an observed cluster's
//!   clients and its outcome ([`CallObserver`]), for recording histories;
//! - [`node`]: one node's assembly — table, log, rings, NIC runtime
//!   ([`build_node`]);
//! - [`cluster`]: the embedding API and the local-cluster driver (DESIGN.md
//!   driver 2): `Cluster::builder()...build()` starts an in-process cluster,
//!   hands each application thread a [`Client`], loads rows, reports
//!   [`ClusterStats`], restarts NIC runtimes and nodes for fault tests, and
//!   shuts down into [`ClusterParts`] for checks;
//! - [`deploy`]: one node per process — the cluster file (`deploy/config/`),
//!   the control endpoint with `/status` and Prometheus `/metrics`;
//! - `membership_etcd` (feature `etcd`): membership on etcd leases for node
//!   processes, the deployed implementation of `splitkv_nic::membership::Membership`.
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

pub use client::{Client, ClientError, ClientOutcome};
pub use cluster::{
    Cluster, ClusterBuilder, ClusterError, ClusterParts, ClusterStats, LoadError, LoadProgress,
    NodeParts, NodeStats,
};
pub use log::HostWorker;
pub use node::{build_node, Node, NodeConfig, NodeError};
pub use observe::{CallObserver, CallOutcome, CallRecord};

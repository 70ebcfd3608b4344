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
//! - [`clients`]: applications in their own processes — the node's listener
//!   on its Unix socket, the connection set-up ([`clients::attach()`]), and
//!   the gateway that runs their requests on NIC client ports of its own
//!   ([`clients::ClientService`]; `ClusterBuilder::serve_applications`);
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
//!
//! ## Implementation status
//!
//! What works today and what does not yet (moved here from the top-level
//! README; measured figures are in `benches/README.md`).
//!
//! - **Embedding API** ([`cluster`]): builder, several clients per node,
//!   load, stats, shutdown; a panic or a node fault stops the cluster.
//! - **Robinhood host table** (`table/robinhood/`, Xenic §4.1.2): D_m,
//!   segments with overflow buckets, backward-shift / overflow-swap deletes
//!   (a per-segment move sequence lets the NIC tell when a delete moved
//!   objects under its read, so it never reports a present key absent), slot
//!   seqlock, a batch API with software prefetch (used by the host log
//!   worker). Values up to 256 B live inline in the slot; longer ones (up to
//!   the node limit `VALUE_BYTES_MAX`, 4096 B) in a value heap of seqlocked
//!   blocks in the same region, which the NIC lookup follows with one more
//!   DMA read; one block size class (`value_bytes_max`). Rings and host-log
//!   entries hold a transaction of 16 values of 4 KiB (`TX_VALUES_MAX`); one
//!   packet still limits a transaction to keys × value limit ≤ MTU. A table
//!   physically full below its capacity (colliding keys) stops the node with
//!   a typed reason (`ClusterError::NodeStopped`), never acknowledging a
//!   write it could not apply; an insert past the shard's quota aborts with
//!   `TableFull` instead (`splitkv_nic`'s room rule).
//! - **DLHT host table** (`table/dlht/`, `--table dlht`): lock-free
//!   get/put/insert/delete, non-blocking resize (so it grows instead of
//!   filling), batch with prefetch, loom-checked (`scripts/loom`); the NIC
//!   reads it by DMA (bin and header re-read in one vector); values over 8 B
//!   live out of line, where the NIC cannot read them yet.
//! - **Host log and workers** ([`log`]): one log per node, applied in
//!   order, acknowledged.
//! - **Drivers**: the simulator (`splitkv-sim`), the local cluster on
//!   threads ([`cluster`]) and one node per process (`splitkv node`, driven
//!   by `splitkv bench … --cluster FILE [--spawn]`, [`deploy`]).
//! - **Node processes with etcd membership** (`membership_etcd`): a node
//!   whose lease ended is configured out by a compare-and-swap on the
//!   configuration key; the survivors recover from a SIGKILLed peer, and
//!   `splitkv bench --cluster --spawn --kill N@S` checks the whole run (the
//!   killed node's client history from its journal). A node applies each
//!   new configuration on the polling thread that runs its NIC runtime
//!   (`cluster/membership.rs`), and stops serving as soon as its own lease
//!   may have ended (exit 4). A killed process started again gets a higher
//!   incarnation from etcd, waits (joining) until its predecessor's lease
//!   ran out and the survivors configured it out, is admitted as a copying
//!   replica once it is loaded with `rejoin` (`--restart N@S` does that; by
//!   hand it is one `POST /load`: no `splitkv` subcommand or supervisor does
//!   it yet), gets every shard still short of replicas from the primaries'
//!   host tables, and is made a full replica. With more nodes than the
//!   replication degree, the configuration that leaves a node out already
//!   gives each of its shards a new backup among the survivors, and a
//!   returning node stays a spare (`host/cli/tests/cluster_new_backups.rs`).
//!   A whole cluster stopped and started again against the same etcd forms
//!   its next generation (`membership_etcd/driver/lifecycle.rs`; tested in
//!   `tests/membership_etcd/lifecycle.rs` and
//!   `cli/tests/cluster_lifecycle.rs`).
//! - **A replacement machine** (`--replace N@S`; `splitkv node
//!   --data-address --control-address`): every process publishes its data
//!   and control address (and, on RDMA verbs, its queue pair's endpoint:
//!   `deploy/verbs.rs`) under `/<prefix>/addresses/<node>` (versioned JSON,
//!   `membership_etcd/address.rs`) in the etcd transaction that takes its
//!   member key, under its lease. Each configuration a node's membership
//!   hands on carries, per member, the data address its configured
//!   incarnation published (read in the same etcd snapshot); the membership
//!   agent, on the polling thread that owns the NIC runtime and its
//!   transport, re-points the transport at any moved address before it
//!   applies that configuration (`MembershipAgent`,
//!   `Transport::set_peer_address`). The UDP transport then drops and counts
//!   what still comes from the old address (`stale_address`). A suspect
//!   report names the suspect's incarnation, so one on a restarted node's
//!   predecessor never fences the new process
//!   (`membership_etcd::keys::current_suspicions`).
//! - **Not yet**: a durable log (stopping every node loses the data); a
//!   node's first process must be at the cluster file's addresses (only a
//!   later incarnation may move: the first configuration carries no
//!   published addresses); the etcd client has no TLS.
#![warn(missing_docs)]

pub mod client;
// Out of `--cfg loom` builds (scripts/loom): its system calls and the
// client crate's set-up code exist only in real builds.
#[cfg(not(loom))]
pub mod clients;
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

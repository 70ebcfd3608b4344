//! Deploying a cluster one node per process: the cluster file every node
//! reads ([`config`]), the HTTP control endpoint each node serves on a thread
//! of its own ([`control`]), the Prometheus metrics it exposes
//! ([`metrics`]), a node's DPDK start-up and counters ([`dpdk`]), and a
//! node's RDMA verbs start-up, peer endpoints and counters ([`verbs`]).
//!
//! The node process (the `splitkv node` subcommand) ties them together: it
//! reads a [`ClusterConfig`], builds its node, implements [`ControlHandler`]
//! over it, and starts a [`ControlServer`] on its control address:
//!
//! ```no_run
//! use std::sync::Arc;
//! use serde_json::{json, Value};
//! use splitkv_host::deploy::{CallError, ClusterConfig, ControlHandler, ControlServer, NodeMetrics, Route};
//!
//! struct Node {
//!     metrics: NodeMetrics,
//! }
//!
//! impl ControlHandler for Node {
//!     fn status(&self) -> Value {
//!         json!({ "state": "running" })
//!     }
//!     fn metrics(&self, out: &mut String) {
//!         let _ = self.metrics.encode(out);
//!     }
//!     fn call(&self, route: Route, _body: &Value) -> Result<Value, CallError> {
//!         Err(CallError::BadRequest(format!("{} is not served here", route.path())))
//!     }
//! }
//!
//! let config = ClusterConfig::from_file("examples/cluster-3-udp.toml")?;
//! let me = config.node(0).expect("node 0 is configured");
//! let node = Arc::new(Node { metrics: NodeMetrics::new(config.cluster_id, me.id) });
//! let control = ControlServer::start(me.control, &config.token, node.clone())?;
//! // … run the node; the polling side calls node.metrics.update_from(&stats) …
//! control.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod config;
pub mod control;
pub mod dpdk;
pub mod metrics;
pub mod node;
pub mod published;
pub mod verbs;

pub use config::{
    ClientSettings, ClientsStart, ClusterConfig, ConfigError, DpdkSettings, LogTarget,
    MembershipSettings, Neighbour, NodeSettings, ProtocolSettings, TableSettings, TransportKind,
    TransportSettings, VerbsSettings,
};
pub use control::{CallError, ControlError, ControlHandler, ControlServer, Route};
pub use dpdk::{DpdkCounters, DpdkSnapshot};
pub use metrics::{NodeMetrics, SessionCounters};
pub use node::{
    incarnation_now, node_builder, node_transport, node_transport_counted, NodeSetupError,
    NodeTransport,
};
pub use published::Published;
pub use verbs::{VerbsCounters, VerbsLink, VerbsPeers, VerbsSnapshot};

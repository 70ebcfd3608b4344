//! Deploying a cluster one node per process: the cluster file every node
//! reads ([`config`]), the HTTP control endpoint each node serves on a thread
//! of its own ([`control`]), and the Prometheus metrics it exposes
//! ([`metrics`]).
//!
//! The node process (the `splitkv node` subcommand) ties them together: it
//! reads a [`ClusterConfig`], builds its node, implements [`ControlHandler`]
//! over it, and starts a [`ControlServer`] on its control address.

pub mod config;
pub mod control;
pub mod metrics;

pub use config::{
    ClusterConfig, ConfigError, LogTarget, NodeSettings, ProtocolSettings, TableSettings,
    TransportKind, TransportSettings,
};
pub use control::{CallError, ControlError, ControlHandler, ControlServer, Route};
pub use metrics::{NodeMetrics, SessionCounters};

//! A node process's view of its cluster file (DESIGN.md driver 3, one node
//! per process): the builder that makes its node as the in-process cluster
//! would ([`node_builder`], then
//! [`ClusterBuilder::build_local_parts`]), the transport it sends with
//! ([`node_transport`]: UDP from the data addresses, DPDK from the file's
//! `[transport] kind = "dpdk"` fields ([`super::dpdk`], cargo feature
//! `dpdk`), or RDMA verbs from `kind = "verbs"` ([`super::verbs`], cargo
//! feature `verbs`), wrapped in the fault-injecting transport when the file asks for
//! injected faults), and its incarnation ([`incarnation_now`]).

use super::config::{ClusterConfig, TransportKind};
use super::dpdk::DpdkCounters;
use super::verbs::VerbsLink;
use crate::cluster::{Cluster, ClusterBuilder};
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::faulty::{FaultConfig, FaultError, FaultyTransport};
use splitkv_nic::net::Transport;
use std::time::{SystemTime, UNIX_EPOCH};
use thiserror::Error;

/// Why a node process cannot set up its node. `Display` is one line.
#[derive(Debug, Error)]
pub enum NodeSetupError {
    /// The cluster has no such node.
    #[error("node {node} is not in the cluster (ids 0 ..= {max})")]
    NoSuchNode {
        /// The id asked for.
        node: NodeId,
        /// The largest id.
        max: usize,
    },
    /// The node's transport cannot connect processes.
    #[error("node[{node}].transport.kind: \"mem\" connects nodes of one process only; a node process needs \"udp\" or \"dpdk\"")]
    MemTransport {
        /// The node.
        node: NodeId,
    },
    /// The UDP socket could not be set up.
    #[cfg(target_os = "linux")]
    #[error("node[{node}].data: {source}")]
    Udp {
        /// The node.
        node: NodeId,
        /// What the transport said.
        #[source]
        source: splitkv_nic::net::udp::UdpError,
    },
    /// UDP is not built on this platform.
    #[error("the udp transport is built on Linux only")]
    NoUdp,
    /// The file asks for DPDK but this build has no DPDK (cargo feature
    /// `dpdk`, Linux only).
    #[error("node[{node}].transport.kind: \"dpdk\" needs a build with DPDK (cargo build -p splitkv --features dpdk, DPDK 22.11 installed)")]
    DpdkNotBuilt {
        /// The node.
        node: NodeId,
    },
    /// DPDK fields missing from a file that did not pass the checks (its
    /// kind is not `"dpdk"`, or a node has no MAC or IPv4 data address).
    #[error("node[{node}].transport: not a checked DPDK transport (kind, MAC or IPv4 data address missing)")]
    NotDpdk {
        /// The node.
        node: NodeId,
    },
    /// EAL or the DPDK port could not be set up.
    #[cfg(all(feature = "dpdk", target_os = "linux"))]
    #[error("node[{node}].transport: {source}")]
    Dpdk {
        /// The node.
        node: NodeId,
        /// What DPDK said.
        #[source]
        source: splitkv_nic::net::dpdk::DpdkError,
    },
    /// The file asks for RDMA verbs but this build has none (cargo feature
    /// `verbs`, Linux only).
    #[error("node[{node}].transport.kind: \"verbs\" needs a build with RDMA verbs (cargo build -p splitkv --features verbs; cmake, libnl-3, libnl-route-3, libclang and libibverbs to build)")]
    VerbsNotBuilt {
        /// The node.
        node: NodeId,
    },
    /// Verbs fields missing from a file that did not pass the checks.
    #[error("node[{node}].transport: not a checked verbs transport")]
    NotVerbs {
        /// The node.
        node: NodeId,
    },
    /// The RDMA device could not be opened or set up (none exists, its
    /// port is down, a verbs call failed).
    #[cfg(all(feature = "verbs", target_os = "linux"))]
    #[error("node[{node}].transport: {source}")]
    Verbs {
        /// The node.
        node: NodeId,
        /// What the verbs layer said.
        #[source]
        source: splitkv_nic::net::verbs::VerbsError,
    },
    /// The injected fault rates cannot be honoured.
    #[error("node[{node}].transport: {source}")]
    Faults {
        /// The node.
        node: NodeId,
        /// What the fault injector said.
        #[source]
        source: FaultError,
    },
}

/// The builder of every node of `config` (nodes, replication, host table,
/// NIC cache, commit protocol, `threads` polling threads per process, `seed`), without
/// procedures (the workload brings them), whose network stacks carry the
/// file's cluster id, batching switch, session silence and retransmission
/// timeout, and `incarnation` ([`incarnation_now`]); with a `[clients]`
/// section it serves applications in other processes
/// ([`ClusterBuilder::serve_applications`]). The builder sizes
/// tables for a cluster-wide key count; it is given the one that makes each
/// node's table hold the file's `capacity_keys` (plus the builder's headroom).
pub fn node_builder(
    config: &ClusterConfig,
    threads: usize,
    seed: u64,
    incarnation: u32,
) -> ClusterBuilder {
    let nodes = config.nodes.len();
    let per_node = config.table.capacity_keys as u128;
    let cluster_keys = (per_node * nodes as u128 / config.replication.max(1) as u128).max(1);
    let cache = config.table.cache_objects;
    let (cluster_id, protocol) = (config.cluster_id, config.protocol);
    let builder = Cluster::builder();
    // `[clients]`: the node serves applications in other processes on
    // `socket_path(node)` once its runtime runs, through a NIC client port
    // of the gateway's own.
    let builder = match &config.clients {
        Some(settings) => builder.serve_applications(settings.clone()),
        None => builder,
    };
    builder
        .nodes(nodes)
        .replication(config.replication)
        .table(config.table.kind)
        .capacity_keys(cluster_keys.min(usize::MAX as u128 / 4) as usize)
        .value_bytes_max(config.table.value_bytes_max)
        .threads(threads)
        .seed(seed)
        .commit_protocol(protocol.commit)
        .configure(move |cfg| {
            cfg.cache_objects = cache;
            cfg.net.cluster_id = cluster_id;
            cfg.net.incarnation = incarnation;
            cfg.net.batching = protocol.batching;
            cfg.net.session.silence_ns = protocol.session_silence_ms.saturating_mul(1_000_000);
            cfg.net.session.retransmit_timeout_ns =
                protocol.retransmit_timeout_us.saturating_mul(1_000);
        })
}

/// Whether `config` asks node `node` to inject faults.
pub fn injects_faults(config: &ClusterConfig, node: NodeId) -> bool {
    config.node(node).is_some_and(|n| {
        let t = &n.transport;
        t.loss_ppm + t.duplicate_ppm + t.reorder_ppm > 0
    })
}

/// The transport of node `node`: a UDP socket bound to its data address
/// with every node's data address as its peers, MTU and socket buffers
/// from the file, or, for `kind = "dpdk"`, a DPDK port
/// ([`super::dpdk::dpdk_transport`]), or, for `kind = "verbs"`, an RDMA UD
/// queue pair (`super::verbs::verbs_transport`); wrapped in a [`FaultyTransport`]
/// seeded from `seed` and the node id when the file's injected fault rates
/// are not all zero. [`node_transport_counted`] also returns the DPDK
/// counters or the verbs link (with its counters).
///
/// # Errors
/// [`NodeSetupError`]: an unknown node, a `mem` transport, a socket that
/// cannot be bound, DPDK or verbs not built or refusing to start (no RDMA
/// device: [`NodeSetupError::Verbs`]), or fault rates
/// over one.
pub fn node_transport(
    config: &ClusterConfig,
    node: NodeId,
    seed: u64,
) -> Result<Box<dyn Transport>, NodeSetupError> {
    node_transport_counted(config, node, seed).map(|t| t.transport)
}

/// A node's transport and, on DPDK or verbs, the counters its polling
/// thread publishes for `/status` and `/metrics`.
pub struct NodeTransport {
    /// The transport (boxed; with injected faults when the file asks).
    pub transport: Box<dyn Transport>,
    /// The DPDK transport's counters (`None` on UDP).
    pub dpdk: Option<DpdkCounters>,
    /// On verbs, the endpoint the node publishes with its membership, the
    /// directory of its peers' endpoints the membership fills, and the
    /// counters the transport publishes ([`super::verbs`]); `None`
    /// otherwise.
    pub verbs: Option<VerbsLink>,
}

/// [`node_transport`], with the DPDK counters or the verbs link.
///
/// # Errors
/// As [`node_transport`].
pub fn node_transport_counted(
    config: &ClusterConfig,
    node: NodeId,
    seed: u64,
) -> Result<NodeTransport, NodeSetupError> {
    let me = config.node(node).ok_or(NodeSetupError::NoSuchNode {
        node,
        max: config.nodes.len().saturating_sub(1),
    })?;
    match me.transport.kind {
        TransportKind::Mem => Err(NodeSetupError::MemTransport { node }),
        TransportKind::Udp => Ok(NodeTransport {
            transport: with_faults(config, node, seed, udp_transport(config, node)?)?,
            dpdk: None,
            verbs: None,
        }),
        TransportKind::Dpdk => dpdk_node_transport(config, node, seed),
        TransportKind::Verbs => verbs_node_transport(config, node, seed),
    }
}

#[cfg(all(feature = "verbs", target_os = "linux"))]
fn verbs_node_transport(
    config: &ClusterConfig,
    node: NodeId,
    seed: u64,
) -> Result<NodeTransport, NodeSetupError> {
    let (transport, link) = super::verbs::verbs_transport(config, node)?;
    Ok(NodeTransport {
        transport: with_faults(config, node, seed, transport)?,
        dpdk: None,
        verbs: Some(link),
    })
}

#[cfg(not(all(feature = "verbs", target_os = "linux")))]
fn verbs_node_transport(
    _: &ClusterConfig,
    node: NodeId,
    _: u64,
) -> Result<NodeTransport, NodeSetupError> {
    Err(NodeSetupError::VerbsNotBuilt { node })
}

#[cfg(all(feature = "dpdk", target_os = "linux"))]
fn dpdk_node_transport(
    config: &ClusterConfig,
    node: NodeId,
    seed: u64,
) -> Result<NodeTransport, NodeSetupError> {
    let (transport, counters) = super::dpdk::dpdk_transport(config, node)?;
    Ok(NodeTransport {
        transport: with_faults(config, node, seed, transport)?,
        dpdk: Some(counters),
        verbs: None,
    })
}

#[cfg(not(all(feature = "dpdk", target_os = "linux")))]
fn dpdk_node_transport(
    _: &ClusterConfig,
    node: NodeId,
    _: u64,
) -> Result<NodeTransport, NodeSetupError> {
    Err(NodeSetupError::DpdkNotBuilt { node })
}

/// `udp`, wrapped in a [`FaultyTransport`] if the file asks for faults.
fn with_faults<T: Transport + 'static>(
    config: &ClusterConfig,
    node: NodeId,
    seed: u64,
    udp: T,
) -> Result<Box<dyn Transport>, NodeSetupError> {
    if !injects_faults(config, node) {
        return Ok(Box::new(udp));
    }
    let t = &config.nodes[node as usize].transport;
    let faults = FaultConfig {
        loss_ppm: t.loss_ppm,
        duplicate_ppm: t.duplicate_ppm,
        reorder_ppm: t.reorder_ppm,
        ..FaultConfig::none(seed ^ (node as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    };
    let faulty = FaultyTransport::new(udp, faults)
        .map_err(|source| NodeSetupError::Faults { node, source })?;
    Ok(Box::new(faulty))
}

#[cfg(target_os = "linux")]
fn udp_transport(
    config: &ClusterConfig,
    node: NodeId,
) -> Result<splitkv_nic::net::udp::UdpTransport, NodeSetupError> {
    use splitkv_nic::net::udp::{UdpConfig, UdpTransport};
    let me = &config.nodes[node as usize];
    let peers = config.nodes.iter().map(|n| n.data).collect();
    let cfg = UdpConfig::new(me.data, peers)
        .with_mtu(me.transport.mtu)
        .with_socket_bytes(
            me.transport.socket_send_buffer_bytes,
            me.transport.socket_recv_buffer_bytes,
        );
    UdpTransport::bind(cfg).map_err(|source| NodeSetupError::Udp { node, source })
}

#[cfg(not(target_os = "linux"))]
fn udp_transport(
    _: &ClusterConfig,
    _: NodeId,
) -> Result<splitkv_nic::net::mem::MemTransport, NodeSetupError> {
    Err(NodeSetupError::NoUdp)
}

/// Start of the incarnation clock: 2025-01-01T00:00:00Z, in seconds since
/// the Unix epoch.
pub const INCARNATION_EPOCH_UNIX_S: u64 = 1_735_689_600;
/// Ticks of the incarnation clock per second (a tick is 100 ms: a u32 of
/// them lasts 13 years from [`INCARNATION_EPOCH_UNIX_S`]).
pub const INCARNATION_TICKS_PER_S: u64 = 10;

/// A fresh incarnation for a node process starting now (the wire carries a
/// u32, at least 1): tenths of a second of the wall clock since
/// [`INCARNATION_EPOCH_UNIX_S`]. A node restarted more than 100 ms later
/// gets a larger one (unless the wall clock went back across the restart),
/// so its peers open fresh sessions instead of taking its packets for
/// duplicates; 1 before the epoch, `u32::MAX` after the clock runs out.
pub fn incarnation_now() -> u32 {
    let ticks = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        let since = d.as_millis() as u64 / (1000 / INCARNATION_TICKS_PER_S);
        since.saturating_sub(INCARNATION_EPOCH_UNIX_S * INCARNATION_TICKS_PER_S)
    });
    ticks.clamp(1, u32::MAX as u64) as u32
}

//! The file as serde reads it: every field optional where the cluster file may
//! leave it out, unknown fields rejected. [`super::validate`] turns a
//! [`RawCluster`] into a checked [`super::ClusterConfig`], so the checks that
//! need several fields at once (duplicate addresses, replication ≤ nodes) and
//! the checks whose messages must name the field (an unknown transport kind)
//! live in one place.

use serde::Deserialize;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCluster {
    pub cluster_id: u32,
    pub token: String,
    pub replication: usize,
    #[serde(default)]
    pub log: Option<String>,
    #[serde(default)]
    pub table: RawTable,
    #[serde(default)]
    pub protocol: RawProtocol,
    #[serde(default)]
    pub transport: RawTransport,
    #[serde(default, rename = "node")]
    pub nodes: Vec<RawNode>,
    #[serde(default)]
    pub membership: Option<RawMembership>,
    #[serde(default)]
    pub clients: Option<RawClients>,
}

/// `[clients]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClients {
    pub socket_dir: Option<String>,
    pub allowed_uids: Option<Vec<u32>>,
    pub request_ring_bytes: Option<u64>,
    pub outcome_ring_bytes: Option<u64>,
    pub in_flight_max: Option<u64>,
    pub connections_max: Option<u64>,
    pub outcome_full_ms_max: Option<u64>,
    pub start: Option<String>,
}

/// `[membership]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMembership {
    pub kind: Option<String>,
    pub endpoints: Option<Vec<String>>,
    pub lease_ttl_s: Option<u64>,
    pub prefix: Option<String>,
}

/// `[table]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTable {
    pub kind: Option<String>,
    pub capacity_keys: Option<u64>,
    pub value_bytes_max: Option<u64>,
    pub cache_objects: Option<u64>,
}

/// `[protocol]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProtocol {
    pub commit: Option<String>,
    pub batching: Option<bool>,
    pub session_silence_ms: Option<u64>,
    pub retransmit_timeout_us: Option<u64>,
}

/// `[transport]`, and a node's `transport = { … }` override (every field
/// optional; a node's value wins over the cluster's, which wins over the
/// default).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTransport {
    pub kind: Option<String>,
    pub mtu: Option<u64>,
    pub socket_send_buffer_bytes: Option<u64>,
    pub socket_recv_buffer_bytes: Option<u64>,
    pub loss_ppm: Option<u32>,
    pub duplicate_ppm: Option<u32>,
    pub reorder_ppm: Option<u32>,
    pub device: Option<String>,
    pub eal_args: Option<Vec<String>>,
    pub mbufs: Option<u64>,
    pub rx_descriptors: Option<u64>,
    pub tx_descriptors: Option<u64>,
    pub neighbours: Option<Vec<RawNeighbour>>,
    pub port: Option<u64>,
    pub gid_index: Option<u64>,
    pub qkey: Option<u64>,
    pub recv_depth: Option<u64>,
    pub send_depth: Option<u64>,
    pub signal_every: Option<u64>,
    pub inline_bytes: Option<u64>,
}

/// One `neighbours = [{ ip = "…", mac = "…" }]` entry of `[transport]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNeighbour {
    pub ip: String,
    pub mac: String,
}

impl RawTransport {
    /// `self` with every field `over` sets replaced by `over`'s value.
    pub fn overlaid(&self, over: &RawTransport) -> RawTransport {
        RawTransport {
            kind: over.kind.clone().or_else(|| self.kind.clone()),
            mtu: over.mtu.or(self.mtu),
            socket_send_buffer_bytes: over
                .socket_send_buffer_bytes
                .or(self.socket_send_buffer_bytes),
            socket_recv_buffer_bytes: over
                .socket_recv_buffer_bytes
                .or(self.socket_recv_buffer_bytes),
            loss_ppm: over.loss_ppm.or(self.loss_ppm),
            duplicate_ppm: over.duplicate_ppm.or(self.duplicate_ppm),
            reorder_ppm: over.reorder_ppm.or(self.reorder_ppm),
            device: over.device.clone().or_else(|| self.device.clone()),
            eal_args: over.eal_args.clone().or_else(|| self.eal_args.clone()),
            mbufs: over.mbufs.or(self.mbufs),
            rx_descriptors: over.rx_descriptors.or(self.rx_descriptors),
            tx_descriptors: over.tx_descriptors.or(self.tx_descriptors),
            neighbours: over.neighbours.clone().or_else(|| self.neighbours.clone()),
            port: over.port.or(self.port),
            gid_index: over.gid_index.or(self.gid_index),
            qkey: over.qkey.or(self.qkey),
            recv_depth: over.recv_depth.or(self.recv_depth),
            send_depth: over.send_depth.or(self.send_depth),
            signal_every: over.signal_every.or(self.signal_every),
            inline_bytes: over.inline_bytes.or(self.inline_bytes),
        }
    }
}

/// One `[[node]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNode {
    pub id: u64,
    pub data: String,
    pub control: String,
    #[serde(default)]
    pub control_public: bool,
    #[serde(default)]
    pub cores: Vec<u64>,
    #[serde(default)]
    pub mac: Option<String>,
    #[serde(default)]
    pub transport: Option<RawTransport>,
}

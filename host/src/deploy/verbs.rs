//! A node process on RDMA verbs (`[transport] kind = "verbs"`,
//! [`super::config::verbs`]): how peers' queue pairs become address handles.
//!
//! A UD queue pair's number is chosen by the device when the node creates it,
//! so no file names it: each node publishes its endpoint
//! ([`VerbsAddress`]: GID or LID, QPN, QKey) in its etcd address record
//! (`crate::membership_etcd::address`), beside its data address. The etcd
//! driver, on every configuration it passes on, writes the endpoints that the
//! configured incarnations published into a [`VerbsPeers`] directory, before
//! it tells the member about the configuration. The node's transport wrapper
//! ([`DirectedVerbs`], cargo feature `verbs`) reads the directory from its
//! polling thread, at most every [`VERBS_PEERS_REFRESH_NS`] of the node's
//! clock (in `tx_burst` and `rx_burst`) and before every
//! `set_peer_address`, through a [`PeerSync`]:
//!
//! - each published endpoint is registered with the transport
//!   (`VerbsTransport::add_endpoint`: an address handle can then be built for
//!   its data address);
//! - a node whose published data address is the one the transport sends it
//!   to now is re-pointed at once (`Transport::set_peer_address` to the same
//!   address: a new address handle when its endpoint changed, e.g. a
//!   restarted process's new queue pair at the same machine);
//! - a node published at another data address (a replacement machine) is
//!   re-pointed when the membership agent says so, as on UDP: the agent's
//!   `set_peer_address` finds the endpoint registered.
//!
//! So the first configuration every node learns makes the address handles of
//! the peers already registered, and each later registration (a peer that
//! started later, a restart, a replacement) reaches the transport within one
//! poll of etcd plus one refresh. The directory and [`PeerSync`] are plain
//! Rust, always built and unit-tested without a device; only the wrapper
//! needs the feature.
//!
//! **Counters.** The wrapper also publishes the transport's counters
//! ([`VerbsStats`]: sends, receives, drops by reason), the nodes it
//! re-pointed and the directory's endpoints it refused (a full endpoint
//! table, an address another node holds, a device that refused an address
//! handle) into a shared [`VerbsCounters`], at most every
//! [`VERBS_COUNTERS_PUBLISH_NS`] of the node's clock (in `tx_flush` and
//! `rx_burst`, from the `now` they get: one uncontended lock per publish,
//! never per packet), as a DPDK node does (`super::dpdk`). The control
//! thread reads them for `/status`'s `verbs.transport` and the `verbs_*`
//! metrics ([`super::metrics`]). Like the directory, the counters are
//! always built, so a node reports them without naming verbs types.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use super::published::Published;

use serde_json::{json, Value};
use splitkv_layout::wire::NodeId;
use splitkv_nic::net::verbs::{RxDrop, VerbsAddress, VerbsPeer, VerbsStats};
use splitkv_nic::NODES_MAX;

/// Longest the transport's peers lag the directory (ns of the node's
/// clock).
pub const VERBS_PEERS_REFRESH_NS: u64 = 10_000_000;

/// Longest the published verbs counters lag the transport's (ns of the
/// node's clock); the same period as DPDK's
/// (`super::dpdk::DPDK_COUNTERS_PUBLISH_NS`).
pub const VERBS_COUNTERS_PUBLISH_NS: u64 = 10_000_000;

/// Per node id, the verbs endpoint its configured incarnation published
/// (`None`: none known), at the data address it published.
pub type PublishedPeers = [Option<VerbsPeer>; NODES_MAX];

#[derive(Debug)]
struct Directory {
    /// Bumped by each publish that changes `peers`.
    version: u64,
    peers: PublishedPeers,
}

/// The verbs endpoints the membership read, shared between the etcd driver
/// (writer) and the node's polling thread (reader); `Clone` shares them.
/// Two handles are equal when they share one directory.
#[derive(Debug, Clone)]
pub struct VerbsPeers(Arc<Mutex<Directory>>);

impl Default for VerbsPeers {
    fn default() -> Self {
        VerbsPeers(Arc::new(Mutex::new(Directory {
            version: 0,
            peers: [None; NODES_MAX],
        })))
    }
}

impl PartialEq for VerbsPeers {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for VerbsPeers {}

impl VerbsPeers {
    /// An empty directory (version 0).
    pub fn new() -> VerbsPeers {
        VerbsPeers::default()
    }

    /// Replaces the endpoints; returns whether anything changed (and the
    /// version moved on).
    pub fn publish(&self, peers: &PublishedPeers) -> bool {
        let mut d = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if d.peers == *peers {
            return false;
        }
        d.peers = *peers;
        d.version += 1;
        true
    }

    /// The version (0: nothing published yet).
    pub fn version(&self) -> u64 {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).version
    }

    /// The version and the endpoints.
    pub fn snapshot(&self) -> (u64, PublishedPeers) {
        let d = self.0.lock().unwrap_or_else(|e| e.into_inner());
        (d.version, d.peers)
    }
}

/// What [`PeerSync::refresh`] asks of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAction {
    /// Register this endpoint at its data address
    /// (`VerbsTransport::add_endpoint`).
    Register(VerbsPeer),
    /// Re-point the node at the endpoint registered for this data address
    /// (`Transport::set_peer_address`), its current one.
    Repoint(NodeId, SocketAddr),
}

/// The transport wrapper's view of the directory: the version it applied
/// and each node's data address as the transport knows it (the cluster
/// file's at first, then each successful `set_peer_address`).
#[derive(Debug, Clone)]
pub struct PeerSync {
    me: NodeId,
    seen: u64,
    addrs: Vec<SocketAddr>,
}

impl PeerSync {
    /// Node `me` of a cluster whose nodes' data addresses are `addrs`
    /// (index = node id).
    pub fn new(me: NodeId, addrs: Vec<SocketAddr>) -> PeerSync {
        PeerSync { me, seen: 0, addrs }
    }

    /// Node `node`'s data address as the transport knows it.
    pub fn address(&self, node: NodeId) -> Option<SocketAddr> {
        self.addrs.get(usize::from(node)).copied()
    }

    /// When `peers` moved past the version applied: each other node's
    /// published endpoint to register, then each node published at its
    /// current data address to re-point, in node order (every register
    /// before any re-point). Nothing when the version is unchanged.
    pub fn refresh(&mut self, peers: &VerbsPeers, out: &mut Vec<PeerAction>) {
        if peers.version() == self.seen {
            return;
        }
        let (version, published) = peers.snapshot();
        self.seen = version;
        let others = published
            .iter()
            .enumerate()
            .filter(|&(n, _)| n != usize::from(self.me) && n < self.addrs.len())
            .filter_map(|(n, p)| Some((n as NodeId, (*p)?)));
        let start = out.len();
        for (_, p) in others.clone() {
            out.push(PeerAction::Register(p));
        }
        for (n, p) in others {
            if self.addrs[usize::from(n)] == p.addr {
                out.push(PeerAction::Repoint(n, p.addr));
            }
        }
        debug_assert!(out[start..].windows(2).all(|w| !matches!(
            (w[0], w[1]),
            (PeerAction::Repoint(..), PeerAction::Register(_))
        )));
    }

    /// Records that the transport now sends node `node`'s packets to
    /// `addr`.
    pub fn repointed(&mut self, node: NodeId, addr: SocketAddr) {
        if let Some(a) = self.addrs.get_mut(usize::from(node)) {
            *a = addr;
        }
    }
}

/// A verbs transport's counters as last published (all cumulative since
/// the transport was made).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerbsSnapshot {
    /// The transport's own counters: packets posted (inline, signalled),
    /// dropped on send (too long, no endpoint), bursts cut short (queue
    /// full, pool exhausted), completion and post errors, packets received
    /// and datagrams dropped by [`RxDrop`] reason.
    pub transport: VerbsStats,
    /// Times a node was re-pointed at another endpoint
    /// (`Transport::set_peer_address` calls that changed one).
    pub peers_repointed: u64,
    /// Endpoints from the directory the transport refused to register or
    /// re-point to.
    pub endpoints_refused: u64,
}

/// The verbs counters a node's polling thread publishes and its control
/// thread reads ([`Published`]: `Clone` shares them; two handles are equal
/// when they share one snapshot).
pub type VerbsCounters = Published<VerbsSnapshot>;

impl Published<VerbsSnapshot> {
    /// `/status`'s `verbs.transport` object: `tx` (packets posted, of them
    /// `inline` and `signaled`; taken and dropped: `too_long`,
    /// `unknown_peer`; bursts cut short: `queue_full`, `pool_exhausted`;
    /// `completion_errors`), `rx` (packets lent, `dropped` by [`RxDrop`]
    /// name, `dropped_total`, `topup_short`: times the receive queue could
    /// not be topped up), `post_errors`, `peers_repointed` and
    /// `endpoints_refused`.
    pub fn to_json(&self) -> Value {
        let s = self.snapshot();
        let t = &s.transport;
        let mut dropped = serde_json::Map::new();
        for r in RxDrop::ALL {
            dropped.insert(r.name().into(), json!(t.rx_dropped.get(r)));
        }
        json!({
            "tx": {
                "packets": t.tx_packets,
                "inline": t.tx_inline,
                "signaled": t.tx_signaled,
                "too_long": t.tx_too_long,
                "unknown_peer": t.tx_unknown_peer,
                "queue_full": t.tx_queue_full,
                "pool_exhausted": t.tx_pool_exhausted,
                "completion_errors": t.tx_completion_errors,
            },
            "rx": {
                "packets": t.rx_packets,
                "dropped": Value::Object(dropped),
                "dropped_total": t.rx_dropped.total(),
                "topup_short": t.rx_topup_short,
            },
            "post_errors": t.post_errors,
            "peers_repointed": s.peers_repointed,
            "endpoints_refused": s.endpoints_refused,
        })
    }
}

/// What a verbs node hands its membership (the endpoint it publishes and
/// the directory the etcd driver fills for its transport) and its control
/// thread (the transport's counters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsLink {
    /// This node's queue pair as peers reach it.
    pub local: VerbsAddress,
    /// Filled by the etcd driver, read by the transport.
    pub peers: VerbsPeers,
    /// Published by the transport's wrapper, read by the control thread.
    pub counters: VerbsCounters,
}

impl VerbsLink {
    /// `/status`'s `verbs` object: `local` (this node's endpoint in its
    /// text form, `gid=…,qpn=…,qkey=…`), `peers_version` (how many changes
    /// the membership wrote), `peers` (node id → `addr=…,gid=…,qpn=…,qkey=…`,
    /// the endpoints its configured incarnations published) and
    /// `transport` (the published counters, [`VerbsCounters::to_json`]).
    pub fn to_json(&self) -> Value {
        let (version, peers) = self.peers.snapshot();
        let peers: serde_json::Map<String, Value> = peers
            .iter()
            .enumerate()
            .filter_map(|(n, p)| Some((n.to_string(), p.as_ref()?.to_string().into())))
            .collect();
        json!({
            "local": self.local.to_string(),
            "peers_version": version,
            "peers": peers,
            "transport": self.counters.to_json(),
        })
    }
}

#[cfg(all(feature = "verbs", target_os = "linux"))]
pub use built::{verbs_transport, DirectedVerbs};

#[cfg(all(feature = "verbs", target_os = "linux"))]
mod built {
    use super::{
        PeerAction, PeerSync, VerbsCounters, VerbsLink, VerbsPeers, VerbsSnapshot,
        VERBS_COUNTERS_PUBLISH_NS, VERBS_PEERS_REFRESH_NS,
    };
    use crate::deploy::config::ClusterConfig;
    use crate::deploy::node::NodeSetupError;
    use splitkv_layout::wire::NodeId;
    use splitkv_nic::net::verbs::device::VerbsDevice;
    use splitkv_nic::net::verbs::sys::Device;
    use splitkv_nic::net::verbs::VerbsTransport;
    use splitkv_nic::net::{PeerAddressError, PeerAddressStats, Transport, TxPacket};
    use splitkv_nic::Nanos;
    use std::net::SocketAddr;

    /// A [`VerbsTransport`] on device `D` (libibverbs'; a test's in-memory
    /// one) that learns its peers' endpoints from a [`VerbsPeers`]
    /// directory and publishes its counters to a [`VerbsCounters`] (see
    /// the module documentation).
    pub struct DirectedVerbs<D: VerbsDevice = Device> {
        inner: VerbsTransport<D>,
        peers: VerbsPeers,
        sync: PeerSync,
        actions: Vec<PeerAction>,
        next_refresh_ns: Nanos,
        /// Endpoints the transport refused to register or re-point to.
        refused: u64,
        counters: VerbsCounters,
        /// The node clock's time of the next publish.
        next_publish_ns: Nanos,
    }

    impl<D: VerbsDevice> DirectedVerbs<D> {
        /// `inner` for node `me`, whose peers start at `addrs` (index =
        /// node id), following `peers`; its counters start unpublished
        /// (zero) in a fresh [`VerbsCounters`] ([`DirectedVerbs::counters`]).
        pub fn new(
            inner: VerbsTransport<D>,
            me: NodeId,
            addrs: Vec<SocketAddr>,
            peers: VerbsPeers,
        ) -> DirectedVerbs<D> {
            DirectedVerbs {
                inner,
                peers,
                sync: PeerSync::new(me, addrs),
                actions: Vec::new(),
                next_refresh_ns: 0,
                refused: 0,
                counters: VerbsCounters::new(),
                next_publish_ns: 0,
            }
        }

        /// The counters this wrapper publishes to (a handle sharing them).
        pub fn counters(&self) -> VerbsCounters {
            self.counters.clone()
        }

        /// The wrapped transport.
        pub fn inner(&self) -> &VerbsTransport<D> {
            &self.inner
        }

        /// The wrapped transport, to change (tests deliver datagrams
        /// through its device).
        pub fn inner_mut(&mut self) -> &mut VerbsTransport<D> {
            &mut self.inner
        }

        /// Endpoints from the directory the transport refused so far.
        pub fn refused(&self) -> u64 {
            self.refused
        }

        fn refresh(&mut self) {
            self.actions.clear();
            self.sync.refresh(&self.peers, &mut self.actions);
            for i in 0..self.actions.len() {
                match self.actions[i] {
                    PeerAction::Register(p) => {
                        if !self.inner.add_endpoint(p) {
                            self.refused += 1;
                        }
                    }
                    PeerAction::Repoint(node, addr) => {
                        if self.inner.set_peer_address(node, addr).is_err() {
                            self.refused += 1;
                        }
                    }
                }
            }
        }

        /// Publishes the counters when [`VERBS_COUNTERS_PUBLISH_NS`] passed
        /// since the last publish (the first call always does).
        fn maybe_publish(&mut self, now: Nanos) {
            if now < self.next_publish_ns {
                return;
            }
            self.next_publish_ns = now.saturating_add(VERBS_COUNTERS_PUBLISH_NS);
            self.counters.publish(VerbsSnapshot {
                transport: self.inner.stats(),
                peers_repointed: self.inner.peer_address_stats().repointed,
                endpoints_refused: self.refused,
            });
        }

        fn maybe_refresh(&mut self, now: Nanos) {
            if now >= self.next_refresh_ns {
                self.next_refresh_ns = now.saturating_add(VERBS_PEERS_REFRESH_NS);
                self.refresh();
            }
        }
    }

    impl<D: VerbsDevice> Transport for DirectedVerbs<D> {
        fn mtu(&self) -> usize {
            self.inner.mtu()
        }

        fn is_lossy(&self) -> bool {
            self.inner.is_lossy()
        }

        fn inline_bytes_max(&self) -> usize {
            self.inner.inline_bytes_max()
        }

        fn tx_burst(&mut self, now: Nanos, packets: &[TxPacket<'_>]) -> usize {
            // Before sending: a peer published since the last refresh is
            // reachable in this burst (a comparison when none is due).
            self.maybe_refresh(now);
            self.inner.tx_burst(now, packets)
        }

        fn tx_flush(&mut self, now: Nanos) {
            self.inner.tx_flush(now);
            self.maybe_publish(now);
        }

        fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
            let lent = self.inner.rx_burst(now, max, on_packet);
            self.maybe_refresh(now);
            self.maybe_publish(now);
            lent
        }

        fn set_peer_address(
            &mut self,
            node: NodeId,
            addr: SocketAddr,
        ) -> Result<bool, PeerAddressError> {
            // The driver writes the directory before it passes the
            // configuration on: register what it published first.
            self.refresh();
            let changed = self.inner.set_peer_address(node, addr)?;
            self.sync.repointed(node, addr);
            Ok(changed)
        }

        fn peer_address_stats(&self) -> PeerAddressStats {
            self.inner.peer_address_stats()
        }
    }

    /// Node `node`'s verbs transport: the device, port and queue depths from
    /// its `[transport]`, no peer known yet; and the link its membership
    /// publishes (its endpoint at its data address) and fills (the
    /// directory), with the counters the transport publishes.
    ///
    /// # Errors
    /// [`NodeSetupError::NoSuchNode`]; [`NodeSetupError::NotVerbs`] when
    /// its transport is not verbs; [`NodeSetupError::Verbs`] when the
    /// device cannot be opened (no RDMA device, port down, a verbs call
    /// refused).
    pub fn verbs_transport(
        config: &ClusterConfig,
        node: NodeId,
    ) -> Result<(DirectedVerbs, VerbsLink), NodeSetupError> {
        let me = config.node(node).ok_or(NodeSetupError::NoSuchNode {
            node,
            max: config.nodes.len().saturating_sub(1),
        })?;
        let settings = me.verbs.as_ref().ok_or(NodeSetupError::NotVerbs { node })?;
        let cfg = settings.verbs_config(me.transport.mtu, config.nodes.len());
        let inner =
            VerbsTransport::new(cfg).map_err(|source| NodeSetupError::Verbs { node, source })?;
        let local = inner.local_endpoint(me.data).address();
        let peers = VerbsPeers::new();
        let addrs = config.nodes.iter().map(|n| n.data).collect();
        let t = DirectedVerbs::new(inner, node, addrs, peers.clone());
        let counters = t.counters();
        let link = VerbsLink {
            local,
            peers,
            counters,
        };
        Ok((t, link))
    }
}

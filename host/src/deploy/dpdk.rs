//! A node process on DPDK (`[transport] kind = "dpdk"`): EAL started from the
//! cluster file, a [`DpdkTransport`](splitkv_nic::net::dpdk::DpdkTransport)
//! with every node's MAC, IPv4 address and UDP port, the file's neighbour
//! table, and the transport's counters published for the control thread
//! ([`DpdkCounters`]: `/status`'s `dpdk` and the `dpdk_*` metrics).
//!
//! The counters' half is always built (a node reports them without naming
//! DPDK types); building the transport needs the cargo feature `dpdk`
//! (without it [`super::node_transport`] refuses a DPDK node with
//! [`NodeSetupError::DpdkNotBuilt`](super::NodeSetupError::DpdkNotBuilt)).
//!
//! **Addresses.** Node `i`'s peer entry is its `mac` and `data` address from
//! the file. This node's own MAC is the `neighbours` entry of its data IPv4
//! address if there is one (a replacement machine started with
//! `--data-address`), else its `mac`. The `neighbours` table is handed to the
//! transport ([`DpdkTransport::set_neighbour`](splitkv_nic::net::dpdk::DpdkTransport::set_neighbour)),
//! so when the membership re-points a peer at a new address
//! (`Transport::set_peer_address`), frames go to that machine's MAC (or,
//! for an IPv4 address nobody listed, to the broadcast MAC, counted in
//! `broadcast_frames`).
//!
//! **Publishing.** The transport runs on the node's polling thread; the
//! wrapper [`CountedDpdk`] copies its counters (and the port driver's) into
//! the shared [`DpdkCounters`] at most every [`DPDK_COUNTERS_PUBLISH_NS`] of
//! the node's clock, from the `now` its calls get: one uncontended lock per
//! publish, never per packet.

use super::published::Published;

use serde_json::{json, Value};
use splitkv_nic::net::dpdk::{DpdkPortStats, DpdkStats, RxDrop};

/// Longest the published DPDK counters lag the transport's (ns of the
/// node's clock).
pub const DPDK_COUNTERS_PUBLISH_NS: u64 = 10_000_000;

/// A DPDK transport's counters as last published: its own (packets, bursts,
/// congestion, receive drops by reason) and its port driver's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DpdkSnapshot {
    /// The transport's counters.
    pub transport: DpdkStats,
    /// The port driver's counters (`rte_eth_stats`).
    pub port: DpdkPortStats,
    /// Mbufs free in the transport's pool.
    pub mbufs_available: u32,
}

/// The DPDK counters a node's polling thread publishes and its control
/// thread reads ([`Published`]: `Clone` shares them).
pub type DpdkCounters = Published<DpdkSnapshot>;

impl Published<DpdkSnapshot> {
    /// `/status`'s `dpdk` object: `tx` (packets, bytes, bursts, port full,
    /// mempool empty, unknown destination, oversized, broadcast frames,
    /// packets sent in place and copied, buffer reservations refused),
    /// `rx` (packets, bytes, bursts, `dropped` by [`RxDrop`] name and
    /// `dropped_total`), `peers_repointed`, `mbufs_available` and `port`
    /// (the driver's counters).
    pub fn to_json(&self) -> Value {
        let s = self.snapshot();
        let t = &s.transport;
        let mut dropped = serde_json::Map::new();
        for r in RxDrop::ALL {
            dropped.insert(r.name().into(), json!(t.rx_dropped.get(r)));
        }
        json!({
            "tx": {
                "packets": t.packets_sent,
                "bytes": t.bytes_sent,
                "bursts": t.tx_bursts,
                "port_full": t.tx_port_full,
                "mempool_empty": t.mempool_empty,
                "unknown_destination": t.unknown_destination,
                "oversized": t.oversized,
                "broadcast_frames": t.broadcast_frames,
                "in_place": t.tx_in_place,
                "copied": t.tx_copied,
                "lend_refused": t.lend_refused,
            },
            "rx": {
                "packets": t.packets_received,
                "bytes": t.bytes_received,
                "bursts": t.rx_bursts,
                "dropped": Value::Object(dropped),
                "dropped_total": t.rx_dropped.total(),
            },
            "peers_repointed": t.peers_repointed,
            "mbufs_available": s.mbufs_available,
            "port": {
                "rx_packets": s.port.rx_packets,
                "tx_packets": s.port.tx_packets,
                "rx_missed": s.port.rx_missed,
                "rx_errors": s.port.rx_errors,
                "rx_no_mbuf": s.port.rx_no_mbuf,
                "tx_errors": s.port.tx_errors,
            },
        })
    }
}

#[cfg(all(feature = "dpdk", target_os = "linux"))]
pub use built::{dpdk_config, dpdk_transport, CountedDpdk};

#[cfg(all(feature = "dpdk", target_os = "linux"))]
mod built {
    use super::{DpdkCounters, DpdkSnapshot, DPDK_COUNTERS_PUBLISH_NS};
    use crate::deploy::config::ClusterConfig;
    use crate::deploy::node::NodeSetupError;
    use splitkv_layout::wire::NodeId;
    use splitkv_nic::net::dpdk::{DpdkConfig, DpdkPeer, DpdkTransport, Eal};
    use splitkv_nic::net::{PeerAddressError, PeerAddressStats, Transport, TxPacket};
    use splitkv_nic::Nanos;
    use std::net::{SocketAddr, SocketAddrV4};

    /// A [`DpdkTransport`] that publishes its counters to a
    /// [`DpdkCounters`] (see the module documentation).
    #[derive(Debug)]
    pub struct CountedDpdk {
        inner: DpdkTransport,
        counters: DpdkCounters,
        /// The node clock's time of the next publish.
        next_publish_ns: Nanos,
    }

    impl CountedDpdk {
        /// `inner`, publishing to `counters`.
        pub fn new(inner: DpdkTransport, counters: DpdkCounters) -> CountedDpdk {
            CountedDpdk {
                inner,
                counters,
                next_publish_ns: 0,
            }
        }

        /// The wrapped transport.
        pub fn inner(&self) -> &DpdkTransport {
            &self.inner
        }

        fn maybe_publish(&mut self, now: Nanos) {
            if now < self.next_publish_ns {
                return;
            }
            self.next_publish_ns = now.saturating_add(DPDK_COUNTERS_PUBLISH_NS);
            self.counters.publish(DpdkSnapshot {
                transport: self.inner.stats(),
                port: self.inner.port_stats(),
                mbufs_available: self.inner.mbufs_available(),
            });
        }
    }

    impl Transport for CountedDpdk {
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
            self.inner.tx_burst(now, packets)
        }

        fn tx_flush(&mut self, now: Nanos) {
            self.inner.tx_flush(now);
            self.maybe_publish(now);
        }

        fn rx_burst(&mut self, now: Nanos, max: usize, on_packet: &mut dyn FnMut(&[u8])) -> usize {
            let lent = self.inner.rx_burst(now, max, on_packet);
            self.maybe_publish(now);
            lent
        }

        fn set_peer_address(
            &mut self,
            node: NodeId,
            addr: SocketAddr,
        ) -> Result<bool, PeerAddressError> {
            self.inner.set_peer_address(node, addr)
        }

        fn peer_address_stats(&self) -> PeerAddressStats {
            self.inner.peer_address_stats()
        }
    }

    /// The CPUs this thread may run on (the node's `cores` once pinned);
    /// empty if the kernel does not say.
    fn allowed_cpus() -> Vec<usize> {
        use rustix::thread::{sched_getaffinity, CpuSet};
        sched_getaffinity(None).map_or_else(
            |_| Vec::new(),
            |set| (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        )
    }

    /// How node `node`'s DPDK port is set up, from the file: its device,
    /// MTU, pool and descriptors, every node's MAC and data address as the
    /// peers, and its own address and MAC (the `neighbours` entry of its
    /// data IPv4 address if any, a replacement machine; else its `mac`).
    ///
    /// # Errors
    /// [`NodeSetupError::NoSuchNode`]; [`NodeSetupError::NotDpdk`] when the
    /// node's transport is not DPDK or a node lacks an IPv4 data address or
    /// a MAC (a file that did not pass the checks).
    pub fn dpdk_config(config: &ClusterConfig, node: NodeId) -> Result<DpdkConfig, NodeSetupError> {
        let me = config.node(node).ok_or(NodeSetupError::NoSuchNode {
            node,
            max: config.nodes.len().saturating_sub(1),
        })?;
        let not_dpdk = || NodeSetupError::NotDpdk { node };
        let settings = me.dpdk.as_ref().ok_or_else(not_dpdk)?;
        let v4 = |a: SocketAddr| match a {
            SocketAddr::V4(v4) => Some(v4),
            SocketAddr::V6(_) => None,
        };
        let peers = config
            .nodes
            .iter()
            .map(|n| {
                Some(DpdkPeer {
                    mac: n.mac?,
                    addr: v4(n.data)?,
                })
            })
            .collect::<Option<Vec<DpdkPeer>>>()
            .ok_or_else(not_dpdk)?;
        let local: SocketAddrV4 = v4(me.data).ok_or_else(not_dpdk)?;
        let mac = settings
            .neighbour(*local.ip())
            .or(me.mac)
            .ok_or_else(not_dpdk)?;
        let mut cfg = DpdkConfig::new(settings.device.clone(), local, peers)
            .with_mac(mac)
            .with_mtu(me.transport.mtu);
        cfg.mbufs = settings.mbufs;
        cfg.rx_descriptors = settings.rx_descriptors;
        cfg.tx_descriptors = settings.tx_descriptors;
        Ok(cfg)
    }

    /// Node `node`'s DPDK transport: EAL initialised with the node's
    /// arguments ([`crate::deploy::DpdkSettings::eal_args_for`] on the CPUs
    /// this thread may use), the port as [`dpdk_config`] says, and the
    /// neighbour table; counters published to the returned [`DpdkCounters`].
    ///
    /// # Errors
    /// As [`dpdk_config`]; [`NodeSetupError::Dpdk`] when EAL refuses its
    /// arguments (no hugepages, no device, a driver's arguments refused) or
    /// the port, pool or queues cannot be set up.
    pub fn dpdk_transport(
        config: &ClusterConfig,
        node: NodeId,
    ) -> Result<(CountedDpdk, DpdkCounters), NodeSetupError> {
        let cfg = dpdk_config(config, node)?;
        let settings = config.nodes[usize::from(node)]
            .dpdk
            .as_ref()
            .ok_or(NodeSetupError::NotDpdk { node })?;
        let dpdk_err = |source| NodeSetupError::Dpdk { node, source };
        let args = settings.eal_args_for(&allowed_cpus());
        let eal = Eal::init(&args).map_err(|e| dpdk_err(e.into()))?;
        let mut transport = DpdkTransport::new(eal, cfg).map_err(dpdk_err)?;
        for n in &settings.neighbours {
            transport.set_neighbour(n.ip, n.mac).map_err(dpdk_err)?;
        }
        let counters = DpdkCounters::new();
        Ok((CountedDpdk::new(transport, counters.clone()), counters))
    }
}

//! What the simulated network does to packets: the one-way delay
//! distribution, per-packet fault rates (parts per million, as
//! `splitkv_nic::net::faulty::FaultConfig`), per-pass partition and clogging
//! rates, and the per-link capacity. Modelled on TigerBeetle's packet
//! simulator.

use splitkv_nic::Nanos;

/// A rate of one: every packet, or every pass (rates are in parts per million).
pub const PPM_MAX: u32 = 1_000_000;
/// Default packets in flight on one directed link (sender → receiver) before
/// `tx_burst` refuses more.
pub const LINK_CAPACITY_DEFAULT: usize = 4_096;
/// Most nodes a partition can split (a side is a bit mask of node ids).
pub const PARTITION_NODES_MAX: usize = 64;
/// The exponential tail of [`DelayDist::Exponential`] is cut at this many
/// means, so no packet waits unboundedly.
pub const DELAY_TAIL_MEANS_MAX: u64 = 20;

/// The extra one-way delay drawn on top of `SimConfig::latency_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DelayDist {
    /// Uniform in `0..=jitter_ns`.
    #[default]
    Uniform,
    /// Exponential with mean `jitter_ns`, cut at [`DELAY_TAIL_MEANS_MAX`]
    /// means: most packets are fast, a few very late. (Drawn with `f64::ln`:
    /// bit for bit on one platform; another libm may round differently.)
    Exponential,
}

/// Network faults. All zero ([`NetFaults::none`]) is a perfect network that
/// keeps each link's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetFaults {
    /// Distribution of the extra one-way delay.
    pub delay: DelayDist,
    /// Packets lost, ppm of packets sent.
    pub loss_ppm: u32,
    /// Packets delivered twice (the copy with its own delay), ppm.
    pub duplicate_ppm: u32,
    /// Packets that leave their link's order (ppm): such a packet gets an
    /// extra delay uniform in `0..=reorder_delay_ns` and may be overtaken.
    /// At 0 every link delivers in the order sent.
    pub reorder_ppm: u32,
    /// Longest extra delay of a reordered packet, ns.
    pub reorder_delay_ns: Nanos,
    /// Chance per pass (ppm) that a partition starts while none is active.
    pub partition_ppm: u32,
    /// Share of partitions (ppm) that are one-way: only packets from the
    /// cut-off side to the rest are dropped.
    pub partition_one_way_ppm: u32,
    /// Shortest partition, ns of virtual time (it heals by itself).
    pub partition_ns_min: Nanos,
    /// Longest partition, ns.
    pub partition_ns_max: Nanos,
    /// Chance per pass (ppm) that one seeded link clogs: it delivers nothing
    /// (packets wait, none are lost) for a while.
    pub clog_ppm: u32,
    /// Shortest clog, ns.
    pub clog_ns_min: Nanos,
    /// Longest clog, ns.
    pub clog_ns_max: Nanos,
    /// Packets in flight per directed link; `tx_burst` accepts only what fits.
    pub link_capacity: usize,
}

impl NetFaults {
    /// No faults: uniform delay, nothing lost, duplicated, reordered,
    /// partitioned or clogged; [`LINK_CAPACITY_DEFAULT`] per link.
    pub const fn none() -> NetFaults {
        NetFaults {
            delay: DelayDist::Uniform,
            loss_ppm: 0,
            duplicate_ppm: 0,
            reorder_ppm: 0,
            reorder_delay_ns: 0,
            partition_ppm: 0,
            partition_one_way_ppm: 0,
            partition_ns_min: 0,
            partition_ns_max: 0,
            clog_ppm: 0,
            clog_ns_min: 0,
            clog_ns_max: 0,
            link_capacity: LINK_CAPACITY_DEFAULT,
        }
    }

    /// Whether any fault is on (the delay distribution aside).
    pub fn any(&self) -> bool {
        self.loss_ppm | self.duplicate_ppm | self.reorder_ppm | self.partition_ppm | self.clog_ppm
            != 0
    }
}

impl Default for NetFaults {
    fn default() -> Self {
        NetFaults::none()
    }
}

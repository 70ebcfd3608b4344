//! Counters of the simulated network: what was sent, delivered, refused
//! (backpressure: the sender keeps the packet) and dropped, by reason.

/// Why the network dropped a packet it had accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Seeded loss ([`crate::NetFaults::loss_ppm`]).
    Loss,
    /// Sent or due across an active partition.
    Partition,
    /// From or to a crashed node.
    Crashed,
    /// Addressed to a node the network does not have.
    UnknownDestination,
}

impl DropReason {
    /// A short name ("loss", "partition", "crashed", "unknown-destination").
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Loss => "loss",
            DropReason::Partition => "partition",
            DropReason::Crashed => "crashed",
            DropReason::UnknownDestination => "unknown-destination",
        }
    }
}

/// Counters over the whole network since it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStats {
    /// Packets accepted by `tx_burst` (each counted once, duplicates not).
    pub sent: u64,
    /// Packets handed to a receiver (duplicates included).
    pub delivered: u64,
    /// Extra copies made by duplication.
    pub duplicated: u64,
    /// Packets that left their link's order.
    pub reordered: u64,
    /// Dropped by seeded loss.
    pub dropped_loss: u64,
    /// Dropped by a partition.
    pub dropped_partition: u64,
    /// Dropped because their sender or receiver crashed.
    pub dropped_crashed: u64,
    /// Dropped for an unknown destination.
    pub dropped_unknown: u64,
    /// Packets `tx_burst` refused because their link was at capacity (the
    /// sender still holds them: not a drop).
    pub refused_link_full: u64,
    /// Packets refused because the whole network was at
    /// [`crate::SIM_PACKETS_IN_FLIGHT_MAX`].
    pub refused_network_full: u64,
    /// Partitions started.
    pub partitions: u64,
    /// Partitions healed.
    pub heals: u64,
    /// Links clogged.
    pub clogs: u64,
    /// Nodes crashed.
    pub crashes: u64,
    /// Held packets delivered by a script ([`crate::SimNetwork::deliver_held`]).
    pub forced_deliveries: u64,
}

impl NetStats {
    /// Packets dropped, every reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss + self.dropped_partition + self.dropped_crashed + self.dropped_unknown
    }

    /// Adds `o`'s counters to these (over several runs).
    pub fn add(&mut self, o: &NetStats) {
        self.sent += o.sent;
        self.delivered += o.delivered;
        self.duplicated += o.duplicated;
        self.reordered += o.reordered;
        self.dropped_loss += o.dropped_loss;
        self.dropped_partition += o.dropped_partition;
        self.dropped_crashed += o.dropped_crashed;
        self.dropped_unknown += o.dropped_unknown;
        self.refused_link_full += o.refused_link_full;
        self.refused_network_full += o.refused_network_full;
        self.partitions += o.partitions;
        self.heals += o.heals;
        self.clogs += o.clogs;
        self.crashes += o.crashes;
        self.forced_deliveries += o.forced_deliveries;
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        match reason {
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::Partition => self.dropped_partition += 1,
            DropReason::Crashed => self.dropped_crashed += 1,
            DropReason::UnknownDestination => self.dropped_unknown += 1,
        }
    }
}

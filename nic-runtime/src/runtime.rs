//! The NIC runtime of one node: a polling state machine (DESIGN.md, "one rule
//! for the runtime"). Each [`NicRuntime::run_iteration`] drains what is ready —
//! packets, DMA completions, host acknowledgements, application requests — and
//! then flushes every batched packet (Dandelion §5.1).
//!
//! Applications reach the runtime through one request/outcome ring pair per
//! client (L5 §3); [`clients`] polls them fairly and routes each outcome to the
//! ring of the client that submitted it.

pub mod clients;

use crate::dma::DmaEngine;
use crate::index::HostTableLayout;
use crate::index::NicIndex;
use crate::net::batch::{BatchStats, Batcher};
use crate::net::Transport;
use crate::placement::Placement;
use crate::procedure::ProcedureRegistry;
use crate::protocol::coordinator::{Coordinator, CoordinatorStats};
use crate::protocol::server::{Server, ServerStats};
use crate::protocol::Io;
use crate::Nanos;
use clients::Clients;
pub use clients::{
    ClientClosed, ClientPortStats, ClientPorts, CLIENTS_PER_NODE_MAX, CLIENT_OUTCOMES_QUEUED_MAX,
    TICKETS_MAX,
};
use splitkv_layout::host_nic::HostToNic;
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::wire::{decode_packet, Body, NodeId};

/// Most packets taken from the transport per iteration.
pub const RX_BURST_MAX: usize = 64;
/// Most application requests started per iteration (over all clients).
pub const REQUESTS_PER_ITERATION_MAX: usize = 64;
/// Most host acknowledgements taken per iteration.
pub const ACKS_PER_ITERATION_MAX: usize = 64;

/// The rings that connect a NIC runtime to its host (the "PCIe" rings).
#[derive(Debug)]
pub struct HostPorts {
    /// One request/outcome ring pair per application client, at most
    /// [`CLIENTS_PER_NODE_MAX`] (more are closed at once). Client `i`'s
    /// outcomes go to `clients[i].outcomes`.
    pub clients: Vec<ClientPorts>,
    /// Host workers → NIC: `LogApplied` acknowledgements.
    pub acks: RingConsumer,
}

impl HostPorts {
    /// Ports for one application client: its request and outcome rings, and
    /// the host workers' acknowledgement ring.
    pub fn one_client(
        requests: RingConsumer,
        outcomes: RingProducer,
        acks: RingConsumer,
    ) -> HostPorts {
        HostPorts {
            clients: vec![ClientPorts { requests, outcomes }],
            acks,
        }
    }
}

/// Counters of one NIC runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Coordinator counters.
    pub coordinator: CoordinatorStats,
    /// Server counters.
    pub server: ServerStats,
    /// Batching counters.
    pub batch: BatchStats,
    /// NIC object-cache counters.
    pub cache: crate::index::cache::CacheStats,
    /// Client-port counters: requests, outcomes by status, closed clients.
    pub clients: ClientPortStats,
    /// Packets or messages dropped because they did not decode or broke a limit.
    pub bad_packets: u64,
    /// Host acknowledgement ring entries dropped because they did not decode.
    /// (A bad request-ring entry closes its client instead:
    /// [`ClientPortStats::clients_closed`].)
    pub bad_ring_entries: u64,
    /// Iterations run.
    pub iterations: u64,
}

/// Everything a NIC runtime is built from.
pub struct NicParts {
    /// This node.
    pub node: NodeId,
    /// Placement of keys.
    pub placement: Placement,
    /// The host table the DMA engine reads.
    pub table: HostTableLayout,
    /// Largest value the host table stores (bytes).
    pub value_bytes_max: usize,
    /// Registered procedures.
    pub procedures: ProcedureRegistry,
    /// Host memory access.
    pub dma: Box<dyn DmaEngine>,
    /// Network.
    pub transport: Box<dyn Transport>,
    /// Rings to the host.
    pub host: HostPorts,
    /// NIC object-cache capacity in objects ([`crate::index::CACHE_OBJECTS_DEFAULT`]).
    pub cache_objects: usize,
    /// The run's seed; every random choice of this runtime (the NIC cache's
    /// eviction sampling) derives from it and the node id ([`node_seed`]).
    pub seed: u64,
}

/// The seed of node `node`'s random choices in a run seeded with `seed`
/// (SplitMix64 of both, so nodes differ and a run seed reproduces them all).
pub fn node_seed(seed: u64, node: NodeId) -> u64 {
    let mut z = seed ^ (node as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One node's protocol engine.
pub struct NicRuntime {
    io: Io,
    index: NicIndex,
    server: Server,
    coordinator: Coordinator,
    procedures: ProcedureRegistry,
    transport: Box<dyn Transport>,
    clients: Clients,
    acks: RingConsumer,
    rx: Vec<Vec<u8>>,
    completions: Vec<crate::dma::DmaCompletion>,
    ring_buf: Vec<u8>,
    bad_packets: u64,
    bad_ring_entries: u64,
    /// Set when the host's acknowledgement ring failed: without acks, pinned
    /// objects are never released, so the node stops.
    ack_fault: Option<String>,
    iterations: u64,
}

impl std::fmt::Debug for NicRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NicRuntime")
            .field("node", &self.io.node)
            .finish_non_exhaustive()
    }
}

impl NicRuntime {
    /// Assembles a runtime.
    pub fn new(parts: NicParts) -> NicRuntime {
        let mtu = parts.transport.mtu();
        NicRuntime {
            io: Io {
                node: parts.node,
                placement: parts.placement,
                value_bytes_max: parts.value_bytes_max,
                now: 0,
                batcher: Batcher::new(parts.node, parts.placement.nodes(), mtu),
                dma: parts.dma,
                w: Default::default(),
            },
            index: NicIndex::new(
                parts.table,
                parts.cache_objects,
                node_seed(parts.seed, parts.node),
            ),
            server: Server::new(),
            coordinator: Coordinator::new(),
            procedures: parts.procedures,
            transport: parts.transport,
            clients: Clients::new(parts.host.clients),
            acks: parts.host.acks,
            rx: Vec::with_capacity(RX_BURST_MAX * 2),
            completions: Vec::with_capacity(256),
            ring_buf: Vec::with_capacity(4096),
            bad_packets: 0,
            bad_ring_entries: 0,
            ack_fault: None,
            iterations: 0,
        }
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.io.node
    }

    /// Counters so far.
    pub fn stats(&self) -> NicStats {
        NicStats {
            coordinator: self.coordinator.stats(),
            server: self.server.stats(),
            batch: self.io.batcher.stats(),
            cache: self.index.cache_stats(),
            clients: self.clients.stats(),
            bad_packets: self.bad_packets,
            bad_ring_entries: self.bad_ring_entries,
            iterations: self.iterations,
        }
    }

    /// The NIC index (locks and pinned objects), for checks.
    pub fn index(&self) -> &NicIndex {
        &self.index
    }

    /// Clients served (request/outcome ring pairs), in [`HostPorts::clients`] order.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Why client `client` was closed (its request ring is no longer read), or
    /// `None` while it is open (or if there is no such client).
    pub fn client_closed(&self, client: usize) -> Option<&ClientClosed> {
        self.clients.closed(client)
    }

    /// Whether nothing is in flight here: no transactions, server requests, DMA,
    /// queued outcomes or unsent packets. (Packets already in the network are
    /// the driver's to account for.)
    pub fn is_quiescent(&mut self) -> bool {
        self.coordinator.inflight() == 0
            && self.server.inflight() == 0
            && self.io.dma.inflight() == 0
            && self.coordinator.pending_outcomes() == 0
            && self.clients.queued() == 0
            && self.index.locks_held() == 0
            && self.io.batcher.ready().is_empty()
    }

    /// Why this node's NIC runtime stopped for good, if it did: it took a
    /// write it cannot apply (a COMMIT over the host's limits, a host log that
    /// refused an append; see [`crate::protocol::server::Server::fatal`]), or
    /// the host's acknowledgement ring held an entry that is not a
    /// `LogApplied` or was corrupt. From then on [`NicRuntime::run_iteration`]
    /// does nothing; drivers stop the node and report this reason.
    pub fn fault(&self) -> Option<&str> {
        self.server.fatal().or(self.ack_fault.as_deref())
    }

    /// Runs one polling iteration at time `now`; returns whether it did any work.
    pub fn run_iteration(&mut self, now: Nanos) -> bool {
        if self.fault().is_some() {
            // Stopped: the refusals were sent by the iteration that failed.
            return false;
        }
        self.iterations += 1;
        self.io.now = now;
        let mut work = self.poll_network(now);
        work |= self.poll_dma(now);
        work |= self.poll_acks();
        work |= self.start_requests();
        work |= self.clients.deliver(&mut self.coordinator);
        // End of iteration: seal and send every batched packet.
        self.io.batcher.flush();
        if !self.io.batcher.ready().is_empty() {
            let batcher = &mut self.io.batcher;
            let mut ready = std::mem::take(batcher.ready());
            crate::net::send_ready(&mut *self.transport, now, &mut ready, |b| {
                batcher.recycle(b)
            });
            *batcher.ready() = ready;
            self.transport.tx_flush(now);
            work = true;
        }
        work
    }

    /// Step 1: network (and loopback) packets.
    fn poll_network(&mut self, now: Nanos) -> bool {
        let mut rx = std::mem::take(&mut self.rx);
        let batcher = &mut self.io.batcher;
        self.transport.rx_burst(now, RX_BURST_MAX, &mut |p| {
            let mut buf = batcher.spare_buffer();
            buf.extend_from_slice(p);
            rx.push(buf);
        });
        self.io.batcher.take_loopback(&mut rx);
        let work = !rx.is_empty();
        for pkt in rx.drain(..) {
            self.on_packet(&pkt);
            self.io.batcher.recycle(pkt);
        }
        self.rx = rx;
        work
    }

    /// Step 2: DMA completions resume their continuations.
    fn poll_dma(&mut self, now: Nanos) -> bool {
        let mut completions = std::mem::take(&mut self.completions);
        self.io.dma.poll(now, &mut completions);
        let work = !completions.is_empty();
        for c in completions.drain(..) {
            self.server.on_dma(&mut self.io, &mut self.index, &c);
        }
        self.completions = completions;
        self.server.retry_deferred(&mut self.io, &mut self.index);
        work
    }

    /// Step 3: host acknowledgements release pinned objects.
    fn poll_acks(&mut self) -> bool {
        let mut work = false;
        for _ in 0..ACKS_PER_ITERATION_MAX {
            match self.acks.try_pop(&mut self.ring_buf) {
                Ok(true) => {
                    work = true;
                    match HostToNic::decode(&self.ring_buf) {
                        Ok(HostToNic::LogApplied(a)) => {
                            self.index.unpin_applied(a.applied_bytes);
                        }
                        Ok(other) => {
                            self.bad_ring_entries += 1;
                            self.ack_fault = Some(format!(
                                "host acknowledgement ring: unexpected entry {other:?}"
                            ));
                            break;
                        }
                        Err(e) => {
                            self.bad_ring_entries += 1;
                            self.ack_fault =
                                Some(format!("host acknowledgement ring: bad entry: {e}"));
                            break;
                        }
                    }
                }
                Ok(false) => break,
                Err(e) => {
                    self.bad_ring_entries += 1;
                    self.ack_fault = Some(format!("host acknowledgement ring: {e}"));
                    break;
                }
            }
        }
        work
    }

    /// Step 4: new transactions from the applications, fairly over clients.
    fn start_requests(&mut self) -> bool {
        let mut work = false;
        for _ in 0..REQUESTS_PER_ITERATION_MAX {
            if !self.coordinator.has_room() {
                break;
            }
            let Some(req) = self.clients.pop_request(&mut self.ring_buf) else {
                break;
            };
            self.coordinator.start(&mut self.io, &self.procedures, &req);
            work = true;
        }
        work
    }

    /// Checks a decoded message against this node's limits: a value longer
    /// than the host table stores must never reach the host log.
    fn acceptable(&self, body: &Body<'_>) -> bool {
        let max = self.io.value_bytes_max;
        match body {
            Body::Log { items, .. } | Body::Commit { items, .. } => {
                items.iter().all(|it| it.value.len() <= max)
            }
            _ => true,
        }
    }

    fn on_packet(&mut self, pkt: &[u8]) {
        let (hdr, msgs) = match decode_packet(pkt) {
            Ok(x) => x,
            Err(_) => {
                self.bad_packets += 1;
                return;
            }
        };
        if hdr.dst != self.io.node || hdr.src as usize >= self.io.placement.nodes() {
            self.bad_packets += 1;
            return;
        }
        for m in msgs {
            let (_, body) = match m {
                Ok(x) => x,
                Err(_) => {
                    self.bad_packets += 1;
                    return;
                }
            };
            if !self.acceptable(&body) {
                // Counted here; the server refuses it with a reply (never a silent drop).
                self.bad_packets += 1;
            }
            match body {
                Body::Execute { .. }
                | Body::Validate { .. }
                | Body::Log { .. }
                | Body::Commit { .. }
                | Body::Abort { .. } => {
                    self.server
                        .handle(&mut self.io, &mut self.index, hdr.src, &body)
                }
                _ => self
                    .coordinator
                    .on_response(&mut self.io, &self.procedures, hdr.src, &body),
            }
        }
    }
}

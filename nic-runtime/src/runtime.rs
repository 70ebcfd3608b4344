//! The NIC runtime of one node: a polling state machine (DESIGN.md, "one rule
//! for the runtime"). Each [`NicRuntime::run_iteration`] drains what is ready —
//! packets (each lent by the transport, checked by its session, its messages
//! dispatched in place: zero copy, fragments reassembled), loopback packets,
//! DMA completions, host acknowledgements, application requests — and then
//! flushes the Dnl stack (Dandelion §5.1): seal every batched packet, number
//! and send it within its session's window, standalone acks, retransmission
//! and silence timers.
//!
//! Applications reach the runtime through one request/outcome ring pair per
//! client (L5 §3); [`clients`] polls them fairly and routes each outcome to the
//! ring of the client that submitted it.

pub mod clients;
mod dispatch;
mod peers;

use crate::dma::DmaEngine;
use crate::index::HostTableLayout;
use crate::index::NicIndex;
use crate::net::fragment::Reassembly;
use crate::net::session::{SessionEvent, SESSION_EVENTS_MAX};
use crate::net::stack::{NetStats, Stack, StackConfig, StackError};
use crate::net::Transport;
use crate::placement::Placement;
use crate::procedure::ProcedureRegistry;
use crate::protocol::coordinator::{phase_deadline_ns, Coordinator, CoordinatorStats};
use crate::protocol::server::{Server, ServerStats};
use crate::protocol::single_key::{self, SingleKey, SingleKeyStats};
use crate::protocol::{CommitProtocol, CommitProtocolError, Io};
use crate::recovery::restart::RestartState;
pub use crate::recovery::restart::{Availability, RebuildStats, RestartError};
use crate::recovery::wiring::admission;
use crate::recovery::wiring::epoch::RecoveryRuntime;
pub use crate::recovery::wiring::epoch::{
    RecoveryActions, RecoveryRuntimeStats, RECOVERY_INBOX_MAX, RECOVERY_SUSPECTS_MAX,
};
pub use crate::recovery::wiring::mode::NicMode;
use crate::Nanos;
use clients::Clients;
pub use clients::{
    ClientClosed, ClientPortStats, ClientPorts, CLIENTS_PER_NODE_MAX, CLIENT_OUTCOMES_QUEUED_MAX,
    TICKETS_MAX,
};
use splitkv_layout::host_nic::HostToNic;
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::wire::NodeId;

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
    /// Network counters: batching, sessions, fragments (Dandelion Figure 6).
    pub net: NetStats,
    /// NIC object-cache counters.
    pub cache: crate::index::cache::CacheStats,
    /// Client-port counters: requests, outcomes by status, closed clients.
    pub clients: ClientPortStats,
    /// Single-key call counters (GetOne, WriteOne; messages per call).
    pub single_key: SingleKeyStats,
    /// The transport's re-pointed peers and packets from their former
    /// addresses (replacement machines; [`NicRuntime::set_peer_address`]).
    pub peer_addresses: crate::net::PeerAddressStats,
    /// Packets or messages dropped because they did not decode or broke a
    /// limit: packets the sessions dropped as malformed or of another format
    /// version, and messages of accepted packets that did not decode,
    /// reassemble or pass this node's limits. (Drops for identity — other
    /// cluster, stranger, old epoch, incarnation — and duplicates are in
    /// [`NetStats::sessions`].)
    pub bad_packets: u64,
    /// Host acknowledgement ring entries dropped because they did not decode.
    /// (A bad request-ring entry closes its client instead:
    /// [`ClientPortStats::clients_closed`].)
    pub bad_ring_entries: u64,
    /// Session events dropped because [`SESSION_EVENTS_MAX`] were
    /// undrained ([`NicRuntime::drain_session_events`]); the coordinator saw
    /// each before it was dropped.
    pub session_events_dropped: u64,
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
    /// The network stack: cluster id, incarnation, batching switch, session
    /// limits and timers (`StackConfig::default()` for one in-process cluster).
    pub net: StackConfig,
    /// The cluster's commit protocol ([`CommitProtocol::XenicOcc`] by
    /// default; the others are refused until they are built).
    pub commit: CommitProtocol,
}

/// Why a NIC runtime could not be assembled ([`NicRuntime::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NicBuildError {
    /// The network stack refused [`NicParts::net`] or the transport.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// [`NicParts::commit`] names a protocol this build does not run.
    #[error(transparent)]
    Commit(#[from] CommitProtocolError),
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
///
/// # Map (the struct is split over several `impl` files)
/// Fields, by concern:
/// - protocol engine (Xenic §4.2): `io` (node, placement, stack, DMA),
///   `index`, `server`, `coordinator`, `single` (single-key calls,
///   `protocol/single_key.rs`), `procedures`;
/// - network: `transport`, `reassembly` (`runtime/dispatch.rs`);
/// - host: `clients` (`runtime/clients.rs`), `acks`, `completions`,
///   `ring_buf`, `host_applied`;
/// - counters and the stop: `bad_packets`, `bad_ring_entries`, `ack_fault`,
///   `iterations`;
/// - membership: `events`, `events_fresh`, `events_dropped`
///   (`runtime/peers.rs`);
/// - faults ([`crate::recovery`]): `recovery`, `recovery_refusal`,
///   `actions`, `committed_at_resume` (`recovery/wiring/epoch.rs`),
///   `copies` (`recovery/wiring/rereplication.rs`), `restart`
///   (`recovery/restart.rs`), `admission` (`recovery/wiring/admission.rs`).
///
/// Methods, by the file that implements them:
/// - `runtime.rs`: [`new`](Self::new), [`node`](Self::node),
///   [`stats`](Self::stats), [`index`](Self::index), [`room`](Self::room),
///   [`room_mut`](Self::room_mut), [`clients`](Self::clients),
///   [`client_closed`](Self::client_closed),
///   [`is_quiescent`](Self::is_quiescent), [`fault`](Self::fault),
///   [`replace_dma`](Self::replace_dma),
///   [`run_iteration`](Self::run_iteration); steps `poll_dma`,
///   `poll_acks`, `start_requests`;
/// - `runtime/dispatch.rs`: step `poll_network` (packets to their
///   handlers);
/// - `runtime/peers.rs`: [`drain_session_events`](Self::drain_session_events),
///   [`set_epoch`](Self::set_epoch), [`epoch`](Self::epoch),
///   [`apply_configuration`](Self::apply_configuration),
///   [`set_peer_address`](Self::set_peer_address),
///   [`failed_peers`](Self::failed_peers); steps `take_renewed_sessions`,
///   `watch_peers`; and the
///   [`MembershipPort`](crate::membership::MembershipPort) impl;
/// - `recovery/wiring/mode.rs`: [`mode`](Self::mode);
/// - `recovery/wiring/epoch.rs`: [`recovering`](Self::recovering),
///   [`recovery`](Self::recovery), [`recovery_stats`](Self::recovery_stats),
///   [`recovery_actions`](Self::recovery_actions),
///   [`drain_recovery_suspects`](Self::drain_recovery_suspects),
///   [`recovery_refusal`](Self::recovery_refusal); step `poll_recovery`;
/// - `recovery/wiring/admission.rs`: [`await_admission`](Self::await_admission),
///   [`awaiting_admission`](Self::awaiting_admission),
///   [`admission_drops`](Self::admission_drops);
/// - `recovery/wiring/rereplication.rs`:
///   [`serve_copy_reads`](Self::serve_copy_reads),
///   [`needs_copy_reads`](Self::needs_copy_reads),
///   [`take_caught_up`](Self::take_caught_up), [`copying`](Self::copying),
///   [`sourcing_copies`](Self::sourcing_copies),
///   [`copy_stats`](Self::copy_stats);
/// - `recovery/restart/restart_nic.rs`: [`availability`](Self::availability),
///   [`rebuild_stats`](Self::rebuild_stats),
///   [`incarnation`](Self::incarnation), [`restart_nic`](Self::restart_nic);
///   step `poll_rebuild`;
/// - `recovery/restart/requery.rs`, `recovery/restart/decide.rs`: the
///   rebuild's queries again after a renewed session, and its decisions.
/// - `lib.rs`: the [`Component`](crate::Component) impl.
pub struct NicRuntime {
    pub(crate) io: Io,
    pub(crate) index: NicIndex,
    pub(crate) server: Server,
    pub(crate) coordinator: Coordinator,
    /// Single-key calls as caller and as primary (`protocol/single_key.rs`).
    pub(crate) single: SingleKey,
    pub(crate) procedures: ProcedureRegistry,
    pub(crate) transport: Box<dyn Transport>,
    pub(crate) reassembly: Reassembly,
    pub(crate) clients: Clients,
    pub(crate) acks: RingConsumer,
    pub(crate) completions: Vec<crate::dma::DmaCompletion>,
    pub(crate) ring_buf: Vec<u8>,
    pub(crate) bad_packets: u64,
    pub(crate) bad_ring_entries: u64,
    /// Set when the host's acknowledgement ring failed: without acks, pinned
    /// objects are never released, so the node stops.
    pub(crate) ack_fault: Option<String>,
    /// Session events seen by the coordinator, kept for the membership layer.
    pub(crate) events: Vec<SessionEvent>,
    pub(crate) events_fresh: Vec<SessionEvent>,
    pub(crate) events_dropped: u64,
    pub(crate) iterations: u64,
    /// Crash recovery: the machine, its inbox and the pause.
    pub(crate) recovery: RecoveryRuntime,
    pub(crate) recovery_refusal: Option<crate::recovery::RecoveryError>,
    pub(crate) actions: RecoveryActions,
    /// The host log position the host workers last acknowledged as applied.
    pub(crate) host_applied: u64,
    /// The coordinator's commits when the last recovery epoch resumed.
    pub(crate) committed_at_resume: u64,
    /// Re-replication: copies run here as source or target.
    pub(crate) copies: crate::recovery::rereplication::Copies,
    /// The NIC restart: a restart of this NIC runtime alone and the rebuild
    /// after it.
    pub(crate) restart: RestartState,
    /// A restarted node's wait for its admission (rejoin).
    pub(crate) admission: admission::Admission,
    /// The cluster's commit protocol ([`NicParts::commit`]).
    commit: CommitProtocol,
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
    ///
    /// # Errors
    /// [`NicBuildError::Stack`] if the network stack cannot be built from
    /// [`NicParts::net`] and the transport (bad session limits, incarnation
    /// 0, an MTU too small, a node outside the placement);
    /// [`NicBuildError::Commit`] if [`NicParts::commit`] is not implemented
    /// yet ([`CommitProtocol::check_implemented`]).
    pub fn new(parts: NicParts) -> Result<NicRuntime, NicBuildError> {
        let commit = parts.commit.check_implemented()?;
        let nodes = parts.placement.nodes();
        let mut net = Stack::new(
            parts.node,
            nodes,
            parts.transport.mtu(),
            parts.transport.is_lossy(),
            &parts.net,
        )?;
        net.set_inline_bytes_max(parts.transport.inline_bytes_max());
        net.attach_lender(parts.transport.as_ref(), &parts.net);
        let mut coordinator = Coordinator::new();
        coordinator.set_commit_protocol(commit);
        let phase_ns = phase_deadline_ns(parts.net.session.silence_ns);
        coordinator.set_phase_deadline_ns(phase_ns);
        Ok(NicRuntime {
            io: Io {
                node: parts.node,
                placement: parts.placement,
                value_bytes_max: parts.value_bytes_max,
                now: 0,
                net,
                dma: parts.dma,
                w: Default::default(),
                send_fault: None,
            },
            index: NicIndex::new(
                parts.table,
                parts.cache_objects,
                node_seed(parts.seed, parts.node),
            ),
            server: Server::new(),
            coordinator,
            single: SingleKey::new(TICKETS_MAX, phase_ns),
            procedures: parts.procedures,
            transport: parts.transport,
            reassembly: Reassembly::new(nodes),
            clients: Clients::new(parts.host.clients),
            acks: parts.host.acks,
            completions: Vec::with_capacity(256),
            ring_buf: Vec::with_capacity(4096),
            bad_packets: 0,
            bad_ring_entries: 0,
            ack_fault: None,
            events: Vec::with_capacity(SESSION_EVENTS_MAX),
            events_fresh: Vec::with_capacity(SESSION_EVENTS_MAX),
            events_dropped: 0,
            iterations: 0,
            recovery: RecoveryRuntime::new(
                parts.node,
                parts.placement,
                crate::recovery::RecoveryConfig::for_silence(parts.net.session.silence_ns)
                    .with_rule(crate::recovery::RecoveryRule::of(commit)),
            ),
            recovery_refusal: None,
            actions: Default::default(),
            host_applied: 0,
            committed_at_resume: 0,
            copies: crate::recovery::rereplication::Copies::new(parts.node),
            restart: RestartState::new(parts.net),
            admission: Default::default(),
            commit,
        })
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.io.node
    }

    /// The commit protocol this runtime runs ([`NicParts::commit`];
    /// `/status`'s `nic.protocol`).
    pub fn commit_protocol(&self) -> CommitProtocol {
        self.commit
    }

    /// Counters so far.
    pub fn stats(&self) -> NicStats {
        NicStats {
            coordinator: self.coordinator.stats(),
            server: self.server.stats(),
            net: NetStats {
                fragments: self.reassembly.stats(),
                ..self.io.net.stats()
            },
            cache: self.index.cache_stats(),
            clients: self.clients.stats(),
            single_key: self.single.stats(),
            peer_addresses: self.transport.peer_address_stats(),
            bad_packets: self.bad_packets
                + self.io.net.stats().sessions.drops.malformed
                + self.io.net.stats().sessions.drops.bad_version,
            bad_ring_entries: self.bad_ring_entries,
            session_events_dropped: self.events_dropped,
            iterations: self.iterations,
        }
    }

    /// The NIC index (locks and pinned objects), for checks.
    pub fn index(&self) -> &NicIndex {
        &self.index
    }

    /// The records this node's server would report to crash recovery now
    /// (at most [`LOCAL_EVIDENCE_ENTRIES_MAX`](crate::recovery::LOCAL_EVIDENCE_ENTRIES_MAX);
    /// `Server::recovery_evidence`), for checks.
    pub fn recovery_records(&self) -> Vec<splitkv_layout::wire::RecordEvidence> {
        let mut out = Vec::new();
        let max = crate::recovery::LOCAL_EVIDENCE_ENTRIES_MAX;
        self.server.recovery_evidence(max, &mut out);
        out
    }

    /// The room of the shard this node is primary of (the room rule; see
    /// [`Room`](crate::protocol::server::Room)).
    pub fn room(&self) -> &crate::protocol::server::Room {
        self.server.room()
    }

    /// The room, mutably: the cluster builder sets the quota and the loader
    /// adds the rows it wrote, while the node does not run.
    pub fn room_mut(&mut self) -> &mut crate::protocol::server::Room {
        self.server.room_mut()
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
    /// queued outcomes, unsent or unacknowledged packets. (Packets already in
    /// the network are the driver's to account for.)
    pub fn is_quiescent(&mut self) -> bool {
        self.coordinator.inflight() == 0
            && self.single.inflight() == 0
            && self.server.inflight() == 0
            && self.io.dma.inflight() == 0
            && self.coordinator.pending_outcomes() == 0
            && self.clients.queued() == 0
            && self.index.locks_held() == 0
            && self.io.net.is_idle()
            && !self.restart.rebuilding()
    }

    /// Why this node's NIC runtime stopped for good, if it did: it took a
    /// write it cannot apply (a COMMIT over the host's limits, a host log that
    /// refused an append; see [`crate::protocol::server::Server::fatal`]), or
    /// the host's acknowledgement ring held an entry that is not a
    /// `LogApplied` or was corrupt. From then on [`NicRuntime::run_iteration`]
    /// does nothing; drivers stop the node and report this reason.
    pub fn fault(&self) -> Option<&str> {
        self.server.fatal().or(self.ack_fault.as_deref()).or(self
            .io
            .send_fault
            .as_ref()
            .map(|f| f.reason.as_str()))
    }

    /// Swaps the DMA engine for `dma` and returns the old one (the
    /// simulator wraps it in seeded latencies). Call while none is in flight.
    pub fn replace_dma(&mut self, dma: Box<dyn DmaEngine>) -> Box<dyn DmaEngine> {
        std::mem::replace(&mut self.io.dma, dma)
    }

    /// Runs one polling iteration at time `now`; returns whether it did any work.
    ///
    /// Its stages, in order (each drains what is ready, then the next runs):
    /// 0. stopped ([`NicRuntime::fault`]): nothing more — `runtime.rs`;
    /// 1. `poll_network`: packets from the transport and loopback, checked
    ///    by their sessions, messages dispatched to the coordinator, server,
    ///    recovery inbox, copies or rebuild — `runtime/dispatch.rs`;
    /// 2. `poll_dma`: DMA completions resume the server's continuations —
    ///    `runtime.rs`;
    /// 3. `poll_acks`: host acknowledgements release pinned objects —
    ///    `runtime.rs`;
    /// 4. `take_renewed_sessions`: peers whose process is new (recovery
    ///    resends, rebuild asks again, copies restart) — `runtime/peers.rs`;
    /// 5. `poll_recovery`: the recovery epoch's machine and its commands —
    ///    `recovery/wiring/epoch.rs`;
    /// 6. copies step (not while recovery pauses the node) —
    ///    `recovery/rereplication/source.rs`;
    /// 7. `poll_rebuild`: the rebuild after a NIC restart —
    ///    `recovery/restart/restart_nic.rs`;
    /// 8. `start_requests`: new client transactions, only while
    ///    [`NicMode::Serving`] — `runtime.rs`;
    /// 9. `watch_peers`: session events to the coordinator, and its
    ///    deadline rules (not while recovery pauses) — `runtime/peers.rs`;
    /// 10. the outcomes of single-key writes this node coordinated for
    ///     callers go back to them — `protocol/single_key.rs`; the rest to
    ///     the clients' rings — `runtime/clients.rs`;
    /// 11. flush: seal, number and send every batched packet (Dandelion
    ///     §5.1) — `net/stack.rs`.
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
        work |= self.take_renewed_sessions();
        work |= self.poll_recovery(now);
        if !self.recovery.paused() {
            work |= self.copies.step(&mut self.io);
        }
        work |= self.poll_rebuild(now);
        work |= self.start_requests();
        work |= self.watch_peers();
        work |= self
            .single
            .reply_forwarded(&mut self.io, &mut self.coordinator);
        work |= self.clients.deliver(&mut self.coordinator);
        // End of iteration: seal, number and send every batched packet.
        work |= self.io.net.flush(now, &mut *self.transport);
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
                            self.host_applied = self.host_applied.max(a.applied_bytes);
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

    /// Step 4: new transactions from the applications, fairly over clients
    /// (only while [`NicMode::Serving`]: otherwise they wait in their rings).
    fn start_requests(&mut self) -> bool {
        if self.mode_in_iteration() != NicMode::Serving {
            // Recovering, rebuilding or awaiting admission. A recovery
            // epoch counts its paused iterations, also those a rebuild
            // (which takes precedence in the mode) overlaps.
            if self.recovery.paused() {
                self.recovery.count_paused_iteration();
            }
            return false;
        }
        let mut work = false;
        for _ in 0..REQUESTS_PER_ITERATION_MAX {
            // Admission control: no new transaction while a backlog toward
            // some peer is past its high-water mark (`net::batch`).
            if !self.coordinator.has_room() || self.io.net.congested() {
                break;
            }
            let Some(req) = self.clients.pop_request(&mut self.ring_buf) else {
                break;
            };
            if single_key::is_single_key(req.procedure) {
                self.single
                    .start(&mut self.io, &mut self.coordinator, &self.procedures, &req);
            } else {
                self.coordinator.start(&mut self.io, &self.procedures, &req);
            }
            work = true;
        }
        work
    }
}

//! A server role alone with its `Io` (node 0): the server tests drive it by
//! hand, delivering requests from [`PEER`], running its DMA and reading the
//! replies it sent and the records it appended to the host log.

use splitkv_layout::log_record::{LogRecord, LogRecords};
use splitkv_layout::ring::{ring_pair, RingConsumer};
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::wire::{decode_packet, Body, BodyWriter, NodeId};
use splitkv_layout::Region;
use splitkv_nic::dma::local::LocalDma;
use splitkv_nic::dma::{DmaCompletion, DmaEngine};
use splitkv_nic::index::{HostTableLayout, NicIndex};
use splitkv_nic::net::stack::{Stack, StackConfig};
use splitkv_nic::protocol::server::Server;
use splitkv_nic::protocol::Io;
use splitkv_nic::Placement;
use std::sync::Arc;

/// The node requests come from (their coordinator).
pub const PEER: NodeId = 1;
/// The largest value of a [`ServerRig::new`] rig (bytes).
pub const VALUE_BYTES_MAX: usize = 64;
/// The packet size of the rig's stack (bytes).
pub const MTU: usize = 4096;

/// Node 0's server, its `Io` (a stack nobody drains but the test) and NIC
/// index.
pub struct ServerRig {
    /// Node 0's `Io`; [`ServerRig::pump`] moves `io.now`.
    pub io: Io,
    /// The NIC index the server locks and caches in.
    pub index: NicIndex,
    /// The server under test.
    pub server: Server,
    /// The host log, when the DMA engine is a [`LocalDma`].
    pub log: Option<RingConsumer>,
}

/// The host table of a rig: 256 keys, values of at most [`VALUE_BYTES_MAX`]
/// bytes.
pub fn table_layout() -> TableLayout {
    TableLayout::new(&TableConfig::new(256, VALUE_BYTES_MAX)).unwrap()
}

impl ServerRig {
    /// Node 0 of `placement` (2 nodes) over an empty host table (every
    /// uncached key is absent) and a host log the test reads.
    pub fn new(placement: Placement) -> ServerRig {
        let (log_tx, log_rx) = ring_pair(1 << 20).unwrap();
        let region = Region::new(table_layout().region_bytes());
        let dma = LocalDma::new(Arc::new(region), log_tx, 0);
        ServerRig::with_dma(placement, Box::new(dma), Some(log_rx), VALUE_BYTES_MAX)
    }

    /// Node 0 of `placement` (2 nodes) over `dma`, with host log `log` if
    /// the test reads one, taking values of at most `value_bytes_max` bytes.
    pub fn with_dma(
        placement: Placement,
        dma: Box<dyn DmaEngine>,
        log: Option<RingConsumer>,
        value_bytes_max: usize,
    ) -> ServerRig {
        ServerRig {
            io: Io {
                node: 0,
                placement,
                value_bytes_max,
                now: 0,
                net: Stack::new(0, 2, MTU, false, &StackConfig::default()).unwrap(),
                dma,
                w: BodyWriter::new(),
                send_fault: None,
            },
            index: NicIndex::new(HostTableLayout::Robinhood(table_layout()), 64, 1),
            server: Server::new(),
            log,
        }
    }

    /// Delivers the request in `w` from [`PEER`]; its DMA stays in flight.
    pub fn deliver(&mut self, w: &BodyWriter) {
        let body = Body::decode(w.kind(), w.bytes()).unwrap();
        self.server
            .handle(&mut self.io, &mut self.index, PEER, &body);
    }

    /// Runs the DMA engine for 64 ticks of 1 ns, handing every completion to
    /// the server and letting it retry what it deferred.
    pub fn pump(&mut self) {
        let mut done: Vec<DmaCompletion> = Vec::new();
        for _ in 0..64 {
            self.io.now += 1;
            self.io.dma.poll(self.io.now, &mut done);
            for c in done.drain(..) {
                self.server.on_dma(&mut self.io, &mut self.index, &c);
            }
            self.server.retry_deferred(&mut self.io, &mut self.index);
        }
    }

    /// The messages sent since the last call, each as `f` reads it; asserts
    /// that they all went to [`PEER`] (replies go to the requester).
    pub fn replies_with<T>(&mut self, mut f: impl FnMut(Body<'_>) -> T) -> Vec<T> {
        self.io.net.seal();
        let mut out = Vec::new();
        let backlogs = self.io.net.batcher_mut().backlogs_mut();
        for (dst, q) in backlogs.iter().enumerate() {
            assert!(
                dst == PEER as usize || q.is_empty(),
                "replies go to the requester"
            );
        }
        for p in backlogs[PEER as usize].drain(..) {
            let (_, msgs) = decode_packet(&p).unwrap();
            for m in msgs {
                out.push(f(m.unwrap().1));
            }
        }
        out
    }

    /// The records appended to the host log since the last call, each as `f`
    /// reads it.
    pub fn logged_with<T>(&mut self, mut f: impl FnMut(LogRecord<'_>) -> T) -> Vec<T> {
        let log = self.log.as_mut().expect("a LocalDma rig");
        let mut out = Vec::new();
        let mut entry = Vec::new();
        while log.try_pop(&mut entry).unwrap() {
            out.extend(LogRecords::new(&entry).map(|r| f(r.unwrap())));
        }
        out
    }
}

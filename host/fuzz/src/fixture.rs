//! The tables, host-memory images and node the fuzz targets run against.
//!
//! Every fixture is small (tens of keys) so that one fuzz input runs in
//! microseconds, and shaped to reach the deep paths: the Robinhood table has a
//! low D_m and small segments, so keys spill into overflow buckets, and values
//! over 256 B, so some live in the value heap; the DLHT has more keys than
//! bins, so chains grow link buckets, and one long (out-of-line) value.

use splitkv_host::table::dlht::dma::DlhtDma;
use splitkv_host::table::dlht::Dlht;
use splitkv_host::table::{RobinhoodTable, TableKind};
use splitkv_host::{build_node, Node, NodeConfig};
use splitkv_layout::dlht_layout::dma::{split, DmaDescriptor, DESCRIPTOR_OFFSET};
use splitkv_layout::dlht_layout::LINE_BYTES;
use splitkv_layout::robinhood_layout::{TableConfig, TableLayout};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta, Region, RegionError};
use splitkv_nic::dma::{HostMemory, HostMemoryError};
use splitkv_nic::net::mem::{mem_network, MemTransport};
use splitkv_nic::procedure::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};
use splitkv_nic::{Placement, ProcedureRegistry};
use std::sync::{Arc, OnceLock};

/// Keys loaded into every fixture table: `Key::new(0, 0 .. KEYS_LOADED)`.
pub const KEYS_LOADED: u64 = 24;
/// Longest value of the Robinhood fixtures (over the 256 B inline limit).
pub const ROBINHOOD_VALUE_BYTES_MAX: usize = 300;
/// Nodes of the fuzzed cluster; the fuzzed node is node 0.
pub const NODES: usize = 3;

/// The key a fuzz choice names: a loaded key for `choice < KEYS_LOADED`, an
/// absent one of the same table just past them, or one of another table.
pub fn key_for(choice: u8) -> Key {
    let c = choice as u64;
    if c < 2 * KEYS_LOADED {
        Key::new(0, c)
    } else {
        Key::new(1 + (c % 3) as u32, c)
    }
}

/// The value loaded under key id `id`, at most `max` bytes; every fourth
/// value is longer than the Robinhood inline limit when `max` allows it.
pub fn value_of(id: u64, max: usize) -> Vec<u8> {
    let len = if id % 4 == 3 {
        max
    } else {
        (id as usize * 3) % 9
    };
    (0..len.min(max)).map(|i| (id as u8) ^ (i as u8)).collect()
}

/// The metadata loaded with key id `id`: version `id + 1`, readable.
pub fn meta_of(id: u64) -> ObjectMeta {
    ObjectMeta::new(id + 1, ObjectFlags::READABLE)
}

/// The Robinhood fixture's configuration: D_m = 2 and 4-slot segments, so
/// that [`KEYS_LOADED`] keys use the overflow buckets.
pub fn robinhood_config() -> TableConfig {
    TableConfig {
        d_max: 2,
        segment_slots: 4,
        overflow_fraction_pct: 50,
        bucket_slots: 2,
        ..TableConfig::new(KEYS_LOADED as usize + 8, ROBINHOOD_VALUE_BYTES_MAX)
    }
}

/// A loaded Robinhood table and a copy of its region's bytes.
#[derive(Debug)]
pub struct RobinhoodImage {
    /// The table (for the expected answers).
    pub table: RobinhoodTable,
    /// Its layout.
    pub layout: TableLayout,
    /// The region's bytes after loading.
    pub bytes: Vec<u8>,
}

/// The Robinhood fixture, built once per process.
///
/// # Panics
/// If the fixture does not fit its own configuration (a harness bug).
pub fn robinhood_image() -> &'static RobinhoodImage {
    static IMAGE: OnceLock<RobinhoodImage> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let mut table = RobinhoodTable::new(&robinhood_config()).expect("fixture config");
        for id in 0..KEYS_LOADED {
            let value = value_of(id, ROBINHOOD_VALUE_BYTES_MAX);
            table
                .upsert(Key::new(0, id), meta_of(id), &value)
                .expect("fixture fits");
        }
        let layout = *table.layout();
        let mut bytes = vec![0u8; table.region().len_bytes()];
        table
            .region()
            .read_bytes(0, &mut bytes)
            .expect("whole region");
        RobinhoodImage {
            table,
            layout,
            bytes,
        }
    })
}

/// A loaded DLHT and a copy of its DMA address space, line by line
/// (line 0 the descriptor, then the bins, then the link buckets).
#[derive(Debug)]
pub struct DlhtImage {
    /// The table (for the expected answers).
    pub table: Arc<Dlht>,
    /// Bins of the copied generation.
    pub bin_count: usize,
    /// The copied lines.
    pub lines: Vec<[u8; LINE_BYTES]>,
}

/// The DLHT fixture, built once per process: [`KEYS_LOADED`] keys in a
/// table sized for fewer (so chains use link buckets), one value out of line.
///
/// # Panics
/// If the fixture cannot be built (a harness bug).
pub fn dlht_image() -> &'static DlhtImage {
    static IMAGE: OnceLock<DlhtImage> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let table = Arc::new(Dlht::with_capacity(8));
        for id in 0..KEYS_LOADED {
            let max = if id == 7 { 20 } else { 8 };
            table
                .upsert(Key::new(0, id), meta_of(id), &value_of(id, max))
                .expect("fixture fits");
        }
        let mem = DlhtDma::new(table.clone());
        let mut line = [0u8; LINE_BYTES];
        mem.read(DESCRIPTOR_OFFSET, &mut line).expect("descriptor");
        let d = DmaDescriptor::decode(&line).expect("descriptor decodes");
        let mut lines = vec![line];
        for l in 1..1 + d.bin_count + d.link_lines {
            let at = splitkv_layout::dlht_layout::dma::offset(d.bin_count, l);
            // Link index 0 is unused; the host may refuse it.
            line = [0u8; LINE_BYTES];
            let _ = mem.read(at, &mut line);
            lines.push(line);
        }
        DlhtImage {
            table,
            bin_count: d.bin_count,
            lines,
        }
    })
}

/// A DLHT's DMA address space served from a copy, as `DlhtDma` serves the
/// live table: the descriptor at offset 0, a read addressed with another bin
/// count refused as stale, reads within one line only.
#[derive(Debug, Clone)]
pub struct DlhtMemory {
    /// Bins the copy was taken with.
    pub bin_count: usize,
    /// The lines (see [`DlhtImage::lines`]); fuzz targets overwrite words.
    pub lines: Vec<[u8; LINE_BYTES]>,
}

impl HostMemory for DlhtMemory {
    fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), HostMemoryError> {
        let oob = || {
            HostMemoryError::OutOfBounds(RegionError {
                offset,
                len: dst.len(),
                region_bytes: 0,
            })
        };
        let within = offset % LINE_BYTES;
        if within % 8 != 0 || dst.len() % 8 != 0 || within + dst.len() > LINE_BYTES {
            return Err(oob());
        }
        let line = match split(offset - within) {
            None => 0,
            Some((bins, _)) if bins != self.bin_count => return Err(HostMemoryError::Stale),
            Some((_, line)) => line,
        };
        let src = self.lines.get(line).ok_or_else(oob)?;
        dst.copy_from_slice(&src[within..within + dst.len()]);
        Ok(())
    }
}

/// A node 0 of a [`NODES`]-node cluster with replication 3, its table loaded
/// with [`KEYS_LOADED`] keys, and the in-process endpoints of its peers.
#[derive(Debug)]
pub struct FuzzNode {
    /// The node (NIC runtime, host worker, client).
    pub node: Node,
    /// Endpoints of nodes 1.. (index 0 is node 1).
    pub peers: Vec<MemTransport>,
}

/// The fuzzed node's one procedure (id 0). Args: `reads: u8`, then key
/// choices ([`key_for`]): the first `reads` are read, the rest written, each
/// with the first value read (or its own choice byte if none was read).
#[derive(Debug, Clone, Copy)]
pub struct ReadWrite;

impl Procedure for ReadWrite {
    fn name(&self) -> &'static str {
        "fuzz-read-write"
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let (&reads, keys) = args.split_first().ok_or(ProcError::BadArgs("empty"))?;
        let reads = (reads as usize).min(keys.len());
        keys[..reads].iter().for_each(|&c| plan.read(key_for(c)));
        keys[reads..].iter().for_each(|&c| plan.write(key_for(c)));
        plan.check()
    }

    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let reads_n = (args[0] as usize).min(args.len() - 1);
        let first = args[1..1 + reads_n]
            .first()
            .and_then(|&c| reads.get(&key_for(c)));
        for &c in &args[1 + reads_n..] {
            let own = [c];
            let value = first.map_or(&own[..], |v| &v[..v.len().min(8)]);
            writes.put(key_for(c), value);
        }
        result.push(reads.len() as u8);
        Ok(())
    }
}

/// Builds a [`FuzzNode`] over the given table kind with small rings, running
/// the [`ReadWrite`] procedure as id 0.
///
/// # Panics
/// If the fixture cannot be built (a harness bug).
pub fn fuzz_node(kind: TableKind) -> FuzzNode {
    let placement = Placement::new(NODES, 3).expect("3 of 3");
    let mut cfg = match kind {
        TableKind::Robinhood => NodeConfig {
            table: robinhood_config(),
            ..NodeConfig::new(0, placement, 1, ROBINHOOD_VALUE_BYTES_MAX)
        },
        TableKind::Dlht => NodeConfig::new(0, placement, KEYS_LOADED as usize, 8),
    };
    cfg.table_kind = kind;
    cfg.log_ring_bytes = 64 << 10;
    cfg.app_ring_bytes = 16 << 10;
    cfg.ack_ring_bytes = 4 << 10;
    cfg.cache_objects = 16;
    let mut net = mem_network(NODES);
    let peers = net.split_off(1);
    let transport = net.pop().expect("node 0's endpoint");
    let mut procedures = ProcedureRegistry::new();
    procedures.register(Arc::new(ReadWrite));
    let mut node = build_node(&cfg, procedures, Box::new(transport)).expect("fixture node");
    let max = node.worker.table().value_bytes_max();
    for id in 0..KEYS_LOADED {
        node.worker
            .table_mut()
            .upsert(Key::new(0, id), meta_of(id), &value_of(id, max))
            .expect("fixture fits");
    }
    FuzzNode { node, peers }
}

/// A fresh [`Region`] holding `bytes` (a multiple of 8 long).
///
/// # Panics
/// If `bytes` is not a whole number of words.
pub fn region_from(bytes: &[u8]) -> Region {
    let region = Region::new(bytes.len());
    region.write_bytes(0, bytes).expect("whole region");
    region
}

//! Xenic Table 2 reproduced: mean objects read and mean DMA round trips per
//! NIC lookup in the host Robinhood table at 90% occupancy, for several D_m.
//!
//! The table is the real host table and the lookups are the NIC runtime's own
//! [`RobinhoodLookup`] state machine (d_i + k, adjacent read, overflow chain), fed by
//! direct copies of host memory instead of a DMA engine. Hints are either
//! learned by a warm-up scan (what a NIC that saw every insertion would know)
//! or learned on the fly from the lookups themselves ("cold").

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::table::robinhood::{RobinhoodError, RobinhoodTable};
use splitkv_layout::robinhood_layout::{TableConfig, D_MAX_LIMIT};
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::dma::read_vector;
use splitkv_nic::index::hints::SegmentHints;
use splitkv_nic::index::robinhood_lookup::RobinhoodLookup;
use splitkv_nic::index::Next;

/// D_m used for "unlimited" (the layout's upper bound; never reached at 90%).
pub const D_MAX_UNLIMITED: usize = D_MAX_LIMIT;

/// One configuration of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LookupSpec {
    /// Table capacity in keys; the table gets `next_pow2(keys · 10/9)` home
    /// slots and is filled to 90% of them.
    pub keys: usize,
    /// Maximum displacement D_m.
    pub d_max: usize,
    /// Home slots per segment (one NIC index entry each).
    pub segment_slots: usize,
    /// Learn hints by a warm-up scan (true) or only from lookups (false).
    pub warm: bool,
    /// Seed of the random keys.
    pub seed: u64,
}

/// The figures of one configuration.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LookupRow {
    /// D_m (4096 = unlimited).
    pub d_max: usize,
    /// Home slots per segment.
    pub segment_slots: usize,
    /// Hints from a warm-up scan?
    pub warm: bool,
    /// Keys in the table.
    pub keys: usize,
    /// Keys / home slots.
    pub occupancy: f64,
    /// Keys stored in overflow buckets.
    pub overflow_keys: usize,
    /// Mean objects (slots) transferred per lookup.
    pub objects_read: f64,
    /// Mean DMA reads per lookup.
    pub round_trips: f64,
    /// Mean known displacement d_i over segments after the run.
    pub d_known_mean: f64,
}

/// A lookup that did not find a key it had inserted, or a table error.
#[derive(Debug, thiserror::Error)]
pub enum LookupReportError {
    /// The table refused a key.
    #[error("table: {0}")]
    Table(#[from] RobinhoodError),
    /// A lookup missed an inserted key or failed.
    #[error("lookup of {0:?} did not find it: {1}")]
    Lost(Key, String),
}

/// Builds the table, looks every key up once (in random order), and reports.
pub fn run(
    spec: &LookupSpec,
    mut progress: impl FnMut(&str, u64, u64),
) -> Result<LookupRow, LookupReportError> {
    let mut cfg = TableConfig::new(spec.keys, 8);
    cfg.d_max = spec.d_max;
    cfg.segment_slots = spec.segment_slots;
    // At 90% with a small D_m many keys overflow; give the pool room.
    cfg.overflow_fraction_pct = 40;
    let mut table = RobinhoodTable::new(&cfg)?;
    let layout = *table.layout();
    let n = layout.home_slots() * 9 / 10;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let mut keys = Vec::with_capacity(n);
    let meta = ObjectMeta::new(1, ObjectFlags::empty());
    while keys.len() < n {
        let k = Key::new(0, rng.gen());
        if table.upsert(k, meta, &[7u8; 8])? {
            keys.push(k);
            if keys.len() % (1 << 20) == 0 {
                progress("insert", keys.len() as u64, n as u64);
            }
        }
    }
    let mut hints = SegmentHints::new(&layout);
    let mut buf = Vec::new();
    if spec.warm {
        buf.resize(layout.region_bytes(), 0);
        table
            .region()
            .read_bytes(0, &mut buf)
            .expect("whole region");
        hints
            .warm_up(&layout, &buf)
            .map_err(|e| LookupReportError::Lost(Key::default(), e.to_string()))?;
    }
    // Random lookup order (Fisher–Yates with the same generator).
    for i in (1..keys.len()).rev() {
        keys.swap(i, rng.gen_range(0..=i));
    }
    let (mut reads, mut slots) = (0u64, 0u64);
    for (i, k) in keys.iter().enumerate() {
        let (mut l, mut step) = RobinhoodLookup::start(&layout, &hints, *k);
        loop {
            match step {
                Next::Read(v, n) => {
                    read_vector(table.region(), &v[..n], &mut buf).expect("in range");
                    step = l.advance(&layout, &mut hints, &buf);
                }
                Next::Found { .. } => break,
                Next::Absent => return Err(LookupReportError::Lost(*k, "absent".into())),
                Next::Failed(e) => return Err(LookupReportError::Lost(*k, e.to_string())),
            }
        }
        reads += l.reads as u64;
        slots += l.slots_read as u64;
        if i % (1 << 20) == 0 {
            progress("lookup", i as u64, n as u64);
        }
    }
    let d_sum: u64 = (0..hints.segments()).map(|s| hints.d_known(s) as u64).sum();
    Ok(LookupRow {
        d_max: spec.d_max,
        segment_slots: layout.segment_slots(),
        warm: spec.warm,
        keys: n,
        occupancy: n as f64 / layout.home_slots() as f64,
        overflow_keys: table.overflow_len(),
        objects_read: slots as f64 / n as f64,
        round_trips: reads as f64 / n as f64,
        d_known_mean: d_sum as f64 / hints.segments() as f64,
    })
}

//! The segment-entry object cache (Xenic §4.1.3, ScaleStore §4.1) against a
//! simple model: random sequences of clean inserts, committed installs, pin
//! positions, host acknowledgements and lookups, on few segment entries so that
//! overflow pages are chained and returned all the time.
//!
//! After every operation:
//! - every object the model says is pinned is cached, pinned, and holds the
//!   last committed value; the pinned counts agree;
//! - every cached key holds the last value installed for it (committed, or a
//!   newer clean read the cache accepted);
//! - the object count is within the capacity unless every cached object is
//!   pinned, and a clean insert is refused only in that case;
//! - overflow pages in use equal the pages the entries' lengths need, and
//!   pages in use plus free pages equal the pool;
//! - the structure's own invariant check passes.

use proptest::prelude::*;
use splitkv_layout::{Key, ObjectFlags, ObjectMeta};
use splitkv_nic::index::cache::{
    ObjectCache, Segmentation, OVERFLOW_PAGE_POSITIONS, SEGMENT_CACHE_POSITIONS,
};
use std::collections::{BTreeMap, VecDeque};

const KEYS: u64 = 96;

#[derive(Debug, Clone)]
enum Op {
    InsertClean { key: u64, version: u64, len: usize },
    InstallCommitted { key: u64, len: usize },
    SetPin { key: u64, stale: bool, gap: u64 },
    UnpinApplied { share_pct: u64 },
    Get { key: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..KEYS, 0..24u64, 0..24usize)
            .prop_map(|(key, version, len)| Op::InsertClean { key, version, len }),
        3 => (0..KEYS, 0..24usize).prop_map(|(key, len)| Op::InstallCommitted { key, len }),
        3 => (0..KEYS, prop::bool::weighted(0.1), 1..50u64)
            .prop_map(|(key, stale, gap)| Op::SetPin { key, stale, gap }),
        2 => (0..=100u64).prop_map(|share_pct| Op::UnpinApplied { share_pct }),
        3 => (0..KEYS).prop_map(|key| Op::Get { key }),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pin {
    Pending(u64),
    At(u64),
}

#[derive(Default)]
struct Model {
    /// What the cache must hold for a key whenever the key is cached.
    expect: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Last committed version per key (commits are monotonic per key; clean
    /// reads may carry any version, older or newer).
    committed: BTreeMap<u64, u64>,
    pins: BTreeMap<u64, Pin>,
    queue: VecDeque<(u64, u64)>,
    log_tail: u64,
    applied: u64,
}

fn key(i: u64) -> Key {
    Key::new((i % 3) as u32, i)
}

fn value(key: u64, version: u64, len: usize, step: usize) -> Vec<u8> {
    (0..len)
        .map(|j| (key as usize * 31 + version as usize * 7 + step + j) as u8)
        .collect()
}

fn meta(version: u64) -> ObjectMeta {
    ObjectMeta::new(version, ObjectFlags::empty())
}

fn check(c: &ObjectCache, m: &Model) -> Result<(), TestCaseError> {
    c.check_invariants().map_err(TestCaseError::fail)?;
    prop_assert_eq!(c.pinned(), m.pins.len());
    for (&k, pin) in &m.pins {
        let o = c.peek(&key(k));
        prop_assert!(o.is_some(), "pinned key {} ({:?}) not cached", k, pin);
        let o = o.unwrap();
        prop_assert!(o.is_pinned());
        let (v, val) = &m.expect[&k];
        prop_assert_eq!(o.meta.version(), *v);
        prop_assert_eq!(&o.value, val);
    }
    let mut cached = 0;
    for k in 0..KEYS {
        if let Some(o) = c.peek(&key(k)) {
            cached += 1;
            let e = m.expect.get(&k);
            prop_assert!(e.is_some(), "key {} cached but never installed", k);
            let (v, val) = e.unwrap();
            prop_assert_eq!(o.meta.version(), *v, "key {}", k);
            prop_assert_eq!(&o.value, val, "key {}", k);
        }
    }
    prop_assert_eq!(cached, c.len());
    prop_assert!(
        c.len() <= c.capacity() || c.len() == c.pinned(),
        "{} cached over capacity {} with {} pinned",
        c.len(),
        c.capacity(),
        c.pinned()
    );
    let pages_needed: usize = (0..c.entries())
        .map(|i| {
            c.entry(i)
                .len()
                .saturating_sub(SEGMENT_CACHE_POSITIONS)
                .div_ceil(OVERFLOW_PAGE_POSITIONS)
        })
        .sum();
    let pool = c.page_pool();
    prop_assert_eq!(pool.in_use, pages_needed);
    prop_assert_eq!(pool.in_use + pool.free, pool.pages);
    Ok(())
}

fn run(bits: u32, capacity: usize, seed: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut c = ObjectCache::new(Segmentation::HashRange { bits }, capacity, 3, seed);
    let mut m = Model::default();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::InsertClean {
                key: k,
                version,
                len,
            } => {
                let before = c.peek(&key(k)).map(|o| (o.meta.version(), o.is_pinned()));
                let val = value(k, version, len, step);
                c.insert_clean(key(k), meta(version), &val);
                let after = c.peek(&key(k)).is_some();
                match before {
                    Some((v, pinned)) => {
                        prop_assert!(after, "a cached key is never evicted by its own insert");
                        if !pinned && v < version {
                            m.expect.insert(k, (version, val));
                        }
                    }
                    None if after => {
                        m.expect.insert(k, (version, val));
                    }
                    None => prop_assert_eq!(
                        c.len(),
                        c.pinned(),
                        "a clean insert is refused only when everything is pinned"
                    ),
                }
            }
            Op::InstallCommitted { key: k, len } => {
                let v = m.committed.get(&k).copied().unwrap_or(0) + 1;
                m.committed.insert(k, v);
                let val = value(k, v, len, step);
                let cached = c.peek(&key(k)).map(|o| o.meta.version());
                let installed = c.install_committed(key(k), meta(v), &val);
                // Versions never go backwards: a newer cached version stays.
                prop_assert_eq!(installed, cached.is_none_or(|cv| cv <= v));
                if installed {
                    m.expect.insert(k, (v, val));
                    m.pins.insert(k, Pin::Pending(v));
                }
            }
            Op::SetPin { key: k, stale, gap } => {
                let v = m.committed.get(&k).copied().unwrap_or(1) - u64::from(stale);
                m.log_tail += gap;
                let pos = m.log_tail;
                c.set_pin(key(k), v, pos);
                if m.pins.get(&k) == Some(&Pin::Pending(v)) {
                    m.pins.insert(k, Pin::At(pos));
                    m.queue.push_back((pos, k));
                }
            }
            Op::UnpinApplied { share_pct } => {
                m.applied += (m.log_tail - m.applied) * share_pct / 100;
                let applied = m.applied;
                let n = c.unpin_applied(applied);
                let mut expect_n = 0;
                while let Some(&(pos, k)) = m.queue.front() {
                    if pos > applied {
                        break;
                    }
                    m.queue.pop_front();
                    if let Some(Pin::At(p)) = m.pins.get(&k) {
                        if *p <= applied {
                            m.pins.remove(&k);
                            expect_n += 1;
                        }
                    }
                }
                prop_assert_eq!(n, expect_n);
            }
            Op::Get { key: k } => {
                let got = c.get(&key(k)).map(|o| (o.meta.version(), o.value.clone()));
                if m.pins.contains_key(&k) {
                    prop_assert!(got.is_some(), "pinned key {} missed", k);
                }
                if let Some(got) = got {
                    prop_assert_eq!(Some(&got), m.expect.get(&k));
                }
            }
        }
        check(&c, &m)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn cache_matches_model(
        bits in 0..3u32,
        capacity in 1..48usize,
        seed in any::<u64>(),
        ops in prop::collection::vec(op(), 1..400),
    ) {
        run(bits, capacity, seed, &ops)?;
    }
}

/// One segment entry and 96 keys: chains of up to 11 overflow pages, a cache
/// over capacity while everything is pinned, and the evictions back down to
/// it as the host acknowledges the log.
#[test]
fn long_run_with_one_entry_exercises_deep_chains() {
    let mut ops = Vec::new();
    for i in 0..KEYS {
        ops.push(Op::InstallCommitted {
            key: i,
            len: (i % 20) as usize,
        });
        ops.push(Op::SetPin {
            key: i,
            stale: false,
            gap: 1,
        });
    }
    for i in 0..KEYS {
        ops.push(Op::InsertClean {
            key: i,
            version: 20,
            len: 4,
        });
        ops.push(Op::Get {
            key: (i * 7) % KEYS,
        });
        if i % 8 == 0 {
            ops.push(Op::UnpinApplied { share_pct: 20 });
        }
    }
    ops.push(Op::UnpinApplied { share_pct: 100 });
    run(0, 40, 11, &ops).unwrap();
}

//! `SlotPool`: random take / release sequences against a model never
//! hand out a lent slot, never lose one, and refuse bad returns.

use proptest::prelude::*;
use splitkv_nic::net::verbs::pool::{PoolError, Slot, SlotPool, SlotUse, VERBS_SLOTS_MAX};
use std::collections::HashMap;

#[derive(Debug, Clone)]
enum Op {
    Take(SlotUse),
    /// Return the lent slot at this position of the model (modulo).
    Release(usize),
    /// Return this index, lent or not, as this use.
    Bogus(u32, SlotUse),
}

fn use_strategy() -> impl Strategy<Value = SlotUse> {
    prop_oneof![Just(SlotUse::Receive), Just(SlotUse::Send)]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => use_strategy().prop_map(Op::Take),
        3 => any::<usize>().prop_map(Op::Release),
        1 => (0u32..40, use_strategy()).prop_map(|(i, u)| Op::Bogus(i, u)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn pool_never_double_lends_or_loses_a_slot(
        slots in 1u32..32,
        ops in prop::collection::vec(op_strategy(), 0..400),
    ) {
        let mut pool = SlotPool::new(slots);
        // Model: slot index -> its use, for lent slots.
        let mut lent: HashMap<u32, SlotUse> = HashMap::new();
        for op in ops {
            match op {
                Op::Take(what) => match pool.take(what) {
                    Ok(Slot(i)) => {
                        prop_assert!(i < slots);
                        prop_assert!(lent.insert(i, what).is_none(), "slot {} lent twice", i);
                    }
                    Err(e) => {
                        prop_assert_eq!(e, PoolError::Exhausted { slots });
                        prop_assert_eq!(lent.len() as u32, slots);
                    }
                },
                Op::Release(k) => {
                    if lent.is_empty() {
                        continue;
                    }
                    let mut keys: Vec<u32> = lent.keys().copied().collect();
                    keys.sort_unstable();
                    let i = keys[k % keys.len()];
                    let what = lent.remove(&i).unwrap();
                    prop_assert_eq!(pool.release(Slot(i), what), Ok(()));
                    // A second return of the same posting is refused.
                    prop_assert_eq!(pool.release(Slot(i), what), Err(PoolError::NotLent { slot: i }));
                }
                Op::Bogus(i, what) => {
                    let got = pool.release(Slot(i), what);
                    match lent.get(&i) {
                        _ if i >= slots => prop_assert_eq!(got, Err(PoolError::OutOfRange { slot: i, slots })),
                        None => prop_assert_eq!(got, Err(PoolError::NotLent { slot: i })),
                        Some(&l) if l != what => prop_assert_eq!(
                            got,
                            Err(PoolError::WrongUse { slot: i, lent: l, returned: what })
                        ),
                        Some(_) => {
                            prop_assert_eq!(got, Ok(()));
                            lent.remove(&i);
                        }
                    }
                }
            }
            prop_assert!(pool.check());
            prop_assert_eq!(pool.free() + lent.len() as u32, slots);
            let count = |w| lent.values().filter(|&&v| v == w).count() as u32;
            prop_assert_eq!(pool.lent(SlotUse::Receive), count(SlotUse::Receive));
            prop_assert_eq!(pool.lent(SlotUse::Send), count(SlotUse::Send));
        }
        // Everything returned: the pool is whole again.
        for (i, what) in lent.drain() {
            prop_assert_eq!(pool.release(Slot(i), what), Ok(()));
        }
        prop_assert_eq!(pool.free(), slots);
        prop_assert!(pool.check());
    }
}

#[test]
fn exhausted_pool_is_an_error_and_recovers() {
    let mut pool = SlotPool::new(2);
    let a = pool.take(SlotUse::Receive).unwrap();
    let b = pool.take(SlotUse::Send).unwrap();
    assert_ne!(a, b);
    assert_eq!(
        pool.take(SlotUse::Send),
        Err(PoolError::Exhausted { slots: 2 })
    );
    pool.release(b, SlotUse::Send).unwrap();
    assert_eq!(pool.take(SlotUse::Receive), Ok(b));
}

#[test]
fn pool_size_is_bounded() {
    let pool = SlotPool::new(u32::MAX);
    assert_eq!(pool.slots(), VERBS_SLOTS_MAX);
    assert_eq!(pool.free(), VERBS_SLOTS_MAX);
}

use super::*;
use crate::history_gen::TxShape;
use crate::micro_txn::test_support::{ops, own_write_then_reads};
use splitkv_check::history::{MicroOp, ReadValue};

fn list_bytes(l: &[u64]) -> Vec<u8> {
    l.iter().flat_map(|e| e.to_le_bytes()).collect()
}

#[test]
fn reads_see_own_appends_and_results_decode() {
    let stored = list_bytes(&[5, 6]);
    let (written, reads) = own_write_then_reads(
        MicroOp::Append { key: 1, element: 7 },
        &stored,
        |o, s, r, w| run_txn(o, s, r, w),
        complete,
    );
    assert_eq!(written, [(1, list_bytes(&[5, 6, 7]))]);
    assert_eq!(
        reads,
        [
            Some(ReadValue::List(vec![5, 6])),
            Some(ReadValue::List(vec![5, 6, 7])),
            Some(ReadValue::List(vec![]))
        ]
    );
}

#[test]
fn a_full_list_aborts_visibly_and_writes_nothing() {
    let full: Vec<u64> = (0..LIST_ELEMENTS_MAX as u64).collect();
    let stored = list_bytes(&full);
    let invoked = [
        MicroOp::Append { key: 3, element: 1 },
        MicroOp::Append { key: 4, element: 2 },
    ];
    let mut written = 0;
    let e = run_txn(
        &ops(&invoked),
        |k| (k == 4).then_some(&stored[..]),
        &mut Vec::new(),
        |_, _| written += 1,
    );
    assert_eq!(e, Err(ListAppendError::ListFull { key: 4 }));
    assert_eq!(written, 0, "no partial write");
    assert_eq!(
        decode_list(9, &[1, 2, 3]),
        Err(ListAppendError::NotAList { key: 9, len: 3 })
    );
}

#[test]
fn the_largest_transaction_result_fits() {
    let full = list_bytes(&vec![u64::MAX; LIST_ELEMENTS_MAX]);
    let invoked: Vec<_> = (0..codec::MICRO_OPS_PER_TX_MAX as u64)
        .map(|key| MicroOp::Read { key, value: None })
        .collect();
    let mut result = Vec::new();
    run_txn(&ops(&invoked), |_| Some(&full[..]), &mut result, |_, _| {}).unwrap();
    assert!(result.len() <= splitkv_layout::host_nic::RESULT_BYTES_MAX);
    assert_eq!(complete(&invoked, &result).unwrap().len(), invoked.len());
}

#[test]
fn generator_never_overfills_a_key_and_elements_are_unique() {
    let clients = 3;
    let budget = 2_000;
    let cfg = ListAppendConfig::new(4, clients, budget, TxShape::Mixed).unwrap();
    let mut per_key = std::collections::HashMap::<u64, usize>::new();
    let mut elements = std::collections::HashSet::new();
    for c in 0..clients {
        let mut g = ListAppendGenerator::new(cfg, c, 9);
        for _ in 0..budget {
            let tx = g.draw().expect("the key space covers the budget");
            assert!((1..=crate::history_gen::MIXED_OPS_MAX).contains(&tx.len()));
            for m in tx {
                assert!(m.key() < cfg.keys_total());
                if let MicroOp::Append { key, element } = m {
                    *per_key.entry(key).or_default() += 1;
                    assert!(elements.insert(element), "element {element} drawn twice");
                }
            }
        }
    }
    assert!(per_key.values().all(|&n| n <= LIST_ELEMENTS_MAX));
    assert!(
        per_key.values().any(|&n| n == LIST_ELEMENTS_MAX),
        "keys fill up before they retire"
    );
    assert!(ListAppendConfig::new(1, 1, 1, TxShape::Mixed).is_err());
    assert!(ListAppendConfig::new(4, 31, 1, TxShape::Mixed).is_err());
}

#[test]
fn generator_is_seeded_and_stops_when_the_key_space_is_used_up() {
    let cfg = ListAppendConfig::new(2, 1, 3, TxShape::WriteSkew).unwrap();
    let draw_all = |seed| {
        let mut g = ListAppendGenerator::new(cfg, 0, seed);
        std::iter::from_fn(|| g.draw()).collect::<Vec<_>>()
    };
    let a = draw_all(4);
    assert_eq!(a, draw_all(4));
    assert_ne!(a, draw_all(5));
    let appends = a.len();
    assert!(appends as u64 >= 3, "at least the budget is drawable");
    assert!(appends as u64 <= cfg.keys_total() * LIST_ELEMENTS_MAX as u64);
    for tx in &a {
        assert_eq!(tx.len(), 3, "write-skew shape: two reads, one append");
        assert_ne!(tx[0].key(), tx[1].key());
    }
}

#[test]
fn failed_appends_give_back_their_share_while_the_key_is_active() {
    use crate::history_gen::MicroOpSource;
    let cfg = ListAppendConfig::new(2, 3, 100, TxShape::WriteSkew).unwrap();
    let share = cfg.appends_per_key_per_client();
    let mut g = ListAppendGenerator::new(cfg, 0, 1);
    let mut keys = std::collections::HashMap::<u64, usize>::new();
    // Every transaction fails and gives its append back: the two window
    // slots never retire, whatever the number of draws.
    for _ in 0..10 * share {
        let tx = g.draw().unwrap();
        for m in &tx {
            if let MicroOp::Append { key, .. } = m {
                *keys.entry(*key).or_default() += 1;
            }
        }
        g.failed(&tx);
    }
    assert_eq!(keys.len(), 2, "no key retired: {keys:?}");
    // Without the give-back each slot retires after `share` appends.
    let mut h = ListAppendGenerator::new(cfg, 0, 1);
    let retired: std::collections::HashSet<u64> = (0..10 * share)
        .flat_map(|_| h.draw().unwrap())
        .filter(|m| matches!(m, MicroOp::Append { .. }))
        .map(|m| m.key())
        .collect();
    assert!(retired.len() > 2);
}

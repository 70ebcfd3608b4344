//! Work-request building: sizes, the inline decision, the signalling
//! cadence, and retiring unsignalled sends with a later completion.

use proptest::prelude::*;
use splitkv_nic::net::verbs::pool::Slot;
use splitkv_nic::net::verbs::wr::{receives_to_post, SendCadence, SendRefusal};

const MTU: usize = 1024;

#[test]
fn inline_decision_follows_the_device_limit() {
    let c = SendCadence::new(4, 16);
    assert!(c.plan(188, MTU, 188).unwrap().inline);
    assert!(!c.plan(189, MTU, 188).unwrap().inline);
    assert!(c.plan(0, MTU, 188).unwrap().inline);
    // A device that grants no inline bytes: nothing inline but empty packets.
    assert!(!c.plan(1, MTU, 0).unwrap().inline);
    let p = c.plan(MTU, MTU, 188).unwrap();
    assert_eq!((p.bytes, p.inline), (MTU, false));
    assert_eq!(
        c.plan(MTU + 1, MTU, 188),
        Err(SendRefusal::TooLong {
            bytes: MTU + 1,
            mtu: MTU
        })
    );
}

#[test]
fn one_send_in_every_is_signalled_and_the_queue_bounds_sends() {
    let mut c = SendCadence::new(4, 16);
    let mut signalled = Vec::new();
    for i in 0..16u64 {
        let p = c.plan(64, MTU, 0).unwrap();
        assert_eq!(p.wr_id, i);
        if p.signaled {
            signalled.push(i);
        }
        c.posted(&p, Some(Slot(i as u32)));
    }
    assert_eq!(signalled, vec![3, 7, 11, 15]);
    assert_eq!(
        c.plan(64, MTU, 0),
        Err(SendRefusal::QueueFull { depth: 16 })
    );
    // The completion of send 7 retires sends 0..=7, oldest first.
    let mut retired = Vec::new();
    assert_eq!(c.completed(7, |s| retired.push(s.unwrap().0)), 8);
    assert_eq!(retired, (0..8).collect::<Vec<_>>());
    assert_eq!(c.outstanding(), 8);
    // Unknown or already retired ids retire nothing.
    assert_eq!(c.completed(7, |_| panic!("retired twice")), 0);
    assert_eq!(c.completed(1_000, |_| panic!("unknown id")), 0);
    assert!(c.plan(64, MTU, 0).is_ok());
}

#[test]
fn cadence_is_clamped_to_the_queue() {
    assert_eq!(SendCadence::new(0, 8).every(), 1);
    assert_eq!(SendCadence::new(100, 8).every(), 8);
    // The send that fills the queue is always signalled, whatever the period.
    let mut c = SendCadence::new(8, 3);
    let flags: Vec<bool> = (0..3)
        .map(|_| {
            let p = c.plan(1, MTU, 0).unwrap();
            c.posted(&p, None);
            p.signaled
        })
        .collect();
    assert_eq!(flags, vec![false, false, true]);
}

#[test]
fn refused_posts_are_unrecorded() {
    let mut c = SendCadence::new(2, 8);
    for i in 0..5 {
        let p = c.plan(1, MTU, 0).unwrap();
        c.posted(&p, Some(Slot(i)));
    }
    let mut back = Vec::new();
    c.unpost_last(2, |s| back.push(s.unwrap().0));
    assert_eq!(back, vec![4, 3]);
    assert_eq!(c.outstanding(), 3);
    assert_eq!(c.plan(1, MTU, 0).unwrap().wr_id, 3);
}

#[test]
fn receive_top_up_counts() {
    assert_eq!(receives_to_post(0, 512, 1000), 512);
    assert_eq!(receives_to_post(500, 512, 1000), 12);
    assert_eq!(receives_to_post(500, 512, 5), 5);
    assert_eq!(receives_to_post(600, 512, 5), 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random sends and completions of the signalled ones the device has
    /// reached: outstanding sends never pass the depth, a full queue
    /// always holds a signalled send (so it drains), and every slot is
    /// retired exactly once.
    #[test]
    fn cadence_never_stalls_or_leaks(
        every in 1u32..20,
        depth in 1u32..40,
        steps in prop::collection::vec(any::<bool>(), 0..300),
    ) {
        let mut c = SendCadence::new(every, depth);
        let mut signalled: std::collections::VecDeque<u64> = Default::default();
        let mut retired = std::collections::BTreeSet::new();
        let mut next = 0u32;
        for send in steps {
            if send {
                match c.plan(8, MTU, 0) {
                    Ok(p) => {
                        c.posted(&p, Some(Slot(next)));
                        next += 1;
                        if p.signaled { signalled.push_back(p.wr_id); }
                    }
                    Err(e) => {
                        prop_assert_eq!(e, SendRefusal::QueueFull { depth });
                        prop_assert_eq!(c.outstanding(), depth as usize);
                        prop_assert!(!signalled.is_empty(), "a full queue with no completion coming");
                    }
                }
            } else if let Some(id) = signalled.pop_front() {
                c.completed(id, |s| { assert!(retired.insert(s.unwrap().0), "slot retired twice"); });
            }
            prop_assert!(c.outstanding() <= depth as usize);
            prop_assert_eq!(retired.len() + c.outstanding(), next as usize);
        }
    }
}

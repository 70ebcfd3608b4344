//! Unit tests of the key layout and the configuration record (no etcd):
//! the old two-field form still decodes, bad shapes are typed errors, and
//! encode∘decode is the identity on valid configurations (proptest).

use super::*;
use proptest::prelude::*;

fn rejoined() -> Configuration {
    // 3 nodes: node 2 restarted as incarnation 7, copied, then caught up at 5.
    let c = Configuration::initial(3).without(1 << 2);
    let c = c.rejoining(2, 7).expect("2 is out");
    let c = c.without(1 << 1).caught_up(2).expect("2 copying");
    assert_eq!((c.epoch, c.live, c.copying, c.since[2]), (5, 0b101, 0, 5));
    c
}

#[test]
fn the_old_two_field_form_decodes_with_no_copy_since_0_incarnation_0() {
    let c = ConfigRecord::decode(br#"{"epoch":4,"live":5}"#, 3).expect("old form");
    let want = Configuration {
        epoch: 4,
        live: 0b101,
        ..Default::default()
    };
    assert_eq!(c, want);
    // And such a configuration is still written in that form.
    assert_eq!(
        ConfigRecord::encode(&want),
        br#"{"epoch":4,"live":5}"#.to_vec()
    );
}

#[test]
fn every_field_round_trips() {
    let c = rejoined();
    assert_eq!(ConfigRecord::decode(&ConfigRecord::encode(&c), 3), Ok(c));
    let copying = Configuration::initial(3)
        .without(1)
        .rejoining(0, 9)
        .expect("0 is out");
    let bytes = ConfigRecord::encode(&copying);
    let text = String::from_utf8(bytes.clone()).expect("JSON text");
    assert!(text.contains(r#""copying":1"#), "{text}");
    assert!(text.contains(r#""incarnation":[9]"#), "{text}");
    assert_eq!(ConfigRecord::decode(&bytes, 3), Ok(copying));
}

#[test]
fn inconsistent_records_are_typed_errors() {
    let d = |s: &str| ConfigRecord::decode(s.as_bytes(), 3);
    assert_eq!(d(r#"{"epoch":0,"live":1}"#), Err(RecordError::EpochZero));
    assert!(matches!(
        d(r#"{"epoch":2,"live":8}"#),
        Err(RecordError::OutsideCluster { what: "live", .. })
    ));
    assert!(matches!(
        d(r#"{"epoch":2,"live":3,"copying":8}"#),
        Err(RecordError::OutsideCluster {
            what: "copying",
            ..
        })
    ));
    assert_eq!(
        d(r#"{"epoch":2,"live":3,"copying":4}"#),
        Err(RecordError::CopyingNotLive {
            copying: 4,
            live: 3
        })
    );
    assert_eq!(
        d(r#"{"epoch":2,"live":3,"since":[0,0,0,1]}"#),
        Err(RecordError::TooLong {
            what: "since",
            len: 4,
            nodes: 3
        })
    );
    assert_eq!(
        d(r#"{"epoch":2,"live":3,"incarnation":[1,2,3,4]}"#),
        Err(RecordError::TooLong {
            what: "incarnation",
            len: 4,
            nodes: 3
        })
    );
    assert_eq!(
        d(r#"{"epoch":2,"live":3,"since":[0,3]}"#),
        Err(RecordError::SinceAfterEpoch {
            node: 1,
            since: 3,
            epoch: 2
        })
    );
    assert!(matches!(
        d(r#"{"epoch":2,"live":1,"x":1}"#),
        Err(RecordError::Shape(_))
    ));
    assert!(matches!(
        d(r#"{"epoch":2,"live":1,"since":[-1]}"#),
        Err(RecordError::Shape(_))
    ));
    assert!(matches!(d("nonsense"), Err(RecordError::Shape(_))));
}

#[test]
fn stored_incarnations_are_read_per_node() {
    let kvs: [(&[u8], &[u8]); 5] = [
        (b"/c/members/0", b"12"),
        (b"/c/members/2", b""),
        (b"/c/members/3", b"x"),
        (b"/c/members/99", b"5"),
        (b"/c/other/1", b"5"),
    ];
    let got = ClusterKeys::incarnations_of("/c/members/", kvs.into_iter());
    assert_eq!(got[..4], [Some(12), None, None, None]);
    let k = ClusterKeys::new("c");
    assert_eq!(k.joining(2), "/c/joining/2");
    assert_eq!(k.incarnations(2), "/c/incarnations/2");
}

/// A valid configuration of a cluster of `nodes`: built by the
/// configuration's own steps, so copying ⊆ live and since ≤ epoch.
fn configuration(nodes: usize) -> impl Strategy<Value = Configuration> {
    let step = (0..nodes as NodeId, 0u8..3, 1u32..u32::MAX);
    proptest::collection::vec(step, 0..12).prop_map(move |steps| {
        let mut c = Configuration::initial(nodes);
        for (n, kind, inc) in steps {
            let next = match kind {
                0 => Some(c.without(1 << n)),
                1 => c.rejoining(n, inc),
                _ => c.caught_up(n),
            };
            c = next.unwrap_or(c);
        }
        c
    })
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(
        (nodes, c) in (1..=NODES_MAX).prop_flat_map(|n| (Just(n), configuration(n)))
    ) {
        prop_assert_eq!(ConfigRecord::decode(&ConfigRecord::encode(&c), nodes), Ok(c));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96), nodes in 0..=NODES_MAX + 1) {
        let _ = ConfigRecord::decode(&bytes, nodes);
    }

    #[test]
    fn arbitrary_records_never_panic(
        epoch in any::<u32>(), live in any::<u32>(), copying in any::<u32>(),
        since in proptest::collection::vec(any::<u32>(), 0..40),
        incarnation in proptest::collection::vec(any::<u32>(), 0..40),
        nodes in 0..=NODES_MAX + 1,
    ) {
        let r = ConfigRecord { epoch, live, copying, since, incarnation };
        let bytes = serde_json::to_vec(&r).expect("serializes");
        if let Ok(c) = ConfigRecord::decode(&bytes, nodes) {
            prop_assert_eq!(c.copying & !c.live, 0);
        }
    }
}

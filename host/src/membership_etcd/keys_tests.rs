//! Unit tests of the key layout and the configuration record (no etcd):
//! the old two-field form still decodes, bad shapes are typed errors, and
//! encode∘decode is the identity on valid configurations (proptest).

use super::*;
use proptest::prelude::*;
use splitkv_nic::{CommitProtocol, CommitProtocolError};

/// The lineage the tests write.
const L: Lineage = Lineage {
    cluster_id: Some(7),
    generation: 3,
};

fn rejoined() -> Configuration {
    // 3 nodes: node 2 restarted as incarnation 7, copied, then caught up at 5.
    let c = Configuration::initial(3, 3).without(1 << 2);
    let c = c.rejoining(2, 7).expect("2 is out");
    let c = c.without(1 << 1).caught_up(2).expect("2 copying");
    assert_eq!((c.epoch, c.live, c.copying), (5, 0b101, 0));
    assert!(c.shards[..3].iter().all(|s| s.since[2] == 5));
    c
}

#[test]
fn older_forms_decode_as_ring_members() {
    // The two-field form: no copy, since 0, incarnation 0, ring members.
    let c = ConfigRecord::decode(br#"{"epoch":4,"live":5}"#, 3, 3).expect("old form");
    let mut want = Configuration {
        epoch: 4,
        live: 0b101,
        ..Configuration::initial(3, 3)
    };
    for s in want.shards[..3].iter_mut() {
        s.members = 0b101;
    }
    assert_eq!(c, want);
    // The per-node form of rejoin: a copying node joins its ring shards.
    let c = ConfigRecord::decode(
        br#"{"epoch":6,"live":7,"copying":4,"since":[0,5],"incarnation":[0,0,9]}"#,
        4,
        2,
    )
    .expect("rejoin form");
    let joining: Vec<u32> = c.shards[..4].iter().map(|s| s.joining).collect();
    assert_eq!(joining, vec![0, 0b100, 0b100, 0]);
    assert_eq!((c.shards[0].since[1], c.shards[1].since[1]), (5, 5));
    assert_eq!(c.shards[3].members, 0b1, "node 3 is not live");
    // Written in the current form, which reads back the same.
    let bytes = ConfigRecord::encode(&c, L, CommitProtocol::XenicOcc);
    assert!(String::from_utf8_lossy(&bytes).contains(r#""shards":["#));
    assert_eq!(ConfigRecord::decode(&bytes, 4, 2), Ok(c));
}

#[test]
fn a_record_carries_its_commit_protocol() {
    let c = Configuration::initial(3, 3);
    for p in CommitProtocol::ALL {
        let h = ConfigRecord::header(&ConfigRecord::encode(&c, L, p)).expect("a record");
        assert_eq!(h.commit, Some(p));
    }
    // A name this build does not know: a typed error, not a default.
    assert_eq!(
        ConfigRecord::header(br#"{"epoch":4,"live":5,"commit":"dnl9"}"#),
        Err(RecordError::Commit(CommitProtocolError::Unknown(
            "dnl9".into()
        )))
    );
}

#[test]
fn every_field_round_trips() {
    let c = rejoined();
    assert_eq!(
        ConfigRecord::decode(&ConfigRecord::encode(&c, L, CommitProtocol::XenicOcc), 3, 3),
        Ok(c)
    );
    let copying = Configuration::initial(3, 3)
        .without(1)
        .rejoining(0, 9)
        .expect("0 is out");
    let bytes = ConfigRecord::encode(&copying, L, CommitProtocol::XenicOcc);
    let text = String::from_utf8(bytes.clone()).expect("JSON text");
    assert!(text.contains(r#""copying":1"#), "{text}");
    assert!(text.contains(r#""incarnation":[9]"#), "{text}");
    assert!(text.contains(r#"{"members":7,"joining":1}"#), "{text}");
    assert_eq!(ConfigRecord::decode(&bytes, 3, 3), Ok(copying));
    // A survivor chosen as a new backup (4 nodes, replication 3).
    let spare = Configuration::initial(4, 3).without(1);
    assert_eq!(spare.shards[0].joining, 0b1000);
    assert_eq!(
        ConfigRecord::decode(
            &ConfigRecord::encode(&spare, L, CommitProtocol::XenicOcc),
            4,
            3
        ),
        Ok(spare)
    );
}

#[test]
fn a_record_carries_its_lineage_and_shape() {
    let c = Configuration::initial(4, 3);
    let bytes = ConfigRecord::encode(&c, L, CommitProtocol::XenicOcc);
    let h = ConfigRecord::header(&bytes).expect("a record");
    assert_eq!(
        (h.epoch, h.lineage, h.nodes, h.replication, h.commit),
        (1, L, Some(4), Some(3), Some(CommitProtocol::XenicOcc))
    );
    assert!(L.belongs_to(7) && !L.belongs_to(8));
    // Read for another shape: a typed error naming both.
    assert_eq!(
        ConfigRecord::decode(&bytes, 5, 3),
        Err(RecordError::OtherShape {
            stored_nodes: 4,
            stored_replication: 3,
            nodes: 5,
            replication: 3
        })
    );
    assert!(matches!(
        ConfigRecord::decode(&bytes, 4, 2),
        Err(RecordError::OtherShape { .. })
    ));
    // Older records: generation 1, anyone's, the reader's shape.
    let old = ConfigRecord::header(br#"{"epoch":4,"live":5}"#).expect("old form");
    assert_eq!(
        old.lineage,
        Lineage {
            cluster_id: None,
            generation: 1
        }
    );
    assert!(old.lineage.belongs_to(9));
    assert_eq!(old.commit, None, "older records ran Xenic OCC");
    assert_eq!(
        ConfigRecord::header(br#"{"epoch":4,"live":5,"generation":0}"#),
        Err(RecordError::GenerationZero)
    );
}

#[test]
fn inconsistent_records_are_typed_errors() {
    let d = |s: &str| ConfigRecord::decode(s.as_bytes(), 3, 3);
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
    assert_eq!(
        d(r#"{"epoch":2,"live":3,"shards":[{"members":3,"since":[0,3]}]}"#),
        Err(RecordError::SinceAfterEpoch {
            node: 1,
            since: 3,
            epoch: 2
        })
    );
    assert!(matches!(
        d(r#"{"epoch":2,"live":3,"shards":[{"members":7}]}"#),
        Err(RecordError::ShardMembers { shard: 0, .. })
    ));
    assert!(matches!(
        d(r#"{"epoch":2,"live":3,"shards":[{"members":1},{"members":1,"joining":2}]}"#),
        Err(RecordError::ShardMembers { shard: 1, .. })
    ));
    assert!(matches!(
        d(
            r#"{"epoch":2,"live":3,"shards":[{"members":1},{"members":1},{"members":1},{"members":1}]}"#
        ),
        Err(RecordError::TooLong { what: "shards", .. })
    ));
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

#[test]
fn report_keys_name_reporter_and_suspect() {
    let k = ClusterKeys::new("c");
    let p = k.suspects();
    assert_eq!(p, "/c/suspects/");
    assert!(k.suspects_of(1).starts_with(&p));
    assert_eq!(
        ClusterKeys::report_of(&p, k.suspect(3, 1).as_bytes()),
        Some((1, 3))
    );
    for bad in [
        "/c/suspects/3",
        "/c/suspects/3/",
        "/c/suspects//1",
        "/c/suspects/3/x",
        "/c/suspects/99/1",
        "/c/suspects/3/1/2",
        "/c/members/3/1",
        "/c/suspects/-1/1",
    ] {
        assert_eq!(ClusterKeys::report_of(&p, bad.as_bytes()), None, "{bad}");
    }
    let mut not_utf8 = p.as_bytes().to_vec();
    not_utf8.extend_from_slice(&[0xff, b'/', b'1']);
    assert_eq!(ClusterKeys::report_of(&p, &not_utf8), None);
}

/// Reports name the suspect's configured incarnation; one on a process that
/// is gone does not count against its successor.
#[test]
fn a_report_counts_only_against_the_incarnation_it_names() {
    let k = ClusterKeys::new("c");
    let p = k.suspects();
    let report = |suspect: NodeId, reporter: NodeId, inc: &str, created: i64| {
        (
            k.suspect(suspect, reporter).into_bytes(),
            inc.as_bytes().to_vec(),
            created,
        )
    };
    let taken = |c: &Configuration, reports: &[(Vec<u8>, Vec<u8>, i64)]| {
        let it = reports.iter().map(|(k, v, r)| (&k[..], &v[..], *r));
        current_suspicions(c, &p, it)
    };
    // Node 2's first process (configured as 0) suspected by node 0.
    let first = Configuration::initial(3, 3);
    let on_first = [report(2, 0, "0", 10)];
    assert_eq!(taken(&first, &on_first), 0b100);
    // Node 2 restarted as incarnation 7 and rejoined: the report on its
    // first process is stale; one naming 7 counts.
    let c = first.without(1 << 2).rejoining(2, 7).expect("2 is out");
    assert_eq!(taken(&c, &on_first), 0);
    assert_eq!(taken(&c, &[report(2, 0, "7", 11)]), 0b100);
    assert_eq!(taken(&rejoined(), &[report(2, 0, "7", 11)]), 0b100);
    // A report on a node outside the configuration counts for nothing.
    assert_eq!(taken(&first.without(1 << 2), &on_first), 0);
    // Values that name no incarnation (the empty value of older reporters,
    // garbage) are ignored.
    for bad in ["", "x", "-1", "7 ", "99999999999"] {
        assert_eq!(taken(&c, &[report(2, 0, bad, 12)]), 0, "{bad:?}");
    }
    // Oldest first, as before: 1 suspected by 0 (taken), then 0 by 1 (a
    // suspect's report on its accuser does not count).
    let both = [report(0, 1, "0", 21), report(1, 0, "0", 20)];
    assert_eq!(taken(&first, &both), 0b010);
}

/// A valid configuration of a cluster of `nodes`: built by the
/// configuration's own steps, so copying ⊆ live and since ≤ epoch.
fn configuration(nodes: usize, replication: usize) -> impl Strategy<Value = Configuration> {
    let step = (0..nodes as NodeId, 0u8..3, 1u32..u32::MAX);
    proptest::collection::vec(step, 0..12).prop_map(move |steps| {
        let mut c = Configuration::initial(nodes, replication);
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
        (nodes, r, c) in (1..=NODES_MAX)
            .prop_flat_map(|n| (Just(n), 1..=n))
            .prop_flat_map(|(n, r)| (Just(n), Just(r), configuration(n, r)))
    ) {
        prop_assert_eq!(ConfigRecord::decode(&ConfigRecord::encode(&c, L, CommitProtocol::XenicOcc), nodes, r), Ok(c));
        for s in &c.shards[..nodes] {
            prop_assert_eq!(s.members & !c.live, 0);
            prop_assert_eq!(s.joining & !s.members, 0);
            prop_assert!(s.members.count_ones() as usize <= r);
        }
    }

    #[test]
    fn arbitrary_report_keys_never_panic(key in proptest::collection::vec(any::<u8>(), 0..40)) {
        let mut k = b"/c/suspects/".to_vec();
        k.extend_from_slice(&key);
        if let Some((r, s)) = ClusterKeys::report_of("/c/suspects/", &k) {
            prop_assert!((r as usize) < NODES_MAX && (s as usize) < NODES_MAX);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..96),
        nodes in 0..=NODES_MAX + 1,
        replication in 0..=NODES_MAX + 1,
    ) {
        let _ = ConfigRecord::decode(&bytes, nodes, replication);
    }

    #[test]
    fn arbitrary_records_never_panic(
        epoch in any::<u32>(), live in any::<u32>(), copying in any::<u32>(),
        since in proptest::collection::vec(any::<u32>(), 0..40),
        incarnation in proptest::collection::vec(any::<u32>(), 0..40),
        shards in proptest::option::of(proptest::collection::vec(
            (any::<u32>(), any::<u32>(), proptest::collection::vec(any::<u32>(), 0..20)),
            0..20,
        )),
        nodes in 0..=NODES_MAX + 1,
    ) {
        let shards = shards.map(|v| {
            v.into_iter()
                .map(|(members, joining, since)| ShardRecord { members, joining, since })
                .collect()
        });
        let r = ConfigRecord {
            epoch, live, copying, since, incarnation, shards,
            generation: 1, cluster_id: None, nodes: None, replication: None, commit: None,
        };
        let bytes = serde_json::to_vec(&r).expect("serializes");
        if let Ok(c) = ConfigRecord::decode(&bytes, nodes, 3) {
            prop_assert_eq!(c.copying & !c.live, 0);
            for s in &c.shards {
                prop_assert_eq!(s.members & !c.live, 0);
            }
        }
    }
}

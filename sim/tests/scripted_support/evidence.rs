//! A crashed coordinator's transaction decided from what the survivors' host
//! logs hold, by the project's decision rule (`splitkv_nic::recovery`,
//! crash recovery; Xenic §4.2.1) — what the recovery leader will do once
//! recovery is wired into the runtime, without depending on that wiring.

use super::Cluster;
use splitkv_layout::log_record::LogKind;
use splitkv_layout::wire::{NodeId, NodeMask, RecordEvidence, RecordKind};
use splitkv_layout::{Key, TxId};
use splitkv_nic::recovery::{DecisionReason, TxEvidence};
use splitkv_nic::PlacementView;
use std::collections::BTreeMap;

/// What surviving replica `node` reports about `tx_id`: per shard, its
/// latest record (LOG = undecided, or the decision that followed). The
/// written shards are those of `writes` (the LOG message carries them).
pub fn record_evidence(
    c: &Cluster,
    node: NodeId,
    tx_id: TxId,
    writes: &[Key],
) -> Vec<RecordEvidence> {
    let write_shards = writes
        .iter()
        .fold(NodeMask::default(), |m, k| m.with(c.placement.shard(k)));
    let mut latest: BTreeMap<NodeId, RecordKind> = BTreeMap::new();
    for r in c.nodes[node as usize]
        .tap
        .records
        .iter()
        .filter(|r| r.tx_id == tx_id)
    {
        match r.kind {
            // Dnl markers: no Xenic server appends them.
            LogKind::Lock | LogKind::Repl => {}
            LogKind::Log => {
                for (k, _, _) in &r.writes {
                    latest.insert(c.placement.shard(k), RecordKind::Log);
                }
            }
            LogKind::Commit | LogKind::Abort => {
                let kind = if r.kind == LogKind::Commit {
                    RecordKind::Commit
                } else {
                    RecordKind::Abort
                };
                if latest.is_empty() {
                    // A decision without LOG records here: it stands for the
                    // written shards this node replicates.
                    for s in write_shards.iter() {
                        if c.placement.shard_replicas(s).any(|n| n == node) {
                            latest.insert(s, kind);
                        }
                    }
                }
                latest.values_mut().for_each(|v| *v = kind);
            }
        }
    }
    latest
        .into_iter()
        .map(|(shard, kind)| RecordEvidence {
            tx_id,
            shard,
            kind,
            write_shards,
        })
        .collect()
}

/// The decision (`true` = commit) and its rule for `tx_id`, whose
/// coordinator crashed, from every live node's host log, in the view where
/// the crashed nodes have failed.
pub fn decide_crashed(c: &Cluster, tx_id: TxId, writes: &[Key]) -> (bool, DecisionReason) {
    let failed = (0..c.nodes.len() as NodeId)
        .filter(|n| !c.nodes[*n as usize].alive)
        .fold(NodeMask::default(), |m, n| m.with(n));
    assert!(
        failed.contains(tx_id.coordinator()),
        "the coordinator of {tx_id:#x} is alive: its own decision stands"
    );
    let view = PlacementView::new(c.placement, failed).expect("a view with survivors");
    let mut ev = TxEvidence::default();
    for n in c.live() {
        for r in record_evidence(c, n, tx_id, writes) {
            ev.add_record(n, r);
        }
    }
    ev.decide(&view, splitkv_nic::recovery::RecoveryRule::XenicOcc)
}

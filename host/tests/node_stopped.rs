//! A node that cannot apply a committed write stops, and the local cluster
//! stops with it and says why ([`ClusterError::NodeStopped`]), instead of
//! panicking or carrying on with a replica that silently lost the write.
//! (Inserts reserve room before the commit point, so such a transaction
//! aborts with `TxStatus::TableFull` instead, `tests/table_full.rs`; this test
//! lifts the quota to reach a table that cannot take a committed write.)

use splitkv_host::cluster::ClusterError;
use splitkv_host::{ClientError, Cluster};
use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// `put(id)`: writes 8 bytes at key (0, id), inserting it if absent.
struct Put;

fn key(args: &[u8]) -> Option<Key> {
    Some(Key::new(0, u64::from_le_bytes(args.try_into().ok()?)))
}

impl Procedure for Put {
    fn name(&self) -> &'static str {
        "put"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(key(args).ok_or(ProcError::BadArgs("put takes an 8-byte id"))?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        w.put(key(args).ok_or(UserAbort)?, args);
        Ok(())
    }
}

#[test]
fn a_full_host_table_stops_the_cluster_with_the_reason() {
    let mut procedures = ProcedureRegistry::new();
    let put = procedures.register(Arc::new(Put));
    let transports = splitkv_nic::net::mem::mem_network(3)
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn splitkv_nic::net::Transport>)
        .collect();
    let mut parts = Cluster::builder()
        .nodes(3)
        .replication(3)
        .capacity_keys(16)
        .value_bytes_max(8)
        .procedures(procedures)
        .build_parts(transports)
        .expect("cluster");
    for n in &mut parts.nodes {
        n.nic
            .room_mut()
            .set_quota(splitkv_nic::protocol::server::ROOM_KEYS_UNLIMITED);
    }
    let cluster = parts.start().expect("cluster");
    let mut client = cluster.client(0).expect("client");
    let mut committed = 0u64;
    let stopped = (0..100_000u64).find_map(|id| match client.call(put, &id.to_le_bytes()) {
        Ok(o) => {
            committed += o.is_committed() as u64;
            None
        }
        Err(e) => Some(e),
    });
    match stopped {
        Some(ClientError::NodeStopped { reason, .. }) => {
            assert!(reason.contains("host worker stopped"), "{reason}");
        }
        other => panic!("expected the cluster to stop on a full table, got {other:?}"),
    }
    assert!(
        committed >= 16,
        "the table took its capacity first ({committed})"
    );
    match cluster.shutdown() {
        Err(ClusterError::NodeStopped { reason, .. }) => {
            assert!(reason.contains("full"), "{reason}")
        }
        other => panic!("expected NodeStopped from shutdown, got {other:?}"),
    }
}

/// A component that reports a fault after a few iterations.
struct Faulty(u32);

impl splitkv_nic::Component for Faulty {
    fn run_iteration(&mut self, _now: splitkv_nic::Nanos) -> bool {
        self.0 = self.0.saturating_sub(1);
        true
    }
    fn fault(&self) -> Option<String> {
        (self.0 == 0).then(|| "out of room".to_string())
    }
}

/// A component that only spins (so its thread must be stopped by the other's fault).
struct Spin;

impl splitkv_nic::Component for Spin {
    fn run_iteration(&mut self, _now: splitkv_nic::Nanos) -> bool {
        false
    }
}

#[test]
fn the_scoped_driver_stops_every_thread_on_a_component_fault() {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (mut faulty, mut spin) = (Faulty(100), Spin);
    let groups: Vec<Vec<&mut dyn splitkv_nic::Component>> =
        vec![vec![&mut faulty], vec![&mut spin]];
    match splitkv_host::cluster::try_run_threads(groups, std::time::Instant::now(), &stop) {
        Err(ClusterError::ComponentStopped { thread, reason }) => {
            assert_eq!(thread, "splitkv-poll-0");
            assert_eq!(reason, "out of room");
        }
        other => panic!("expected ComponentStopped, got {other:?}"),
    }
}

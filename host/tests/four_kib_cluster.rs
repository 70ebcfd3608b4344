//! Values of 4 KiB ([`VALUE_BYTES_MAX`]) through the embedding API: a threaded
//! three-node cluster with replication 3 built by `Cluster::builder` at the
//! node value limit, loaded with 4 KiB rows; two application threads put and
//! read back 4 KiB values (one key per transaction, which fits one packet);
//! after shutdown every replica holds each key's last committed value.

use splitkv_host::{Client, Cluster};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::{Key, VALUE_BYTES_MAX};
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

fn key_arg(args: &[u8]) -> Result<Key, ProcError> {
    let id = args
        .get(..8)
        .ok_or(ProcError::BadArgs("needs an 8-byte id"))?;
    Ok(Key::new(0, u64::from_le_bytes(id.try_into().unwrap())))
}

/// `put(id, value)`: writes `value` to key (0, id).
struct Put;

impl Procedure for Put {
    fn name(&self) -> &'static str {
        "put"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(key_arg(args)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        w.put(key_arg(args).map_err(|_| UserAbort)?, &args[8..]);
        Ok(())
    }
}

/// `get(id)`: returns the value of key (0, id), or aborts if it is absent.
struct Get;

impl Procedure for Get {
    fn name(&self) -> &'static str {
        "get"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.read(key_arg(args)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        out.extend_from_slice(
            r.get(&key_arg(args).map_err(|_| UserAbort)?)
                .ok_or(UserAbort)?,
        );
        Ok(())
    }
}

/// The value thread `t` writes to `id` in its round `round`: 4 KiB, every
/// byte derived from all three, so a mixed-up or torn value shows.
fn value(t: u64, id: u64, round: u64) -> Vec<u8> {
    (0..VALUE_BYTES_MAX as u64)
        .map(|i| (t * 101 + id * 7 + round * 13 + i) as u8)
        .collect()
}

const KEYS_PER_THREAD: u64 = 20;
const ROUNDS: u64 = 10;

/// Thread `t` owns keys `t * 100 ..`: puts a new 4 KiB value to each, reads
/// it back (from another node's client, so through replication and DMA),
/// `ROUNDS` times; returns how many reads it checked.
fn work(t: u64, writer: &mut Client, reader: &mut Client, put: u32, get: u32) -> u64 {
    let mut checked = 0;
    for round in 1..=ROUNDS {
        for id in t * 100..t * 100 + KEYS_PER_THREAD {
            let mut args = id.to_le_bytes().to_vec();
            args.extend_from_slice(&value(t, id, round));
            loop {
                let o = writer.call(put, &args).unwrap();
                if o.is_committed() {
                    break;
                }
                assert!(o.status.is_conflict(), "put {id}: {:?}", o.status);
            }
            let o = reader.call(get, &id.to_le_bytes()).unwrap();
            assert_eq!(o.status, TxStatus::Committed, "get {id}");
            assert!(
                o.result == value(t, id, round),
                "get {id} round {round}: wrong value"
            );
            checked += 1;
        }
    }
    checked
}

#[test]
fn four_kib_values_through_a_threaded_cluster() {
    let mut procedures = ProcedureRegistry::new();
    let put = procedures.register(Arc::new(Put));
    let get = procedures.register(Arc::new(Get));
    let mut cluster = Cluster::builder()
        .nodes(3)
        .replication(3)
        .capacity_keys(1000)
        .value_bytes_max(VALUE_BYTES_MAX)
        .clients_per_node(2)
        // A small NIC cache: most reads go to the host table by DMA.
        .configure(|c| c.cache_objects = 8)
        .procedures(procedures)
        .build()
        .unwrap();
    // Loaded rows are 4 KiB too; thread 0's keys start from them.
    let rows = (0..KEYS_PER_THREAD).map(|id| (Key::new(0, id), value(0, id, 0)));
    cluster.load(rows, |_| {}).unwrap();
    let mut clients: Vec<Client> = (0..3).map(|n| cluster.client(n).unwrap()).collect();
    let (mut c2, rest) = (clients.pop().unwrap(), clients);
    let [mut c0, mut c1]: [Client; 2] = rest.try_into().unwrap();
    let checked = std::thread::scope(|s| {
        let a = s.spawn(|| work(0, &mut c0, &mut c1, put, get));
        let mut more = cluster.client(1).unwrap();
        let b = work(1, &mut c2, &mut more, put, get);
        a.join().unwrap() + b
    });
    assert_eq!(checked, 2 * KEYS_PER_THREAD * ROUNDS);
    let parts = cluster.shutdown().unwrap();
    let mut v = Vec::new();
    for t in 0..2u64 {
        for id in t * 100..t * 100 + KEYS_PER_THREAD {
            for n in 0..3u16 {
                let table = parts.table(n).unwrap();
                assert!(
                    table.get(&Key::new(0, id), &mut v).is_some(),
                    "{id} on node {n}"
                );
                assert!(
                    v == value(t, id, ROUNDS),
                    "{id} on node {n}: not the last value"
                );
            }
        }
    }
}

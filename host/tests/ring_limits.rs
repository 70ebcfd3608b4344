//! The host↔NIC ring messages at their limits, through the embedding API:
//! requests of exactly [`ARGS_BYTES_MAX`] and outcomes of exactly
//! [`RESULT_BYTES_MAX`] bytes (room for 16 values of 4 KiB with their keys)
//! cross the default request and outcome rings, several at once; one byte
//! more is a typed error (at submission for arguments, as a `TooLarge`
//! outcome for a result), and the rings stay usable.

use splitkv_host::{Client, ClientError, Cluster};
use splitkv_layout::host_nic::{TxStatus, ARGS_BYTES_MAX, RESULT_BYTES_MAX};
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// `echo(bytes)`: touches no key and returns its arguments as its result.
struct Echo;

impl Procedure for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    fn plan(&self, _: &[u8], _: &mut TxPlan) -> Result<(), ProcError> {
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        out.extend_from_slice(args);
        Ok(())
    }
}

/// `fill(n: u32)`: touches no key and returns `n` bytes of `0x5a`.
struct Fill;

impl Procedure for Fill {
    fn name(&self) -> &'static str {
        "fill"
    }
    fn plan(&self, args: &[u8], _: &mut TxPlan) -> Result<(), ProcError> {
        match args.len() {
            4 => Ok(()),
            _ => Err(ProcError::BadArgs("fill takes a u32")),
        }
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let n = u32::from_le_bytes(args.try_into().map_err(|_| UserAbort)?) as usize;
        out.resize(n, 0x5a);
        Ok(())
    }
}

fn cluster() -> (Cluster, u32, u32) {
    let mut procedures = ProcedureRegistry::new();
    let echo = procedures.register(Arc::new(Echo));
    let fill = procedures.register(Arc::new(Fill));
    let cluster = Cluster::builder()
        .nodes(3)
        .replication(3)
        .capacity_keys(64)
        .value_bytes_max(VALUE_BYTES_MAX)
        .procedures(procedures)
        .build()
        .unwrap();
    (cluster, echo, fill)
}

#[test]
fn requests_at_the_limit_are_served_and_one_byte_more_is_refused() {
    let (cluster, echo, _) = cluster();
    let mut c = cluster.client(0).unwrap();
    let big: Vec<u8> = (0..ARGS_BYTES_MAX).map(|i| (i % 251) as u8).collect();
    let o = c.call(echo, &big).unwrap();
    assert_eq!(o.status, TxStatus::Committed);
    assert!(o.result == big, "echo of ARGS_BYTES_MAX bytes differs");
    let over = vec![1u8; ARGS_BYTES_MAX + 1];
    assert_eq!(
        c.submit(9, echo, &over),
        Err(ClientError::ArgsTooLarge {
            len: ARGS_BYTES_MAX + 1,
            max: ARGS_BYTES_MAX
        })
    );
    assert_eq!(c.outstanding(), 0, "a refused submission changed nothing");
    assert!(c.call(echo, b"still usable").unwrap().is_committed());
    cluster.shutdown().unwrap();
}

#[test]
fn results_at_the_limit_are_delivered_and_one_byte_more_is_too_large() {
    let (cluster, _, fill) = cluster();
    let mut c = cluster.client(1).unwrap();
    let o = c
        .call(fill, &(RESULT_BYTES_MAX as u32).to_le_bytes())
        .unwrap();
    assert_eq!(o.status, TxStatus::Committed);
    assert_eq!(o.result.len(), RESULT_BYTES_MAX);
    assert!(o.result.iter().all(|&b| b == 0x5a));
    let o = c
        .call(fill, &(RESULT_BYTES_MAX as u32 + 1).to_le_bytes())
        .unwrap();
    assert_eq!(
        (o.status, &o.result[..]),
        (TxStatus::TooLarge, &b"result too large"[..])
    );
    cluster.shutdown().unwrap();
}

/// Eight full-size requests outstanding at once on one client fit its
/// default request and outcome rings.
#[test]
fn several_full_size_requests_fit_the_default_rings_at_once() {
    let (cluster, echo, _) = cluster();
    let mut c: Client = cluster.client(2).unwrap();
    let big: Vec<u8> = (0..ARGS_BYTES_MAX).map(|i| (i % 13) as u8).collect();
    for id in 0..8u64 {
        c.submit(100 + id, echo, &big).unwrap();
    }
    let mut done = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while done < 8 && std::time::Instant::now() < deadline {
        c.poll(8, |o| {
            assert_eq!(o.status, TxStatus::Committed);
            assert!(o.result == &big[..]);
            done += 1;
        })
        .unwrap();
        std::thread::yield_now();
    }
    assert_eq!(done, 8);
    cluster.shutdown().unwrap();
}

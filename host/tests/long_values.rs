//! Values up to 1000 B and up to 4 KiB ([`VALUE_BYTES_MAX`]) through the whole
//! system: three replicated nodes (mem transport, replication 3) with a tiny
//! NIC cache, so reads go to the host Robinhood table by DMA and follow
//! out-of-line references (Xenic §4.1.2); writes travel as
//! EXECUTE/LOG/COMMIT messages and host-log records. Every read returns
//! exactly the last committed value, and all replicas agree.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_host::{build_node, Node, NodeConfig, NodeError};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::log_record::log_entry_bytes_max;
use splitkv_layout::Key;
use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::net::mem::mem_network;
use splitkv_nic::{
    Placement, ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet,
};
use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;

fn id_arg(args: &[u8], at: usize) -> Result<Key, ProcError> {
    let id = args
        .get(at..at + 8)
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
        plan.write(id_arg(args, 0)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        w.put(id_arg(args, 0).unwrap(), &args[8..]);
        Ok(())
    }
}

/// `get(id)`: returns `[1] ++ value`, or `[0]` if the key does not exist.
struct Get;

impl Procedure for Get {
    fn name(&self) -> &'static str {
        "get"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.read(id_arg(args, 0)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        view: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        match view.get(&id_arg(args, 0).unwrap()) {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(v);
            }
            None => out.push(0),
        }
        Ok(())
    }
}

/// `copy(src, dst)`: reads `src` and writes its value to `dst` (a read and a
/// long write in one transaction); returns the value copied.
struct Copy;

impl Procedure for Copy {
    fn name(&self) -> &'static str {
        "copy"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.read(id_arg(args, 0)?);
        plan.write(id_arg(args, 8)?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        view: &ReadView,
        w: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let v = view.get(&id_arg(args, 0).unwrap()).ok_or(UserAbort)?;
        out.extend_from_slice(v);
        w.put(id_arg(args, 8).unwrap(), v);
        Ok(())
    }
}

/// `put_many(n: u8, len: u16, id × n)`: writes `len` bytes of 9 to `n` keys.
struct PutMany;

impl PutMany {
    fn keys(args: &[u8]) -> Result<Vec<Key>, ProcError> {
        let n = *args.first().ok_or(ProcError::BadArgs("needs a count"))? as usize;
        (0..n).map(|i| id_arg(args, 3 + 8 * i)).collect()
    }
}

impl Procedure for PutMany {
    fn name(&self) -> &'static str {
        "put_many"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        for k in Self::keys(args)? {
            plan.write(k);
        }
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        _: &ReadView,
        w: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let len = u16::from_le_bytes([args[1], args[2]]) as usize;
        for k in Self::keys(args).unwrap() {
            w.put(k, &vec![9u8; len]);
        }
        Ok(())
    }
}

const PUT: u32 = 0;
const GET: u32 = 1;
const COPY: u32 = 2;
const PUT_MANY: u32 = 3;
const NODES: usize = 3;

fn cluster(value_bytes_max: usize) -> Result<Vec<Node>, NodeError> {
    cluster_with(value_bytes_max, |_| {})
}

fn cluster_with(
    value_bytes_max: usize,
    configure: impl Fn(&mut NodeConfig),
) -> Result<Vec<Node>, NodeError> {
    let placement = Placement::new(NODES, NODES).unwrap();
    mem_network(NODES)
        .into_iter()
        .enumerate()
        .map(|(n, t)| {
            let mut procs = ProcedureRegistry::new();
            assert_eq!(procs.register(Arc::new(Put)), PUT);
            assert_eq!(procs.register(Arc::new(Get)), GET);
            assert_eq!(procs.register(Arc::new(Copy)), COPY);
            assert_eq!(procs.register(Arc::new(PutMany)), PUT_MANY);
            let mut cfg = NodeConfig::new(n as u16, placement, 256, value_bytes_max);
            // A tiny cache: most reads miss and go to the host table by DMA.
            cfg.cache_objects = 2;
            configure(&mut cfg);
            build_node(&cfg, procs, Box::new(t))
        })
        .collect()
}

fn run(nodes: &mut [Node], now: &mut u64) {
    for n in nodes.iter_mut() {
        n.nic.run_iteration(*now);
        n.worker.run_iteration(*now);
    }
    *now += 1;
}

/// Submits one transaction at `coordinator` and runs the cluster until it ends.
fn call(
    nodes: &mut [Node],
    now: &mut u64,
    coordinator: usize,
    procedure: u32,
    args: &[u8],
) -> (TxStatus, Vec<u8>) {
    let req = *now;
    nodes[coordinator]
        .client
        .submit(req, procedure, args)
        .unwrap();
    for _ in 0..100_000 {
        run(nodes, now);
        let mut got = None;
        nodes[coordinator]
            .client
            .poll(1, |o| {
                assert_eq!(o.req_id, req);
                got = Some((o.status, o.result.to_vec()));
            })
            .unwrap();
        if let Some(g) = got {
            return g;
        }
    }
    panic!("no outcome for request {req}");
}

/// Asserts that a value read back is the expected one (messages show lengths
/// and a prefix, not 1000-byte dumps).
fn assert_same(got: Option<&[u8]>, want: Option<&[u8]>, what: &str) {
    let show = |v: Option<&[u8]>| v.map(|v| (v.len(), v[..v.len().min(8)].to_vec()));
    assert!(
        got == want,
        "{what}: got {:?}, want {:?} (length, prefix)",
        show(got),
        show(want)
    );
}

fn args(ids: &[u64], value: &[u8]) -> Vec<u8> {
    let mut a: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    a.extend_from_slice(value);
    a
}

/// Runs `txs` random one-key puts, gets and two-key copies over 40 keys on a
/// cluster with `value_bytes_max`; three puts in four write a value of a
/// length in `long`, the rest one of at most 256 B (inline). Checks every read
/// against a model, then every replica's table.
fn random_history(value_bytes_max: usize, long: RangeInclusive<usize>, txs: usize, seed: u64) {
    const KEYS: u64 = 40;
    let mut nodes = cluster(value_bytes_max).expect("a node takes values up to VALUE_BYTES_MAX");
    let mut now = 0u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    let (mut committed, mut long_reads) = (0u64, 0u64);
    for tx in 0..txs {
        let coordinator = rng.gen_range(0..NODES);
        let id = rng.gen_range(0..KEYS);
        match rng.gen_range(0..10) {
            0..=3 => {
                let len = match rng.gen_range(0..4) {
                    0 => rng.gen_range(0..=256),
                    1 => *long.end(),
                    _ => rng.gen_range(long.clone()),
                };
                let fill = tx as u8;
                let value: Vec<u8> = (0..len).map(|i| fill ^ (i as u8)).collect();
                let (status, _) =
                    call(&mut nodes, &mut now, coordinator, PUT, &args(&[id], &value));
                if status == TxStatus::Committed {
                    model.insert(id, value);
                    committed += 1;
                }
            }
            4..=7 => {
                let (status, out) = call(&mut nodes, &mut now, coordinator, GET, &args(&[id], &[]));
                if status == TxStatus::Committed {
                    let want = model.get(&id);
                    match out.split_first() {
                        Some((1, v)) => {
                            assert_same(
                                Some(v),
                                want.map(|w| &w[..]),
                                &format!("tx {tx}: get {id}"),
                            );
                            long_reads += (v.len() > 256) as u64;
                        }
                        Some((0, [])) => assert_eq!(want, None, "tx {tx}: get {id}"),
                        other => panic!("tx {tx}: get returned {other:?}"),
                    }
                    committed += 1;
                }
            }
            _ => {
                let dst = rng.gen_range(0..KEYS);
                let (status, out) = call(
                    &mut nodes,
                    &mut now,
                    coordinator,
                    COPY,
                    &args(&[id, dst], &[]),
                );
                match status {
                    TxStatus::Committed => {
                        assert_same(
                            Some(&out),
                            model.get(&id).map(|w| &w[..]),
                            &format!("tx {tx}: copy {id}"),
                        );
                        model.insert(dst, out);
                        committed += 1;
                    }
                    TxStatus::UserAborted => assert!(!model.contains_key(&id)),
                    _ => {}
                }
            }
        }
    }
    assert!(
        committed as usize > txs * 9 / 10,
        "{committed} of {txs} committed"
    );
    assert!(
        long_reads as usize > txs / 30,
        "{long_reads} long values read back"
    );
    // Let the host logs drain, then check every replica's table.
    for _ in 0..1000 {
        run(&mut nodes, &mut now);
    }
    let mut dma_reads = 0;
    for (n, node) in nodes.iter().enumerate() {
        let s = node.nic.stats();
        assert_eq!(s.server.host_decode_errors, 0, "node {n}");
        dma_reads += s.server.dma_reads;
        let table = node.worker.table();
        assert_eq!(table.len(), model.len(), "node {n}");
        let mut v = Vec::new();
        for (id, want) in &model {
            assert!(table.get(&Key::new(0, *id), &mut v).is_some());
            assert_same(Some(&v), Some(want), &format!("node {n}: replica of {id}"));
        }
    }
    assert!(
        dma_reads as usize > txs / 3,
        "reads went to host memory: {dma_reads}"
    );
}

#[test]
fn thousand_byte_values_read_back_exactly_as_last_committed() {
    random_history(1024, 900..=1000, 3_000, 77);
}

/// Values of 3 to 4 KiB (a quarter exactly [`VALUE_BYTES_MAX`]) on nodes at
/// the node limit: each lives in a 4 KiB block of the value heap, which the
/// NIC reads with a partial block copy.
#[test]
fn four_kib_values_read_back_exactly_as_last_committed() {
    assert_eq!(VALUE_BYTES_MAX, 4096);
    random_history(VALUE_BYTES_MAX, 3000..=VALUE_BYTES_MAX, 2_000, 78);
}

#[test]
fn value_size_limits_are_typed_errors() {
    assert_eq!(VALUE_BYTES_MAX, 4096);
    assert!(matches!(
        cluster(VALUE_BYTES_MAX + 1),
        Err(NodeError::ValueTooLarge(4097))
    ));
    // At the limit: a 4096-byte value commits and reads back; one more byte
    // is refused and changes nothing.
    let mut nodes = cluster(VALUE_BYTES_MAX).unwrap();
    let mut now = 0;
    let full = vec![0xabu8; VALUE_BYTES_MAX];
    let (status, _) = call(&mut nodes, &mut now, 0, PUT, &args(&[1], &full));
    assert_eq!(status, TxStatus::Committed);
    let over = vec![0xcdu8; VALUE_BYTES_MAX + 1];
    let (status, why) = call(&mut nodes, &mut now, 1, PUT, &args(&[1], &over));
    assert_eq!(
        (status, &why[..]),
        (TxStatus::TooLarge, &b"value too large"[..])
    );
    let (status, out) = call(&mut nodes, &mut now, 2, GET, &args(&[1], &[]));
    assert_eq!(status, TxStatus::Committed);
    assert_same(Some(&out[1..]), Some(&full), "value at the limit");
    // A value over the configured maximum is rejected and changes nothing.
    let mut nodes = cluster(300).unwrap();
    let mut now = 0;
    let (status, _) = call(&mut nodes, &mut now, 0, PUT, &args(&[1], &[5u8; 300]));
    assert_eq!(status, TxStatus::Committed);
    let (status, why) = call(&mut nodes, &mut now, 0, PUT, &args(&[1], &[6u8; 301]));
    assert_eq!(
        (status, &why[..]),
        (TxStatus::TooLarge, &b"value too large"[..])
    );
    let (status, out) = call(&mut nodes, &mut now, 1, GET, &args(&[1], &[]));
    assert_eq!(status, TxStatus::Committed);
    assert_eq!(out[1..], [5u8; 300]);
}

/// A transaction whose messages do not fit one packet (keys × (value +
/// item header) over the MTU) commits: its COMMIT and LOG messages travel as
/// fragments below the protocol (`splitkv_nic::net::batch`), up to the
/// message limit `MESSAGE_BYTES_MAX`.
#[test]
fn transactions_larger_than_a_packet_commit_as_fragments() {
    let mut nodes = cluster(1024).unwrap();
    let mut now = 0;
    let put_many = |n: u8, len: u16| {
        let mut a = vec![n];
        a.extend_from_slice(&len.to_le_bytes());
        for id in 0..n as u64 {
            a.extend_from_slice(&(100 + id).to_le_bytes());
        }
        a
    };
    // 12 values of 1000 B make a 12.3 KB COMMIT message: two packets or more.
    let (status, why) = call(&mut nodes, &mut now, 0, PUT_MANY, &put_many(12, 1000));
    assert_eq!(
        status,
        TxStatus::Committed,
        "{}",
        String::from_utf8_lossy(&why)
    );
    let fragments: u64 = nodes
        .iter()
        .map(|n| n.nic.stats().net.batch.fragments)
        .sum();
    assert!(fragments >= 2, "sent as fragments: {fragments}");
    let (status, _) = call(&mut nodes, &mut now, 0, PUT_MANY, &put_many(8, 1000));
    assert_eq!(status, TxStatus::Committed);
    let (status, out) = call(&mut nodes, &mut now, 2, GET, &args(&[107], &[]));
    assert_eq!(status, TxStatus::Committed);
    assert_eq!(out[1..], [9u8; 1000]);
    // Nodes with 8-byte values take the full 16-key write set.
    let mut small = cluster(8).unwrap();
    let (status, _) = call(&mut small, &mut now, 0, PUT_MANY, &put_many(16, 8));
    assert_eq!(status, TxStatus::Committed);
}

/// A host log too small for the node's largest entry (16 records of the
/// node's value limit) is refused when the node is built, not when a
/// transaction first needs it.
#[test]
fn log_ring_too_small_for_the_value_limit_is_a_typed_error() {
    let need = log_entry_bytes_max(VALUE_BYTES_MAX);
    assert!(need > 64 << 10);
    let small = |c: &mut NodeConfig| c.log_ring_bytes = 64 << 10;
    match cluster_with(VALUE_BYTES_MAX, small) {
        Err(NodeError::LogRingTooSmall {
            ring_bytes,
            need: n,
            value_bytes_max,
            ..
        }) => assert_eq!(
            (ring_bytes, n, value_bytes_max),
            (64 << 10, need, VALUE_BYTES_MAX)
        ),
        other => panic!("{:?}", other.map(|_| ())),
    }
    // The same ring takes the entries of a node with 1 KiB values.
    assert!(cluster_with(1024, small).is_ok());
}

/// A transaction writing 16 values of 4 KiB end to end (the Dnl stack's
/// batching layer): its LOG and COMMIT messages (~66 KB) are larger than one
/// packet and travel as fragments, reassembled below the protocol.
#[test]
fn sixteen_four_kib_values_in_one_transaction() {
    let mut nodes = cluster(VALUE_BYTES_MAX).unwrap();
    let mut now = 0;
    let mut a = vec![16u8];
    a.extend_from_slice(&(VALUE_BYTES_MAX as u16).to_le_bytes());
    for id in 0..16u64 {
        a.extend_from_slice(&(200 + id).to_le_bytes());
    }
    let (status, why) = call(&mut nodes, &mut now, 0, PUT_MANY, &a);
    assert_eq!(
        status,
        TxStatus::Committed,
        "{}",
        String::from_utf8_lossy(&why)
    );
    for id in 0..16u64 {
        let (status, out) = call(
            &mut nodes,
            &mut now,
            (id % 3) as usize,
            GET,
            &args(&[200 + id], &[]),
        );
        assert_eq!(status, TxStatus::Committed);
        assert_same(
            Some(&out[1..]),
            Some(&[9u8; VALUE_BYTES_MAX][..]),
            "16-key write",
        );
    }
}

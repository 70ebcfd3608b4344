//! Applications served by an in-process cluster through its application
//! socket (L5 §III-B): `splitkv_client::Connection`s send raw
//! `splitkv_layout::app::Request` entries to node 0's gateway, which runs
//! them on the commit protocol and answers typed `Outcome`s. Covers
//! single-key calls, one-shot transactions with compares, a registered
//! procedure, and the hostile cases: a client that dies with requests in
//! flight (no lock stays held), a client that never reads its outcomes, and
//! garbage entries — each closes only that connection and is counted. Every
//! wait has a deadline; sockets live in a fresh directory under /tmp.

use splitkv_client::{ConnectOptions, Connection};
use splitkv_host::clients::{CloseReason, GatewayCounts};
use splitkv_host::cluster::{Cluster, StatsHandle};
use splitkv_host::deploy::config::ClientSettings;
use splitkv_layout::app::txn::{Branch, CmpOp, Compare, Condition, GetResult, Op, Txn, TxnResult};
use splitkv_layout::app::{
    AbortReason, GetValue, Outcome, Request, Status, APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::Key;
use splitkv_nic::procedure::{ProcError, Procedure, ReadView, TxPlan, UserAbort, WriteSet};
use splitkv_nic::ProcedureRegistry;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long any one wait may take before the test fails.
const WAIT: Duration = Duration::from_secs(20);
const CAP: usize = APP_RING_CAPACITY_MIN_BYTES;
/// Values up to this size (the stalled-client case fills a ring with them).
const VALUE_BYTES: usize = 4000;
const ENV_ROLE: &str = "SPLITKV_APP_GATEWAY_ROLE";
const ENV_SOCKET: &str = "SPLITKV_APP_GATEWAY_SOCKET";
/// The key the killed child writes and the survivor then writes again.
const CONTESTED: Key = Key::new(0, 11);
/// Puts the killed child leaves in flight.
const CHILD_PUTS: u64 = 8;

/// `peek(id)`: returns `[1] ++ value` of key (0, id), or `[0]`.
struct Peek;

impl Procedure for Peek {
    fn name(&self) -> &'static str {
        "peek"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let id = args
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| ProcError::BadArgs("peek takes a u64"))?;
        plan.read(Key::new(0, id));
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        view: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let id = u64::from_le_bytes(args.try_into().map_err(|_| UserAbort)?);
        match view.get(&Key::new(0, id)) {
            Some(v) => {
                out.push(1);
                out.extend_from_slice(v);
            }
            None => out.push(0),
        }
        Ok(())
    }
}

struct Served {
    cluster: Cluster,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    fn counts(&self) -> GatewayCounts {
        counts(&self.cluster.stats_handle())
    }

    fn wait_counts(&self, what: &str, cond: impl Fn(&GatewayCounts) -> bool) {
        let end = Instant::now() + WAIT;
        loop {
            let c = self.counts();
            if cond(&c) {
                return;
            }
            assert!(Instant::now() < end, "timed out waiting for {what}: {c:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn connect(&self, in_flight_max: u32) -> Connection {
        let options = ConnectOptions {
            procedures: vec!["peek".into(), "txn".into()],
            in_flight_max,
            request_ring_bytes: CAP,
            outcome_ring_bytes: CAP,
            timeout: Duration::from_secs(5),
            ..ConnectOptions::default()
        };
        Connection::connect(&self.socket, &options).expect("connect")
    }
}

fn counts(h: &StatsHandle) -> GatewayCounts {
    let all = h.applications();
    assert_eq!(all.len(), 3, "one gateway per node");
    all.into_iter().find(|(n, _)| *n == 0).unwrap().1
}

/// A three-node cluster whose nodes serve applications in a fresh socket
/// directory, with `in_flight_max` and `outcome_full_ms_max` as given.
fn serve(test: &str, in_flight_max: usize, outcome_full_ms_max: u64) -> Served {
    let dir = tempfile::Builder::new()
        .prefix(&format!("splitkv-gw-{test}-"))
        .tempdir_in("/tmp")
        .unwrap();
    let settings = ClientSettings {
        socket_dir: dir.path().join("s"),
        allowed_uids: None,
        request_ring_bytes: CAP,
        outcome_ring_bytes: CAP,
        in_flight_max,
        connections_max: 8,
        outcome_full_ms_max,
        start: Default::default(),
    };
    let mut registry = ProcedureRegistry::new();
    registry.register(Arc::new(Peek));
    let cluster = Cluster::builder()
        .procedures(registry)
        .capacity_keys(1024)
        .value_bytes_max(VALUE_BYTES)
        .serve_applications(settings.clone())
        .build()
        .expect("cluster");
    let socket = settings.socket_path(0);
    assert!(socket.exists(), "node 0 listens");
    Served {
        cluster,
        socket,
        _dir: dir,
    }
}

fn encode(req: &Request<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    req.encode(&mut out).unwrap();
    out
}

/// Sends `req` and waits for its outcome: (status, body).
fn call(c: &mut Connection, req: &Request<'_>) -> (Status, Vec<u8>) {
    let end = Instant::now() + WAIT;
    c.send(&encode(req), Some(end)).expect("send");
    let mut out = Vec::new();
    c.recv(&mut out, Some(end)).expect("an outcome");
    let o = Outcome::decode(&out).expect("a valid outcome");
    assert_eq!(o.req_id, req.req_id(), "the client's req_id comes back");
    (o.status, o.body.to_vec())
}

/// Retries `req` while it ends retryably (a conflict), until the deadline.
fn call_until_final(c: &mut Connection, req: &Request<'_>) -> (Status, Vec<u8>) {
    let end = Instant::now() + WAIT;
    loop {
        let (status, body) = call(c, req);
        if !status.is_retryable() || Instant::now() > end {
            return (status, body);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn txn(compares: &[Compare<'_>], success: &[Op<'_>], failure: &[Op<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    Txn::encode(compares, success, failure, &mut out).unwrap();
    out
}

#[test]
fn single_key_calls_transactions_and_procedures_come_back_typed() {
    let s = serve("calls", 8, 1000);
    let mut c = s.connect(8);
    let peek = c.procedure_ids()[0].expect("peek resolves");
    let (k1, k2) = (Key::new(0, 1), Key::new(0, 2));

    let put = Request::Put {
        req_id: 10,
        key: k1,
        value: b"a",
    };
    assert_eq!(call_until_final(&mut c, &put), (Status::Committed, vec![]));
    let (status, body) = call_until_final(
        &mut c,
        &Request::Get {
            req_id: 11,
            key: k1,
        },
    );
    assert_eq!(status, Status::Committed);
    assert_eq!(GetValue::decode(&body).unwrap().value, b"a");
    let (status, _) = call_until_final(
        &mut c,
        &Request::Get {
            req_id: 12,
            key: k2,
        },
    );
    assert_eq!(status, Status::KeyNotFound);

    let insert = |req_id, key, value| Request::Insert { req_id, key, value };
    let (status, _) = call_until_final(&mut c, &insert(13, k1, &b"x"[..]));
    assert_eq!(status, Status::Aborted(AbortReason::CompareFailed));
    let (status, _) = call_until_final(&mut c, &insert(14, k2, &b"b"[..]));
    assert_eq!(status, Status::Committed);
    // DeleteOne: committed once, then the key is not found.
    let delete = |req_id| Request::Delete { req_id, key: k2 };
    let (status, _) = call_until_final(&mut c, &delete(115));
    assert_eq!(status, Status::Committed);
    let (status, _) = call_until_final(&mut c, &delete(116));
    assert_eq!(status, Status::KeyNotFound);
    let (status, _) = call_until_final(
        &mut c,
        &Request::Get {
            req_id: 117,
            key: k2,
        },
    );
    assert_eq!(status, Status::KeyNotFound);

    // Compare-and-swap k1 from "a" to "c", twice: the second takes the
    // failure branch and reads what is there.
    let expect_a = Compare {
        key: k1,
        condition: Condition::Value {
            op: CmpOp::Equal,
            operand: b"a",
        },
    };
    let cas = txn(
        &[expect_a],
        &[Op::Put {
            key: k1,
            value: b"c",
        }],
        &[Op::Get(k1)],
    );
    let cas_req = |req_id| Request::Txn {
        req_id,
        txn: Txn::decode(&cas).unwrap(),
    };
    let (status, body) = call_until_final(&mut c, &cas_req(16));
    assert_eq!(status, Status::Committed);
    assert_eq!(TxnResult::decode(&body).unwrap().branch(), Branch::Success);
    let (status, body) = call_until_final(&mut c, &cas_req(17));
    assert_eq!(status, Status::Committed, "a failed compare commits");
    let r = TxnResult::decode(&body).unwrap();
    assert_eq!(r.branch(), Branch::Failure);
    match r.gets().next() {
        Some(GetResult::Found { value, .. }) => assert_eq!(value, b"c"),
        other => panic!("the failure branch reads k1: {other:?}"),
    }

    let args = 1u64.to_le_bytes();
    let call_peek = Request::Call {
        req_id: 18,
        procedure: peek,
        args: &args,
    };
    assert_eq!(
        call_until_final(&mut c, &call_peek),
        (Status::Committed, b"\x01c".to_vec())
    );
    let unknown = Request::Call {
        req_id: 19,
        procedure: 77,
        args: &args,
    };
    assert_eq!(call(&mut c, &unknown).0, Status::UnknownProcedure);

    let n = s.counts();
    assert!(n.requests >= 10, "{n:?}");
    assert!(n.outcomes(Status::Committed) >= 6, "{n:?}");
    assert_eq!(n.outcomes(Status::UnknownProcedure), 1);
    assert_eq!((n.attached, n.open), (1, 1));
    drop(c);
    s.wait_counts("the closed connection", |n| {
        n.closed(CloseReason::PeerClosed) == 1 && n.open == 0
    });
    let socket = s.socket.clone();
    s.cluster.shutdown().expect("shutdown");
    assert!(!socket.exists(), "the socket is removed at shutdown");
}

#[test]
fn a_client_that_dies_with_requests_in_flight_leaves_no_lock_held() {
    let s = serve("dies", 8, 1000);
    let key = Key::new(0, 5);
    let mut doomed = s.connect(8);
    let end = Instant::now() + WAIT;
    for i in 0..8u64 {
        let put = Request::Put {
            req_id: i,
            key,
            value: b"from the dead",
        };
        doomed.send(&encode(&put), Some(end)).unwrap();
    }
    drop(doomed);
    s.wait_counts("the dead client", |n| {
        n.closed(CloseReason::PeerClosed) == 1
    });
    let mut c = s.connect(8);
    let put = Request::Put {
        req_id: 100,
        key,
        value: b"alive",
    };
    assert_eq!(
        call_until_final(&mut c, &put).0,
        Status::Committed,
        "no lock held"
    );
    let (status, body) = call_until_final(&mut c, &Request::Get { req_id: 101, key });
    assert_eq!(status, Status::Committed);
    assert_eq!(GetValue::decode(&body).unwrap().value, b"alive");
    let n = s.counts();
    assert_eq!(n.open, 1, "{n:?}");
}

#[test]
fn a_client_that_never_reads_its_outcomes_is_disconnected_alone() {
    let s = serve("stall", 64, 100);
    let key = Key::new(0, 9);
    let mut writer = s.connect(8);
    let big = vec![7u8; VALUE_BYTES];
    let put = Request::Put {
        req_id: 1,
        key,
        value: &big,
    };
    assert_eq!(call_until_final(&mut writer, &put).0, Status::Committed);

    // Each outcome carries the 4000-byte value: 32 fill the outcome ring,
    // the rest wait in the gateway's backlog (within the 64 granted).
    let mut stalled = s.connect(64);
    assert_eq!(stalled.limits().in_flight_max, 64);
    let end = Instant::now() + WAIT;
    for i in 0..48u64 {
        let get = Request::Get { req_id: i, key };
        stalled.send(&encode(&get), Some(end)).unwrap();
    }
    s.wait_counts("the stalled client", |n| {
        n.closed(CloseReason::OutcomeRingStalled) == 1
    });
    let (status, body) = call_until_final(&mut writer, &Request::Get { req_id: 2, key });
    assert_eq!(status, Status::Committed, "the other client is unaffected");
    assert_eq!(GetValue::decode(&body).unwrap().value.len(), VALUE_BYTES);
    assert_eq!(s.counts().open, 1);
    drop(stalled);
}

#[test]
fn a_client_over_its_granted_in_flight_bound_is_disconnected_alone() {
    // Granted 4 in flight; outcome rings that hold 32 of the big outcomes.
    let s = serve("inflight", 4, 10_000);
    let key = Key::new(0, 13);
    let mut writer = s.connect(4);
    let big = vec![3u8; VALUE_BYTES];
    let put = Request::Put {
        req_id: 1,
        key,
        value: &big,
    };
    assert_eq!(call_until_final(&mut writer, &put).0, Status::Committed);
    let mut greedy = s.connect(64);
    assert_eq!(
        greedy.limits().in_flight_max,
        4,
        "the node grants its bound"
    );
    // 40 gets, none of their outcomes read: at least 8 cannot leave the
    // gateway, twice the grant.
    let end = Instant::now() + WAIT;
    for i in 0..40u64 {
        let get = Request::Get { req_id: i, key };
        if greedy.send(&encode(&get), Some(end)).is_err() {
            break; // closed already: its request ring no longer drains
        }
    }
    s.wait_counts("the greedy client", |n| {
        n.closed(CloseReason::InFlightExceeded) == 1
    });
    let (status, _) = call_until_final(&mut writer, &Request::Get { req_id: 2, key });
    assert_eq!(status, Status::Committed, "the other client is unaffected");
    assert_eq!(s.counts().open, 1);
}

#[test]
fn garbage_and_oversized_entries_close_only_their_connection() {
    let s = serve("garbage", 8, 1000);
    let mut good = s.connect(8);
    let end = Instant::now() + WAIT;
    let mut garbage = s.connect(8);
    garbage.send(&[0xff, 1, 2, 3], Some(end)).unwrap();
    s.wait_counts("the garbage", |n| n.closed(CloseReason::Malformed) == 1);

    // A put whose length field says more than VALUE_BYTES_MAX.
    let mut oversized = s.connect(8);
    let mut entry = encode(&Request::Put {
        req_id: 1,
        key: Key::new(0, 1),
        value: b"v",
    });
    let len_at = 1 + 8 + splitkv_layout::KEY_BYTES;
    entry[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    oversized.send(&entry, Some(end)).unwrap();
    s.wait_counts("the oversized entry", |n| {
        n.closed(CloseReason::Malformed) == 2
    });

    let put = Request::Put {
        req_id: 3,
        key: Key::new(0, 3),
        value: b"fine",
    };
    assert_eq!(call_until_final(&mut good, &put).0, Status::Committed);
    assert_eq!(s.counts().open, 1);
}

/// Not a test of its own: the body of the child process
/// [`a_killed_client_process_leaves_no_lock_held`] spawns (it returns at
/// once in a normal run).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ENV_ROLE) else {
        return;
    };
    let path = PathBuf::from(std::env::var(ENV_SOCKET).expect("socket path"));
    if role != "puts" {
        eprintln!("unknown role {role}");
        std::process::exit(3);
    }
    let options = ConnectOptions {
        in_flight_max: CHILD_PUTS as u32,
        request_ring_bytes: CAP,
        outcome_ring_bytes: CAP,
        timeout: Duration::from_secs(5),
        ..ConnectOptions::default()
    };
    let mut c = Connection::connect(&path, &options).expect("connect");
    let end = Instant::now() + WAIT;
    for i in 0..CHILD_PUTS {
        let put = Request::Put {
            req_id: i,
            key: CONTESTED,
            value: b"from the killed",
        };
        c.send(&encode(&put), Some(end)).expect("send");
    }
    // Wait to be killed (bounded: the parent's deadline is shorter).
    std::thread::sleep(WAIT * 2);
    std::process::exit(0);
}

/// A child process, killed and reaped when dropped.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(role: &str, path: &Path) -> ChildGuard {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ENV_ROLE, role)
        .env(ENV_SOCKET, path)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    ChildGuard(child)
}

#[test]
fn a_killed_client_process_leaves_no_lock_held() {
    let s = serve("killed", 8, 1000);
    let mut child = spawn_child("puts", &s.socket);
    s.wait_counts("the child's puts", |n| n.requests >= CHILD_PUTS);
    child.0.kill().unwrap(); // SIGKILL, its puts in flight or just answered
    let _ = child.0.wait();
    s.wait_counts("the killed client", |n| {
        n.closed(CloseReason::PeerClosed) == 1 && n.open == 0
    });
    let mut c = s.connect(8);
    let put = Request::Put {
        req_id: 1,
        key: CONTESTED,
        value: b"survivor",
    };
    assert_eq!(
        call_until_final(&mut c, &put).0,
        Status::Committed,
        "no lock held"
    );
    let (status, body) = call_until_final(
        &mut c,
        &Request::Get {
            req_id: 2,
            key: CONTESTED,
        },
    );
    assert_eq!(status, Status::Committed);
    assert_eq!(GetValue::decode(&body).unwrap().value, b"survivor");
}

/// CPU time (clock ticks) of each of this process's threads whose name
/// starts with `prefix`, by thread id.
fn thread_ticks(prefix: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc");
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rsplit(") ").next() else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        // utime and stime: fields 14 and 15 of stat, 12 and 13 after "(comm) ".
        let field = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let tid = task.file_name().to_string_lossy().into_owned();
        out.push((tid, field(11) + field(12)));
    }
    out.sort();
    out
}

/// Clock ticks per second of /proc's times (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// A measurement, not a check (run with `--ignored --nocapture`): the CPU
/// the gateway threads spend over a few seconds with no connection, then
/// with one idle connection open (at node 0), as a share of one core each.
#[test]
#[ignore]
fn idle_gateway_cpu_share() {
    let s = serve("idle", 8, 1000);
    let window = Duration::from_secs(5);
    let measure = |what: &str| {
        std::thread::sleep(Duration::from_millis(200));
        // Thread names are cut to 15 bytes: the three nodes' gateway
        // threads all read "clients-gateway".
        let before = thread_ticks("clients-gateway");
        assert_eq!(before.len(), 3, "one gateway thread per node");
        std::thread::sleep(window);
        let after = thread_ticks("clients-gateway");
        let most = (before.iter().zip(&after))
            .map(|((_, b), (_, a))| a - b)
            .max()
            .unwrap_or(0);
        let share = most as f64 / USER_HZ / window.as_secs_f64();
        println!(
            "idle gateway threads, {what}: busiest {most} ticks in {window:?} = {:.3}% of a core",
            share * 100.0
        );
    };
    measure("no connection");
    let _idle = s.connect(8);
    measure("one idle connection at node 0");
}

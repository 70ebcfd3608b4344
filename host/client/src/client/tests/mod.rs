//! The out-of-process client against a fake node on a thread: the node side
//! of the set-up (Hello, descriptor, Welcome), then a script that answers
//! each decoded request with outcome entries of its choosing — right,
//! reordered, late, malformed or unmatched. Proves the encoding of every
//! call, request-id matching, the in-flight bound, typed errors for bad
//! outcomes and a lost node, and many calls wrapping both rings; [`model`]:
//! random pipelined calls answered out of order, against a model.

use super::*;

mod model;
use crate::calls::Versioned;
use crate::doorbell::Doorbell;
use crate::handshake_io::read_frame;
use crate::memory::SharedMemory;
use crate::txn_builder::{Cmp, Txn, TxnOp};
use crate::{recv_fd, AbortReason, Branch, TxnOutput};
use splitkv_layout::app::{GetResult, GetValue, HandshakeMsg, Status, TxnResult, Welcome};
use splitkv_layout::ring::{RingConsumer, RingProducer};
use splitkv_layout::{DecodeError, Key};
use std::io::Write;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::thread::JoinHandle;

/// Bound on every fake node's life.
const NODE_LIFE: Duration = Duration::from_secs(20);

/// A procedure id the fake node knows: it echoes its arguments reversed.
const ECHO_ID: u32 = 7;

/// What a script answers to each request: the outcome entries to write (any
/// bytes), possibly none yet.
type Script = Box<dyn FnMut(&Request<'_>, &mut Vec<Vec<u8>>) + Send>;

fn socket_path(test: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("splitkv-calls-{test}-"))
        .tempdir_in("/tmp")
        .unwrap();
    let path = dir.path().join("node-0.sock");
    (dir, path)
}

fn limits(in_flight_max: u32) -> AppLimits {
    AppLimits {
        in_flight_max,
        value_bytes_max: 4096,
        args_bytes_max: 8192,
        result_bytes_max: 65_536,
    }
}

fn outcome(req_id: u64, status: Status, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Outcome {
        req_id,
        status,
        body,
    }
    .encode(&mut out)
    .unwrap();
    out
}

/// The right answer to every request: a get reads `(version 3, key's id
/// as bytes)`; a put commits; an insert fails its compare; a delete finds
/// nothing; a transaction runs its success branch and its gets read
/// nothing; the echo procedure reverses its arguments; any other id is
/// unknown.
fn right_answer(req: &Request<'_>) -> Vec<u8> {
    let id = req.req_id();
    match req {
        Request::Get { key, .. } => {
            let mut body = Vec::new();
            let value = key.id.to_le_bytes();
            GetValue {
                version: 3,
                value: &value,
            }
            .encode(&mut body)
            .unwrap();
            outcome(id, Status::Committed, &body)
        }
        Request::Put { .. } => outcome(id, Status::Committed, &[]),
        Request::Insert { .. } => outcome(
            id,
            Status::Aborted(AbortReason::CompareFailed),
            b"key exists",
        ),
        Request::Delete { .. } => outcome(id, Status::KeyNotFound, b""),
        Request::Txn { txn, .. } => {
            let gets = vec![GetResult::NotFound; txn.get_count(Branch::Success)];
            let mut body = Vec::new();
            TxnResult::encode(Branch::Success, &gets, &mut body).unwrap();
            outcome(id, Status::Committed, &body)
        }
        Request::Call {
            procedure: ECHO_ID,
            args,
            ..
        } => {
            let back: Vec<u8> = args.iter().rev().copied().collect();
            outcome(id, Status::Committed, &back)
        }
        Request::Call { .. } => outcome(id, Status::UnknownProcedure, b"no such id"),
    }
}

fn right() -> Script {
    Box::new(|req, out| out.push(right_answer(req)))
}

/// What the fake node saw.
#[derive(Debug, Default)]
struct NodeLog {
    /// Requests decoded.
    requests: usize,
    /// Entries that did not decode as requests.
    undecodable: usize,
}

/// Sets up one connection as a node would, then serves requests with
/// `script` until the client closes its socket (or [`NODE_LIFE`]); with
/// `close_after` = n it closes the socket on the n-th request instead, without
/// answering it.
fn fake_node(
    path: &Path,
    grant: AppLimits,
    ids: Vec<Option<u32>>,
    mut script: Script,
    close_after: Option<usize>,
) -> JoinHandle<NodeLog> {
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        let deadline = Instant::now() + NODE_LIFE;
        let (mut s, _) = listener.accept().unwrap();
        let mut hello = Vec::new();
        read_frame(&mut s, &mut hello, deadline).unwrap();
        let Ok(HandshakeMsg::Hello(h)) = HandshakeMsg::decode(&hello) else {
            panic!("not a Hello");
        };
        let layout = h.layout;
        let memory = SharedMemory::from_fd(recv_fd(&s).unwrap(), layout.memory_bytes).unwrap();
        let mut welcome = Vec::new();
        Welcome::encode(0, &grant, &ids, &mut welcome).unwrap();
        s.write_all(&welcome).unwrap();
        let region = memory.region().clone();
        let mut requests =
            RingConsumer::attach(region.clone(), layout.request_ring_offset).unwrap();
        let mut outcomes =
            RingProducer::attach(region.clone(), layout.outcome_ring_offset).unwrap();
        let bell = Doorbell::attach(region, layout.outcome_doorbell_offset).unwrap();
        let mut log = NodeLog::default();
        let (mut entry, mut answers) = (Vec::new(), Vec::new());
        while Instant::now() < deadline {
            if !requests.try_pop(&mut entry).unwrap() {
                if socket_closed(&s) {
                    return log;
                }
                std::thread::sleep(Duration::from_micros(50));
                continue;
            }
            match Request::decode(&entry) {
                Ok(req) => {
                    log.requests += 1;
                    if close_after == Some(log.requests) {
                        // Closes the socket (and drops the mapping) unanswered.
                        return log;
                    }
                    script(&req, &mut answers);
                }
                Err(_) => log.undecodable += 1,
            }
            for a in answers.drain(..) {
                while !outcomes.try_push(&a).is_ok_and(|_| true) {
                    assert!(Instant::now() < deadline, "outcome ring stayed full");
                    std::thread::yield_now();
                }
                bell.ring();
            }
        }
        log
    })
}

fn socket_closed(s: &UnixStream) -> bool {
    use rustix::net::{recv, RecvFlags};
    let mut b = [0u8; 1];
    matches!(
        recv(s, &mut b[..], RecvFlags::PEEK | RecvFlags::DONTWAIT),
        Ok((0, _))
    )
}

fn options() -> ConnectOptions {
    ConnectOptions {
        timeout: Duration::from_secs(2),
        procedures: vec!["echo".into(), "missing".into()],
        ..ConnectOptions::default()
    }
}

fn connect(path: &Path) -> Client {
    let mut c = Client::connect(path, &options()).unwrap();
    c.set_call_timeout(Some(Duration::from_secs(5)));
    c
}

#[test]
fn every_call_is_encoded_and_its_outcome_typed() {
    let (_dir, path) = socket_path("every");
    let node = fake_node(&path, limits(8), vec![Some(ECHO_ID), None], right(), None);
    let mut c = connect(&path);
    let key = Key::new(1, 42);
    assert_eq!(
        c.get(key).unwrap(),
        Versioned {
            version: 3,
            value: 42u64.to_le_bytes().to_vec()
        }
    );
    c.put(key, b"v").unwrap();
    assert!(matches!(
        c.insert(key, b"v"),
        Err(CallError::Aborted {
            reason: AbortReason::CompareFailed,
            ..
        })
    ));
    assert_eq!(c.delete(key), Err(CallError::KeyNotFound));
    let txn = Txn::new()
        .when([Cmp::absent(key)])
        .then([TxnOp::get(Key::new(1, 1)), TxnOp::put(key, *b"x")]);
    assert_eq!(
        c.txn(&txn).unwrap(),
        TxnOutput {
            branch: Branch::Success,
            gets: vec![None]
        }
    );
    assert_eq!(c.call("echo", b"abc").unwrap(), b"cba");
    assert_eq!(c.call(ECHO_ID, b"xy").unwrap(), b"yx");
    assert!(matches!(
        c.call("missing", b""),
        Err(CallError::UnknownProcedure { name }) if name == "missing"
    ));
    assert!(matches!(
        c.require_procedures(),
        Err(CallError::UnknownProcedure { .. })
    ));
    assert!(matches!(
        c.call(99u32, b""),
        Err(CallError::UnknownProcedure { .. })
    ));
    assert_eq!(c.in_flight(), 0);
    drop(c);
    // "missing" and the over-limit calls never reached the node.
    assert_eq!(node.join().unwrap().requests, 8);
}

#[test]
fn oversized_values_and_bad_transactions_are_refused_before_sending() {
    let (_dir, path) = socket_path("oversized");
    let mut small = limits(4);
    small.value_bytes_max = 100;
    small.args_bytes_max = 50;
    let node = fake_node(&path, small, vec![Some(ECHO_ID), None], right(), None);
    let mut c = connect(&path);
    let key = Key::new(1, 1);
    assert!(matches!(
        c.put(key, &[0; 101]),
        Err(CallError::TooLarge { .. })
    ));
    assert!(matches!(
        c.insert(key, &[0; 101]),
        Err(CallError::TooLarge { .. })
    ));
    assert!(matches!(
        c.call("echo", &[0; 51]),
        Err(CallError::TooLarge { .. })
    ));
    let big = Txn::new().then([TxnOp::put(key, vec![0; 101])]);
    assert!(matches!(
        c.txn(&big),
        Err(CallError::InvalidTxn(crate::TxnError::ValueTooLarge {
            len: 101,
            max: 100
        }))
    ));
    let twice = Txn::new().then([TxnOp::get(key), TxnOp::delete(key)]);
    assert!(matches!(
        c.txn(&twice),
        Err(CallError::InvalidTxn(
            crate::TxnError::KeyTwiceInBranch { .. }
        ))
    ));
    c.put(key, &[0; 100]).unwrap();
    drop(c);
    assert_eq!(node.join().unwrap().requests, 1);
}

#[test]
fn outcomes_out_of_order_reach_their_calls() {
    let (_dir, path) = socket_path("order");
    // Holds four requests, then answers them last first.
    let mut held: Vec<Vec<u8>> = Vec::new();
    let script: Script = Box::new(move |req, out| {
        held.push(right_answer(req));
        if held.len() == 4 {
            out.extend(held.drain(..).rev());
        }
    });
    let node = fake_node(&path, limits(8), vec![Some(ECHO_ID), None], script, None);
    let mut c = connect(&path);
    let tickets: Vec<Ticket> = (0..4u64)
        .map(|i| c.submit(Call::Get(Key::new(1, i))).unwrap())
        .collect();
    assert_eq!(c.in_flight(), 4);
    let deadline = Some(Instant::now() + Duration::from_secs(5));
    // The first call's outcome comes last: waiting for it files the others.
    let first = c.wait(tickets[0], deadline).unwrap();
    assert!(matches!(first, Reply::Value(v) if v.value == 0u64.to_le_bytes()));
    assert_eq!(c.in_flight(), 3);
    let mut done = Vec::new();
    assert_eq!(c.poll_all(&mut done).unwrap(), 3);
    for d in &done {
        let i = tickets.iter().position(|t| *t == d.ticket).unwrap() as u64;
        assert!(matches!(&d.result, Ok(Reply::Value(v)) if v.value == i.to_le_bytes()));
    }
    assert_eq!(c.in_flight(), 0);
    assert_eq!(
        c.wait(tickets[1], deadline),
        Err(CallError::UnknownTicket { ticket: tickets[1] })
    );
    drop(c);
    node.join().unwrap();
}

#[test]
fn the_granted_in_flight_bound_is_never_exceeded() {
    let (_dir, path) = socket_path("bound");
    let grant = 3;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let script: Script = Box::new(move |req, out| {
        held.push(right_answer(req));
        if held.len() == 3 {
            out.append(&mut held);
        }
    });
    // The client asks for 32; the node grants 3.
    let node = fake_node(
        &path,
        limits(grant),
        vec![Some(ECHO_ID), None],
        script,
        None,
    );
    let mut c = connect(&path);
    assert_eq!(c.limits().in_flight_max, grant);
    let key = Key::new(1, 1);
    let tickets: Vec<Ticket> = (0..grant)
        .map(|_| c.submit(Call::Put(key, b"v")).unwrap())
        .collect();
    assert_eq!(
        c.submit(Call::Put(key, b"v")),
        Err(CallError::InFlightFull { max: grant })
    );
    // A completion not handed back still counts.
    let deadline = Some(Instant::now() + Duration::from_secs(5));
    assert_eq!(c.wait(tickets[2], deadline), Ok(Reply::Written));
    assert_eq!(c.in_flight(), 2);
    c.submit(Call::Put(key, b"v")).unwrap();
    assert!(matches!(
        c.submit(Call::Put(key, b"v")),
        Err(CallError::InFlightFull { .. })
    ));
    drop(c);
    assert_eq!(node.join().unwrap().requests, 4);
}

#[test]
fn bad_outcomes_are_typed_errors_and_the_connection_goes_on() {
    let (_dir, path) = socket_path("bad");
    let script: Script = Box::new(|req, out| {
        let id = req.req_id();
        match req.req_id() {
            // Garbage, an unknown id, then the right answer.
            0 => {
                out.push(vec![0xEE; 7]);
                out.push(outcome(id + 1000, Status::Committed, &[]));
                out.push(right_answer(req));
            }
            // A get whose body is no GetValue.
            1 => out.push(outcome(id, Status::Committed, &[1, 2, 3])),
            // A put with a body; a transaction with the wrong get count.
            2 => out.push(outcome(id, Status::Committed, b"?")),
            3 => {
                let mut body = Vec::new();
                TxnResult::encode(Branch::Success, &[], &mut body).unwrap();
                out.push(outcome(id, Status::Committed, &body));
            }
            _ => out.push(right_answer(req)),
        }
    });
    let node = fake_node(&path, limits(8), vec![Some(ECHO_ID), None], script, None);
    let mut c = connect(&path);
    let key = Key::new(1, 5);
    let t = c.submit(Call::Get(key)).unwrap();
    let deadline = Some(Instant::now() + Duration::from_secs(5));
    assert!(matches!(
        c.wait(t, deadline),
        Err(CallError::BadOutcome { req_id: None, .. })
    ));
    assert_eq!(
        c.wait(t, deadline),
        Err(CallError::UnmatchedOutcome { req_id: 1000 })
    );
    assert!(matches!(c.wait(t, deadline), Ok(Reply::Value(_))));
    assert!(matches!(
        c.get(key),
        Err(CallError::BadOutcome {
            req_id: Some(1),
            error: DecodeError::Truncated { .. }
        })
    ));
    assert!(matches!(
        c.put(key, b"v"),
        Err(CallError::BadOutcome {
            req_id: Some(2),
            ..
        })
    ));
    let txn = Txn::new().then([TxnOp::get(key)]);
    assert!(matches!(
        c.txn(&txn),
        Err(CallError::BadOutcome {
            req_id: Some(3),
            ..
        })
    ));
    // Still serving.
    c.put(key, b"v").unwrap();
    assert_eq!(c.in_flight(), 0);
    drop(c);
    node.join().unwrap();
}

#[test]
fn a_wait_times_out_and_the_call_stays_in_flight() {
    let (_dir, path) = socket_path("late");
    // Answers each request only when the next one arrives.
    let mut held: Option<Vec<u8>> = None;
    let script: Script = Box::new(move |req, out| {
        out.extend(held.take());
        held = Some(right_answer(req));
    });
    let node = fake_node(&path, limits(8), vec![Some(ECHO_ID), None], script, None);
    let mut c = connect(&path);
    let t = c.submit(Call::Put(Key::new(1, 1), b"v")).unwrap();
    let short = Some(Instant::now() + Duration::from_millis(100));
    assert_eq!(c.wait(t, short), Err(CallError::TimedOut { ticket: t }));
    assert_eq!(c.in_flight(), 1);
    c.submit(Call::Put(Key::new(1, 2), b"v")).unwrap();
    let long = Some(Instant::now() + Duration::from_secs(5));
    assert_eq!(c.wait(t, long), Ok(Reply::Written));
    drop(c);
    node.join().unwrap();
}

#[test]
fn a_node_that_closes_its_socket_leaves_its_client_not_connected() {
    let (_dir, path) = socket_path("closed");
    // Answers the first request, then closes on the second without answer.
    let node = fake_node(
        &path,
        limits(8),
        vec![Some(ECHO_ID), None],
        right(),
        Some(2),
    );
    let mut c = connect(&path);
    let key = Key::new(1, 1);
    c.put(key, b"v").unwrap();
    assert!(matches!(
        c.put(key, b"v"),
        Err(CallError::NotConnected { .. })
    ));
    assert_eq!(c.in_flight(), 0);
    assert!(matches!(
        c.submit(Call::Get(key)),
        Err(CallError::NotConnected { .. })
    ));
    assert_eq!(c.poll_one(), Ok(None));
    node.join().unwrap();
}

#[test]
fn many_calls_wrap_both_rings_and_every_outcome_matches() {
    let (_dir, path) = socket_path("wrap");
    let node = fake_node(&path, limits(16), vec![Some(ECHO_ID), None], right(), None);
    // 128 KiB rings (the minimum): 3 000 echoes of up to 2 KiB each pass
    // about 3 MiB through each ring, wrapping both many times.
    let mut o = options();
    o.request_ring_bytes = splitkv_layout::app::APP_RING_CAPACITY_MIN_BYTES;
    o.outcome_ring_bytes = splitkv_layout::app::APP_RING_CAPACITY_MIN_BYTES;
    let mut c = Client::connect(&path, &o).unwrap();
    let args_of = |i: u64| -> Vec<u8> {
        let len = (i * 7919 % 2048) as usize + 8;
        (0..len).map(|j| (i as usize + j) as u8).collect()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut sent: HashMap<Ticket, u64> = HashMap::new();
    let (mut next, mut checked, total) = (0u64, 0u64, 3_000u64);
    let mut done = Vec::new();
    while checked < total {
        assert!(Instant::now() < deadline, "{checked} of {total} calls done");
        while next < total {
            match c.submit(Call::Procedure(ProcedureRef::Id(ECHO_ID), &args_of(next))) {
                Ok(t) => {
                    sent.insert(t, next);
                    next += 1;
                }
                Err(CallError::InFlightFull { .. }) => break,
                Err(e) => panic!("submit {next}: {e}"),
            }
        }
        done.clear();
        c.poll_all(&mut done).unwrap();
        for d in &done {
            let i = sent.remove(&d.ticket).expect("a ticket of ours");
            let back: Vec<u8> = args_of(i).into_iter().rev().collect();
            assert_eq!(d.result, Ok(Reply::Output(back)), "call {i}");
            checked += 1;
        }
        if done.is_empty() {
            std::thread::yield_now();
        }
    }
    drop(c);
    assert_eq!(node.join().unwrap().requests, total as usize);
}

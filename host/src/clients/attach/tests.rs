//! [`attach()`] on one end of a socket pair, the client played by hand on the
//! other: every refusal reason from the input that causes it, the clients
//! that leave, and a good set-up whose rings carry entries both ways.

use super::*;
use rustix::fd::AsFd;
use rustix::fs::MemfdFlags;
use splitkv_client::send_fd;
use splitkv_layout::app::{HandshakeMsg, APP_LAYOUT_VERSION, APP_RING_CAPACITY_MIN_BYTES};
use splitkv_layout::doorbell::init_doorbell;
use splitkv_layout::ring::init_ring;
use std::io::Write;

const CAP: usize = APP_RING_CAPACITY_MIN_BYTES;

fn own_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

fn policy() -> AttachPolicy {
    AttachPolicy {
        node_id: 1,
        allowed_uids: vec![own_uid()],
        request_ring_bytes_max: 2 * CAP,
        outcome_ring_bytes_max: 2 * CAP,
        in_flight_max: 16,
        handshake_timeout: Duration::from_millis(500),
        resolve: Arc::new(|n: &str| (n == "transfer").then_some(5)),
    }
}

fn layout(request: usize, outcome: usize) -> AppMemoryLayout {
    AppMemoryLayout::new(request as u64, outcome as u64).unwrap()
}

/// Memory for `l`, rings and doorbells initialised as a client does.
fn memory(l: &AppMemoryLayout) -> SharedMemory {
    let m = SharedMemory::create(l.memory_bytes).unwrap();
    let r = m.region();
    init_ring(r, l.request_ring_offset, l.request_ring_capacity_bytes).unwrap();
    init_ring(r, l.outcome_ring_offset, l.outcome_ring_capacity_bytes).unwrap();
    init_doorbell(r, l.request_doorbell_offset).unwrap();
    init_doorbell(r, l.outcome_doorbell_offset).unwrap();
    m
}

fn hello(l: &AppMemoryLayout, in_flight: u32) -> Vec<u8> {
    let mut out = Vec::new();
    Hello::encode(l, in_flight, &["transfer", "unknown"], &mut out).unwrap();
    out
}

/// The node's answer as the client reads it.
fn answer(client: &mut UnixStream) -> Vec<u8> {
    let mut buf = Vec::new();
    read_frame(client, &mut buf, Instant::now() + Duration::from_secs(5)).unwrap();
    buf
}

fn refusal(
    result: Result<AttachedConnection, AttachFailure>,
    client: &mut UnixStream,
) -> RefusedReason {
    let Err(AttachFailure::Refused { reason, .. }) = result else {
        panic!("expected a refusal, got {result:?}");
    };
    let bytes = answer(client);
    let Ok(HandshakeMsg::Refused(r)) = HandshakeMsg::decode(&bytes) else {
        panic!("the client did not read a Refused");
    };
    assert_eq!(r.reason, reason);
    reason
}

/// Runs attach after the client wrote `bytes` and, if given, passed `fd`.
fn run(
    bytes: &[u8],
    fd: Option<rustix::fd::BorrowedFd<'_>>,
    policy: &AttachPolicy,
    slots: &ConnectionSlots,
) -> (Result<AttachedConnection, AttachFailure>, UnixStream) {
    let (mut client, node) = UnixStream::pair().unwrap();
    client.write_all(bytes).unwrap();
    if let Some(fd) = fd {
        send_fd(&client, fd).unwrap();
    }
    (attach(node, policy, slots), client)
}

#[test]
fn a_good_client_is_welcomed_and_its_rings_carry_entries() {
    let l = layout(CAP, 2 * CAP);
    let m = memory(&l);
    let slots = ConnectionSlots::new(4);
    let (result, mut client) = run(&hello(&l, 64), Some(m.fd()), &policy(), &slots);
    let mut conn = result.unwrap();
    let bytes = answer(&mut client);
    let Ok(HandshakeMsg::Welcome(w)) = HandshakeMsg::decode(&bytes) else {
        panic!("no Welcome");
    };
    assert_eq!(w.node_id, 1);
    assert_eq!(
        w.limits.in_flight_max, 16,
        "the ask of 64 is cut to the node's 16"
    );
    assert_eq!(w.procedure_ids().collect::<Vec<_>>(), vec![Some(5), None]);
    assert_eq!(conn.peer().uid, own_uid());
    assert_eq!(slots.open(), 1);
    let mut requests = RingProducer::attach(m.region().clone(), l.request_ring_offset).unwrap();
    let mut outcomes = RingConsumer::attach(m.region().clone(), l.outcome_ring_offset).unwrap();
    requests.try_push(b"ping").unwrap();
    let mut got = Vec::new();
    assert!(conn.try_recv(&mut got).unwrap());
    assert_eq!(got, b"ping");
    assert!(conn.try_send(b"pong").unwrap());
    assert!(outcomes.try_pop(&mut got).unwrap());
    assert_eq!(got, b"pong");
    drop(conn);
    assert_eq!(slots.open(), 0);
}

#[test]
fn users_and_connection_counts_are_checked_first() {
    let l = layout(CAP, CAP);
    let m = memory(&l);
    let mut p = policy();
    p.allowed_uids = vec![own_uid().wrapping_add(1)];
    let slots = ConnectionSlots::new(1);
    let (r, mut c) = run(&hello(&l, 4), Some(m.fd()), &p, &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::UserNotAllowed);
    let _held = slots.try_reserve().unwrap();
    let (r, mut c) = run(&hello(&l, 4), Some(m.fd()), &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::ConnectionsFull);
}

#[test]
fn bad_hellos_are_refused() {
    let l = layout(CAP, CAP);
    let slots = ConnectionSlots::new(4);
    let mut other_version = hello(&l, 4);
    other_version[4..8].copy_from_slice(&(APP_LAYOUT_VERSION + 1).to_le_bytes());
    let (r, mut c) = run(&other_version, None, &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::VersionMismatch);
    let (r, mut c) = run(&[0x42; 64], None, &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::BadHello);
    let mut oversized = hello(&l, 4);
    oversized[8..12].copy_from_slice(&(1u32 << 20).to_le_bytes());
    let (r, mut c) = run(&oversized, None, &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::BadHello);
    let mut corrupt = hello(&l, 4);
    corrupt[13] ^= 0xff; // memory_bytes no longer matches the rings
    let (r, mut c) = run(&corrupt, None, &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::BadHello);
    let big = layout(4 * CAP, CAP);
    let (r, mut c) = run(&hello(&big, 4), None, &policy(), &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::BadHello);
    assert_eq!(slots.open(), 0, "a refusal frees its place");
}

#[test]
fn bad_memory_is_refused_before_it_is_used() {
    let l = layout(CAP, CAP);
    let slots = ConnectionSlots::new(4);
    let check = |fd: Option<rustix::fd::BorrowedFd<'_>>, hello_bytes: &[u8], why: &str| {
        let (r, mut c) = run(hello_bytes, fd, &policy(), &slots);
        assert_eq!(refusal(r, &mut c), RefusedReason::BadMemory, "{why}");
    };
    let wrong_size = SharedMemory::create(l.memory_bytes + 4096).unwrap();
    check(Some(wrong_size.fd()), &hello(&l, 4), "wrong size");
    let unsealed = rustix::fs::memfd_create("t", MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&unsealed, l.memory_bytes as u64).unwrap();
    check(Some(unsealed.as_fd()), &hello(&l, 4), "unsealed");
    let mut no_fd = hello(&l, 4);
    no_fd.push(splitkv_client::fd_pass::FD_PASS_TAG);
    check(None, &no_fd, "a tag byte without a descriptor");
    let uninitialised = SharedMemory::create(l.memory_bytes).unwrap();
    check(Some(uninitialised.fd()), &hello(&l, 4), "no ring headers");
    // Rings laid out for other capacities than the Hello's, in memory of the
    // Hello's size: the request ring header says CAP / 2.
    let m = memory(&l);
    init_ring(m.region(), l.request_ring_offset, CAP / 2).unwrap();
    check(Some(m.fd()), &hello(&l, 4), "capacity differs");
    let used = memory(&l);
    let mut p = RingProducer::attach(used.region().clone(), l.outcome_ring_offset).unwrap();
    p.try_push(b"forged outcome").unwrap();
    check(Some(used.fd()), &hello(&l, 4), "outcome ring already used");
    assert_eq!(slots.open(), 0);
}

#[test]
fn a_resolver_that_returns_the_reserved_id_is_answered_unavailable() {
    let l = layout(CAP, CAP);
    let m = memory(&l);
    let mut p = policy();
    p.resolve = Arc::new(|_: &str| Some(splitkv_layout::app::PROCEDURE_ID_UNKNOWN));
    let slots = ConnectionSlots::new(4);
    let (r, mut c) = run(&hello(&l, 4), Some(m.fd()), &p, &slots);
    assert_eq!(refusal(r, &mut c), RefusedReason::Unavailable);
    assert_eq!(slots.open(), 0);
}

#[test]
fn clients_that_leave_or_stall_get_no_answer() {
    let l = layout(CAP, CAP);
    let slots = ConnectionSlots::new(4);
    let h = hello(&l, 4);
    let (client, node) = UnixStream::pair().unwrap();
    (&client).write_all(&h[..10]).unwrap();
    drop(client);
    let r = attach(node, &policy(), &slots);
    assert!(
        matches!(
            r,
            Err(AttachFailure::Dropped {
                reason: DropReason::PeerClosed,
                ..
            })
        ),
        "{r:?}"
    );
    let (client, node) = UnixStream::pair().unwrap();
    (&client).write_all(&h).unwrap();
    drop(client);
    let r = attach(node, &policy(), &slots);
    assert!(
        matches!(
            r,
            Err(AttachFailure::Dropped {
                reason: DropReason::PeerClosed,
                ..
            })
        ),
        "{r:?}"
    );
    let (client, node) = UnixStream::pair().unwrap();
    (&client).write_all(&h).unwrap();
    let start = Instant::now();
    let r = attach(node, &policy(), &slots);
    assert!(
        matches!(
            r,
            Err(AttachFailure::Dropped {
                reason: DropReason::TimedOut,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));
    drop(client);
    assert_eq!(slots.open(), 0);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Any bytes a client sends before closing its side, after a valid
    /// header prefix or not, end in a refusal or a drop: never a panic, a
    /// hang, a place held, or an attached connection.
    #[test]
    fn arbitrary_hellos_never_attach(
        body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        framed in proptest::prelude::any::<bool>(),
    ) {
        let mut bytes = Vec::new();
        if framed {
            bytes.extend_from_slice(&splitkv_layout::app::HANDSHAKE_MAGIC.to_le_bytes());
            bytes.extend_from_slice(&APP_LAYOUT_VERSION.to_le_bytes());
            bytes.extend_from_slice(&((body.len() + 13) as u32).to_le_bytes());
            bytes.push(1);
        }
        bytes.extend_from_slice(&body);
        let slots = ConnectionSlots::new(1);
        let (client, node) = UnixStream::pair().unwrap();
        (&client).write_all(&bytes).unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        let start = Instant::now();
        let r = attach(node, &policy(), &slots);
        let refused_or_dropped = matches!(
            r,
            Err(AttachFailure::Refused {
                reason: RefusedReason::BadHello | RefusedReason::VersionMismatch,
                ..
            }) | Err(AttachFailure::Dropped {
                reason: DropReason::PeerClosed,
                ..
            })
        );
        proptest::prop_assert!(refused_or_dropped, "{:?}", r);
        proptest::prop_assert!(start.elapsed() < Duration::from_millis(400), "waited for the timeout");
        proptest::prop_assert_eq!(slots.open(), 0);
    }
}

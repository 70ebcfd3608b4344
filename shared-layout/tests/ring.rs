//! Tests of the SPSC ring (`splitkv_layout::ring`): a model-based property test,
//! a two-thread stress test, corruption tests and header validation.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use proptest::prelude::*;
use splitkv_layout::ring::*;
use splitkv_layout::{Region, CACHE_LINE_BYTES};

// Header layout, as documented in `ring.rs`.
const MAGIC_AT: usize = 0;
const CAPACITY_AT: usize = 8;
const TAIL_AT: usize = CACHE_LINE_BYTES;
const HEAD_AT: usize = 2 * CACHE_LINE_BYTES;
const DATA_AT: usize = RING_HEADER_BYTES;

fn payload(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed as u8).wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

/// A new ring at offset 0 of its own region, plus the region.
fn ring_in_region(capacity_bytes: usize) -> (Region, RingProducer, RingConsumer) {
    let region = Region::new(ring_region_bytes(capacity_bytes));
    init_ring(&region, 0, capacity_bytes).unwrap();
    let p = RingProducer::attach(region.clone(), 0).unwrap();
    let c = RingConsumer::attach(region.clone(), 0).unwrap();
    (region, p, c)
}

fn assert_corrupt(r: Result<bool, RingError>, needle: &str) {
    match r {
        Err(RingError::Corrupt(why)) => assert!(why.contains(needle), "{why:?} lacks {needle:?}"),
        other => panic!("expected Corrupt({needle:?}), got {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Model-based property test.

/// Reference model: the byte accounting of the layout spec, and the payloads in
/// FIFO order. Padding is an item of the queue with no payload.
struct Model {
    capacity: u64,
    tail: u64,
    head: u64,
    items: VecDeque<(Option<Vec<u8>>, u64)>,
}

impl Model {
    fn new(capacity: usize) -> Model {
        Model {
            capacity: capacity as u64,
            tail: 0,
            head: 0,
            items: VecDeque::new(),
        }
    }

    fn free(&self) -> u64 {
        self.capacity - (self.tail - self.head)
    }

    fn push(&mut self, data: Vec<u8>) -> Result<u64, RingError> {
        let max = RING_ENTRY_BYTES_MAX.min(self.capacity as usize - 8);
        if data.len() > max {
            return Err(RingError::TooLarge {
                len: data.len(),
                max,
            });
        }
        let entry = 8 + (data.len() as u64).div_ceil(8) * 8;
        let to_end = self.capacity - self.tail % self.capacity;
        if entry > to_end {
            if self.free() < to_end {
                return Err(RingError::Full);
            }
            self.items.push_back((None, to_end));
            self.tail += to_end;
        }
        if self.free() < entry {
            return Err(RingError::Full);
        }
        self.items.push_back((Some(data), entry));
        self.tail += entry;
        Ok(self.tail)
    }

    /// Consumes padding in front of the next message (or of the end).
    fn skip_padding(&mut self) {
        while let Some((None, bytes)) = self.items.front() {
            self.head += bytes;
            self.items.pop_front();
        }
    }

    fn pop(&mut self) -> Option<Vec<u8>> {
        self.skip_padding();
        let (item, bytes) = self.items.pop_front()?;
        self.head += bytes;
        item
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Push a payload of this length (resolved against the capacity).
    Push(LenSpec, u8),
    /// Push the same, gathered from parts split at these fractions.
    PushParts(LenSpec, u8, Vec<u8>),
    Pop,
    IsEmpty,
    FreeBytes,
}

#[derive(Debug, Clone)]
enum LenSpec {
    Small(usize),
    UpTo(u16),
    NearCapacity(u8),
    OverMax(u16),
}

impl LenSpec {
    fn resolve(&self, capacity: usize) -> usize {
        match *self {
            LenSpec::Small(n) => n,
            LenSpec::UpTo(f) => f as usize * capacity / u16::MAX as usize,
            LenSpec::NearCapacity(d) => (capacity + 8).saturating_sub(d as usize),
            LenSpec::OverMax(d) => RING_ENTRY_BYTES_MAX + 1 + d as usize,
        }
    }
}

fn len_spec() -> impl Strategy<Value = LenSpec> {
    prop_oneof![
        4 => (0usize..=24).prop_map(LenSpec::Small),
        4 => any::<u16>().prop_map(LenSpec::UpTo),
        1 => (0u8..=40).prop_map(LenSpec::NearCapacity),
        1 => any::<u16>().prop_map(LenSpec::OverMax),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (len_spec(), any::<u8>()).prop_map(|(l, s)| Op::Push(l, s)),
        2 => (len_spec(), any::<u8>(), prop::collection::vec(any::<u8>(), 0..4))
            .prop_map(|(l, s, cuts)| Op::PushParts(l, s, cuts)),
        6 => Just(Op::Pop),
        1 => Just(Op::IsEmpty),
        1 => Just(Op::FreeBytes),
    ]
}

/// Splits `data` into parts at the given fractions (of 256).
fn split<'a>(data: &'a [u8], cuts: &[u8]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts
        .iter()
        .map(|&c| c as usize * data.len() / 256)
        .collect();
    points.sort_unstable();
    let mut parts = Vec::new();
    let mut start = 0;
    for p in points {
        parts.push(&data[start..p]);
        start = p;
    }
    parts.push(&data[start..]);
    parts
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn ring_matches_fifo_model(
        capacity in prop::sample::select(vec![64usize, 128, 256, 1024, 128 * 1024]),
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let (mut p, mut c) = ring_pair(capacity).unwrap();
        let mut model = Model::new(capacity);
        let mut payloads: VecDeque<Vec<u8>> = VecDeque::new();
        let mut acks: VecDeque<u64> = VecDeque::new();
        let mut out = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            match op {
                Op::Push(len, seed) | Op::PushParts(len, seed, _) => {
                    let data = payload(*seed as u64 ^ i as u64, len.resolve(capacity));
                    let got = match op {
                        Op::PushParts(_, _, cuts) => p.try_push_parts(&split(&data, cuts)),
                        _ => p.try_push(&data),
                    };
                    let want = model.push(data.clone());
                    prop_assert_eq!(&got, &want);
                    if let Ok(tail) = got {
                        prop_assert_eq!(p.produced_bytes(), tail);
                        payloads.push_back(data);
                        acks.push_back(tail);
                    }
                }
                Op::Pop => {
                    let before = c.consumed_bytes();
                    let got = c.try_pop(&mut out).unwrap();
                    let want = model.pop();
                    prop_assert_eq!(got, want.is_some());
                    prop_assert_eq!(c.consumed_bytes(), model.head);
                    prop_assert!(c.consumed_bytes() >= before);
                    if let Some(want) = want {
                        prop_assert_eq!(&out, &want);
                        prop_assert_eq!(Some(want), payloads.pop_front());
                        // The entry's push return value is now acknowledged.
                        let ack = acks.pop_front().unwrap();
                        prop_assert!(before < ack && ack <= c.consumed_bytes());
                    } else {
                        prop_assert!(out.is_empty());
                    }
                }
                Op::IsEmpty => {
                    prop_assert_eq!(c.is_empty(), payloads.is_empty());
                    // is_empty consumes padding in front of the next message.
                    model.skip_padding();
                    prop_assert_eq!(c.consumed_bytes(), model.head);
                }
                Op::FreeBytes => {
                    prop_assert_eq!(p.free_bytes() as u64, model.free());
                }
            }
        }
        // Drain: everything pushed comes out in order.
        while let Some(want) = payloads.pop_front() {
            prop_assert!(c.try_pop(&mut out).unwrap());
            prop_assert_eq!(&out, &want);
        }
        prop_assert!(!c.try_pop(&mut out).unwrap());
        prop_assert!(c.is_empty());
        prop_assert_eq!(c.consumed_bytes(), p.produced_bytes());
        prop_assert_eq!(p.free_bytes(), capacity);
    }
}

// ---------------------------------------------------------------------------
// Deterministic behaviour.

#[test]
fn ends_are_send() {
    fn assert_send<T: Send>() {}
    assert_send::<RingProducer>();
    assert_send::<RingConsumer>();
}

#[test]
fn empty_payloads_round_trip() {
    let (mut p, mut c) = ring_pair(64).unwrap();
    let mut out = vec![1, 2, 3];
    assert!(c.is_empty());
    assert!(!c.try_pop(&mut out).unwrap());
    assert!(out.is_empty());
    for i in 0..100u64 {
        assert_eq!(p.try_push(&[]).unwrap(), 8 * (i + 1));
        assert!(!c.is_empty());
        out.push(9);
        assert!(c.try_pop(&mut out).unwrap());
        assert!(out.is_empty());
        assert_eq!(c.consumed_bytes(), 8 * (i + 1));
    }
}

#[test]
fn full_until_consumed() {
    let (mut p, mut c) = ring_pair(256).unwrap();
    // 8 entries of 32 B (24 B payload) fill the 256 B data area exactly.
    for i in 0..8 {
        p.try_push(&payload(i, 24)).unwrap();
    }
    assert_eq!(p.free_bytes(), 0);
    assert_eq!(p.try_push(&[]), Err(RingError::Full));
    assert_eq!(p.try_push(&payload(0, 1)), Err(RingError::Full));
    let mut out = Vec::new();
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(out, payload(0, 24));
    assert_eq!(p.free_bytes(), 32);
    assert_eq!(p.try_push(&payload(8, 24)), Ok(9 * 32));
    assert_eq!(p.try_push(&[]), Err(RingError::Full));
    for i in 1..9 {
        assert!(c.try_pop(&mut out).unwrap());
        assert_eq!(out, payload(i, 24));
    }
    assert!(c.is_empty());
}

#[test]
fn too_large_payloads() {
    let (mut p, _c) = ring_pair(64).unwrap();
    assert_eq!(p.payload_bytes_max(), 56);
    assert!(p.try_push(&[0; 56]).is_ok());
    assert_eq!(
        p.try_push(&[0; 57]),
        Err(RingError::TooLarge { len: 57, max: 56 })
    );
    assert_eq!(
        p.try_push_parts(&[&[0; 30], &[0; 27]]),
        Err(RingError::TooLarge { len: 57, max: 56 })
    );

    let (mut p, mut c) = ring_pair(1 << 20).unwrap();
    let big = payload(7, RING_ENTRY_BYTES_MAX);
    assert!(p.try_push(&big).is_ok());
    assert_eq!(
        p.try_push(&[0; RING_ENTRY_BYTES_MAX + 1]),
        Err(RingError::TooLarge {
            len: RING_ENTRY_BYTES_MAX + 1,
            max: RING_ENTRY_BYTES_MAX
        })
    );
    let mut out = Vec::new();
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(out, big);
}

#[test]
fn full_ring_sized_entries_wrap_via_padding() {
    // An entry as large as the whole data area only fits at position 0: the
    // producer pads, the consumer drains the padding, then the entry fits.
    let (mut p, mut c) = ring_pair(64).unwrap();
    let mut out = Vec::new();
    p.try_push(&payload(1, 10)).unwrap(); // 24 B
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(p.try_push(&payload(2, 56)), Err(RingError::Full)); // padding written
    assert!(c.is_empty()); // consumes the padding
    assert_eq!(c.consumed_bytes(), 64);
    assert_eq!(p.try_push(&payload(2, 56)), Ok(128));
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(out, payload(2, 56));
}

#[test]
fn many_wraparounds_small_ring() {
    let (mut p, mut c) = ring_pair(64).unwrap();
    let mut out = Vec::new();
    let mut rng = 0x1234_5678_u64;
    let mut queued = VecDeque::new();
    for i in 0..20_000u64 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = (rng >> 58) as usize; // 0..64
        let data = payload(i, len);
        match p.try_push(&data) {
            Ok(_) => queued.push_back(data),
            Err(RingError::Full) => {}
            Err(RingError::TooLarge { len, max: 56 }) => assert!(len > 56),
            Err(e) => panic!("{e}"),
        }
        if rng & 1 == 0 {
            if c.try_pop(&mut out).unwrap() {
                assert_eq!(Some(&out), queued.pop_front().as_ref());
            } else {
                assert!(queued.is_empty());
            }
        }
    }
    assert!(
        p.produced_bytes() > 1000 * 64,
        "wrapped {} times",
        p.produced_bytes() / 64
    );
}

#[test]
fn gathered_parts_equal_one_payload() {
    let (mut p, mut c) = ring_pair(1024).unwrap();
    let data = payload(3, 100);
    let parts: Vec<&[u8]> = vec![&data[..3], &[], &data[3..11], &data[11..12], &data[12..]];
    p.try_push_parts(&parts).unwrap();
    p.try_push_parts(&[]).unwrap();
    let mut out = Vec::new();
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(out, data);
    assert!(c.try_pop(&mut out).unwrap());
    assert!(out.is_empty());
}

#[test]
fn padding_bytes_are_zeroed() {
    let (region, mut p, _c) = ring_in_region(64);
    region.write_bytes(DATA_AT, &[0xff; 64]).unwrap();
    p.try_push(&[7, 7, 7]).unwrap();
    let mut entry = [0u8; 16];
    region.read_bytes(DATA_AT, &mut entry).unwrap();
    assert_eq!(entry, [3, 0, 0, 0, 0, 0, 0, 0, 7, 7, 7, 0, 0, 0, 0, 0]);
}

#[test]
fn reattach_continues_where_the_ends_left_off() {
    let (region, mut p, mut c) = ring_in_region(128);
    let mut out = Vec::new();
    for i in 0..4 {
        p.try_push(&payload(i, 20)).unwrap();
    }
    assert!(c.try_pop(&mut out).unwrap());
    drop((p, c));
    let mut p = RingProducer::attach(region.clone(), 0).unwrap();
    let mut c = RingConsumer::attach(region, 0).unwrap();
    assert_eq!(c.consumed_bytes(), 32);
    assert_eq!(p.produced_bytes(), 128);
    assert_eq!(p.try_push(&payload(4, 20)), Ok(160));
    for i in 1..5 {
        assert!(c.try_pop(&mut out).unwrap());
        assert_eq!(out, payload(i, 20));
    }
    assert!(c.is_empty());
}

#[test]
fn two_rings_share_a_region() {
    let second = ring_region_bytes(128);
    let region = Region::new(second + ring_region_bytes(256));
    init_ring(&region, 0, 128).unwrap();
    init_ring(&region, second, 256).unwrap();
    let mut p0 = RingProducer::attach(region.clone(), 0).unwrap();
    let mut p1 = RingProducer::attach(region.clone(), second).unwrap();
    let mut c0 = RingConsumer::attach(region.clone(), 0).unwrap();
    let mut c1 = RingConsumer::attach(region, second).unwrap();
    assert_eq!((p0.capacity_bytes(), c1.capacity_bytes()), (128, 256));
    for i in 0..200 {
        p0.try_push(&payload(i, 100)).unwrap();
        p1.try_push(&payload(i + 1, 200)).unwrap();
        let mut out = Vec::new();
        assert!(c0.try_pop(&mut out).unwrap());
        assert_eq!(out, payload(i, 100));
        assert!(c1.try_pop(&mut out).unwrap());
        assert_eq!(out, payload(i + 1, 200));
    }
}

// ---------------------------------------------------------------------------
// Two threads.

fn stress_len(seq: u64) -> usize {
    let h = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57; // 0..128
    8 + h as usize
}

fn stress_byte(seq: u64, i: usize) -> u8 {
    (seq as u8) ^ (i as u8).wrapping_mul(13)
}

#[test]
fn two_thread_stress() {
    const MESSAGES: u64 = 200_000;
    let (mut p, mut c) = ring_pair(4096).unwrap();
    let producer = std::thread::spawn(move || {
        let mut buf = Vec::with_capacity(256);
        let mut acks = Vec::new();
        for seq in 0..MESSAGES {
            let len = stress_len(seq);
            buf.clear();
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend((8..len).map(|i| stress_byte(seq, i)));
            let cut = (seq as usize) % (len + 1);
            let mut spins = 0u32;
            let tail = loop {
                let r = if seq % 2 == 0 {
                    p.try_push(&buf)
                } else {
                    p.try_push_parts(&[&buf[..cut], &buf[cut..]])
                };
                match r {
                    Ok(t) => break t,
                    Err(RingError::Full) => {
                        spins += 1;
                        if spins & 63 == 0 {
                            std::thread::yield_now();
                        } else {
                            std::hint::spin_loop();
                        }
                    }
                    Err(e) => panic!("producer: {e}"),
                }
            };
            if seq % 1000 == 0 {
                acks.push(tail);
            }
        }
        acks
    });
    let mut out = Vec::new();
    let mut seq = 0u64;
    let mut spins = 0u32;
    while seq < MESSAGES {
        if !c.try_pop(&mut out).expect("consumer") {
            spins += 1;
            if spins & 63 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let len = stress_len(seq);
        assert_eq!(out.len(), len, "message {seq}");
        assert_eq!(u64::from_le_bytes(out[..8].try_into().unwrap()), seq);
        assert!(out[8..]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == stress_byte(seq, i + 8)));
        seq += 1;
    }
    let acks = producer.join().unwrap();
    assert!(!c.try_pop(&mut out).unwrap());
    assert_eq!(acks.len(), MESSAGES as usize / 1000);
    assert!(acks.windows(2).all(|w| w[0] < w[1]));
    assert!(*acks.last().unwrap() <= c.consumed_bytes());
}

// ---------------------------------------------------------------------------
// Corruption.

#[test]
fn corrupt_length_words() {
    let cases: [(u64, &str); 4] = [
        ((RING_ENTRY_BYTES_MAX + 1) as u64, "RING_ENTRY_BYTES_MAX"),
        (1 << 40, "high bits"),
        (17, "past the produced bytes"),
        (u32::MAX as u64, "RING_ENTRY_BYTES_MAX"),
    ];
    for (word, needle) in cases {
        let (region, mut p, mut c) = ring_in_region(256);
        p.try_push(&[1; 8]).unwrap();
        region.store(DATA_AT, word, Ordering::Relaxed);
        let mut out = Vec::new();
        assert_corrupt(c.try_pop(&mut out), needle);
        // The consumer stays failed, even after the word is repaired.
        region.store(DATA_AT, 8, Ordering::Relaxed);
        assert_corrupt(c.try_pop(&mut out), needle);
        assert!(!c.is_empty());
        assert_eq!(c.consumed_bytes(), 0);
    }
}

#[test]
fn corrupt_entry_crossing_the_end() {
    let (region, mut p, mut c) = ring_in_region(64);
    let mut out = Vec::new();
    p.try_push(&[0; 40]).unwrap(); // 48 B
    assert!(c.try_pop(&mut out).unwrap());
    p.try_push(&[0; 8]).unwrap(); // 16 B at position 48
    p.try_push(&[0; 8]).unwrap(); // 16 B at position 0
    region.store(DATA_AT + 48, 16, Ordering::Relaxed); // 24 B entry at 48
    assert_corrupt(c.try_pop(&mut out), "crosses the end");
}

#[test]
fn corrupt_padding() {
    // Padding at position 0.
    let (region, mut p, mut c) = ring_in_region(64);
    p.try_push(&[0; 8]).unwrap();
    region.store(DATA_AT, RING_PAD_MARKER, Ordering::Relaxed);
    assert_corrupt(c.try_pop(&mut Vec::new()), "start of the data area");

    // Padding that covers more than was produced.
    let (region, mut p, mut c) = ring_in_region(64);
    let mut out = Vec::new();
    p.try_push(&[0; 8]).unwrap();
    assert!(c.try_pop(&mut out).unwrap());
    p.try_push(&[0; 8]).unwrap(); // 16 B at 16; padding would need 48 B
    region.store(DATA_AT + 16, RING_PAD_MARKER, Ordering::Relaxed);
    assert_corrupt(c.try_pop(&mut out), "past the produced bytes");
}

#[test]
fn corrupt_tail() {
    let setups: [(u64, &str); 3] = [
        (4096, "beyond head + capacity"),
        (12, "not a multiple of 8"),
        (8, "moved backwards"),
    ];
    for (tail, needle) in setups {
        let (region, mut p, mut c) = ring_in_region(256);
        let mut out = Vec::new();
        p.try_push(&[0; 8]).unwrap();
        p.try_push(&[0; 8]).unwrap();
        assert!(c.try_pop(&mut out).unwrap()); // head = 16, cached tail = 32
        assert!(c.try_pop(&mut out).unwrap());
        region.store(TAIL_AT, tail, Ordering::Relaxed);
        assert_corrupt(c.try_pop(&mut out), needle);
    }
    // A tail below head wraps around to "far ahead".
    let (region, mut p, mut c) = ring_in_region(256);
    p.try_push(&[0; 8]).unwrap();
    assert!(c.try_pop(&mut Vec::new()).unwrap());
    region.store(TAIL_AT, 0, Ordering::Relaxed);
    assert!(matches!(
        c.try_pop(&mut Vec::new()),
        Err(RingError::Corrupt(_))
    ));
}

#[test]
fn corrupt_head_poisons_producer() {
    let (region, mut p, _c) = ring_in_region(64);
    p.try_push(&[0; 56]).unwrap(); // fills the ring with the cached head
    region.store(HEAD_AT, 1000, Ordering::Relaxed);
    assert!(matches!(p.try_push(&[]), Err(RingError::Corrupt(_))));
    region.store(HEAD_AT, 64, Ordering::Relaxed);
    assert!(matches!(p.try_push(&[]), Err(RingError::Corrupt(_))));
    assert_eq!(p.free_bytes(), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random bytes over any part of the ring: the consumer returns errors or
    /// bounded payloads, never panics, and stays failed after an error.
    #[test]
    fn scribbles_never_panic(
        capacity in prop::sample::select(vec![64usize, 256, 1024]),
        pushes in prop::collection::vec((0usize..80, any::<bool>()), 0..20),
        scribbles in prop::collection::vec(
            (any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 1..24)),
            1..8,
        ),
        fresh_consumer in any::<bool>(),
    ) {
        let (region, mut p, mut c) = ring_in_region(capacity);
        let mut out = Vec::new();
        for (len, pop) in &pushes {
            let _ = p.try_push(&payload(*len as u64, *len));
            if *pop {
                c.try_pop(&mut out).unwrap();
            }
        }
        let words = region.len_bytes() / 8;
        for (at, bytes) in &scribbles {
            let offset = at.index(words) * 8;
            let n = bytes.len().min(region.len_bytes() - offset);
            region.write_bytes(offset, &bytes[..n]).unwrap();
        }
        let consumer = if fresh_consumer {
            match RingConsumer::attach(region.clone(), 0) {
                Ok(c) => Some(c),
                Err(e) => {
                    prop_assert!(
                        matches!(e, RingError::BadHeader(_) | RingError::Region(_)),
                        "{e:?}"
                    );
                    None
                }
            }
        } else {
            Some(c)
        };
        if let Some(mut c) = consumer {
            let max = ring_payload_bytes_max(c.capacity_bytes());
            let mut failed = false;
            for i in 0..64 {
                match c.try_pop(&mut out) {
                    Ok(got) => {
                        prop_assert!(!failed, "error was not sticky");
                        prop_assert!(out.len() <= max);
                        prop_assert!(got || out.is_empty());
                    }
                    Err(e) => {
                        prop_assert!(matches!(e, RingError::Corrupt(_)), "{e:?}");
                        failed = true;
                    }
                }
                let _ = c.is_empty();
                if i % 4 == 0 {
                    let _ = p.try_push(&payload(i, i as usize));
                    let _ = p.free_bytes();
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Header validation.

#[test]
fn attach_rejects_bad_headers() {
    let region = Region::new(ring_region_bytes(256));
    let bad_header = |region: &Region, what: &str| {
        for r in [
            RingConsumer::attach(region.clone(), 0).map(|_| ()),
            RingProducer::attach(region.clone(), 0).map(|_| ()),
        ] {
            assert!(matches!(r, Err(RingError::BadHeader(_))), "{what}: {r:?}");
        }
    };
    bad_header(&region, "never initialised");

    init_ring(&region, 0, 256).unwrap();
    region.store(MAGIC_AT, RING_MAGIC ^ 1, Ordering::Relaxed);
    bad_header(&region, "bad magic");

    for capacity in [0u64, 32, 100, 255, 1 << 31, u64::MAX] {
        init_ring(&region, 0, 256).unwrap();
        region.store(CAPACITY_AT, capacity, Ordering::Relaxed);
        bad_header(&region, "bad capacity");
    }

    init_ring(&region, 0, 256).unwrap();
    region.store(HEAD_AT, 8, Ordering::Relaxed);
    bad_header(&region, "head ahead of tail");
    region.store(HEAD_AT, 0, Ordering::Relaxed);
    region.store(TAIL_AT, 264, Ordering::Relaxed);
    bad_header(&region, "tail over a capacity ahead");
    region.store(TAIL_AT, 4, Ordering::Relaxed);
    bad_header(&region, "misaligned tail");

    // A capacity that is valid but larger than the region.
    init_ring(&region, 0, 256).unwrap();
    region.store(CAPACITY_AT, 512, Ordering::Relaxed);
    assert!(matches!(
        RingConsumer::attach(region.clone(), 0),
        Err(RingError::Region(_))
    ));
}

#[test]
fn attach_and_init_reject_bad_placement() {
    let region = Region::new(ring_region_bytes(256));
    assert!(matches!(
        init_ring(&region, 8, 64),
        Err(RingError::BadHeader(_))
    ));
    assert!(matches!(
        init_ring(&region, 0, 512),
        Err(RingError::Region(_))
    ));
    assert!(matches!(
        init_ring(&region, 128, 256),
        Err(RingError::Region(_))
    ));
    assert!(matches!(
        init_ring(&region, usize::MAX - 63, 64),
        Err(RingError::Region(_))
    ));
    for capacity in [0, 1, 32, 96, 1000, RING_CAPACITY_MAX_BYTES * 2] {
        assert!(matches!(
            init_ring(&region, 0, capacity),
            Err(RingError::BadHeader(_))
        ));
        assert!(matches!(ring_pair(capacity), Err(RingError::BadHeader(_))));
    }
    init_ring(&region, 0, 256).unwrap();
    assert!(matches!(
        RingConsumer::attach(region.clone(), 8),
        Err(RingError::BadHeader(_))
    ));
    assert!(matches!(
        RingProducer::attach(region.clone(), region.len_bytes()),
        Err(RingError::Region(_))
    ));
    assert!(RingProducer::attach(region, 0).is_ok());
}

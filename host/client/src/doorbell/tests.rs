//! Unit tests of the doorbell (threads in one process).

use super::*;
use splitkv_layout::doorbell::{doorbell_offset, init_doorbell, ring_with_doorbell_bytes};
use splitkv_layout::ring::{init_ring, RingConsumer, RingProducer};

#[test]
fn policy_bounds_are_enforced() {
    assert!(WaitPolicy::new(DOORBELL_SPINS_MAX, DOORBELL_YIELDS_MAX, 1).is_ok());
    for (s, y, ms, field) in [
        (DOORBELL_SPINS_MAX + 1, 0, 1, "spins"),
        (0, DOORBELL_YIELDS_MAX + 1, 1, "yields"),
        (0, 0, 0, "sleep_ms"),
        (0, 0, DOORBELL_SLEEP_MS_MAX + 1, "sleep_ms"),
    ] {
        match WaitPolicy::new(s, y, ms) {
            Err(DoorbellError::PolicyOutOfRange { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn attach_checks_place() {
    let region = Region::new(128);
    assert!(matches!(
        Doorbell::attach(region.clone(), 8),
        Err(DoorbellError::Misaligned { offset: 8 })
    ));
    assert!(matches!(
        Doorbell::attach(region.clone(), 128),
        Err(DoorbellError::Region(_))
    ));
    assert!(Doorbell::attach(region, 64).is_ok());
}

#[test]
fn ring_wakes_only_a_sleeper() {
    let region = Region::new(64);
    let bell = Doorbell::attach(region.clone(), 0).unwrap();
    assert!(!bell.ring(), "nobody asked to be woken");
    region.store(0, DOORBELL_SLEEPING, Ordering::Relaxed);
    assert!(bell.ring());
    assert_eq!(region.load(0, Ordering::Relaxed), 0, "flag cleared");
}

#[test]
fn spin_budget_shrinks_when_spinning_fails_and_grows_when_it_works() {
    let region = Region::new(64);
    let mut bell = Doorbell::attach(region, 0).unwrap();
    let policy = WaitPolicy::new(64, 1000, 5).unwrap();
    assert_eq!(bell.spin_budget(), DOORBELL_SPINS_MAX);
    // Ready only after the spin phase: each wait halves the budget.
    let mut budgets = Vec::new();
    for _ in 0..5 {
        let mut checks = 0u32;
        let spins = bell.spin_budget().min(64);
        let got = bell.wait(
            &policy,
            || {
                checks += 1;
                checks > spins + 1
            },
            None,
        );
        assert_eq!(got, WaitOutcome::Ready);
        budgets.push(bell.spin_budget());
    }
    assert_eq!(
        budgets,
        [32, 16, 8, DOORBELL_SPINS_FLOOR, DOORBELL_SPINS_FLOOR]
    );
    // Ready at once: each wait doubles it, and the policy caps its use.
    let mut budgets = Vec::new();
    for _ in 0..5 {
        assert_eq!(bell.wait(&policy, || true, None), WaitOutcome::Ready);
        budgets.push(bell.spin_budget());
    }
    assert_eq!(budgets, [16, 32, 64, 128, 128]);
}

#[test]
fn wait_times_out_and_leaves_the_flag_clear() {
    let region = Region::new(64);
    let mut bell = Doorbell::attach(region.clone(), 0).unwrap();
    let policy = WaitPolicy::new(10, 2, 5).unwrap();
    let start = Instant::now();
    let end = start + Duration::from_millis(30);
    assert_eq!(
        bell.wait(&policy, || false, Some(end)),
        WaitOutcome::TimedOut
    );
    assert!(Instant::now() >= end);
    assert_eq!(region.load(0, Ordering::Relaxed), 0);
}

/// A sleeping consumer thread is woken by each of many entries, each sent
/// after the consumer has had time to fall asleep, with a sleep timeout
/// far longer than the test: a lost wake-up shows as a 10 s stall, which
/// fails the deadline below.
#[test]
fn sleeper_is_woken_by_each_entry() {
    // Room for every entry: the producer never waits for the consumer.
    const CAPACITY_BYTES: usize = 1024;
    const ENTRIES: u64 = 40;
    let region = Region::new(ring_with_doorbell_bytes(CAPACITY_BYTES));
    init_ring(&region, 0, CAPACITY_BYTES).unwrap();
    let at = doorbell_offset(0, CAPACITY_BYTES);
    init_doorbell(&region, at).unwrap();
    let mut producer = RingProducer::attach(region.clone(), 0).unwrap();
    let bell = Doorbell::attach(region.clone(), at).unwrap();
    let policy = WaitPolicy::new(0, 0, DOORBELL_SLEEP_MS_MAX).unwrap();
    let consumer_region = region.clone();
    let deadline = Instant::now() + Duration::from_secs(5);
    let consumer = std::thread::spawn(move || {
        let mut c = RingConsumer::attach(consumer_region.clone(), 0).unwrap();
        let mut bell = Doorbell::attach(consumer_region, at).unwrap();
        let mut out = Vec::new();
        for i in 0..ENTRIES {
            let got = bell.wait(&policy, || !c.is_empty(), Some(deadline));
            assert_eq!(got, WaitOutcome::Ready, "entry {i} not seen in time");
            assert!(c.try_pop(&mut out).unwrap());
            assert_eq!(out, i.to_le_bytes());
        }
    });
    let mut woke = 0;
    for i in 0..ENTRIES {
        // Let the consumer reach its futex sleep most of the time.
        std::thread::sleep(Duration::from_millis(if i % 4 == 0 { 0 } else { 2 }));
        producer.try_push(&i.to_le_bytes()).unwrap();
        woke += u64::from(bell.ring());
    }
    consumer.join().unwrap();
    assert!(Instant::now() < deadline);
    assert!(
        woke > 0,
        "the consumer never slept: the test checked nothing"
    );
}

#[test]
fn sleep_once_returns_at_once_when_ready_and_clears_the_flag_on_a_timeout() {
    let region = Region::new(64);
    let bell = Doorbell::attach(region.clone(), 0).unwrap();
    assert!(bell.sleep_once(|| true, Duration::from_secs(60)));
    assert_eq!(region.load(0, Ordering::Relaxed), 0);
    assert!(!bell.sleep_once(|| false, Duration::from_millis(5)));
    assert_eq!(region.load(0, Ordering::Relaxed), 0, "flag cleared");
}

/// The producer sees the sleeper's flag, publishes and rings (a real wake-up,
/// not the timeout), and the sleeper comes back with the entry there.
#[test]
fn sleep_once_is_ended_by_the_producers_ring() {
    let bytes = 256;
    let region = Region::new(ring_with_doorbell_bytes(bytes));
    init_ring(&region, 0, bytes).unwrap();
    let at = doorbell_offset(0, bytes);
    init_doorbell(&region, at).unwrap();
    let producer = {
        let region = region.clone();
        std::thread::spawn(move || {
            let bell = Doorbell::attach(region.clone(), at).unwrap();
            let mut p = RingProducer::attach(region.clone(), 0).unwrap();
            while region.load(at + DOORBELL_WORD_OFFSET, Ordering::Acquire) & DOORBELL_SLEEPING == 0
            {
                std::thread::yield_now();
            }
            p.try_push(&[9]).unwrap();
            bell.ring()
        })
    };
    let bell = Doorbell::attach(region.clone(), at).unwrap();
    let mut c = RingConsumer::attach(region.clone(), 0).unwrap();
    let mut ready = false;
    while !ready {
        ready = bell.sleep_once(|| !c.is_empty(), Duration::from_secs(60));
    }
    assert!(producer.join().unwrap(), "the producer issued a wake-up");
    let mut out = Vec::new();
    assert!(c.try_pop(&mut out).unwrap());
    assert_eq!(out, [9]);
}

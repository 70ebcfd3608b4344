//! Loom models of the protocol with a futex stand-in that never times out.
//! A waiter that goes to sleep after the producer has finished without
//! waking it would sleep forever: the stand-in fails the model at that point
//! (rather than leaving loom to find a deadlock, whose unwinding aborts).
//! `RUSTFLAGS="--cfg loom" cargo test -p splitkv-client --release --lib loom`.

use super::*;
use loom::sync::{Arc, Condvar, Mutex};
use splitkv_layout::doorbell::{doorbell_offset, init_doorbell, ring_with_doorbell_bytes};
use splitkv_layout::ring::{init_ring, RingConsumer, RingProducer};

#[derive(Default)]
struct Bucket {
    /// A wake-up is pending for the sleeper.
    woken: bool,
    /// The producer has published and rung, and will do nothing more.
    producer_done: bool,
}

/// The kernel's futex: the value check and the sleep happen under the
/// bucket lock, and so does a wake-up. A wake-up that arrives before the
/// sleeper checks is kept (the real futex would instead find the value
/// changed, with the same effect: no sleep).
#[derive(Default)]
struct LoomFutex {
    bucket: Mutex<Bucket>,
    sleepers: Condvar,
}

impl Futex for LoomFutex {
    fn wait(&self, word: &AtomicU64, expected: u32, _timeout: Duration) {
        let mut bucket = self.bucket.lock().unwrap();
        if (word.load(Ordering::Relaxed) & DOORBELL_FUTEX_MASK) as u32 != expected {
            return;
        }
        loop {
            if bucket.woken {
                bucket.woken = false;
                return;
            }
            assert!(
                !bucket.producer_done,
                "lost wake-up: asleep, with the entry published and no wake-up coming"
            );
            bucket = self.sleepers.wait(bucket).unwrap();
        }
    }
    fn wake(&self, _word: &AtomicU64) {
        self.bucket.lock().unwrap().woken = true;
        self.sleepers.notify_all();
    }
}

impl LoomFutex {
    /// The producer will not ring again: a sleeper now sleeps forever.
    fn producer_done(&self) {
        self.bucket.lock().unwrap().producer_done = true;
        self.sleepers.notify_all();
    }
}

const CAPACITY_BYTES: usize = 64;

/// One entry, one waiter going straight to the sleep rounds (spinning and
/// yielding only repeat its check), the producer ringing with `ring`.
fn model(ring: fn(&LoomFutex, &AtomicU64) -> bool) {
    splitkv_layout::sync::model(3, move || {
        let region = Region::new(ring_with_doorbell_bytes(CAPACITY_BYTES));
        init_ring(&region, 0, CAPACITY_BYTES).unwrap();
        let at = doorbell_offset(0, CAPACITY_BYTES);
        init_doorbell(&region, at).unwrap();
        let futex = Arc::new(LoomFutex::default());
        let waiter = {
            let region = region.clone();
            let futex = futex.clone();
            loom::thread::spawn(move || {
                let mut c = RingConsumer::attach(region.clone(), 0).unwrap();
                let policy = WaitPolicy::new(0, 0, 1).unwrap();
                let mut spins = 0;
                let got = wait_on(
                    &*futex,
                    region.word(at),
                    &policy,
                    &mut spins,
                    || !c.is_empty(),
                    None,
                );
                assert_eq!(got, WaitOutcome::Ready);
                let mut out = Vec::new();
                assert!(c.try_pop(&mut out).unwrap());
                assert_eq!(out, [7u8]);
            })
        };
        let mut p = RingProducer::attach(region.clone(), 0).unwrap();
        p.try_push(&[7]).unwrap();
        ring(&futex, region.word(at));
        futex.producer_done();
        waiter.join().unwrap();
    });
}

#[test]
fn loom_no_lost_wakeup() {
    model(|f, w| ring_on(f, w));
}

/// The variant that first loads the word and skips the read-modify-write
/// when it shows no sleeper loses a wake-up; loom must find it.
#[test]
#[should_panic(expected = "lost wake-up")]
fn loom_load_only_ring_loses_a_wakeup() {
    model(|f, w| {
        if w.load(Ordering::Acquire) & DOORBELL_SLEEPING != 0 {
            ring_on(f, w)
        } else {
            false
        }
    });
}

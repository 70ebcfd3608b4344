//! Adaptive waiting for a ring to fill, across processes (L5 §III-A.3): the
//! waiting side spins a bounded number of times, then yields a bounded number
//! of times, then sleeps on a futex in the shared doorbell word
//! ([`splitkv_layout::doorbell`]) with a timeout; the producer wakes it only
//! when it asked to be woken. The spin phase's length adapts to whether
//! spinning has been paying ([`Doorbell::wait`]): on a machine with fewer
//! cores than busy threads, the peer a waiter spins for may need the very
//! core it spins on.
//!
//! The futex is a shared one (no `FUTEX_PRIVATE_FLAG`): the word lives in
//! memory that two processes map, possibly at different addresses, and only a
//! shared futex is keyed by the page rather than by the virtual address. It
//! watches the word's low 32 bits.
//!
//! # The protocol
//!
//! Waiter (the ring's consumer), once spinning and yielding found nothing:
//!
//! 1. `w = word.fetch_or(SLEEPING)` (AcqRel);
//! 2. check the ring (an Acquire load of its `tail`); if an entry is there,
//!    clear `SLEEPING` and return;
//! 3. `futex_wait(word, w | SLEEPING, timeout)`: the kernel sleeps only if the
//!    word still holds that value; on any return, go to 1.
//!
//! Producer, after publishing an entry (the Release store of `tail`):
//! `p = word.fetch_and(!SLEEPING)` (AcqRel); if `p` had `SLEEPING`,
//! `futex_wake(word)`.
//!
//! # No lost wake-up
//!
//! The two read-modify-writes of the word are totally ordered (the word's
//! modification order), so one of two things holds for the producer's `P`
//! and the waiter's step 1 `W` of its last round:
//!
//! - `P` before `W`: `W` reads `P`'s value or a later one, and `P` (Release)
//!   synchronises with `W` (Acquire), so the producer's `tail` store happens
//!   before the waiter's check in step 2, which therefore sees the entry and
//!   does not sleep;
//! - `W` before `P`: `P` reads `SLEEPING` (only the waiter sets it, and it
//!   clears it only when it stops waiting), clears it and calls
//!   `futex_wake`. The waiter's `futex_wait` in step 3 either runs after the
//!   clear — the kernel sees a value other than `w | SLEEPING` and returns at
//!   once — or sleeps before the wake, which the kernel's check-and-enqueue,
//!   atomic with respect to `futex_wake` on the same word, guarantees to end.
//!
//! A check that only loaded the word before deciding to wake would lose that
//! second case (both sides read stale values: the store-buffer pattern); the
//! loom models in this module check the protocol with a stand-in for the
//! futex and show that the load-only variant loses a wake-up.
//!
//! The timeout bounds a sleep anyway (a peer that died or wrote garbage into
//! the word costs at most one timeout per round), and spurious returns only
//! repeat steps 1–3. A node never sleeps on a client's doorbell (its polling
//! loop must not block on a client); it only rings the client's.

use splitkv_layout::doorbell::{
    DOORBELL_BYTES, DOORBELL_FUTEX_MASK, DOORBELL_SLEEPING, DOORBELL_WORD_OFFSET,
};
use splitkv_layout::sync::{AtomicU64, Ordering};
use splitkv_layout::{Region, RegionError, CACHE_LINE_BYTES};
use std::time::{Duration, Instant};

/// Most spins [`WaitPolicy::spins`] allows.
pub const DOORBELL_SPINS_MAX: u32 = 1 << 20;
/// Most yields [`WaitPolicy::yields`] allows.
pub const DOORBELL_YIELDS_MAX: u32 = 1 << 16;
/// Longest single futex sleep [`WaitPolicy::sleep_ms`] allows, in ms.
pub const DOORBELL_SLEEP_MS_MAX: u32 = 10_000;
/// Fewest spins the adaptive spin budget falls to (if the policy allows that
/// many): enough to catch a reply that is already on its way.
pub const DOORBELL_SPINS_FLOOR: u32 = 8;

/// How long a waiter spins, yields and sleeps before it checks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    spins: u32,
    yields: u32,
    sleep_ms: u32,
}

impl Default for WaitPolicy {
    /// At most 256 spins (about 8 µs on the 2-core AMD EPYC test machine,
    /// ten times a hot two-process round trip; the adaptive budget of
    /// [`Doorbell::wait`] uses fewer while spinning does not pay), 16 yields,
    /// sleeps of 50 ms (benches/README.md, "Ring API across processes").
    fn default() -> Self {
        WaitPolicy {
            spins: 256,
            yields: 16,
            sleep_ms: 50,
        }
    }
}

impl WaitPolicy {
    /// A policy: `spins` checks with a spin hint between them, then `yields`
    /// checks with a `sched_yield` between them, then sleeps of at most
    /// `sleep_ms` (at least 1 ms) between checks until the producer wakes the
    /// waiter.
    ///
    /// # Errors
    /// [`DoorbellError::PolicyOutOfRange`] if `spins` is over
    /// [`DOORBELL_SPINS_MAX`], `yields` over [`DOORBELL_YIELDS_MAX`], or
    /// `sleep_ms` zero or over [`DOORBELL_SLEEP_MS_MAX`].
    pub fn new(spins: u32, yields: u32, sleep_ms: u32) -> Result<WaitPolicy, DoorbellError> {
        let bad = |field, value, max| Err(DoorbellError::PolicyOutOfRange { field, value, max });
        if spins > DOORBELL_SPINS_MAX {
            return bad("spins", spins, DOORBELL_SPINS_MAX);
        }
        if yields > DOORBELL_YIELDS_MAX {
            return bad("yields", yields, DOORBELL_YIELDS_MAX);
        }
        if sleep_ms == 0 || sleep_ms > DOORBELL_SLEEP_MS_MAX {
            return bad("sleep_ms", sleep_ms, DOORBELL_SLEEP_MS_MAX);
        }
        Ok(WaitPolicy {
            spins,
            yields,
            sleep_ms,
        })
    }

    /// Checks with a spin hint between them before yielding.
    pub fn spins(&self) -> u32 {
        self.spins
    }

    /// Checks with a yield between them before sleeping.
    pub fn yields(&self) -> u32 {
        self.yields
    }

    /// Longest single sleep, in ms.
    pub fn sleep_ms(&self) -> u32 {
        self.sleep_ms
    }
}

/// Why a doorbell or a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DoorbellError {
    /// The doorbell is not cache-line aligned.
    #[error("doorbell at byte {offset} is not {CACHE_LINE_BYTES}-byte aligned")]
    Misaligned {
        /// Its byte offset in the region.
        offset: usize,
    },
    /// The doorbell does not fit in the region.
    #[error(transparent)]
    Region(#[from] RegionError),
    /// A [`WaitPolicy`] field is out of its range.
    #[error("wait policy {field} = {value} is out of range (1..={max} for sleep_ms, 0..={max} otherwise)")]
    PolicyOutOfRange {
        /// The field.
        field: &'static str,
        /// The value given.
        value: u32,
        /// Its largest allowed value.
        max: u32,
    },
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The condition held.
    Ready,
    /// The deadline passed first.
    TimedOut,
}

/// Sleeping on and waking a word; the real one is a shared futex, the loom
/// models use a stand-in.
#[cfg_attr(loom, allow(dead_code))]
trait Futex {
    /// Sleeps while the word's futex half equals `expected`, at most `timeout`
    /// (may return early).
    fn wait(&self, word: &AtomicU64, expected: u32, timeout: Duration);
    /// Wakes one sleeper on the word.
    fn wake(&self, word: &AtomicU64);
}

/// The shared (not process-private) Linux futex on the word's low half.
#[cfg(not(loom))]
struct SharedFutex;

#[cfg(not(loom))]
impl SharedFutex {
    fn half(word: &AtomicU64) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: the low 32 bits of an 8-aligned `AtomicU64` on a
        // little-endian machine are a 4-aligned, live `u32` at the same
        // address; the reference only tells the kernel which address to
        // watch, and lives no longer than `word`.
        unsafe { &*(word as *const AtomicU64).cast::<std::sync::atomic::AtomicU32>() }
    }
}

#[cfg(not(loom))]
impl Futex for SharedFutex {
    fn wait(&self, word: &AtomicU64, expected: u32, timeout: Duration) {
        use rustix::io::Errno;
        use rustix::thread::futex;
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        match futex::wait(Self::half(word), futex::Flags::empty(), expected, Some(&ts)) {
            Ok(()) | Err(Errno::AGAIN | Errno::TIMEDOUT | Errno::INTR) => {}
            // Not expected (EFAULT, ENOSYS): sleep instead, so the caller's
            // loop still does not burn a core.
            Err(_) => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }

    fn wake(&self, word: &AtomicU64) {
        let _ =
            rustix::thread::futex::wake(Self::half(word), rustix::thread::futex::Flags::empty(), 1);
    }
}

#[inline]
fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

#[inline]
fn yield_now() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::thread::yield_now();
}

/// The waiter's side of the protocol (module docs) on `word`, spinning at
/// most `*spin_budget` (capped by the policy) times and adapting the budget.
#[cfg_attr(loom, allow(dead_code))]
fn wait_on<F: Futex>(
    futex: &F,
    word: &AtomicU64,
    policy: &WaitPolicy,
    spin_budget: &mut u32,
    mut ready: impl FnMut() -> bool,
    deadline: Option<Instant>,
) -> WaitOutcome {
    let spins = (*spin_budget).min(policy.spins);
    for _ in 0..spins {
        if ready() {
            *spin_budget = spins.saturating_mul(2).max(DOORBELL_SPINS_FLOOR);
            return WaitOutcome::Ready;
        }
        spin_hint();
    }
    *spin_budget = (spins / 2).max(DOORBELL_SPINS_FLOOR);
    for _ in 0..policy.yields {
        if ready() {
            return WaitOutcome::Ready;
        }
        yield_now();
    }
    let sleep = Duration::from_millis(policy.sleep_ms.into());
    loop {
        let seen = word.fetch_or(DOORBELL_SLEEPING, Ordering::AcqRel) | DOORBELL_SLEEPING;
        if ready() {
            word.fetch_and(!DOORBELL_SLEEPING, Ordering::Relaxed);
            return WaitOutcome::Ready;
        }
        let timeout = match deadline {
            None => sleep,
            Some(end) => match end.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(sleep),
                _ => {
                    word.fetch_and(!DOORBELL_SLEEPING, Ordering::Relaxed);
                    return WaitOutcome::TimedOut;
                }
            },
        };
        futex.wait(word, (seen & DOORBELL_FUTEX_MASK) as u32, timeout);
    }
}

/// The producer's side of the protocol: clears `SLEEPING` and wakes the
/// waiter if it was set. Returns whether it woke.
#[cfg_attr(loom, allow(dead_code))]
fn ring_on<F: Futex>(futex: &F, word: &AtomicU64) -> bool {
    let before = word.fetch_and(!DOORBELL_SLEEPING, Ordering::AcqRel);
    if before & DOORBELL_SLEEPING != 0 {
        futex.wake(word);
        true
    } else {
        false
    }
}

/// One side's handle on a doorbell in shared memory
/// ([`splitkv_layout::doorbell`]). The ring's consumer waits on it
/// ([`Doorbell::wait`]); the producer rings it after each publish (or batch of
/// publishes, [`Doorbell::ring`]).
#[derive(Debug, Clone)]
pub struct Doorbell {
    region: Region,
    /// Byte offset of the doorbell word in the region.
    word_offset: usize,
    /// Spins the next wait may use (before the policy's cap); this side's
    /// own state, not shared.
    spin_budget: u32,
}

impl Doorbell {
    /// The doorbell at byte `offset` of `region` (initialised by
    /// [`splitkv_layout::doorbell::init_doorbell`], typically at
    /// [`splitkv_layout::doorbell::doorbell_offset`]).
    ///
    /// # Errors
    /// [`DoorbellError::Misaligned`] if `offset` is not cache-line aligned;
    /// [`DoorbellError::Region`] if the doorbell does not fit in the region.
    pub fn attach(region: Region, offset: usize) -> Result<Doorbell, DoorbellError> {
        if !offset.is_multiple_of(CACHE_LINE_BYTES) {
            return Err(DoorbellError::Misaligned { offset });
        }
        region.check(offset, DOORBELL_BYTES)?;
        Ok(Doorbell {
            region,
            word_offset: offset + DOORBELL_WORD_OFFSET,
            spin_budget: DOORBELL_SPINS_MAX,
        })
    }

    #[cfg_attr(loom, allow(dead_code))]
    #[inline]
    fn word(&self) -> &AtomicU64 {
        self.region.word(self.word_offset)
    }

    /// Waits until `ready()` returns true (checked first, then between spins,
    /// yields and sleeps as `policy` says) or until `deadline` passes. `ready`
    /// must observe the ring with Acquire (e.g. `!consumer.is_empty()`).
    ///
    /// The spin phase adapts: it lasts at most [`Self::spin_budget`] spins
    /// (capped by `policy`); a wait that spinning satisfies doubles the
    /// budget, one that spinning does not halves it (down to
    /// [`DOORBELL_SPINS_FLOOR`]). Spinning pays when the peer runs on another
    /// core and answers within the budget; when it does not (it shares this
    /// core, or is slow), spinning only delays it, and the budget shrinks.
    #[cfg(not(loom))]
    pub fn wait(
        &mut self,
        policy: &WaitPolicy,
        ready: impl FnMut() -> bool,
        deadline: Option<Instant>,
    ) -> WaitOutcome {
        let word = self.region.word(self.word_offset);
        wait_on(
            &SharedFutex,
            word,
            policy,
            &mut self.spin_budget,
            ready,
            deadline,
        )
    }

    /// Spins the next [`Self::wait`] uses at most, before the policy's cap
    /// (starts at [`DOORBELL_SPINS_MAX`]).
    pub fn spin_budget(&self) -> u32 {
        self.spin_budget
    }

    /// Wakes the waiter if it is asleep or about to sleep; call after every
    /// push, including one that returned [`splitkv_layout::ring::RingError::Full`]
    /// (it may have published a padding entry, which a sleeping consumer must
    /// skip before the ring has room). Returns whether it issued a wake-up (a
    /// system call); otherwise it cost one atomic operation.
    #[cfg(not(loom))]
    pub fn ring(&self) -> bool {
        ring_on(&SharedFutex, self.word())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
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
}

/// Loom models of the protocol with a futex stand-in that never times out.
/// A waiter that goes to sleep after the producer has finished without
/// waking it would sleep forever: the stand-in fails the model at that point
/// (rather than leaving loom to find a deadlock, whose unwinding aborts).
/// `RUSTFLAGS="--cfg loom" cargo test -p splitkv-client --release --lib loom`.
#[cfg(all(test, loom))]
mod loom_tests {
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
}

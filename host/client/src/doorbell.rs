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
//! repeat steps 1–3. A node's NIC runtime never sleeps on a client's doorbell
//! (its polling loop must not block on a client); the node's gateway thread,
//! once idle, sleeps on one request doorbell for at most the sleep it would
//! have taken anyway ([`Doorbell::sleep_once`]).

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
        let timeout = match deadline {
            None => sleep,
            Some(end) => match end.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(sleep),
                _ => {
                    word.fetch_and(!DOORBELL_SLEEPING, Ordering::Relaxed);
                    return match ready() {
                        true => WaitOutcome::Ready,
                        false => WaitOutcome::TimedOut,
                    };
                }
            },
        };
        if sleep_round(futex, word, &mut ready, timeout) {
            return WaitOutcome::Ready;
        }
    }
}

/// One round of the waiter's steps 1–3 (module docs) with a sleep of at most
/// `timeout`: true if `ready()` held before sleeping (the flag is cleared
/// then); false after the futex returned (woken, timed out or spurious),
/// with the flag possibly still set.
#[cfg_attr(loom, allow(dead_code))]
fn sleep_round<F: Futex>(
    futex: &F,
    word: &AtomicU64,
    ready: &mut impl FnMut() -> bool,
    timeout: Duration,
) -> bool {
    let seen = word.fetch_or(DOORBELL_SLEEPING, Ordering::AcqRel) | DOORBELL_SLEEPING;
    if ready() {
        word.fetch_and(!DOORBELL_SLEEPING, Ordering::Relaxed);
        return true;
    }
    futex.wait(word, (seen & DOORBELL_FUTEX_MASK) as u32, timeout);
    false
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

    /// Sleeps once on the doorbell for at most `timeout`, without spinning
    /// or yielding first, unless `ready()` already holds; returns whether it
    /// held afterwards (the producer's ring, a timeout or a spurious return
    /// all end the sleep, and the flag is cleared on return). For a waiter
    /// that must not be held by its producer: the node's gateway thread
    /// sleeps on a client's request doorbell no longer than it would have
    /// slept anyway, and a client that never rings (or scribbles on the
    /// word) costs it nothing beyond that.
    #[cfg(not(loom))]
    pub fn sleep_once(&self, mut ready: impl FnMut() -> bool, timeout: Duration) -> bool {
        let word = self.word();
        if sleep_round(&SharedFutex, word, &mut ready, timeout) {
            return true;
        }
        word.fetch_and(!DOORBELL_SLEEPING, Ordering::Relaxed);
        ready()
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
mod tests;

/// Loom models of the flag protocol (`scripts/loom`).
#[cfg(all(test, loom))]
mod loom_tests;

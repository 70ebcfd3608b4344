//! The adaptive retransmission timeout of one session, in the manner of
//! RFC 6298: a smoothed round-trip time and its variation, estimated from
//! acknowledged packets, give the timeout; Karn's rule keeps retransmitted
//! packets out of the estimate; repeated timeouts back off exponentially.
//!
//! - **Sampling.** One packet at a time is timed: the first packet handed to
//!   the transport while none is timed. The acknowledgement that covers it
//!   gives one sample, `now − sent`. A timeout stops the timing (everything
//!   unacknowledged is sent again, so that packet's acknowledgement would be
//!   ambiguous: Karn's rule).
//! - **Estimate.** The first sample `R` sets `srtt = R`, `rttvar = R/2`; each
//!   later one `rttvar = ¾·rttvar + ¼·|srtt − R|`, `srtt = ⅞·srtt + ⅛·R`
//!   (RFC 6298 §2, α = ⅛, β = ¼). The timeout is `srtt + 4·rttvar`, clamped
//!   to `[floor, ceiling]`; before any sample it is the configured value.
//! - **Bounds.** The configured timeout
//!   ([`super::SessionConfig::retransmit_timeout_ns`]) is both the initial
//!   timeout and the minimum; the maximum is
//!   `max(configured, RETRANSMIT_TIMEOUT_MAX_NS)`. The estimate only ever
//!   raises the timeout: measured with three node processes busy-polling on
//!   two cores (Smallbank, 5 s, batching on; backoff then kept until a fresh
//!   sample), a timeout allowed down to 1 ms
//!   retransmitted 26,400 packets against 3,495 for the fixed 5 ms one, and
//!   the floor at the configured value 100 to 1,863. Round trips there are
//!   bimodal: tens of µs while the peer runs, a scheduler slice while it
//!   waits for its core, and the samples cannot foresee the second kind;
//!   a timeout fitted to the first fires on every slice.
//! - **Backoff.** Each timeout without progress doubles the timeout (at
//!   most [`RETRANSMIT_BACKOFFS_MAX`] doublings, never above the ceiling;
//!   RFC 6298 §5.5); any progress of the cumulative acknowledgement clears
//!   it. RFC 6298 §5.7 keeps it until a fresh sample instead, but under
//!   go-back-N with reordering nearly every packet is retransmitted, so no
//!   sample comes: the stack's loss, duplication and reordering test stalled
//!   at the ceiling so. The price: a round trip steadily above the
//!   configured timeout is never learned (each packet times out once).
//!
//! Pure arithmetic on the `now` passed in; no clock is read here.

use crate::Nanos;

/// Highest retransmission timeout, backoff included (200 ms), unless the
/// configured one is higher (then that). Well below the default session
/// silence, so a lost packet is retried several times before the peer is
/// declared failed.
pub const RETRANSMIT_TIMEOUT_MAX_NS: Nanos = 200_000_000;
/// Most doublings of the timeout by consecutive timeouts (64 times the
/// estimate at most, besides [`RETRANSMIT_TIMEOUT_MAX_NS`]).
pub const RETRANSMIT_BACKOFFS_MAX: u32 = 6;

/// One session's round-trip estimate and timeout (see the module docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rto {
    /// Smoothed round-trip time, ns (`None` before the first sample).
    srtt: Option<Nanos>,
    /// Round-trip variation, ns.
    rttvar: Nanos,
    /// Consecutive timeouts without a fresh sample.
    backoffs: u32,
    /// The packet being timed: its number and when it was first sent.
    timing: Option<(u32, Nanos)>,
}

impl Rto {
    /// Packet `seq` was handed to the transport for the first time at `now`:
    /// timed if no other packet is.
    pub(crate) fn on_first_send(&mut self, seq: u32, now: Nanos) {
        if self.timing.is_none() {
            self.timing = Some((seq, now));
        }
    }

    /// The cumulative acknowledgement advanced to `ack` (every packet below
    /// it is acknowledged) at `now`: progress, so the backoff is cleared;
    /// samples the timed packet if `ack` covers it. Returns the sample, if
    /// one was taken.
    pub(crate) fn on_ack(&mut self, ack: u32, now: Nanos) -> Option<Nanos> {
        self.backoffs = 0;
        let (seq, sent) = self.timing?;
        if (ack.wrapping_sub(seq) as i32) <= 0 {
            return None;
        }
        self.timing = None;
        let r = now.saturating_sub(sent);
        self.sample(r);
        Some(r)
    }

    /// Folds one round-trip sample `r` (ns) into the estimate.
    fn sample(&mut self, r: Nanos) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(r)) / 4;
                self.srtt = Some((7 * srtt + r) / 8);
            }
        }
    }

    /// A timeout fired: everything unacknowledged goes again, so the timed
    /// packet's acknowledgement would be ambiguous (Karn's rule: stop timing
    /// it), and the next timeout is twice as long.
    pub(crate) fn on_timeout(&mut self) {
        self.timing = None;
        self.backoffs = (self.backoffs + 1).min(RETRANSMIT_BACKOFFS_MAX);
    }

    /// The packet being timed, if any (its number).
    #[cfg(test)]
    pub(crate) fn timed(&self) -> Option<u32> {
        self.timing.map(|(seq, _)| seq)
    }

    /// The smoothed round-trip time, ns (`None` before the first sample).
    #[cfg(test)]
    pub(crate) fn srtt(&self) -> Option<Nanos> {
        self.srtt
    }

    /// The current timeout, ns, for a session configured with `initial`
    /// (backoff included; see the module docs for the bounds).
    pub(crate) fn timeout_ns(&self, initial: Nanos) -> Nanos {
        let floor = initial;
        let ceiling = initial.max(RETRANSMIT_TIMEOUT_MAX_NS);
        let base = match self.srtt {
            None => initial,
            Some(srtt) => srtt.saturating_add(self.rttvar.saturating_mul(4)),
        }
        .clamp(floor, ceiling);
        base.saturating_mul(1 << self.backoffs).min(ceiling)
    }
}

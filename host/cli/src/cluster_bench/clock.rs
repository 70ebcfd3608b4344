//! When things happened at the nodes, by the nodes' own clocks: each
//! node's `/status` `events_unix_ms` (Unix-epoch milliseconds of its wall
//! clock: its runtime's epoch installed, its recovery epoch's resume, its
//! first commit after it, its copy completed) placed on the run's time line
//! by the bench's wall clock at the run's start ([`RunClock`]), not by when
//! the bench's poll noticed them. Nodes spawned on this machine share the
//! bench's clock; nodes elsewhere are off by their clocks' skew.
//!
//! [`NodeClock`] keeps, per epoch, the earliest time any node installed it
//! or resumed from its recovery epoch, and the first commit at a survivor
//! after a recovery that resumed after the kill (service resumed).

use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The bench's wall clock at the run's start, to place nodes' wall-clock
/// times on the run's time line.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunClock {
    /// Unix-epoch ns at the run's start.
    t0_unix_ns: u128,
}

impl RunClock {
    /// The run's start: now, as an instant and on the wall clock.
    pub fn start() -> (Instant, RunClock) {
        let t0 = Instant::now();
        let wall = SystemTime::now().duration_since(UNIX_EPOCH);
        let t0_unix_ns = wall.map_or(0, |d| d.as_nanos());
        (t0, RunClock { t0_unix_ns })
    }

    /// A clock whose run started at `t0_unix_ms` (tests).
    #[cfg(test)]
    pub fn at_unix_ms(t0_unix_ms: u64) -> RunClock {
        RunClock {
            t0_unix_ns: u128::from(t0_unix_ms) * 1_000_000,
        }
    }

    /// `unix_ms` (a node's wall clock) as time into the run; `None` before
    /// the run's start.
    pub fn run_time(&self, unix_ms: u64) -> Option<Duration> {
        let ns = (u128::from(unix_ms) * 1_000_000).checked_sub(self.t0_unix_ns)?;
        Some(Duration::from_nanos(ns as u64))
    }

    /// The bench's wall clock `t` into the run, in Unix-epoch ms.
    pub fn unix_ms(&self, t: Duration) -> u64 {
        ((self.t0_unix_ns + t.as_nanos()) / 1_000_000) as u64
    }
}

/// What one `/status` says under `events_unix_ms` (absent keys and `null`
/// are `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct NodeEvents {
    /// The runtime's epoch.
    pub epoch: u64,
    /// When the runtime installed it.
    pub epoch_installed: Option<u64>,
    /// When its last recovery epoch resumed.
    pub recovery_resumed: Option<u64>,
    /// Its coordinator's first commit after that resume.
    pub first_commit_after_resume: Option<u64>,
    /// When it last finished being copied.
    pub copy_caught_up: Option<u64>,
}

impl NodeEvents {
    /// The events of the `/status` answer `s`.
    pub fn of(s: &Value) -> NodeEvents {
        let e = &s["events_unix_ms"];
        NodeEvents {
            epoch: e["epoch"].as_u64().unwrap_or(0),
            epoch_installed: e["epoch_installed"].as_u64(),
            recovery_resumed: e["recovery_resumed"].as_u64(),
            first_commit_after_resume: e["first_commit_after_resume"].as_u64(),
            copy_caught_up: e["copy_caught_up"].as_u64(),
        }
    }
}

/// What happened when, across the nodes (Unix-epoch ms of their clocks).
#[derive(Debug, Clone, Default)]
pub(super) struct NodeClock {
    /// By epoch, the earliest time a node's runtime installed it.
    installed: BTreeMap<u64, u64>,
    /// By epoch, the earliest time a node resumed from its recovery epoch.
    resumed: BTreeMap<u64, u64>,
    /// The earliest first commit at a survivor after a recovery that
    /// resumed after the kill: `(time, node, its resume)`.
    service_resumed: Option<(u64, u16, u64)>,
    /// The lease TTL etcd granted (`membership.lease_ttl_granted_s`), as
    /// first seen.
    pub ttl_granted_s: Option<f64>,
}

impl NodeClock {
    /// Notes node `node`'s `/status` answer `s`; `kill_ms` is the kill's
    /// time (the bench's wall clock) if the node is a survivor of one.
    pub fn note(&mut self, node: u16, s: &Value, kill_ms: Option<u64>) {
        let e = NodeEvents::of(s);
        if self.ttl_granted_s.is_none() {
            self.ttl_granted_s = s["membership"]["lease_ttl_granted_s"].as_f64();
        }
        if let Some(at) = e.epoch_installed {
            min_into(self.installed.entry(e.epoch).or_insert(at), at);
        }
        let Some(resumed) = e.recovery_resumed else {
            return;
        };
        // A resume earlier than the epoch's install is an earlier epoch's.
        if e.epoch_installed.is_none_or(|at| resumed >= at) {
            min_into(self.resumed.entry(e.epoch).or_insert(resumed), resumed);
        }
        let after_kill = kill_ms.is_some_and(|k| resumed >= k);
        if let (true, Some(first)) = (after_kill, e.first_commit_after_resume) {
            if self.service_resumed.is_none_or(|(t, ..)| first < t) {
                self.service_resumed = Some((first, node, resumed));
            }
        }
    }

    /// The earliest time a node installed `epoch`.
    pub fn installed(&self, epoch: u64) -> Option<u64> {
        self.installed.get(&epoch).copied()
    }

    /// The first commit at a survivor after its recovery epoch resumed,
    /// after the kill: `(time, node, when that node resumed)`.
    pub fn service_resumed(&self) -> Option<(u64, u16, u64)> {
        self.service_resumed
    }

    /// The timeline's events by the nodes' clocks: `epoch E` at its first
    /// install and `epoch E: recovery resumed` at its first resume, those
    /// after the run's start.
    pub fn events(&self, clock: &RunClock) -> Vec<(Duration, String)> {
        let installed = (self.installed.iter()).map(|(e, at)| (*at, format!("epoch {e}")));
        let resumed =
            (self.resumed.iter()).map(|(e, at)| (*at, format!("epoch {e}: recovery resumed")));
        installed
            .chain(resumed)
            .filter_map(|(at, label)| Some((clock.run_time(at)?, label)))
            .collect()
    }
}

fn min_into(slot: &mut u64, at: u64) {
    *slot = (*slot).min(at);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(epoch: u64, installed: u64, resumed: u64, first: Option<u64>) -> Value {
        json!({ "events_unix_ms": {
            "now": 0, "epoch": epoch, "epoch_installed": installed,
            "recovery_resumed": resumed, "first_commit_after_resume": first,
            "copy_caught_up": null,
        }})
    }

    #[test]
    fn times_are_placed_by_the_runs_wall_clock() {
        let c = RunClock::at_unix_ms(1_000_000);
        assert_eq!(c.run_time(1_002_500), Some(Duration::from_millis(2_500)));
        assert_eq!(c.run_time(999_999), None);
        assert_eq!(c.unix_ms(Duration::from_millis(1_500)), 1_001_500);
    }

    #[test]
    fn the_earliest_node_dates_an_epoch_and_service_resumes_after_the_kill() {
        let mut n = NodeClock::default();
        let kill = Some(10_000);
        // An earlier recovery (before the kill) does not count.
        n.note(0, &status(2, 5_000, 5_001, Some(5_002)), kill);
        assert_eq!(n.service_resumed(), None);
        n.note(0, &status(3, 11_200, 11_210, None), kill);
        n.note(1, &status(3, 11_150, 11_190, Some(11_230)), kill);
        n.note(0, &status(3, 11_200, 11_210, Some(11_215)), kill);
        assert_eq!(n.service_resumed(), Some((11_215, 0, 11_210)));
        assert_eq!(n.installed(3), Some(11_150));
        let c = RunClock::at_unix_ms(8_000);
        let ev = n.events(&c);
        assert!(ev.contains(&(Duration::from_millis(3_150), "epoch 3".into())));
        let resumed = (
            Duration::from_millis(3_190),
            "epoch 3: recovery resumed".into(),
        );
        assert!(ev.contains(&resumed), "{ev:?}");
        // Epoch 2 came before the run's start: left out.
        assert!(!ev.iter().any(|(_, l)| l.starts_with("epoch 2")), "{ev:?}");
    }

    #[test]
    fn a_resume_older_than_the_installed_epoch_is_not_dated_to_it() {
        let mut n = NodeClock::default();
        n.note(2, &status(4, 7_000, 6_000, Some(6_001)), None);
        assert_eq!(n.events(&RunClock::at_unix_ms(0)).len(), 1);
        assert_eq!(n.service_resumed(), None, "no kill");
    }
}

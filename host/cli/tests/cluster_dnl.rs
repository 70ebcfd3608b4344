//! The Dnl rows in node processes: `splitkv bench smallbank|list-append
//! --cluster FILE --spawn --kill 2@… --restart 2@…` with `[protocol] commit =
//! "dnl4"`, `"dnl2"` and `"dnl1"` and etcd membership (feature `etcd`):
//! three UDP node processes and a private etcd on loopback per run; node 2
//! is SIGKILLed mid-run, the survivors' recovery decides its transactions by
//! the row's rule (`dnl4::decide`, `dnl1::decide`), node 2's process is
//! started again, rejoins empty and is copied; every check over the whole
//! run passes (money, replicas, strict serializability, lost commits), as
//! `cluster_rejoin.rs` checks Xenic OCC. Bounded: each run is one `splitkv
//! bench` that stops its nodes; etcd is stopped when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::{fresh_membership, Etcd};
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the rejoin,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);

/// A fresh etcd and the file's sections naming it and the protocol.
fn membership_running(protocol: &'static str) -> impl FnMut() -> (String, Etcd) {
    move || {
        let (membership, etcd) = fresh_membership();
        (
            format!("{membership}\n[protocol]\ncommit = \"{protocol}\"\n"),
            etcd,
        )
    }
}

#[test]
fn every_dnl_row_runs_through_a_kill_and_a_rejoin_and_passes_every_check() {
    for protocol in ["dnl4", "dnl2", "dnl1"] {
        let setup = membership_running(protocol);
        brought_back_runs_pass_every_check("restart", "restarted", RUN_MAX, setup, |_| {});
    }
}

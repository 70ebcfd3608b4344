//! `splitkv bench smallbank|list-append --cluster FILE --spawn --kill 2@… --replace 2@…`
//! with etcd membership (feature `etcd`; a replacement machine joins the way a
//! restarted node does): three UDP node processes and a private etcd on
//! loopback; node 2 is SIGKILLed mid-run and the survivors recover and keep
//! committing; then a new machine takes its place: node 2's new process
//! listens at other data and control addresses than the cluster file's
//! (127.0.0.2, fresh ports), publishes them with its etcd registration,
//! is admitted as copying, and the survivors' transports are re-pointed
//! at its new data address before they apply that configuration; it gets
//! its shards copied and becomes a replica again, and every check over the
//! whole run passes with its rows as a full replica. Checked to fail with
//! the agent's re-pointing disabled (`repoint_peers` not called in
//! `MembershipAgent::run_iteration`): the survivors' packets then go to
//! node 2's old address, they report it as a suspect and its lease is not
//! renewed, and the bench stops with "node 2 fenced by its membership".
//! Bounded as
//! `cluster_rejoin`: one `splitkv bench` per run, which stops its nodes
//! and fails by itself if the degree is not restored in time; etcd is
//! stopped by process id when dropped.

#[path = "../../tests/etcd_support/mod.rs"]
mod etcd_support;
mod support_deploy;

use etcd_support::fresh_membership;
use std::time::Duration;
use support_deploy::*;

/// Longest one bench run may take (a few seconds of run, the replacement,
/// start-up, drain, checks).
const RUN_MAX: Duration = Duration::from_secs(90);

/// Both runs pass every check with node 2 replaced, which the report
/// places on the new machine's loopback address.
#[test]
fn smallbank_and_list_append_run_through_a_kill_and_a_replacement_at_a_new_address() {
    brought_back_runs_pass_every_check("replace", "replaced", RUN_MAX, fresh_membership, |line| {
        assert!(line.contains("on a new machine (data 127.0.0.2:"), "{line}");
    });
}

/// `--replace` needs a membership that publishes the new address, a
/// `--kill` of the same node before it, and is not `--restart` as well:
/// each refusal is one line and exit 2, before any node starts.
#[test]
fn a_bad_replace_is_one_line_and_exit_2() {
    let file = cluster_file(3, 3, "");
    let path = file.path.to_str().unwrap();
    let base = ["bench", "smallbank", "--cluster", path, "--spawn"];
    let cases: [(&[&str], &str); 4] = [
        (&["--kill", "2@1", "--replace", "2@2"], "etcd"),
        (&["--replace", "2@2"], "required"),
        (&["--kill", "2@1", "--replace", "1@2"], "--replace"),
        (
            &["--kill", "2@1", "--replace", "2@2", "--restart", "2@2"],
            "--restart",
        ),
    ];
    for (extra, needle) in cases {
        let args = [&base[..], extra].concat();
        let out = splitkv(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

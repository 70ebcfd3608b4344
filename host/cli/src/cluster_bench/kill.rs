//! `--kill NODE@SECS`: killing the node, and the line the report says
//! about it (see the module docs of `cluster_bench`).

use super::{bad, replace, Deployed};
use crate::cli::ClusterArgs;
use crate::Failure;
use serde_json::Value;
use splitkv_host::deploy::{ClusterConfig, MembershipSettings};
use splitkv_layout::wire::NodeMask;
use std::path::PathBuf;
use std::time::Duration;

/// Checks the fault flags (`--kill`, `--restart`, `--replace`,
/// `--nic-crash`) against each other and the cluster file.
///
/// # Errors
/// One line naming the flag: a node not in the file, a restart or
/// replacement of another node than the killed one or not after the kill,
/// a restart or replacement without etcd membership (a static membership
/// never admits a new incarnation: the run would wait for it until its
/// timeout), a NIC crash of the killed node.
pub(super) fn check_flags(args: &ClusterArgs, config: &ClusterConfig) -> Result<(), Failure> {
    let flag = match args.replace {
        Some(_) => "--replace",
        None => "--restart",
    };
    if let (Some(r), Some(k)) = (args.restart.or(args.replace), args.kill) {
        if r.node != k.node || r.after <= k.after {
            return Err(bad(format!(
                "{flag} must name the --kill node, after the kill"
            )));
        }
    }
    if args.replace.is_some() {
        replace::check(config)?;
    }
    if args.restart.is_some() && config.membership == MembershipSettings::Static {
        return Err(bad(
            "--restart needs [membership] kind = \"etcd\" in the cluster file: a restarted node rejoins through it",
        ));
    }
    let in_file = |node: u16| config.nodes.iter().any(|n| n.id == node);
    if let Some(k) = args.nic_crash {
        if !in_file(k.node) {
            return Err(bad(format!("--nic-crash: no node {} in the file", k.node)));
        }
        if args.kill.is_some_and(|x| x.node == k.node) {
            return Err(bad("--nic-crash and --kill name the same node"));
        }
    }
    if let Some(k) = args.kill.filter(|k| !in_file(k.node)) {
        return Err(bad(format!("--kill: no node {} in the file", k.node)));
    }
    Ok(())
}

impl Deployed {
    /// Whether `node` was killed by `--kill`.
    pub(super) fn is_killed(&self, node: u16) -> bool {
        self.killed.is_some_and(|(k, _)| k == node)
    }

    /// The journal file of `node`'s client, when journaling.
    pub(super) fn journal(&self, node: u16) -> Option<PathBuf> {
        let dir = self.run_dir.as_ref()?;
        Some(dir.join(format!("journal-{node}.log")))
    }

    /// The dead nodes (killed by `--kill`, unless `--restart` made it a
    /// replica again).
    pub(super) fn failed(&self) -> NodeMask {
        if self.restored() {
            return NodeMask::EMPTY;
        }
        self.killed
            .map_or(NodeMask::EMPTY, |(n, _)| NodeMask::EMPTY.with(n))
    }

    /// Kills the `--kill` node if it is due (`elapsed` into the run).
    pub(super) fn kill_if_due(&mut self, elapsed: Duration) -> Result<(), Failure> {
        let Some(k) = self
            .kill
            .filter(|k| self.killed.is_none() && elapsed >= k.after)
        else {
            return Ok(());
        };
        let spawned = self
            .spawned
            .as_mut()
            .ok_or_else(|| bad("a node can be killed only with --spawn"))?;
        let status = spawned.kill(k.node).map_err(bad)?;
        self.killed = Some((k.node, elapsed));
        if let Some(t) = self.timeline.as_mut() {
            t.event(elapsed, &format!("node {} killed", k.node));
        }
        tracing::info!(node = k.node, ?elapsed, %status, "killed");
        Ok(())
    }

    /// Notes a survivor's `/status` (`s`), seen `t` into the run: the
    /// first time its configuration leaves the killed node out (not
    /// restarted yet) with every shard at the replication degree and no
    /// backup still joining (re-replication: survivors that were no replica of a
    /// shard became its new backups and were copied) is marked.
    pub(super) fn note_restored_without_killed(&mut self, t: Duration, s: &Value) {
        let Some((n, _)) = self.killed else {
            return;
        };
        let m = &s["membership"];
        let out = m["live"].as_u64().is_some_and(|l| l & (1 << n) == 0);
        let restored = out && super::restart::degree_restored(m);
        if !restored || self.restored_without_killed.is_some() || self.is_restarted(n) {
            return;
        }
        self.restored_without_killed = Some(t);
        if let Some(tl) = self.timeline.as_mut() {
            tl.event(t, &format!("replication restored without node {n}"));
        }
    }

    /// The line that says which node was killed and when, if one was.
    pub(super) fn killed_line(&self) -> Option<String> {
        let (n, at) = self.killed?;
        let (at_kill, end) = self.committed_around_kill;
        // "; WHAT at T s (N ms after the kill)", or nothing if it never came.
        let when = |what: &str, t: Option<Duration>| {
            t.map_or(String::new(), |t| {
                let after = t.saturating_sub(at).as_millis();
                format!(
                    "; {what} at {:.2} s ({after} ms after the kill)",
                    t.as_secs_f64()
                )
            })
        };
        let resumed = when("service resumed", self.resumed_after_kill);
        let restored = when(
            "replication degree restored without it",
            self.restored_without_killed,
        );
        Some(format!(
            "killed: node {n} (SIGKILL) at {:.2} s into the run; survivors committed {} transactions after it; its client's history from its journal{resumed}{restored}",
            at.as_secs_f64(),
            end.saturating_sub(at_kill.unwrap_or(end)),
        ))
    }
}

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

    /// Notes a survivor's `/status` (`s`): the first configuration its
    /// runtime serves that leaves the killed node out (not restarted yet)
    /// with every shard at the replication degree and no backup still
    /// joining (re-replication: survivors that were no replica of a shard
    /// became its new backups and were copied); it is dated at the end by
    /// the nodes' earliest install of its epoch.
    pub(super) fn note_restored_without_killed(&mut self, s: &Value) {
        let Some((n, _)) = self.killed else {
            return;
        };
        let m = &s["membership"];
        let out = m["live"].as_u64().is_some_and(|l| l & (1 << n) == 0);
        let restored = out && super::restart::degree_restored(m);
        if !restored || self.restored_without_killed.is_some() || self.is_restarted(n) {
            return;
        }
        self.restored_without_killed = m["runtime_epoch"].as_u64();
    }

    /// When the degree was restored without the killed node, by the nodes'
    /// clocks.
    pub(super) fn restored_without_killed_at(&self) -> Option<Duration> {
        let ms = self.node_clock.installed(self.restored_without_killed?)?;
        self.run_clock.run_time(ms)
    }

    /// The line that says which node was killed and when (the bench's
    /// clock: it sent the SIGKILL), if one was; then, by the nodes' clocks,
    /// when service resumed (a survivor's first commit after its recovery
    /// epoch resumed) and when the replication degree was restored, each
    /// beside the kill, and the lease TTL etcd granted ("?" when the
    /// nodes' `/status` does not say).
    pub(super) fn killed_line(&self) -> Option<String> {
        let (n, at) = self.killed?;
        let (at_kill, end) = self.committed_around_kill;
        let after = |t: Duration| t.saturating_sub(at).as_millis();
        let client = match self.external {
            Some(_) => "its external client ended with its transactions in flight indeterminate",
            None => "its client's history from its journal",
        };
        let mut line = format!(
            "killed: node {n} (SIGKILL) at {:.2} s into the run (the bench's clock, which sent it); survivors committed {} transactions after it; {client}",
            at.as_secs_f64(),
            end.saturating_sub(at_kill.unwrap_or(end)),
        );
        if let Some((first, node, resumed)) = self.node_clock.service_resumed() {
            let clock = &self.run_clock;
            if let (Some(t), Some(r)) = (clock.run_time(first), clock.run_time(resumed)) {
                line += &format!(
                    "; service resumed at {:.3} s ({} ms after the kill: node {node}'s first commit after its recovery epoch resumed at {:.3} s, by its clock)",
                    t.as_secs_f64(),
                    after(t),
                    r.as_secs_f64(),
                );
            }
        }
        let restored = match self.restart.is_some() {
            true => (self.restored_at()).map(|t| (format!("(node {n} a replica again)"), t)),
            false => (self.restored_without_killed_at()).map(|t| ("without it".to_string(), t)),
        };
        if let Some((how, t)) = restored {
            line += &format!(
                "; replication degree restored {} at {:.3} s ({} ms after the kill, by the nodes' clocks)",
                how,
                t.as_secs_f64(),
                after(t),
            );
        }
        if self.config.membership != MembershipSettings::Static {
            line += &format!(
                "; lease TTL granted by etcd {} (asked {})",
                self.ttl_granted(),
                self.ttl_asked()
            );
        }
        Some(line)
    }

    /// The lease TTL etcd granted, as the nodes' `/status` shows it
    /// (`membership.lease_ttl_granted_s`), or "?".
    fn ttl_granted(&self) -> String {
        self.node_clock
            .ttl_granted_s
            .map_or("?".into(), |s| format!("{s} s"))
    }

    /// The lease TTL the cluster file asks for.
    fn ttl_asked(&self) -> String {
        match &self.config.membership {
            MembershipSettings::Etcd { lease_ttl_s, .. } => format!("{lease_ttl_s} s"),
            MembershipSettings::Static => "none".into(),
        }
    }
}

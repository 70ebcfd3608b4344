//! `splitkv etcd show|clear --config FILE`: a deployed cluster's state
//! under its etcd prefix (`splitkv_host::membership_etcd::admin`), printed,
//! or deleted once the cluster is stopped for good (a stopped cluster's
//! next start forms its next generation by itself: clearing is for a
//! prefix that another cluster, or another shape of this one, must use).

use crate::cli::{EtcdArgs, EtcdClearArgs};
use crate::Failure;
use splitkv_host::deploy::{ClusterConfig, MembershipSettings};
use std::path::Path;

/// Bound on each etcd call (ms).
#[cfg(feature = "etcd")]
const RPC_TIMEOUT_MS: u64 = 2_000;

/// The endpoints and prefix of `file`'s etcd membership, with its shape.
fn membership(file: &Path) -> Result<(ClusterConfig, Vec<String>, String), Failure> {
    let config = ClusterConfig::from_file(file)
        .map_err(|e| Failure::BadInput(format!("{}: {e}", file.display())))?;
    match &config.membership {
        MembershipSettings::Etcd {
            endpoints, prefix, ..
        } => {
            let (endpoints, prefix) = (endpoints.clone(), prefix.clone());
            Ok((config, endpoints, prefix))
        }
        MembershipSettings::Static => Err(Failure::BadInput(format!(
            "{}: no etcd membership ([membership] kind = \"etcd\"): nothing is stored",
            file.display()
        ))),
    }
}

/// `splitkv etcd show`.
pub fn show(args: &EtcdArgs) -> Result<(), Failure> {
    let (config, endpoints, prefix) = membership(&args.config)?;
    imp::show(&config, &endpoints, &prefix, args.json)
}

/// `splitkv etcd clear`.
pub fn clear(args: &EtcdClearArgs) -> Result<(), Failure> {
    let (_, endpoints, prefix) = membership(&args.config)?;
    imp::clear(&endpoints, &prefix, args.force)
}

#[cfg(feature = "etcd")]
mod imp {
    use super::RPC_TIMEOUT_MS;
    use crate::Failure;
    use serde_json::{json, Value};
    use splitkv_host::deploy::ClusterConfig;
    use splitkv_host::membership_etcd::admin::{ClusterState, EtcdAdmin};
    use splitkv_host::membership_etcd::{node_list, EtcdError};
    use std::time::Duration;

    fn connect(endpoints: &[String], prefix: &str) -> Result<EtcdAdmin, Failure> {
        EtcdAdmin::connect(endpoints, prefix, Duration::from_millis(RPC_TIMEOUT_MS))
            .map_err(|e| Failure::BadInput(e.to_string()))
    }

    pub(super) fn show(
        config: &ClusterConfig,
        endpoints: &[String],
        prefix: &str,
        as_json: bool,
    ) -> Result<(), Failure> {
        let shape = (config.nodes.len(), config.replication);
        let state = connect(endpoints, prefix)?
            .show(shape)
            .map_err(|e| Failure::BadInput(e.to_string()))?;
        match as_json {
            true => outln!("{}", to_json(&state, config.cluster_id)),
            false => out!("{}", to_text(&state, endpoints, config.cluster_id)),
        }
        Ok(())
    }

    pub(super) fn clear(endpoints: &[String], prefix: &str, force: bool) -> Result<(), Failure> {
        match connect(endpoints, prefix)?.clear(force) {
            Ok(deleted) => {
                outln!("cleared /{prefix}/: {deleted} keys deleted");
                Ok(())
            }
            Err(e @ EtcdError::MembersAlive { .. }) => Err(Failure::Check(format!(
                "{e}; nothing deleted (stop its nodes first, or --force)"
            ))),
            Err(e) => Err(Failure::BadInput(e.to_string())),
        }
    }

    /// `splitkv etcd show`'s text.
    pub(super) fn to_text(s: &ClusterState, endpoints: &[String], cluster_id: u32) -> String {
        let mut out = format!(
            "etcd {}, prefix {} ({} keys)\n",
            endpoints.join(","),
            s.prefix,
            s.keys
        );
        match &s.header {
            None => {
                out.push_str("configuration: none stored (the next start creates generation 1)\n")
            }
            Some(Err(e)) => out.push_str(&format!("configuration: unreadable ({e})\n")),
            Some(Ok(h)) => {
                let owner = match h.lineage.cluster_id {
                    Some(id) if id == cluster_id => format!("cluster {id}"),
                    Some(id) => format!("cluster {id} (NOT this file's cluster {cluster_id})"),
                    None => "cluster not recorded".into(),
                };
                let shape = match (h.nodes, h.replication) {
                    (Some(n), Some(r)) => format!("{n} nodes, replication {r}"),
                    _ => "shape not recorded".into(),
                };
                out.push_str(&format!(
                    "configuration: epoch {}, generation {}, {owner}, {shape}\n",
                    h.epoch, h.lineage.generation
                ));
                if let Some(c) = &s.config {
                    out.push_str(&format!(
                        "  live {}  copying {}  shards short of replicas {}\n",
                        node_list(c.live),
                        node_list(c.copying),
                        c.short_shards(),
                    ));
                }
            }
        }
        out.push_str("members (member keys, under each process's lease):\n");
        if s.members.is_empty() {
            out.push_str("  none: no process holds a lease\n");
        }
        for m in &s.members {
            let inc = m.incarnation.map_or("?".into(), |i| i.to_string());
            let lease = match m.ttl_s {
                Some(t) => format!("lease {t} s left of {} s", m.granted_ttl_s),
                None => "lease gone (key about to go)".into(),
            };
            out.push_str(&format!("  node {}  incarnation {inc}  {lease}\n", m.node));
        }
        out
    }

    /// `splitkv etcd show --json`'s object.
    pub(super) fn to_json(s: &ClusterState, cluster_id: u32) -> Value {
        let config = match &s.header {
            None => Value::Null,
            Some(Err(e)) => json!({ "unreadable": e }),
            Some(Ok(h)) => json!({
                "epoch": h.epoch,
                "generation": h.lineage.generation,
                "cluster_id": h.lineage.cluster_id,
                "ours": h.lineage.belongs_to(cluster_id),
                "nodes": h.nodes,
                "replication": h.replication,
                "commit": h.commit.map(|p| p.as_str()),
                "live": s.config.map(|c| c.live),
                "copying": s.config.map(|c| c.copying),
                "short_shards": s.config.map(|c| c.short_shards()),
            }),
        };
        let members: Vec<Value> = s
            .members
            .iter()
            .map(|m| {
                json!({
                    "node": m.node,
                    "incarnation": m.incarnation,
                    "lease_ttl_s": m.ttl_s,
                    "lease_granted_ttl_s": m.granted_ttl_s,
                })
            })
            .collect();
        json!({
            "prefix": s.prefix,
            "keys": s.keys,
            "configuration": config,
            "members": members,
            "incarnations": s.incarnations.iter().map(|(n, i)| json!({"node": n, "last": i})).collect::<Vec<_>>(),
        })
    }
}

#[cfg(not(feature = "etcd"))]
mod imp {
    use crate::Failure;
    use splitkv_host::deploy::ClusterConfig;

    fn unsupported() -> Result<(), Failure> {
        Err(Failure::BadInput(
            "this binary was built without etcd support".into(),
        ))
    }

    pub(super) fn show(_: &ClusterConfig, _: &[String], _: &str, _: bool) -> Result<(), Failure> {
        unsupported()
    }

    pub(super) fn clear(_: &[String], _: &str, _: bool) -> Result<(), Failure> {
        unsupported()
    }
}

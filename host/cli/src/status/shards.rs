//! Each shard's replicas as a configuration fixes them, for
//! `splitkv status`: its primary, its caught-up backups in serving order,
//! its joining backups (being copied), and whether it is short of the
//! replication degree.

use serde_json::{json, Value};
use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::NODES_MAX;

/// One shard's line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardRow {
    pub shard: usize,
    /// Caught-up replicas in serving order (by `since`, then ring position
    /// from the shard, as `Configuration::roles`): the first is the primary.
    pub replicas: Vec<NodeId>,
    /// Backups still being copied.
    pub joining: Vec<NodeId>,
    /// The degree re-replication restores.
    pub replication: usize,
}

impl ShardRow {
    /// Fewer caught-up replicas than the degree.
    pub fn short(&self) -> bool {
        self.replicas.len() < self.replication
    }

    pub fn to_json(&self) -> Value {
        json!({
            "shard": self.shard,
            "primary": self.replicas.first(),
            "backups": self.replicas.get(1..).unwrap_or_default(),
            "joining": self.joining,
            "replicas": self.replicas.len(),
            "replication": self.replication,
            "short": self.short(),
        })
    }
}

impl std::fmt::Display for ShardRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: &[NodeId]| match v.is_empty() {
            true => "-".to_string(),
            false => v
                .iter()
                .map(NodeId::to_string)
                .collect::<Vec<_>>()
                .join(","),
        };
        let primary = self
            .replicas
            .first()
            .map_or("none".into(), NodeId::to_string);
        write!(
            f,
            "shard {}  primary {primary}  backups {}  replicas {}/{}",
            self.shard,
            list(self.replicas.get(1..).unwrap_or_default()),
            self.replicas.len(),
            self.replication
        )?;
        if !self.joining.is_empty() {
            write!(f, "  joining {}", list(&self.joining))?;
        }
        if self.short() {
            write!(f, "  SHORT")?;
        }
        Ok(())
    }
}

/// The rows of every shard of `c`, in the serving order
/// `Configuration::roles` fixes.
pub fn shard_rows(c: &Configuration) -> Vec<ShardRow> {
    let roles = c.roles();
    let n = (c.nodes as usize).min(NODES_MAX);
    (0..n as NodeId)
        .map(|s| {
            let joining = roles.joining(s);
            let (joining, replicas): (Vec<NodeId>, Vec<NodeId>) =
                roles.members(s).partition(|&m| joining.contains(m));
            ShardRow {
                shard: s as usize,
                replicas,
                joining,
                replication: c.replication as usize,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_follow_the_configuration_and_flag_short_shards() {
        let c = Configuration::initial(3, 2);
        let rows = shard_rows(&c);
        assert_eq!(rows[0].replicas, vec![0, 1]);
        assert_eq!(rows[2].replicas, vec![2, 0]);
        assert!(rows.iter().all(|r| !r.short()));
        assert_eq!(
            rows[0].to_string(),
            "shard 0  primary 0  backups 1  replicas 2/2"
        );
        // Node 0 out: shard 0's backup 1 is its primary, short until copied.
        let out = c.without(1);
        let rows = shard_rows(&out);
        assert_eq!(
            (rows[0].replicas.clone(), rows[0].joining.clone()),
            (vec![1], vec![2])
        );
        assert!(rows[0].short());
        assert_eq!(
            rows[0].to_string(),
            "shard 0  primary 1  backups -  replicas 1/2  joining 2  SHORT"
        );
    }
}

//! `splitkv status --config FILE`: one screen about a deployed cluster, in
//! the spirit of FoundationDB's `fdbcli status`, built from each node's
//! `/status` (read twice, `--interval` apart, for the transactions of that
//! interval) and, with etcd membership, the stored configuration
//! (`splitkv_host::membership_etcd::admin`).
//!
//! Exit codes: 0 when every member serves and every shard is at its
//! replication degree; 1 when degraded (the reasons on stderr, the screen
//! on stdout); 2 on a bad file; 3 when no node answers.

mod shards;

use crate::cli::StatusArgs;
use crate::http::call;
use crate::Failure;
use serde_json::{json, Value};
use shards::{shard_rows, ShardRow};
use splitkv_host::deploy::{ClusterConfig, MembershipSettings};
use splitkv_nic::membership::Configuration;
use std::time::{Duration, Instant};

/// One node's two reads of `/status` (or why it did not answer).
struct NodeView {
    id: u16,
    control: std::net::SocketAddr,
    first: Result<Value, String>,
    last: Result<Value, String>,
}

impl NodeView {
    fn answered(&self) -> Option<&Value> {
        self.last.as_ref().ok()
    }

    /// Whether the node serves: answered, no failure, not draining, its
    /// membership neither fenced nor joining, its NIC runtime serving (or
    /// not loaded yet).
    fn serves(&self) -> bool {
        let Some(s) = self.answered() else {
            return false;
        };
        let m = &s["membership"];
        s["failure"].is_null()
            && s["state"] != "draining"
            && m["fail_stop"].is_null()
            && m["role"] != "joining"
            && (s["nic"].is_null() || s["nic"]["mode"] == "serving")
    }
}

/// Where the configuration came from.
enum Stored {
    /// Static membership: the file's nodes, epoch 1, never changed.
    Static(Configuration),
    /// Read from etcd, with its cluster generation.
    Etcd(Configuration, u32),
    /// etcd did not answer or held none (the reason).
    Unknown(String),
}

/// `splitkv status`.
pub fn run(args: &StatusArgs) -> Result<(), Failure> {
    let config = ClusterConfig::from_file(&args.config)
        .map_err(|e| Failure::BadInput(format!("{}: {e}", args.config.display())))?;
    let interval = Duration::from_secs_f64(args.interval);
    let views = read_nodes(&config, interval);
    if views.iter().all(|v| v.answered().is_none()) {
        return Err(Failure::Unreachable(format!(
            "no node of {} answers at its control address",
            args.config.display()
        )));
    }
    let stored = stored_configuration(&config);
    let shards = match &stored {
        Stored::Static(c) | Stored::Etcd(c, _) => shard_rows(c),
        Stored::Unknown(_) => Vec::new(),
    };
    let degraded = degraded(&views, &stored, &shards);
    let screen = Screen {
        config: &config,
        views: &views,
        stored: &stored,
        shards: &shards,
        interval,
    };
    match args.json {
        true => outln!("{}", screen.to_json(&degraded)),
        false => out!("{}", screen.to_text(&degraded)),
    }
    match degraded.is_empty() {
        true => Ok(()),
        false => Err(Failure::Check(format!("degraded: {}", degraded.join("; ")))),
    }
}

/// Every node's `/status`, read twice `interval` apart.
fn read_nodes(config: &ClusterConfig, interval: Duration) -> Vec<NodeView> {
    let read = |addr| call(addr, "GET", "/status", "", None).map_err(|e| e.to_string());
    let first: Vec<_> = config.nodes.iter().map(|n| read(n.control)).collect();
    let started = Instant::now();
    std::thread::sleep(interval.saturating_sub(started.elapsed()));
    config
        .nodes
        .iter()
        .zip(first)
        .map(|(n, first)| NodeView {
            id: n.id,
            control: n.control,
            first,
            last: read(n.control),
        })
        .collect()
}

/// The configuration the cluster serves under.
fn stored_configuration(config: &ClusterConfig) -> Stored {
    let shape = (config.nodes.len(), config.replication);
    match &config.membership {
        MembershipSettings::Static => Stored::Static(Configuration::initial(shape.0, shape.1)),
        MembershipSettings::Etcd {
            endpoints, prefix, ..
        } => etcd_configuration(endpoints, prefix, shape),
    }
}

#[cfg(feature = "etcd")]
fn etcd_configuration(endpoints: &[String], prefix: &str, shape: (usize, usize)) -> Stored {
    use splitkv_host::membership_etcd::admin::EtcdAdmin;
    let rpc = Duration::from_millis(2_000);
    let state = EtcdAdmin::connect(endpoints, prefix, rpc).and_then(|mut a| a.show(shape));
    match state {
        Err(e) => Stored::Unknown(e.to_string()),
        Ok(s) => match (s.config, s.header) {
            (Some(c), Some(Ok(h))) => Stored::Etcd(c, h.lineage.generation),
            _ => Stored::Unknown(format!("no readable configuration under {}", s.prefix)),
        },
    }
}

#[cfg(not(feature = "etcd"))]
fn etcd_configuration(_: &[String], _: &str, _: (usize, usize)) -> Stored {
    Stored::Unknown("this binary was built without etcd support".into())
}

/// Why the cluster is degraded (empty: it is not).
fn degraded(views: &[NodeView], stored: &Stored, shards: &[ShardRow]) -> Vec<String> {
    let mut why = Vec::new();
    let config = match stored {
        Stored::Static(c) | Stored::Etcd(c, _) => Some(c),
        Stored::Unknown(e) => {
            why.push(format!("configuration unknown ({e})"));
            None
        }
    };
    for v in views {
        let member = config.is_none_or(|c| c.contains(v.id));
        match (&v.last, member) {
            (Err(_), true) => why.push(format!("node {} does not answer", v.id)),
            (Ok(_), true) if !v.serves() => why.push(format!("node {} does not serve", v.id)),
            (_, false) => why.push(format!("node {} is not a member", v.id)),
            _ => {}
        }
    }
    let short: Vec<String> = shards
        .iter()
        .filter(|s| s.short())
        .map(|s| s.shard.to_string())
        .collect();
    if !short.is_empty() {
        why.push(format!("shard(s) {} short of replicas", short.join(",")));
    }
    why
}

/// Transactions by outcome over the interval, summed over the nodes that
/// answered both reads.
fn outcomes(views: &[NodeView]) -> serde_json::Map<String, Value> {
    let mut out = serde_json::Map::new();
    for v in views {
        let (Ok(a), Ok(b)) = (&v.first, &v.last) else {
            continue;
        };
        let Some(after) = b["transactions"].as_object() else {
            continue;
        };
        for (k, n) in after {
            let before = a["transactions"][k].as_u64().unwrap_or(0);
            let d = n.as_u64().unwrap_or(0).saturating_sub(before);
            let sum = out.get(k).and_then(Value::as_u64).unwrap_or(0) + d;
            out.insert(k.clone(), json!(sum));
        }
    }
    out
}

/// One member's line.
fn member_line(v: &NodeView) -> String {
    let Some(s) = v.answered() else {
        let why = v.last.as_ref().err().map_or("", String::as_str);
        return format!("  node {}  {}  does not answer ({why})\n", v.id, v.control);
    };
    let m = &s["membership"];
    let mut line = format!(
        "  node {}  {}  incarnation {}  up {:.1} s  {}",
        v.id,
        v.control,
        s["incarnation"],
        s["uptime_ms"].as_u64().unwrap_or(0) as f64 / 1e3,
        s["state"].as_str().unwrap_or("?"),
    );
    if let Some(mode) = s["nic"]["mode"].as_str() {
        line.push_str(&format!("  nic {mode}"));
    }
    if let Some(role) = m["role"].as_str() {
        line.push_str(&format!("  {role}"));
    }
    if let Some(ms) = m["lease_remaining_ms"].as_u64() {
        line.push_str(&format!("  lease {:.1} s", ms as f64 / 1e3));
    }
    for (what, v) in [("FAILED", &s["failure"]), ("FENCED", &m["fail_stop"])] {
        if let Some(why) = v.as_str() {
            line.push_str(&format!("  {what}: {why}"));
        }
    }
    line + "\n"
}

/// What `splitkv status` shows.
struct Screen<'a> {
    config: &'a ClusterConfig,
    views: &'a [NodeView],
    stored: &'a Stored,
    shards: &'a [ShardRow],
    /// Between the two reads of every node.
    interval: Duration,
}

impl Screen<'_> {
    /// The screen as text.
    fn to_text(&self, degraded: &[String]) -> String {
        let Screen {
            config,
            views,
            stored,
            shards,
            interval,
        } = *self;
        let mut out = format!(
            "cluster {} ({} nodes, replication {}, protocol {})\n",
            config.cluster_id,
            config.nodes.len(),
            config.replication,
            config.protocol.commit
        );
        out.push_str(&match stored {
            Stored::Static(c) => format!("configuration: static, epoch {}\n", c.epoch),
            Stored::Etcd(c, g) => format!(
                "configuration: etcd, epoch {}, cluster generation {g}\n",
                c.epoch
            ),
            Stored::Unknown(e) => format!("configuration: unknown ({e})\n"),
        });
        out.push_str("members:\n");
        views.iter().for_each(|v| out.push_str(&member_line(v)));
        out.push_str("shards:\n");
        for s in shards {
            out.push_str(&format!("  {s}\n"));
        }
        let under_way: Vec<String> = views
            .iter()
            .filter_map(|v| {
                let s = v.answered()?;
                let mode = s["nic"]["mode"].as_str().filter(|m| *m != "serving");
                let copying = s["membership"]["copy"]["copying"].as_bool() == Some(true);
                let what = [mode.map(str::to_string), copying.then(|| "copying".into())];
                let what: Vec<String> = what.into_iter().flatten().collect();
                (!what.is_empty()).then(|| format!("node {} {}", v.id, what.join(", ")))
            })
            .collect();
        let under_way = if under_way.is_empty() {
            "none".into()
        } else {
            under_way.join("; ")
        };
        out.push_str(&format!("recovery and copies under way: {under_way}\n"));
        let failed: u64 = views
            .iter()
            .filter_map(|v| v.answered()?["sessions"]["sessions_failed"].as_u64())
            .sum();
        out.push_str(&format!("sessions failed: {failed}\n"));
        let by_outcome: Vec<String> = outcomes(views)
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!(
            "transactions over the last {:.1} s: {}\n",
            interval.as_secs_f64(),
            if by_outcome.is_empty() {
                "none".into()
            } else {
                by_outcome.join(", ")
            }
        ));
        out.push_str(&format!("last faults: {}\n", faults(views).join("; ")));
        out.push_str(&match degraded.is_empty() {
            true => "status: healthy\n".into(),
            false => format!("status: DEGRADED ({})\n", degraded.join("; ")),
        });
        out
    }
}

/// The faults the nodes' counters show (recovery epochs, NIC restarts,
/// failed peers), or "none seen".
fn faults(views: &[NodeView]) -> Vec<String> {
    let mut seen = Vec::new();
    for v in views {
        let Some(s) = v.answered() else { continue };
        let epochs = s["recovery"]["epochs_begun"].as_u64().unwrap_or(0);
        if epochs > 0 {
            seen.push(format!("node {}: {epochs} recovery epoch(s)", v.id));
        }
        let restarts = s["nic"]["restarts"].as_u64().unwrap_or(0);
        if restarts > 0 {
            seen.push(format!("node {}: {restarts} NIC restart(s)", v.id));
        }
        let refused = s["membership"]["etcd"]["configs_refused"]
            .as_u64()
            .unwrap_or(0);
        if refused > 0 {
            seen.push(format!(
                "node {}: {refused} stored configuration(s) refused",
                v.id
            ));
        }
        if let Some(peers) = s["sessions"]["failed_peers"].as_u64().filter(|&p| p != 0) {
            seen.push(format!("node {}: failed peers {peers:#x}", v.id));
        }
    }
    if seen.is_empty() {
        seen.push("none seen".into());
    }
    seen
}

impl Screen<'_> {
    /// `--json`: one object.
    fn to_json(&self, degraded: &[String]) -> Value {
        let Screen {
            config,
            views,
            stored,
            shards,
            interval,
        } = *self;
        let (epoch, generation, error) = match stored {
            Stored::Static(c) => (Some(c.epoch), Some(1), None),
            Stored::Etcd(c, g) => (Some(c.epoch), Some(*g), None),
            Stored::Unknown(e) => (None, None, Some(e.clone())),
        };
        let members: Vec<Value> = views
            .iter()
            .map(|v| {
                json!({
                    "node": v.id,
                    "control": v.control.to_string(),
                    "answered": v.answered().is_some(),
                    "serves": v.serves(),
                    "status": v.answered(),
                    "error": v.last.as_ref().err(),
                })
            })
            .collect();
        json!({
            "cluster": config.cluster_id,
            "nodes": config.nodes.len(),
            "replication": config.replication,
            "protocol": config.protocol.commit.as_str(),
            "configuration": { "epoch": epoch, "generation": generation, "error": error },
            "members": members,
            "shards": shards.iter().map(ShardRow::to_json).collect::<Vec<_>>(),
            "interval_s": interval.as_secs_f64(),
            "transactions": outcomes(views),
            "faults": faults(views),
            "healthy": degraded.is_empty(),
            "degraded": degraded,
        })
    }
}

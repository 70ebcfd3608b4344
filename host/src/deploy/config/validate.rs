//! The checks of a parsed cluster file, each naming the field it refuses.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use splitkv_layout::VALUE_BYTES_MAX;
use splitkv_nic::index::CACHE_OBJECTS_DEFAULT;
use splitkv_nic::NODES_MAX;

use super::raw::{RawCluster, RawNode, RawProtocol, RawTable, RawTransport};
use super::transport::in_range;
use super::*;

/// Checks `raw` as a whole; the first problem found is the error.
pub(super) fn check(raw: RawCluster) -> Result<ClusterConfig, ConfigError> {
    check_token(&raw.token)?;
    let table = check_table(&raw.table)?;
    let protocol = check_protocol(&raw.protocol)?;
    transport::check("transport", &raw.transport)?;
    let nodes = check_nodes(&raw.nodes, &raw.transport)?;
    if raw.replication == 0 || raw.replication > nodes.len() {
        return Err(ConfigError::invalid(
            "replication",
            format!(
                "must be between 1 and the number of nodes ({}), got {}",
                nodes.len(),
                raw.replication
            ),
        ));
    }
    let config = ClusterConfig {
        cluster_id: raw.cluster_id,
        token: raw.token,
        replication: raw.replication,
        log: check_log(raw.log.as_deref())?,
        table,
        protocol,
        nodes,
        membership: super::membership::check(raw.membership.as_ref(), raw.cluster_id)?,
        clients: super::clients::check(raw.clients.as_ref(), raw.cluster_id)?,
    };
    check_verbs_cluster(&raw.nodes, &config)?;
    Ok(config)
}

/// With any node on verbs: every node is (a UD queue pair reaches no UDP
/// socket), and the membership is etcd, whose address records carry the
/// queue pair numbers peers need ([`super::verbs`]). Errors name the file's
/// `[[node]]` entry or `membership`.
fn check_verbs_cluster(raw: &[RawNode], config: &ClusterConfig) -> Result<(), ConfigError> {
    let Some(first) = config.nodes.iter().find(|n| n.verbs.is_some()) else {
        return Ok(());
    };
    let at = |id: NodeId| raw.iter().position(|r| r.id == u64::from(id)).unwrap_or(0);
    if let Some(other) = config.nodes.iter().find(|n| n.verbs.is_none()) {
        return Err(ConfigError::invalid(
            format!("node[{}].transport.kind", at(other.id)),
            format!(
                "\"{}\" beside node {} on \"verbs\": an RDMA queue pair reaches verbs peers only, so every node's transport must be \"verbs\"",
                other.transport.kind.name(),
                first.id
            ),
        ));
    }
    if config.membership == MembershipSettings::Static {
        return Err(ConfigError::invalid(
            "membership.kind",
            "transport \"verbs\" needs kind = \"etcd\": each node publishes its queue pair number in its etcd address record, where its peers read it",
        ));
    }
    Ok(())
}

fn check_token(token: &str) -> Result<(), ConfigError> {
    if token.is_empty() {
        return Err(ConfigError::invalid("token", "must not be empty"));
    }
    if token.len() > TOKEN_BYTES_MAX {
        return Err(ConfigError::invalid(
            "token",
            format!("longer than {TOKEN_BYTES_MAX} bytes"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(ConfigError::invalid(
            "token",
            "must be printable ASCII without spaces (it travels in an HTTP header)",
        ));
    }
    Ok(())
}

fn check_log(log: Option<&str>) -> Result<LogTarget, ConfigError> {
    match log {
        None | Some("stderr") => Ok(LogTarget::Stderr),
        Some("") => Err(ConfigError::invalid(
            "log",
            "must be \"stderr\" or a file path, got an empty string",
        )),
        Some(path) => Ok(LogTarget::File(PathBuf::from(path))),
    }
}

fn check_table(raw: &RawTable) -> Result<TableSettings, ConfigError> {
    let kind = match raw.kind.as_deref() {
        None | Some("robinhood") => TableKind::Robinhood,
        Some("dlht") => TableKind::Dlht,
        Some(other) => {
            return Err(ConfigError::invalid(
                "table.kind",
                format!("unknown table kind \"{other}\" (expected \"robinhood\" or \"dlht\")"),
            ))
        }
    };
    let capacity_keys = raw.capacity_keys.unwrap_or(CAPACITY_KEYS_DEFAULT as u64);
    let capacity_keys = in_range(
        "table.capacity_keys",
        capacity_keys,
        1,
        CAPACITY_KEYS_MAX as u64,
    )?;
    let value_bytes_max = raw.value_bytes_max.unwrap_or(VALUE_BYTES_MAX as u64);
    if value_bytes_max == 0 || value_bytes_max > VALUE_BYTES_MAX as u64 {
        return Err(ConfigError::invalid(
            "table.value_bytes_max",
            format!(
                "must be between 1 and the node's value limit {VALUE_BYTES_MAX} bytes, got {value_bytes_max}"
            ),
        ));
    }
    let cache_objects = in_range(
        "table.cache_objects",
        raw.cache_objects.unwrap_or(CACHE_OBJECTS_DEFAULT as u64),
        1,
        CACHE_OBJECTS_MAX as u64,
    )?;
    Ok(TableSettings {
        kind,
        capacity_keys: capacity_keys as usize,
        value_bytes_max: value_bytes_max as usize,
        cache_objects: cache_objects as usize,
    })
}

fn check_protocol(raw: &RawProtocol) -> Result<ProtocolSettings, ConfigError> {
    let silence_ms = in_range(
        "protocol.session_silence_ms",
        raw.session_silence_ms.unwrap_or(SESSION_SILENCE_MS_DEFAULT),
        SESSION_SILENCE_MS_MIN,
        SESSION_SILENCE_MS_MAX,
    )?;
    let rto_us = raw
        .retransmit_timeout_us
        .unwrap_or(RETRANSMIT_TIMEOUT_US_DEFAULT);
    if rto_us < RETRANSMIT_TIMEOUT_US_MIN || rto_us >= silence_ms * 1_000 {
        return Err(ConfigError::invalid(
            "protocol.retransmit_timeout_us",
            format!(
                "must be at least {RETRANSMIT_TIMEOUT_US_MIN} µs and below the session silence ({} µs), got {rto_us}",
                silence_ms * 1_000
            ),
        ));
    }
    let commit = match raw.commit.as_deref() {
        None => CommitProtocol::XenicOcc,
        Some(name) => name
            .parse::<CommitProtocol>()
            .and_then(CommitProtocol::check_deployable)
            .map_err(|e| ConfigError::invalid("protocol.commit", e.to_string()))?,
    };
    Ok(ProtocolSettings {
        commit,
        batching: raw.batching.unwrap_or(true),
        session_silence_ms: silence_ms,
        retransmit_timeout_us: rto_us,
    })
}

fn check_nodes(
    raw: &[RawNode],
    transport: &RawTransport,
) -> Result<Vec<NodeSettings>, ConfigError> {
    if raw.is_empty() {
        return Err(ConfigError::invalid("node", "the cluster has no [[node]]"));
    }
    if raw.len() > NODES_MAX {
        return Err(ConfigError::invalid(
            "node",
            format!("at most {NODES_MAX} nodes, got {}", raw.len()),
        ));
    }
    let mut by_id: Vec<Option<NodeSettings>> = vec![None; raw.len()];
    let mut data_seen = HashMap::new();
    let mut control_seen = HashMap::new();
    for (i, node) in raw.iter().enumerate() {
        let settings = check_node(i, node, transport)?;
        let slot = by_id.get_mut(settings.id as usize).ok_or_else(|| {
            ConfigError::invalid(
                format!("node[{i}].id"),
                format!(
                    "ids must be 0 ..= {} (one per node), got {}",
                    raw.len() - 1,
                    node.id
                ),
            )
        })?;
        if slot.is_some() {
            return Err(ConfigError::invalid(
                format!("node[{i}].id"),
                format!("duplicate node id {}", node.id),
            ));
        }
        unique(&mut data_seen, settings.data, i, "data")?;
        unique(&mut control_seen, settings.control, i, "control")?;
        *slot = Some(settings);
    }
    // n distinct ids in 0..n: every slot is filled.
    let nodes: Vec<NodeSettings> = by_id.into_iter().flatten().collect();
    check_dpdk_addresses(raw, &nodes)?;
    Ok(nodes)
}

/// With any node on DPDK: every node has a MAC (its DPDK peers address
/// frames to it), no two share one, and every data address is IPv4 (its frames are Ethernet + IPv4 + UDP). Errors name the file's
/// `[[node]]` entry.
fn check_dpdk_addresses(raw: &[RawNode], nodes: &[NodeSettings]) -> Result<(), ConfigError> {
    if nodes.iter().all(|n| n.dpdk.is_none()) {
        return Ok(());
    }
    // Index in the file of node `id`.
    let at = |id: NodeId| raw.iter().position(|r| r.id == u64::from(id)).unwrap_or(0);
    let mut seen: HashMap<MacAddr, usize> = HashMap::new();
    for n in nodes {
        let i = at(n.id);
        let mac = n.mac.ok_or_else(|| ConfigError::MissingMac {
            field: format!("node[{i}].mac"),
        })?;
        if let Some(first) = seen.insert(mac, i) {
            return Err(ConfigError::invalid(
                format!("node[{i}].mac"),
                format!("{mac} is already node[{first}].mac"),
            ));
        }
        if !n.data.is_ipv4() {
            return Err(ConfigError::invalid(
                format!("node[{i}].data"),
                format!("{} is not IPv4: DPDK frames carry IPv4 + UDP", n.data),
            ));
        }
    }
    Ok(())
}

/// Records `addr` as node `i`'s `name` address, refusing one seen before.
fn unique(
    seen: &mut HashMap<SocketAddr, usize>,
    addr: SocketAddr,
    i: usize,
    name: &str,
) -> Result<(), ConfigError> {
    if let Some(first) = seen.insert(addr, i) {
        return Err(ConfigError::invalid(
            format!("node[{i}].{name}"),
            format!("address {addr} is already node[{first}].{name}"),
        ));
    }
    Ok(())
}

fn check_node(
    i: usize,
    raw: &RawNode,
    transport: &RawTransport,
) -> Result<NodeSettings, ConfigError> {
    let id = u16::try_from(raw.id)
        .ok()
        .filter(|&id| (id as usize) < NODES_MAX)
        .ok_or_else(|| {
            ConfigError::invalid(
                format!("node[{i}].id"),
                format!("must be below {NODES_MAX}, got {}", raw.id),
            )
        })?;
    let data = data_address(
        &format!("node[{i}].data"),
        address(&format!("node[{i}].data"), &raw.data)?,
    )?;
    let control = control_address(
        &format!("node[{i}].control"),
        address(&format!("node[{i}].control"), &raw.control)?,
        raw.control_public,
    )?;
    let cores = check_cores(i, &raw.cores)?;
    let merged = match &raw.transport {
        Some(over) => transport.overlaid(over),
        None => transport.clone(),
    };
    let prefix = if raw.transport.is_some() {
        format!("node[{i}].transport")
    } else {
        "transport".to_string()
    };
    let (transport, dpdk, verbs) = transport::check(&prefix, &merged)?;
    let mac = match &raw.mac {
        Some(text) => Some(transport::mac(&format!("node[{i}].mac"), text)?),
        None => None,
    };
    Ok(NodeSettings {
        id,
        data,
        control,
        control_public: raw.control_public,
        cores,
        transport,
        mac,
        dpdk,
        verbs,
    })
}

fn address(field: &str, text: &str) -> Result<SocketAddr, ConfigError> {
    text.parse().map_err(|_| {
        ConfigError::invalid(
            field,
            format!("\"{text}\" is not an IP address and port (e.g. \"127.0.0.1:7100\")"),
        )
    })
}

/// `addr` if it has a fixed port, else an error naming `field`.
fn fixed_port(field: &str, addr: SocketAddr) -> Result<SocketAddr, ConfigError> {
    if addr.port() == 0 {
        return Err(ConfigError::invalid(
            field,
            "port 0 is not a fixed port; peers must know it",
        ));
    }
    Ok(addr)
}

/// `addr` if peers can send to it (a fixed port, a specified IP).
fn data_address(field: &str, addr: SocketAddr) -> Result<SocketAddr, ConfigError> {
    if addr.ip().is_unspecified() {
        return Err(ConfigError::invalid(
            field,
            format!("{addr} is not an address peers can send to"),
        ));
    }
    fixed_port(field, addr)
}

/// `addr` if it may serve a control endpoint: a fixed port, on loopback
/// unless `public`.
fn control_address(field: &str, addr: SocketAddr, public: bool) -> Result<SocketAddr, ConfigError> {
    if !addr.ip().is_loopback() && !public {
        return Err(ConfigError::invalid(
            field,
            format!("{addr} is not a loopback address; set control_public = true to serve it"),
        ));
    }
    fixed_port(field, addr)
}

/// `config` with node `id` at `data` and `control` where given (see
/// [`ClusterConfig::with_node_moved`]).
pub(super) fn moved(
    mut config: ClusterConfig,
    id: NodeId,
    data: Option<SocketAddr>,
    control: Option<SocketAddr>,
) -> Result<ClusterConfig, ConfigError> {
    let i = id as usize;
    let Some(me) = config.nodes.get(i) else {
        return Err(ConfigError::invalid(
            "node",
            format!(
                "the cluster has no node {id} (ids 0 ..= {})",
                config.nodes.len().saturating_sub(1)
            ),
        ));
    };
    let data = match data {
        Some(a) => data_address(&format!("node[{i}].data"), a)?,
        None => me.data,
    };
    let control = match control {
        Some(a) => control_address(&format!("node[{i}].control"), a, me.control_public)?,
        None => me.control,
    };
    let (mut data_seen, mut control_seen) = (HashMap::new(), HashMap::new());
    for n in config.nodes.iter().filter(|n| n.id != id) {
        data_seen.insert(n.data, n.id as usize);
        control_seen.insert(n.control, n.id as usize);
    }
    unique(&mut data_seen, data, i, "data")?;
    unique(&mut control_seen, control, i, "control")?;
    config.nodes[i].data = data;
    config.nodes[i].control = control;
    Ok(config)
}

fn check_cores(i: usize, raw: &[u64]) -> Result<Vec<usize>, ConfigError> {
    let field = format!("node[{i}].cores");
    if raw.len() > CORES_PER_NODE_MAX {
        return Err(ConfigError::invalid(
            field,
            format!("at most {CORES_PER_NODE_MAX} cores, got {}", raw.len()),
        ));
    }
    let mut cores = Vec::with_capacity(raw.len());
    for &core in raw {
        let core = in_range(&field, core, 0, CORE_ID_MAX as u64)? as usize;
        if cores.contains(&core) {
            return Err(ConfigError::invalid(
                field,
                format!("core {core} listed twice"),
            ));
        }
        cores.push(core);
    }
    Ok(cores)
}

//! `[membership]`: how the node processes agree on membership (DESIGN.md
//! "Faults"). Without the section, membership is static (every node of the
//! file, epoch 1, never changed); `kind = "etcd"` asks for leases and a
//! configuration key in etcd (`crate::membership_etcd`, cargo feature
//! `etcd`; a build without it refuses the file with one line).
//! Endpoints are `http://` only: the etcd client is built without TLS, so an
//! `https://` endpoint is refused here, with one line, rather than failing
//! at the first connection.
//!
//! ```toml
//! [membership]
//! kind = "etcd"                            # or "static" (the default)
//! endpoints = ["http://127.0.0.1:2379"]    # etcd client URLs (http://), 1 ..= ENDPOINTS_MAX
//! lease_ttl_s = 2                          # whole seconds, 1 ..= LEASE_TTL_S_MAX
//! prefix = "splitkv-7"                     # etcd key prefix; default splitkv-<cluster_id>
//! ```

use super::raw::RawMembership;
use super::ConfigError;

/// Default etcd lease TTL (whole seconds).
pub const LEASE_TTL_S_DEFAULT: u32 = 2;
/// Largest etcd lease TTL a cluster file may ask for (s).
pub const LEASE_TTL_S_MAX: u32 = 60;
/// Most etcd endpoints a cluster file may list.
pub const ENDPOINTS_MAX: usize = 16;
/// Longest etcd key prefix (bytes).
pub const PREFIX_BYTES_MAX: usize = 64;

#[cfg(feature = "etcd")]
const _: () = {
    assert!(LEASE_TTL_S_MAX == crate::membership_etcd::LEASE_TTL_S_MAX);
    assert!(LEASE_TTL_S_DEFAULT == crate::membership_etcd::LEASE_TTL_S_DEFAULT);
    assert!(PREFIX_BYTES_MAX == crate::membership_etcd::keys::CLUSTER_NAME_BYTES_MAX);
};

/// Which membership the node processes use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MembershipSettings {
    /// Every node of the file, epoch 1, never changed (no failure handling).
    Static,
    /// Leases and a configuration key in etcd.
    Etcd {
        /// Client URLs (`http://host:port`), 1 ..= [`ENDPOINTS_MAX`].
        endpoints: Vec<String>,
        /// Lease TTL (whole seconds, 1 ..= [`LEASE_TTL_S_MAX`]).
        lease_ttl_s: u32,
        /// The key prefix `/<prefix>/` (1 ..= [`PREFIX_BYTES_MAX`] bytes, no `/`).
        prefix: String,
    },
}

/// Checks `[membership]` of cluster `cluster_id`.
pub(super) fn check(
    raw: Option<&RawMembership>,
    cluster_id: u32,
) -> Result<MembershipSettings, ConfigError> {
    let Some(raw) = raw else {
        return Ok(MembershipSettings::Static);
    };
    match raw.kind.as_deref() {
        None | Some("static") => {
            if raw.endpoints.is_some() || raw.lease_ttl_s.is_some() || raw.prefix.is_some() {
                return Err(ConfigError::invalid(
                    "membership",
                    "endpoints, lease_ttl_s and prefix belong to kind = \"etcd\"",
                ));
            }
            Ok(MembershipSettings::Static)
        }
        Some("etcd") => check_etcd(raw, cluster_id),
        Some(other) => Err(ConfigError::invalid(
            "membership.kind",
            format!("unknown membership kind \"{other}\" (expected \"static\" or \"etcd\")"),
        )),
    }
}

fn check_etcd(raw: &RawMembership, cluster_id: u32) -> Result<MembershipSettings, ConfigError> {
    if !cfg!(feature = "etcd") {
        return Err(ConfigError::invalid(
            "membership.kind",
            "\"etcd\" needs a build with the cargo feature etcd (this one has none)",
        ));
    }
    let endpoints = raw.endpoints.clone().unwrap_or_default();
    if endpoints.is_empty() || endpoints.len() > ENDPOINTS_MAX {
        return Err(ConfigError::invalid(
            "membership.endpoints",
            format!(
                "must list 1 to {ENDPOINTS_MAX} etcd client URLs, got {}",
                endpoints.len()
            ),
        ));
    }
    for (i, e) in endpoints.iter().enumerate() {
        if e.starts_with("https://") {
            return Err(ConfigError::invalid(
                format!("membership.endpoints[{i}]"),
                format!(
                    "\"{e}\": https:// needs TLS, which this build does not support; use http://"
                ),
            ));
        }
        if !e.starts_with("http://") || e.contains(char::is_whitespace) {
            return Err(ConfigError::invalid(
                format!("membership.endpoints[{i}]"),
                format!("\"{e}\" is not an http:// URL"),
            ));
        }
    }
    let lease_ttl_s = raw.lease_ttl_s.unwrap_or(u64::from(LEASE_TTL_S_DEFAULT));
    if lease_ttl_s == 0 || lease_ttl_s > u64::from(LEASE_TTL_S_MAX) {
        return Err(ConfigError::invalid(
            "membership.lease_ttl_s",
            format!("must be between 1 and {LEASE_TTL_S_MAX}, got {lease_ttl_s}"),
        ));
    }
    let prefix = raw
        .prefix
        .clone()
        .unwrap_or_else(|| format!("splitkv-{cluster_id}"));
    if prefix.is_empty() || prefix.len() > PREFIX_BYTES_MAX || prefix.contains('/') {
        return Err(ConfigError::invalid(
            "membership.prefix",
            format!("must be 1 to {PREFIX_BYTES_MAX} bytes without '/', got \"{prefix}\""),
        ));
    }
    Ok(MembershipSettings::Etcd {
        endpoints,
        lease_ttl_s: lease_ttl_s as u32,
        prefix,
    })
}

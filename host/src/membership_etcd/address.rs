//! The address record a node process publishes under
//! `/<cluster>/addresses/<node>` with its registration (a replacement
//! machine: a new machine replaces a dead node): the incarnation that published
//! it and that process's data address (where its transport receives packets)
//! and control address (its HTTP control endpoint). Pure encode/decode, no I/O
//! (unit- and property-tested without etcd, as [`super::keys::ConfigRecord`]).
//!
//! The value is JSON of one version,
//! `{"version":1,"incarnation":I,"data":"IP:PORT","control":"IP:PORT"}`
//! (IPv6 as `[IP]:PORT`), at most [`ADDRESS_RECORD_BYTES_MAX`] bytes. A
//! node on RDMA verbs also publishes its queue pair's endpoint, which the
//! device chose at start-up (`[transport] kind = "verbs"`,
//! `crate::deploy::config::verbs`), as version 2 with one more field,
//! `"verbs":"gid=…,qpn=…,qkey=…"` (`lid=…` on InfiniBand; the text form of
//! [`VerbsAddress`]). A node without one writes version 1, byte for byte
//! as before, so readers that know version 1 only are unaffected; they
//! refuse a version 2 record as a later version, as they should (they
//! could not use the endpoint). A record of a version this code does not
//! read is refused as such ([`AddressRecordError::Version`]), whatever
//! else it holds, so a later format is never misread as this one.

use splitkv_layout::wire::NodeId;
use splitkv_nic::membership::Configuration;
use splitkv_nic::net::verbs::{PeerParseError, VerbsAddress};
use splitkv_nic::NODES_MAX;
use std::net::SocketAddr;

use super::keys::configured_incarnation;

/// The version of an address record without a verbs endpoint.
pub const ADDRESS_RECORD_VERSION: u32 = 1;
/// The version of an address record with a verbs endpoint (`verbs`).
pub const ADDRESS_RECORD_VERSION_VERBS: u32 = 2;
/// Longest address record read (bytes): two IPv6 socket addresses with
/// scope, a verbs endpoint with an IPv6 GID and the field names fit in
/// well under it.
pub const ADDRESS_RECORD_BYTES_MAX: usize = 512;

/// Where one node process can be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeAddresses {
    /// Its transport's data address (UDP: IP and port).
    pub data: SocketAddr,
    /// Its control endpoint's address (HTTP).
    pub control: SocketAddr,
    /// Its RDMA verbs endpoint (GID or LID, queue pair number, QKey),
    /// when its transport is verbs: peers reach it there, at `data`.
    pub verbs: Option<VerbsAddress>,
}

/// One published address record: which incarnation of the node published
/// it, and where that process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AddressRecord {
    /// The publishing process's incarnation (at least 1).
    pub incarnation: u32,
    /// Its addresses.
    pub addresses: NodeAddresses,
}

/// Why a stored address record is unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressRecordError {
    /// Longer than [`ADDRESS_RECORD_BYTES_MAX`].
    #[error("address record of {bytes} bytes, at most {max}")]
    TooLong {
        /// Its length.
        bytes: usize,
        /// [`ADDRESS_RECORD_BYTES_MAX`].
        max: usize,
    },
    /// Not JSON of the record's shape (the parser's reason).
    #[error("not an address record: {0}")]
    Shape(String),
    /// A version this code does not read.
    #[error("address record version {found}, this build reads versions {supported} and {supported_verbs}")]
    Version {
        /// The stored version.
        found: u32,
        /// [`ADDRESS_RECORD_VERSION`].
        supported: u32,
        /// [`ADDRESS_RECORD_VERSION_VERBS`].
        supported_verbs: u32,
    },
    /// A version 2 record without `verbs`, or a version 1 record with it.
    #[error("address record version {version} {}", if *version == ADDRESS_RECORD_VERSION { "has a verbs endpoint (version 2 carries it)" } else { "lacks its verbs endpoint" })]
    VerbsField {
        /// The stored version.
        version: u32,
    },
    /// A `verbs` endpoint that does not parse.
    #[error("verbs: {0}")]
    Verbs(#[source] PeerParseError),
    /// Incarnation 0 (incarnations start at 1).
    #[error("address record of incarnation 0 (incarnations start at 1)")]
    IncarnationZero,
    /// A field that is not an IP address and port.
    #[error("{field}: {text:?} is not an IP address and port")]
    NotAnAddress {
        /// `data` or `control`.
        field: &'static str,
        /// The stored text.
        text: String,
    },
    /// An address no peer can send to (unspecified IP, or port 0).
    #[error("{field}: {addr} is not an address peers can send to")]
    Unreachable {
        /// `data` or `control`.
        field: &'static str,
        /// The stored address.
        addr: SocketAddr,
    },
}

/// The stored form (every field required, no other field).
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    version: u32,
    incarnation: u32,
    data: String,
    control: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    verbs: Option<String>,
}

/// Just the version, read before the rest (other fields ignored).
#[derive(serde::Deserialize)]
struct VersionOnly {
    version: u32,
}

impl AddressRecord {
    /// The JSON bytes stored in etcd.
    pub fn encode(&self) -> Vec<u8> {
        let verbs = self.addresses.verbs;
        let s = Stored {
            version: match verbs {
                Some(_) => ADDRESS_RECORD_VERSION_VERBS,
                None => ADDRESS_RECORD_VERSION,
            },
            incarnation: self.incarnation,
            data: self.addresses.data.to_string(),
            control: self.addresses.control.to_string(),
            verbs: verbs.map(|v| v.to_string()),
        };
        // Integers and strings always serialize.
        serde_json::to_vec(&s).unwrap_or_default()
    }

    /// Decodes a stored record.
    ///
    /// # Errors
    /// [`AddressRecordError`]: too long, not JSON of this shape, another
    /// version, incarnation 0, a field that is not an IP address and port,
    /// an address no peer can send to, or a verbs endpoint missing from a
    /// version 2 record, present in a version 1 record or not parsing.
    pub fn decode(bytes: &[u8]) -> Result<AddressRecord, AddressRecordError> {
        if bytes.len() > ADDRESS_RECORD_BYTES_MAX {
            let (bytes, max) = (bytes.len(), ADDRESS_RECORD_BYTES_MAX);
            return Err(AddressRecordError::TooLong { bytes, max });
        }
        let shape = |e: serde_json::Error| AddressRecordError::Shape(e.to_string());
        let v: VersionOnly = serde_json::from_slice(bytes).map_err(shape)?;
        if v.version != ADDRESS_RECORD_VERSION && v.version != ADDRESS_RECORD_VERSION_VERBS {
            return Err(AddressRecordError::Version {
                found: v.version,
                supported: ADDRESS_RECORD_VERSION,
                supported_verbs: ADDRESS_RECORD_VERSION_VERBS,
            });
        }
        let s: Stored = serde_json::from_slice(bytes).map_err(shape)?;
        if s.incarnation == 0 {
            return Err(AddressRecordError::IncarnationZero);
        }
        if s.verbs.is_some() != (s.version == ADDRESS_RECORD_VERSION_VERBS) {
            return Err(AddressRecordError::VerbsField { version: s.version });
        }
        let verbs = match &s.verbs {
            Some(text) => Some(text.parse().map_err(AddressRecordError::Verbs)?),
            None => None,
        };
        Ok(AddressRecord {
            incarnation: s.incarnation,
            addresses: NodeAddresses {
                data: reachable("data", &s.data)?,
                control: reachable("control", &s.control)?,
                verbs,
            },
        })
    }
}

/// `text` as a socket address peers can send to.
fn reachable(field: &'static str, text: &str) -> Result<SocketAddr, AddressRecordError> {
    let addr: SocketAddr = text.parse().map_err(|_| AddressRecordError::NotAnAddress {
        field,
        text: text.to_string(),
    })?;
    if addr.ip().is_unspecified() || addr.port() == 0 {
        return Err(AddressRecordError::Unreachable { field, addr });
    }
    Ok(addr)
}

/// Per node, the records stored under `prefix` (`/<cluster>/addresses/`),
/// and a mask of the nodes whose record did not decode (left `None`).
/// Keys that name no node are ignored.
pub fn address_records<'a>(
    prefix: &str,
    kvs: impl Iterator<Item = (&'a [u8], &'a [u8])>,
) -> ([Option<AddressRecord>; NODES_MAX], u32) {
    let mut out = [None; NODES_MAX];
    let mut bad = 0u32;
    for (k, v) in kvs {
        let Some(n) = super::keys::ClusterKeys::node_of(prefix, k) else {
            continue;
        };
        match AddressRecord::decode(v) {
            Ok(r) => out[n] = Some(r),
            Err(_) => bad |= 1 << n,
        }
    }
    (out, bad)
}

/// Per node of configuration `c`, the data address its configured
/// incarnation published: `records[n]` if it was published by the
/// incarnation `c` admits for `n` (`first[n]`: the node's first
/// incarnation, for `c.incarnation[n] == 0`), otherwise `None` (the node
/// is out, published nothing, or the record is an earlier or later
/// process's).
pub fn published_data_addresses(
    c: &Configuration,
    records: &[Option<AddressRecord>; NODES_MAX],
    first: &[Option<u32>; NODES_MAX],
) -> [Option<SocketAddr>; NODES_MAX] {
    published_addresses(c, records, first).map(|a| a.map(|a| a.data))
}

/// Per node of configuration `c`, the addresses its configured incarnation
/// published (as [`published_data_addresses`], with the control address
/// and the verbs endpoint).
pub fn published_addresses(
    c: &Configuration,
    records: &[Option<AddressRecord>; NODES_MAX],
    first: &[Option<u32>; NODES_MAX],
) -> [Option<NodeAddresses>; NODES_MAX] {
    let mut out = [None; NODES_MAX];
    for n in 0..NODES_MAX {
        let configured = configured_incarnation(c, n as NodeId, first[n]);
        out[n] = records[n]
            .filter(|r| configured == Some(r.incarnation))
            .map(|r| r.addresses);
    }
    out
}

/// Per node, the verbs endpoint in `addresses` at its data address
/// (`None` where a node published none).
pub fn verbs_peers(
    addresses: &[Option<NodeAddresses>; NODES_MAX],
) -> [Option<splitkv_nic::net::verbs::VerbsPeer>; NODES_MAX] {
    addresses.map(|a| a.and_then(|a| Some(a.verbs?.at(a.data))))
}

#[cfg(test)]
#[path = "address_tests.rs"]
mod tests;

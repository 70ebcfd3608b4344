//! Peer descriptions: where a UD datagram goes (GID or LID, queue pair
//! number, QKey) and the data address the membership knows the peer by,
//! parsed from config-like text with typed errors; and the peer table
//! that tells a received datagram's source (source QPN with its GID or
//! LID) apart from strangers and from a re-pointed peer's former
//! endpoint.
//!
//! Text form, comma-separated `key=value` pairs in any order:
//! `addr=10.0.0.2:7100,gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111`
//! (RoCE: a GID, written as an IPv6 address; an IPv4 address is taken as
//! its IPv4-mapped GID, RoCE v2's convention) or
//! `addr=10.0.0.2:7100,lid=3,qpn=418,qkey=0x11111111` (InfiniBand: a LID,
//! no GRH). Numbers are decimal or `0x` hexadecimal.

use splitkv_layout::wire::NodeId;
use std::net::{IpAddr, SocketAddr};

/// Largest queue pair number (QPNs are 24 bits).
pub const VERBS_QPN_MAX: u32 = 0x00FF_FFFF;

/// A 128-bit global identifier (RoCE: the interface's IPv6 or
/// IPv4-mapped address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID written as an IP address (IPv4: its IPv4-mapped form).
    pub fn from_ip(ip: IpAddr) -> Gid {
        match ip {
            IpAddr::V4(v4) => Gid(v4.to_ipv6_mapped().octets()),
            IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }
}

/// How datagrams reach a peer's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// Routed by GID, with a GRH (RoCE, or InfiniBand across subnets).
    Gid(Gid),
    /// By local identifier, no GRH (InfiniBand within a subnet).
    Lid(u16),
}

/// One peer's UD endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerbsPeer {
    /// The data address the membership names the peer by (what
    /// [`crate::net::Transport::set_peer_address`] is given).
    pub addr: SocketAddr,
    /// How to reach its port.
    pub route: Route,
    /// Its queue pair number (at most [`VERBS_QPN_MAX`]).
    pub qpn: u32,
    /// The QKey its queue pair accepts.
    pub qkey: u32,
}

impl VerbsPeer {
    /// Its endpoint without the data address.
    pub fn address(&self) -> VerbsAddress {
        VerbsAddress {
            route: self.route,
            qpn: self.qpn,
            qkey: self.qkey,
        }
    }
}

/// A UD endpoint as its node publishes it (the membership's address
/// record): route, QPN and QKey; the data address travels beside it.
/// Text form: [`VerbsPeer`]'s without `addr`
/// (`gid=::ffff:10.0.0.2,qpn=0x1a2,qkey=0x11111111`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VerbsAddress {
    /// How to reach its port.
    pub route: Route,
    /// Its queue pair number (1 ..= [`VERBS_QPN_MAX`]).
    pub qpn: u32,
    /// The QKey its queue pair accepts.
    pub qkey: u32,
}

impl VerbsAddress {
    /// The peer at data address `addr` with this endpoint.
    pub fn at(self, addr: SocketAddr) -> VerbsPeer {
        VerbsPeer {
            addr,
            route: self.route,
            qpn: self.qpn,
            qkey: self.qkey,
        }
    }
}

impl std::fmt::Display for VerbsAddress {
    /// The text form `str::parse` reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.route {
            Route::Gid(g) => write!(f, "gid={}", std::net::Ipv6Addr::from(g.0))?,
            Route::Lid(l) => write!(f, "lid={l}")?,
        }
        write!(f, ",qpn={:#x},qkey={:#x}", self.qpn, self.qkey)
    }
}

impl std::str::FromStr for VerbsAddress {
    type Err = PeerParseError;

    /// Parses the text form (gid or lid, qpn, qkey; no addr).
    fn from_str(s: &str) -> Result<VerbsAddress, PeerParseError> {
        let addr_given = s
            .split(',')
            .any(|p| p.split_once('=').is_some_and(|(k, _)| k.trim() == "addr"));
        if addr_given {
            return Err(PeerParseError::AddrInEndpoint);
        }
        // Any address: only the other fields are kept.
        let placeholder = SocketAddr::from(([0, 0, 0, 0], 0));
        Ok(format!("addr={placeholder},{s}")
            .parse::<VerbsPeer>()?
            .address())
    }
}

impl std::fmt::Display for VerbsPeer {
    /// The text form `str::parse` reads back (GID as an IPv6
    /// address, QPN and QKey in hexadecimal).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "addr={},{}", self.addr, self.address())
    }
}

/// Why a peer description did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerParseError {
    /// A part without `=`.
    #[error("`{part}` is not key=value")]
    NotKeyValue {
        /// The part.
        part: String,
    },
    /// A key other than addr, gid, lid, qpn, qkey.
    #[error("unknown key `{key}` (expected addr, gid, lid, qpn, qkey)")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// `addr` in an endpoint's text form ([`VerbsAddress`]): the data
    /// address travels beside it.
    #[error("addr is not part of an endpoint (the data address travels beside it)")]
    AddrInEndpoint,
    /// A key given twice.
    #[error("key `{key}` given twice")]
    Duplicate {
        /// The key.
        key: &'static str,
    },
    /// A value that does not parse for its key.
    #[error("bad {key} `{value}`")]
    BadValue {
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
    },
    /// A required key is missing.
    #[error("missing {key}")]
    Missing {
        /// The key.
        key: &'static str,
    },
    /// Both a GID and a LID: one route only.
    #[error("give gid or lid, not both")]
    TwoRoutes,
    /// A QPN past 24 bits (or 0, reserved for management).
    #[error("qpn {qpn:#x} is not in 1..={max:#x}", max = VERBS_QPN_MAX)]
    QpnRange {
        /// The number given.
        qpn: u32,
    },
    /// LID 0 is not a valid unicast LID.
    #[error("lid 0 is not a unicast LID")]
    ZeroLid,
}

fn number(key: &'static str, v: &str) -> Result<u64, PeerParseError> {
    let bad = || PeerParseError::BadValue {
        key,
        value: v.to_string(),
    };
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).map_err(|_| bad()),
        None => v.parse().map_err(|_| bad()),
    }
}

fn set<T>(slot: &mut Option<T>, key: &'static str, v: T) -> Result<(), PeerParseError> {
    if slot.replace(v).is_some() {
        return Err(PeerParseError::Duplicate { key });
    }
    Ok(())
}

impl std::str::FromStr for VerbsPeer {
    type Err = PeerParseError;

    /// Parses the text form (module documentation).
    fn from_str(s: &str) -> Result<VerbsPeer, PeerParseError> {
        let (mut addr, mut gid, mut lid, mut qpn, mut qkey) = (None, None, None, None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| PeerParseError::NotKeyValue {
                    part: part.to_string(),
                })?;
            let (k, v) = (k.trim(), v.trim());
            let bad = |key| PeerParseError::BadValue {
                key,
                value: v.to_string(),
            };
            match k {
                "addr" => set(
                    &mut addr,
                    "addr",
                    v.parse::<SocketAddr>().map_err(|_| bad("addr"))?,
                )?,
                "gid" => set(
                    &mut gid,
                    "gid",
                    v.parse::<IpAddr>().map_err(|_| bad("gid"))?,
                )?,
                "lid" => {
                    let n = u16::try_from(number("lid", v)?).map_err(|_| bad("lid"))?;
                    set(&mut lid, "lid", n)?
                }
                "qpn" => {
                    let n = u32::try_from(number("qpn", v)?).map_err(|_| bad("qpn"))?;
                    set(&mut qpn, "qpn", n)?
                }
                "qkey" => {
                    let n = u32::try_from(number("qkey", v)?).map_err(|_| bad("qkey"))?;
                    set(&mut qkey, "qkey", n)?
                }
                _ => return Err(PeerParseError::UnknownKey { key: k.to_string() }),
            }
        }
        let route = match (gid, lid) {
            (Some(_), Some(_)) => return Err(PeerParseError::TwoRoutes),
            (Some(ip), None) => Route::Gid(Gid::from_ip(ip)),
            (None, Some(0)) => return Err(PeerParseError::ZeroLid),
            (None, Some(l)) => Route::Lid(l),
            (None, None) => return Err(PeerParseError::Missing { key: "gid or lid" }),
        };
        let qpn = qpn.ok_or(PeerParseError::Missing { key: "qpn" })?;
        if qpn == 0 || qpn > VERBS_QPN_MAX {
            return Err(PeerParseError::QpnRange { qpn });
        }
        Ok(VerbsPeer {
            addr: addr.ok_or(PeerParseError::Missing { key: "addr" })?,
            route,
            qpn,
            qkey: qkey.ok_or(PeerParseError::Missing { key: "qkey" })?,
        })
    }
}

/// A received datagram's source as the completion and GRH give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The sender's queue pair number (`wc.src_qp`).
    pub qpn: u32,
    /// The sender's route: its GID from the GRH when one was present,
    /// else its LID (`wc.slid`).
    pub route: Route,
}

/// Whom a source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceLookup {
    /// A current peer.
    Peer(NodeId),
    /// An endpoint a peer had before it was re-pointed.
    Former,
    /// Nobody known.
    Stranger,
}

/// Most former endpoints remembered (older ones count as strangers).
pub const VERBS_FORMER_ENDPOINTS_MAX: usize = 64;

/// The peers (index = [`NodeId`]; `None` for a node with no endpoint yet,
/// this node's own entry among them) and the former endpoints of
/// re-pointed peers.
#[derive(Debug, Clone, Default)]
pub struct PeerTable {
    peers: Vec<Option<VerbsPeer>>,
    former: std::collections::VecDeque<(u32, Route)>,
}

impl PeerTable {
    /// A table of `peers`.
    pub fn new(peers: Vec<Option<VerbsPeer>>) -> PeerTable {
        PeerTable {
            peers,
            former: std::collections::VecDeque::with_capacity(VERBS_FORMER_ENDPOINTS_MAX),
        }
    }

    /// Node `node`'s endpoint, if it has one.
    pub fn get(&self, node: NodeId) -> Option<&VerbsPeer> {
        self.peers.get(usize::from(node)).and_then(Option::as_ref)
    }

    /// Entries (nodes) in the table.
    pub fn len(&self) -> usize {
        self.peers.len()
    }

    /// Whether the table has no entries.
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// The node whose data address is `addr`, if any.
    pub fn node_at(&self, addr: SocketAddr) -> Option<NodeId> {
        self.peers
            .iter()
            .position(|p| p.is_some_and(|p| p.addr == addr))
            .and_then(|i| NodeId::try_from(i).ok())
    }

    /// Replaces `node`'s endpoint with `peer`, remembering the old one as
    /// former. Returns whether it changed; `None` when `node` is outside
    /// the table.
    pub fn repoint(&mut self, node: NodeId, peer: VerbsPeer) -> Option<bool> {
        let entry = self.peers.get_mut(usize::from(node))?;
        if *entry == Some(peer) {
            return Some(false);
        }
        if let Some(old) = entry.replace(peer) {
            if self.former.len() == VERBS_FORMER_ENDPOINTS_MAX {
                self.former.pop_front();
            }
            self.former.push_back((old.qpn, old.route));
        }
        Some(true)
    }

    /// Who sent from `src`. O(peers): a cluster has few nodes.
    pub fn lookup(&self, src: Source) -> SourceLookup {
        let found = self
            .peers
            .iter()
            .position(|p| p.is_some_and(|p| p.qpn == src.qpn && p.route == src.route));
        match found.and_then(|i| NodeId::try_from(i).ok()) {
            Some(node) => SourceLookup::Peer(node),
            None if self.former.contains(&(src.qpn, src.route)) => SourceLookup::Former,
            None => SourceLookup::Stranger,
        }
    }
}

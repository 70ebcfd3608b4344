//! `--replace NODE@SECS` (a replacement machine: a new machine replaces a dead
//! node): the `--kill`ed node's new process starts as `--restart`'s does, but
//! at fresh addresses instead of the file's — the loopback address
//! [`REPLACEMENT_HOST_V4`] (or `::1` for a node of an IPv6 file) with ports the
//! operating system picks — standing for another machine (`splitkv node
//! --data-address --control-address`). It publishes them through its etcd
//! membership; the peers re-point their transports once a configuration admits
//! it. The bench then reaches it at its new control address
//! ([`Deployed::control_of`]) for its status, its load and its results;
//! everything else is the restart's ([`super::restart`]).

use super::{bad, Deployed};
use crate::Failure;
use splitkv_host::deploy::{ClusterConfig, MembershipSettings};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};

/// The replacement's IPv4 address: on loopback, but not the file's
/// `127.0.0.1`, so its packets come from another address than its
/// predecessor's.
pub const REPLACEMENT_HOST_V4: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Where a replacement node listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Moved {
    /// Its data address (UDP).
    pub data: SocketAddr,
    /// Its control address (HTTP).
    pub control: SocketAddr,
}

/// Checks that `config` can carry a replacement: the membership must
/// publish a moved node's address (etcd).
///
/// # Errors
/// One line naming `--replace` for a static membership.
pub(super) fn check(config: &ClusterConfig) -> Result<(), Failure> {
    if config.membership == MembershipSettings::Static {
        return Err(bad(
            "--replace needs [membership] kind = \"etcd\" in the cluster file: the peers learn the replacement's address from it",
        ));
    }
    Ok(())
}

/// Fresh addresses for a replacement of `node` of `config`: a UDP and a
/// TCP port the operating system picks (bound, then released, so the node
/// can bind them; a port lost meanwhile makes the node exit, which the
/// bench reports) on [`REPLACEMENT_HOST_V4`], or `::1` when the node's
/// data address is IPv6.
///
/// # Errors
/// The host has no such address, or no port is free.
fn fresh_addresses(config: &ClusterConfig, node: u16) -> Result<Moved, String> {
    let v6 = config.node(node).is_some_and(|n| n.data.is_ipv6());
    let host = if v6 {
        IpAddr::V6(Ipv6Addr::LOCALHOST)
    } else {
        IpAddr::V4(REPLACEMENT_HOST_V4)
    };
    let no_port = |e: std::io::Error| format!("--replace: no free port on {host}: {e}");
    let udp = UdpSocket::bind((host, 0)).map_err(no_port)?;
    let tcp = TcpListener::bind((host, 0)).map_err(no_port)?;
    let data = udp.local_addr().map_err(no_port)?;
    let control = tcp.local_addr().map_err(no_port)?;
    Ok(Moved { data, control })
}

impl Deployed {
    /// Starts the `--restart` or `--replace` node's new process: at the
    /// file's addresses, or (replace) at fresh ones, which the bench uses
    /// for it from now on.
    pub(super) fn start_again(&mut self, node: u16) -> Result<(), Failure> {
        let replace = self.restart.as_ref().is_some_and(|r| r.replace);
        let moved = match replace {
            true => Some(fresh_addresses(&self.config, node).map_err(bad)?),
            false => None,
        };
        let spawned = self
            .spawned
            .as_mut()
            .ok_or_else(|| bad("a node can be restarted only with --spawn"))?;
        match moved {
            Some(m) => spawned.replace(node, m.data, m.control),
            None => spawned.restart(node),
        }
        .map_err(bad)?;
        if let Some(r) = self.restart.as_mut() {
            r.moved = moved;
        }
        Ok(())
    }

    /// Where `node`'s control endpoint is: the file's address, or the
    /// replacement's once `--replace` started it.
    pub(super) fn control_of(&self, node: u16) -> SocketAddr {
        let moved = self
            .restart
            .as_ref()
            .filter(|r| r.at.node == node)
            .and_then(|r| r.moved);
        match moved {
            Some(m) => m.control,
            None => self.config.nodes[node as usize].control,
        }
    }
}

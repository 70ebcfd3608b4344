//! `[transport]` and a node's `transport = { … }`: how a node sends
//! packets — kernel UDP, in-process channels, DPDK (kernel bypass,
//! Dandelion §5; the transport is `splitkv_nic::net::dpdk`), or RDMA
//! verbs (unreliable datagrams; its fields are in [`super::verbs`]).
//!
//! A DPDK node needs, besides the UDP fields it shares (`mtu` and the
//! injected faults):
//!
//! ```toml
//! [transport]
//! kind = "dpdk"
//! device = "net_af_packet0"       # the ethdev port EAL finds (a --vdev name or a PCI address)
//! eal_args = ["--vdev=net_af_packet0,iface=eth0", "--no-pci"]
//! mbufs = 4095                    # the transport's mempool
//! rx_descriptors = 1024
//! tx_descriptors = 1024
//! neighbours = [{ ip = "10.0.0.9", mac = "02:00:00:00:00:09" }]  # machines that may replace a node
//!
//! [[node]]
//! id = 0
//! data = "10.0.0.1:7100"          # IPv4 address and UDP port of its frames
//! mac = "02:00:00:00:00:01"       # every node's, when any node runs DPDK
//! ```
//!
//! Parsing and checking need no DPDK: the bounds are
//! `splitkv_nic::net::dpdk`'s `DPDK_*` constants, built without the feature.
//! Only building the transport (`crate::deploy::node_transport`) needs the
//! cargo feature `dpdk`. The EAL arguments a node passes are its defaults
//! followed by the file's ([`DpdkSettings::eal_args_for`]).

use std::net::Ipv4Addr;

use splitkv_nic::net::dpdk::{
    MacAddr, DPDK_DESCRIPTORS_DEFAULT, DPDK_DESCRIPTORS_MAX, DPDK_MBUFS_DEFAULT, DPDK_MBUFS_MAX,
    DPDK_MBUFS_MIN, DPDK_MTU_DEFAULT, DPDK_MTU_MAX, DPDK_MTU_MIN, DPDK_NEIGHBOURS_MAX,
};

use super::raw::{RawNeighbour, RawTransport};
use super::verbs::{self, VerbsSettings};
use super::ConfigError;

/// Smallest transport MTU (bytes of one splitkv packet, headers included):
/// below it a packet holds too few messages to be worth sending.
pub const MTU_MIN: usize = 512;
/// Largest transport MTU: [`splitkv_layout::wire::PACKET_BYTES_MAX`] (a jumbo frame's payload).
/// A DPDK node's is at most [`DPDK_MTU_MAX`] (a 9000-byte frame's UDP payload).
pub const MTU_MAX: usize = splitkv_layout::wire::PACKET_BYTES_MAX;
/// Default MTU: a standard 1500-byte Ethernet frame less its IPv4 (20 B) and
/// UDP (8 B) headers.
pub const MTU_DEFAULT: usize = 1500 - 20 - 8;
/// Default socket send and receive buffer size (bytes, `SO_SNDBUF`/`SO_RCVBUF`).
pub const SOCKET_BUFFER_BYTES_DEFAULT: usize = 4 << 20;
/// Smallest socket buffer size a cluster file may ask for (bytes).
pub const SOCKET_BUFFER_BYTES_MIN: usize = 64 << 10;
/// Largest socket buffer size a cluster file may ask for (bytes).
pub const SOCKET_BUFFER_BYTES_MAX: usize = 1 << 30;
/// Largest injected fault rate, in parts per million (every packet).
pub const FAULT_PPM_MAX: u32 = 1_000_000;
/// Most `eal_args` a cluster file may give.
pub const EAL_ARGS_MAX: usize = 64;
/// Longest single EAL argument (bytes).
pub const EAL_ARG_BYTES_MAX: usize = 1024;
/// Longest DPDK `device` name (bytes; DPDK's `RTE_ETH_NAME_MAX_LEN` less its NUL).
pub const DPDK_DEVICE_BYTES_MAX: usize = 63;

// Every MTU the file accepts for a DPDK node is one the transport accepts,
// and both default to a standard frame's UDP payload.
const _: () = assert!(MTU_MIN >= DPDK_MTU_MIN && DPDK_MTU_MAX <= MTU_MAX);
const _: () = assert!(MTU_DEFAULT == DPDK_MTU_DEFAULT);

/// Which transport a node sends packets with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportKind {
    /// Kernel UDP sockets.
    Udp,
    /// In-process channels (every node in one process; tests).
    Mem,
    /// DPDK: Ethernet + IPv4 + UDP frames through a poll-mode driver, no
    /// system call per packet (needs the cargo feature `dpdk` to run).
    Dpdk,
    /// RDMA verbs: unreliable-datagram queue pairs (needs the cargo feature
    /// `verbs` and an RDMA device to run; [`super::verbs`]).
    Verbs,
}

impl TransportKind {
    /// The name the cluster file uses (`"udp"`, `"mem"`, `"dpdk"`, `"verbs"`).
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Udp => "udp",
            TransportKind::Mem => "mem",
            TransportKind::Dpdk => "dpdk",
            TransportKind::Verbs => "verbs",
        }
    }
}

/// `[transport]` (and a node's override): how a node sends packets. The
/// DPDK-only fields are in [`DpdkSettings`] ([`super::NodeSettings::dpdk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportSettings {
    /// Transport; default UDP.
    pub kind: TransportKind,
    /// Largest packet (bytes, splitkv headers included, IP/UDP excluded):
    /// [`MTU_MIN`] ..= [`MTU_MAX`] ([`DPDK_MTU_MAX`] on DPDK), default [`MTU_DEFAULT`];
    /// on verbs [`MTU_MIN`] ..= `VERBS_MTU_MAX` (GRH excluded), default
    /// `VERBS_MTU_DEFAULT` ([`super::verbs`]).
    pub mtu: usize,
    /// `SO_SNDBUF` (bytes): [`SOCKET_BUFFER_BYTES_MIN`] ..= [`SOCKET_BUFFER_BYTES_MAX`].
    pub socket_send_buffer_bytes: usize,
    /// `SO_RCVBUF` (bytes): [`SOCKET_BUFFER_BYTES_MIN`] ..= [`SOCKET_BUFFER_BYTES_MAX`].
    pub socket_recv_buffer_bytes: usize,
    /// Injected loss (tests): packets dropped per million, ≤ [`FAULT_PPM_MAX`]. Default 0.
    pub loss_ppm: u32,
    /// Injected duplication (tests): packets sent twice per million. Default 0.
    pub duplicate_ppm: u32,
    /// Injected reordering (tests): packets held back per million. Default 0.
    pub reorder_ppm: u32,
}

/// One `neighbours` entry: a machine that may take over a node's data
/// address (a replacement started with `--data-address`), so frames to its
/// IPv4 address go to its MAC (there is no ARP on DPDK).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Neighbour {
    /// Its IPv4 address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: MacAddr,
}

/// The DPDK fields of a node's transport (`kind = "dpdk"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpdkSettings {
    /// The ethdev port EAL finds: a `--vdev` name (`net_af_packet0`) or a
    /// PCI address; 1 ..= [`DPDK_DEVICE_BYTES_MAX`] bytes. Required.
    pub device: String,
    /// EAL arguments after the node's defaults (see [`DpdkSettings::eal_args_for`]):
    /// at most [`EAL_ARGS_MAX`], each 1 ..= [`EAL_ARG_BYTES_MAX`] bytes
    /// without NUL. Default none.
    pub eal_args: Vec<String>,
    /// Mbufs in the transport's pool: [`DPDK_MBUFS_MIN`] ..= [`DPDK_MBUFS_MAX`],
    /// default [`DPDK_MBUFS_DEFAULT`].
    pub mbufs: u32,
    /// RX descriptors asked for: 1 ..= [`DPDK_DESCRIPTORS_MAX`], default
    /// [`DPDK_DESCRIPTORS_DEFAULT`].
    pub rx_descriptors: u16,
    /// TX descriptors asked for: 1 ..= [`DPDK_DESCRIPTORS_MAX`], default
    /// [`DPDK_DESCRIPTORS_DEFAULT`].
    pub tx_descriptors: u16,
    /// IPv4 → MAC of machines that may replace a node, at most
    /// [`DPDK_NEIGHBOURS_MAX`], each IPv4 address once.
    pub neighbours: Vec<Neighbour>,
}

impl DpdkSettings {
    /// The EAL arguments of a node whose polling threads may run on `cpus`
    /// (its `cores`, or with none the CPUs the process may use): the
    /// node's defaults, then [`DpdkSettings::eal_args`]. Each default is
    /// left out when the file's arguments already say it:
    ///
    /// - `--no-telemetry` (unless `--telemetry`): components spawn no threads;
    /// - `--in-memory`, or `--no-shconf` beside `--no-huge` (DPDK 22.11
    ///   refuses `--in-memory --no-huge`), unless `--in-memory`,
    ///   `--no-shconf` or `--file-prefix` is given: two node processes on one
    ///   machine are then both primaries;
    /// - `--lcores=0@(CPUS)` (unless `-l`, `-c` or `--lcores`): one lcore,
    ///   on the node's CPUs, so EAL starts no worker thread.
    pub fn eal_args_for(&self, cpus: &[usize]) -> Vec<String> {
        let given = |names: &[&str]| {
            self.eal_args.iter().any(|a| {
                names.iter().any(|n| {
                    a == n || a.starts_with(&format!("{n}=")) || (n.len() == 2 && a.starts_with(n))
                })
            })
        };
        let mut args = Vec::new();
        if !given(&["--no-telemetry", "--telemetry"]) {
            args.push("--no-telemetry".to_string());
        }
        if !given(&["--in-memory", "--no-shconf", "--file-prefix"]) {
            let private = if given(&["--no-huge"]) {
                "--no-shconf"
            } else {
                "--in-memory"
            };
            args.push(private.to_string());
        }
        if !given(&["-l", "-c", "--lcores"]) {
            let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
            args.push(match list.as_slice() {
                [] => "-l0".to_string(),
                [one] => format!("--lcores=0@{one}"),
                _ => format!("--lcores=0@({})", list.join(",")),
            });
        }
        args.extend(self.eal_args.iter().cloned());
        args
    }

    /// The MAC of `ip` in [`DpdkSettings::neighbours`], if listed.
    pub fn neighbour(&self, ip: Ipv4Addr) -> Option<MacAddr> {
        self.neighbours.iter().find(|n| n.ip == ip).map(|n| n.mac)
    }
}

/// `value` if it lies in `min ..= max`, else an error naming `field`.
pub(super) fn in_range(field: &str, value: u64, min: u64, max: u64) -> Result<u64, ConfigError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(ConfigError::invalid(
            field,
            format!("must be between {min} and {max}, got {value}"),
        ))
    }
}

/// A MAC address from the file, or [`ConfigError::BadMac`] naming `field`.
pub(super) fn mac(field: &str, text: &str) -> Result<MacAddr, ConfigError> {
    text.parse().map_err(|_| ConfigError::BadMac {
        field: field.to_string(),
        text: text.to_string(),
    })
}

/// Checks a `[transport]` table (or a node's merged one) whose fields are
/// named under `prefix`, filling in the defaults; the DPDK fields too when
/// the kind is `"dpdk"`, the verbs fields when it is `"verbs"`.
pub(super) fn check(
    prefix: &str,
    raw: &RawTransport,
) -> Result<
    (
        TransportSettings,
        Option<DpdkSettings>,
        Option<VerbsSettings>,
    ),
    ConfigError,
> {
    let kind = match raw.kind.as_deref() {
        None | Some("udp") => TransportKind::Udp,
        Some("mem") => TransportKind::Mem,
        Some("dpdk") => TransportKind::Dpdk,
        Some("verbs") => TransportKind::Verbs,
        Some(other) => {
            return Err(ConfigError::invalid(
                format!("{prefix}.kind"),
                format!(
                "unknown transport \"{other}\" (expected \"udp\", \"mem\", \"dpdk\" or \"verbs\")"
            ),
            ))
        }
    };
    let mtu_max = if kind == TransportKind::Dpdk {
        DPDK_MTU_MAX
    } else {
        MTU_MAX
    };
    let mtu = match kind {
        TransportKind::Verbs => verbs::check_mtu(prefix, raw)? as u64,
        _ => in_range(
            &format!("{prefix}.mtu"),
            raw.mtu.unwrap_or(MTU_DEFAULT as u64),
            MTU_MIN as u64,
            mtu_max as u64,
        )?,
    };
    let buffer = |name: &str, value: Option<u64>| {
        let field = format!("{prefix}.{name}");
        let value = value.unwrap_or(SOCKET_BUFFER_BYTES_DEFAULT as u64);
        let min = SOCKET_BUFFER_BYTES_MIN as u64;
        in_range(&field, value, min, SOCKET_BUFFER_BYTES_MAX as u64).map(|v| v as usize)
    };
    let ppm = |name: &str, value: Option<u32>| {
        let field = format!("{prefix}.{name}");
        in_range(&field, value.unwrap_or(0).into(), 0, FAULT_PPM_MAX.into()).map(|v| v as u32)
    };
    let settings = TransportSettings {
        kind,
        mtu: mtu as usize,
        socket_send_buffer_bytes: buffer("socket_send_buffer_bytes", raw.socket_send_buffer_bytes)?,
        socket_recv_buffer_bytes: buffer("socket_recv_buffer_bytes", raw.socket_recv_buffer_bytes)?,
        loss_ppm: ppm("loss_ppm", raw.loss_ppm)?,
        duplicate_ppm: ppm("duplicate_ppm", raw.duplicate_ppm)?,
        reorder_ppm: ppm("reorder_ppm", raw.reorder_ppm)?,
    };
    let dpdk = match kind {
        TransportKind::Dpdk => Some(check_dpdk(prefix, raw)?),
        _ => None,
    };
    let verbs = match kind {
        TransportKind::Verbs => Some(verbs::check(prefix, raw)?),
        _ => None,
    };
    Ok((settings, dpdk, verbs))
}

/// The DPDK fields of a `kind = "dpdk"` transport.
fn check_dpdk(prefix: &str, raw: &RawTransport) -> Result<DpdkSettings, ConfigError> {
    let field = |name: &str| format!("{prefix}.{name}");
    let device = raw.device.clone().ok_or_else(|| {
        ConfigError::invalid(
            field("device"),
            "required with kind = \"dpdk\" (the ethdev port, e.g. \"net_af_packet0\" or a PCI address)",
        )
    })?;
    if device.is_empty() || device.len() > DPDK_DEVICE_BYTES_MAX || device.contains('\0') {
        return Err(ConfigError::invalid(
            field("device"),
            format!("must be 1 ..= {DPDK_DEVICE_BYTES_MAX} bytes without NUL"),
        ));
    }
    let eal_args = raw.eal_args.clone().unwrap_or_default();
    if eal_args.len() > EAL_ARGS_MAX {
        return Err(ConfigError::invalid(
            field("eal_args"),
            format!("at most {EAL_ARGS_MAX} arguments, got {}", eal_args.len()),
        ));
    }
    for (i, a) in eal_args.iter().enumerate() {
        if a.is_empty() || a.len() > EAL_ARG_BYTES_MAX || a.contains('\0') {
            return Err(ConfigError::invalid(
                format!("{prefix}.eal_args[{i}]"),
                format!("must be 1 ..= {EAL_ARG_BYTES_MAX} bytes without NUL"),
            ));
        }
    }
    let mbufs = raw.mbufs.unwrap_or(DPDK_MBUFS_DEFAULT.into());
    let mbufs = in_range(
        &field("mbufs"),
        mbufs,
        DPDK_MBUFS_MIN.into(),
        DPDK_MBUFS_MAX.into(),
    )?;
    let descriptors = |name: &str, value: Option<u64>| {
        let value = value.unwrap_or(DPDK_DESCRIPTORS_DEFAULT.into());
        in_range(&field(name), value, 1, DPDK_DESCRIPTORS_MAX.into()).map(|v| v as u16)
    };
    Ok(DpdkSettings {
        device,
        eal_args,
        mbufs: mbufs as u32,
        rx_descriptors: descriptors("rx_descriptors", raw.rx_descriptors)?,
        tx_descriptors: descriptors("tx_descriptors", raw.tx_descriptors)?,
        neighbours: check_neighbours(prefix, raw.neighbours.as_deref().unwrap_or_default())?,
    })
}

fn check_neighbours(prefix: &str, raw: &[RawNeighbour]) -> Result<Vec<Neighbour>, ConfigError> {
    if raw.len() > DPDK_NEIGHBOURS_MAX {
        return Err(ConfigError::invalid(
            format!("{prefix}.neighbours"),
            format!("at most {DPDK_NEIGHBOURS_MAX} entries, got {}", raw.len()),
        ));
    }
    let mut out: Vec<Neighbour> = Vec::with_capacity(raw.len());
    for (i, n) in raw.iter().enumerate() {
        let field = format!("{prefix}.neighbours[{i}]");
        let ip: Ipv4Addr = n.ip.parse().map_err(|_| {
            ConfigError::invalid(
                format!("{field}.ip"),
                format!("\"{}\" is not an IPv4 address", n.ip),
            )
        })?;
        if out.iter().any(|o| o.ip == ip) {
            return Err(ConfigError::invalid(
                format!("{field}.ip"),
                format!("{ip} is listed twice"),
            ));
        }
        let mac = mac(&format!("{field}.mac"), &n.mac)?;
        out.push(Neighbour { ip, mac });
    }
    Ok(out)
}

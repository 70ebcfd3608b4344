//! `[transport] kind = "verbs"`: RDMA unreliable datagrams (FaSST, eRPC;
//! Dandelion §8.3's inline sends) through `splitkv_nic::net::verbs`.
//!
//! ```toml
//! [transport]
//! kind = "verbs"
//! device = "mlx5_0"        # optional: the first RDMA device when left out
//! port = 1                 # the device's port (1-based)
//! gid_index = 3            # RoCE v2: the port's IPv4-mapped GID (`show_gids`)
//! qkey = 0x11111111        # every node's the same; high bit clear
//! mtu = 1024               # bytes of packet, at most the path MTU (4096)
//! recv_depth = 512         # receives kept posted
//! send_depth = 256         # sends outstanding
//! signal_every = 32        # one send in this many is signalled
//! inline_bytes = 188       # inline bytes asked of the device (0: none)
//!
//! [membership]
//! kind = "etcd"            # required: peers learn each other's queue pair there
//! endpoints = ["http://10.0.0.9:2379"]
//! ```
//!
//! **Where peers learn a node's endpoint.** The device chooses a queue pair's
//! number when the node creates it, so no file can name it in advance. Each
//! node publishes its endpoint (GID or LID, QPN, QKey) in the etcd address
//! record it already writes with its registration (`addresses/<node>`, under
//! its lease, in the transaction that takes its member key), and peers read it
//! with the same snapshot that tells them the node's data address. That record
//! was chosen over the control endpoint (peers would poll each other over
//! HTTP, with a second source of truth about which process is the node) and
//! over a static `[[node]]` field (it cannot know a QPN the device chooses):
//! the record names exactly the process the configuration admits, and a
//! replaced or restarted node's new queue pair travels with its new
//! incarnation. So a verbs file needs `[membership] kind = "etcd"`, and every
//! node's transport is verbs (a UD queue pair cannot reach a UDP socket).
//!
//! Parsing and checking need no rdma-core: the bounds are
//! `splitkv_nic::net::verbs`'s `VERBS_*` constants, built without the feature.

use splitkv_nic::net::verbs::pool::VERBS_SLOTS_MAX;
use splitkv_nic::net::verbs::{
    VerbsConfig, VERBS_DEPTH_MAX, VERBS_INLINE_REQUEST_DEFAULT, VERBS_MTU_DEFAULT, VERBS_MTU_MAX,
    VERBS_QKEY_DEFAULT, VERBS_RECV_DEPTH_DEFAULT, VERBS_SEND_DEPTH_DEFAULT,
    VERBS_SIGNAL_EVERY_DEFAULT,
};

use super::raw::RawTransport;
use super::transport::{in_range, MTU_MIN};
use super::ConfigError;

/// Longest RDMA device name (bytes; libibverbs' `IBV_SYSFS_NAME_MAX` less
/// its NUL).
pub const VERBS_DEVICE_BYTES_MAX: usize = 63;
/// Largest inline request a file may make (bytes): no packet is longer
/// than the largest MTU.
pub const VERBS_INLINE_BYTES_MAX: u32 = VERBS_MTU_MAX as u32;
/// The QKey bit that marks a privileged (controlled) QKey: a process
/// without `CAP_NET_RAW` cannot send with one, so the file refuses it.
pub const VERBS_QKEY_PRIVILEGED_BIT: u32 = 1 << 31;

// The file's smallest MTU is one the transport accepts; its default is the
// transport's.
const _: () = assert!(MTU_MIN >= splitkv_nic::net::verbs::VERBS_MTU_MIN);
const _: () = assert!(MTU_MIN <= VERBS_MTU_DEFAULT && VERBS_MTU_DEFAULT <= VERBS_MTU_MAX);
const _: () = assert!(VERBS_QKEY_DEFAULT & VERBS_QKEY_PRIVILEGED_BIT == 0);
// Any two depths the file accepts fit the registered pool.
const _: () = assert!(2 * VERBS_DEPTH_MAX <= VERBS_SLOTS_MAX);

/// The verbs fields of a node's transport (`kind = "verbs"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsSettings {
    /// The RDMA device (`mlx5_0`, `rxe0`), 1 ..= [`VERBS_DEVICE_BYTES_MAX`]
    /// bytes; `None`: the first device found.
    pub device: Option<String>,
    /// The device's port, 1-based (1 ..= 255), default 1.
    pub port: u8,
    /// The GID table index (0 ..= 255), default 0.
    pub gid_index: u8,
    /// The cluster's QKey, high bit ([`VERBS_QKEY_PRIVILEGED_BIT`]) clear,
    /// default [`VERBS_QKEY_DEFAULT`].
    pub qkey: u32,
    /// Receives kept posted: 1 ..= [`VERBS_DEPTH_MAX`], default
    /// [`VERBS_RECV_DEPTH_DEFAULT`].
    pub recv_depth: u32,
    /// Sends outstanding: 1 ..= [`VERBS_DEPTH_MAX`], default
    /// [`VERBS_SEND_DEPTH_DEFAULT`] (with `recv_depth`, within the pool's
    /// [`VERBS_SLOTS_MAX`] slots).
    pub send_depth: u32,
    /// One send in this many is signalled: 1 ..= `send_depth`, default
    /// [`VERBS_SIGNAL_EVERY_DEFAULT`] (or `send_depth` if smaller).
    pub signal_every: u32,
    /// Inline bytes asked of the device: 0 ..= [`VERBS_INLINE_BYTES_MAX`],
    /// default [`VERBS_INLINE_REQUEST_DEFAULT`].
    pub inline_bytes: u32,
}

impl VerbsSettings {
    /// The transport's configuration for packets of `mtu` bytes, with no
    /// peer known yet for any of `nodes` nodes (peers are learnt from the
    /// membership's address records).
    pub fn verbs_config(&self, mtu: usize, nodes: usize) -> VerbsConfig {
        VerbsConfig {
            device: self.device.clone(),
            port: self.port,
            gid_index: self.gid_index,
            qkey: self.qkey,
            mtu,
            recv_depth: self.recv_depth,
            send_depth: self.send_depth,
            signal_every: self.signal_every,
            inline_request: self.inline_bytes,
            peers: vec![None; nodes],
        }
    }
}

/// The MTU of a verbs transport: [`MTU_MIN`] ..= [`VERBS_MTU_MAX`], default
/// [`VERBS_MTU_DEFAULT`] (RoCE's usual path MTU on 1500-byte Ethernet).
pub(super) fn check_mtu(prefix: &str, raw: &RawTransport) -> Result<usize, ConfigError> {
    let mtu = raw.mtu.unwrap_or(VERBS_MTU_DEFAULT as u64);
    in_range(
        &format!("{prefix}.mtu"),
        mtu,
        MTU_MIN as u64,
        VERBS_MTU_MAX as u64,
    )
    .map(|v| v as usize)
}

/// The verbs fields of a `kind = "verbs"` transport whose fields are named
/// under `prefix`.
pub(super) fn check(prefix: &str, raw: &RawTransport) -> Result<VerbsSettings, ConfigError> {
    let field = |name: &str| format!("{prefix}.{name}");
    if let Some(d) = &raw.device {
        if d.is_empty() || d.len() > VERBS_DEVICE_BYTES_MAX || d.contains('\0') {
            return Err(ConfigError::invalid(
                field("device"),
                format!("must be 1 ..= {VERBS_DEVICE_BYTES_MAX} bytes without NUL"),
            ));
        }
    }
    let port = in_range(&field("port"), raw.port.unwrap_or(1), 1, u8::MAX.into())? as u8;
    let gid_index = in_range(
        &field("gid_index"),
        raw.gid_index.unwrap_or(0),
        0,
        u8::MAX.into(),
    )? as u8;
    let qkey = raw.qkey.unwrap_or(VERBS_QKEY_DEFAULT.into());
    let qkey = in_range(&field("qkey"), qkey, 0, u32::MAX.into())? as u32;
    if qkey & VERBS_QKEY_PRIVILEGED_BIT != 0 {
        return Err(ConfigError::invalid(
            field("qkey"),
            format!("{qkey:#x} has the high bit set (a privileged QKey); use one below 0x80000000"),
        ));
    }
    let depth = |name: &str, value: Option<u64>, default: u32| {
        let value = value.unwrap_or(default.into());
        in_range(&field(name), value, 1, VERBS_DEPTH_MAX.into()).map(|v| v as u32)
    };
    let recv_depth = depth("recv_depth", raw.recv_depth, VERBS_RECV_DEPTH_DEFAULT)?;
    let send_depth = depth("send_depth", raw.send_depth, VERBS_SEND_DEPTH_DEFAULT)?;
    let signal_every = raw
        .signal_every
        .unwrap_or(VERBS_SIGNAL_EVERY_DEFAULT.min(send_depth).into());
    let signal_every = in_range(&field("signal_every"), signal_every, 1, send_depth.into())? as u32;
    let inline_bytes = raw
        .inline_bytes
        .unwrap_or(VERBS_INLINE_REQUEST_DEFAULT.into());
    let inline_bytes = in_range(
        &field("inline_bytes"),
        inline_bytes,
        0,
        VERBS_INLINE_BYTES_MAX.into(),
    )? as u32;
    Ok(VerbsSettings {
        device: raw.device.clone(),
        port,
        gid_index,
        qkey,
        recv_depth,
        send_depth,
        signal_every,
        inline_bytes,
    })
}

//! The verbs transport's configuration, limits, errors and counters.

use super::addr::VerbsPeer;
use super::pool::VERBS_SLOTS_MAX;
use super::recv::RxDropCounts;
use super::wr::VERBS_GRH_BYTES;

/// Smallest MTU (bytes of packet, GRH excluded).
pub const VERBS_MTU_MIN: usize = 256;
/// Largest MTU: a UD message is at most one path MTU, 4096 B on
/// InfiniBand and RoCE.
pub const VERBS_MTU_MAX: usize = 4096;
/// Default MTU: RoCE's usual 1024 B path MTU on 1500 B Ethernet.
pub const VERBS_MTU_DEFAULT: usize = 1024;
/// Default receive queue depth (receives kept posted).
pub const VERBS_RECV_DEPTH_DEFAULT: u32 = 512;
/// Default send queue depth (sends outstanding).
pub const VERBS_SEND_DEPTH_DEFAULT: u32 = 256;
/// Largest queue depth asked of the device, each way.
pub const VERBS_DEPTH_MAX: u32 = 8192;
/// Default signalling period: one send in this many asks for a completion
/// (FaSST signals one in 64 on its UD queue pairs; eRPC one per batch).
pub const VERBS_SIGNAL_EVERY_DEFAULT: u32 = 32;
/// Most completions taken from a completion queue in one poll, and most
/// work requests chained in one post.
pub const VERBS_BURST_MAX: usize = 32;
/// The QKey the cluster's queue pairs use by default (high bit clear: a
/// non-privileged QKey).
pub const VERBS_QKEY_DEFAULT: u32 = 0x1111_1111;
/// Inline bytes asked of the device by default (Dandelion §8.3 uses the
/// NIC's limit, 188 B on its ConnectX parts; the device may grant more or
/// fewer, and the transport uses what it grants).
pub const VERBS_INLINE_REQUEST_DEFAULT: u32 = 188;

/// One endpoint's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsConfig {
    /// Device name (`mlx5_0`, `rxe0`); `None`: the first device.
    pub device: Option<String>,
    /// Port number on the device (1-based).
    pub port: u8,
    /// GID table index (RoCE v2 with an IPv4 address: usually the entry
    /// `ibv_devinfo -v` lists as its IPv4-mapped RoCE v2 GID).
    pub gid_index: u8,
    /// This cluster's QKey.
    pub qkey: u32,
    /// Largest packet in bytes ([`VERBS_MTU_MIN`]..=[`VERBS_MTU_MAX`]).
    pub mtu: usize,
    /// Receives kept posted (1..=[`VERBS_DEPTH_MAX`]).
    pub recv_depth: u32,
    /// Sends outstanding at most (1..=[`VERBS_DEPTH_MAX`]).
    pub send_depth: u32,
    /// One send in this many is signalled (clamped to `1..=send_depth`).
    pub signal_every: u32,
    /// Inline bytes asked of the device (0: no inline sends).
    pub inline_request: u32,
    /// The peers, index = node id; `None` for nodes with no endpoint yet
    /// (this node's own entry among them).
    pub peers: Vec<Option<VerbsPeer>>,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        VerbsConfig {
            device: None,
            port: 1,
            gid_index: 0,
            qkey: VERBS_QKEY_DEFAULT,
            mtu: VERBS_MTU_DEFAULT,
            recv_depth: VERBS_RECV_DEPTH_DEFAULT,
            send_depth: VERBS_SEND_DEPTH_DEFAULT,
            signal_every: VERBS_SIGNAL_EVERY_DEFAULT,
            inline_request: VERBS_INLINE_REQUEST_DEFAULT,
            peers: Vec::new(),
        }
    }
}

impl VerbsConfig {
    /// Bytes of one slot of the registered pool: the GRH and one packet.
    pub fn slot_bytes(&self) -> usize {
        VERBS_GRH_BYTES + self.mtu
    }

    /// Slots in the pool: every receive posted and every send outstanding
    /// can hold one.
    pub fn slots(&self) -> u32 {
        self.recv_depth + self.send_depth
    }

    /// Checks the bounds.
    ///
    /// # Errors
    /// [`VerbsError::BadConfig`] naming the field.
    pub fn check(&self) -> Result<(), VerbsError> {
        let bad = |field: &'static str, value: u64| Err(VerbsError::BadConfig { field, value });
        if !(VERBS_MTU_MIN..=VERBS_MTU_MAX).contains(&self.mtu) {
            return bad("mtu", self.mtu as u64);
        }
        if !(1..=VERBS_DEPTH_MAX).contains(&self.recv_depth) {
            return bad("recv_depth", self.recv_depth.into());
        }
        if !(1..=VERBS_DEPTH_MAX).contains(&self.send_depth) {
            return bad("send_depth", self.send_depth.into());
        }
        if self.slots() > VERBS_SLOTS_MAX {
            return bad("recv_depth + send_depth", self.slots().into());
        }
        if self.port == 0 {
            return bad("port", 0);
        }
        if self.peers.len() > usize::from(u16::MAX) {
            return bad("peers", self.peers.len() as u64);
        }
        Ok(())
    }
}

/// Why the transport could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerbsError {
    /// A configuration value out of bounds.
    #[error("verbs configuration: {field} = {value} is out of bounds")]
    BadConfig {
        /// The field.
        field: &'static str,
        /// Its value.
        value: u64,
    },
    /// No RDMA device (or none with the name asked for).
    #[error("no RDMA device{} ({available} found{}){}",
        wanted.as_ref().map(|w| format!(" named {w}")).unwrap_or_default(),
        if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) },
        if *errno != 0 { format!("; ibv_get_device_list: errno {errno}") } else { String::new() })]
    NoDevice {
        /// The name asked for, if any.
        wanted: Option<String>,
        /// Devices found.
        available: usize,
        /// Their names.
        names: Vec<String>,
        /// `errno` when the device list itself failed (e.g. `ENOSYS`:
        /// no kernel RDMA support), else 0.
        errno: i32,
    },
    /// A verbs call failed while setting up.
    #[error("RDMA device {device}: {step} failed (errno {errno})")]
    Setup {
        /// The device.
        device: String,
        /// The call (`ibv_create_qp`, ...).
        step: &'static str,
        /// Its `errno`.
        errno: i32,
    },
    /// The port is not active.
    #[error("RDMA device {device} port {port} is not active (state {state})")]
    PortDown {
        /// The device.
        device: String,
        /// The port.
        port: u8,
        /// `ibv_port_state` value.
        state: u32,
    },
}

/// Counters of one verbs endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// Packets posted for sending.
    pub tx_packets: u64,
    /// Of those, sent inline.
    pub tx_inline: u64,
    /// Of those, signalled.
    pub tx_signaled: u64,
    /// Packets taken and dropped: longer than the MTU.
    pub tx_too_long: u64,
    /// Packets taken and dropped: no endpoint for the destination.
    pub tx_unknown_peer: u64,
    /// `tx_burst` calls that stopped early: the send queue was full.
    pub tx_queue_full: u64,
    /// `tx_burst` calls that stopped early: the pool had no free slot.
    pub tx_pool_exhausted: u64,
    /// Send completions with an error status (the queue pair is then in
    /// the error state and sends no more).
    pub tx_completion_errors: u64,
    /// Posts the device refused (`ibv_post_send` / `ibv_post_recv`).
    pub post_errors: u64,
    /// Packets lent to the caller.
    pub rx_packets: u64,
    /// Received datagrams dropped, by reason.
    pub rx_dropped: RxDropCounts,
    /// Times the receive queue could not be topped up to its depth (no
    /// free slot).
    pub rx_topup_short: u64,
}

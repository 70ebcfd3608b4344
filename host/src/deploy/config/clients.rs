//! `[clients]`: applications in their own processes (DESIGN.md "Process
//! boundaries and placements"; L5 §III). Without the section a node takes
//! no application connections; with it, node N listens on the Unix socket
//! `<socket_dir>/node-N.sock` while its runtime runs (in `splitkv node`:
//! from the workload's load to the drain, `crate::clients::ClientService`),
//! so several nodes of one machine share the directory. Each connection brings its own shared memory with one request
//! ring and one outcome ring of the sizes below; the node checks the peer's
//! user id against `allowed_uids`.
//!
//! ```toml
//! [clients]
//! socket_dir = "/tmp/splitkv-7"    # absolute; default /tmp/splitkv-<cluster_id>
//! allowed_uids = [1000]            # default: only the node process's own user
//! request_ring_bytes = 262144      # power of two, RING_BYTES_MIN (128 KiB) ..= RING_BYTES_MAX (64 MiB)
//! outcome_ring_bytes = 262144      # power of two, RING_BYTES_MIN (128 KiB) ..= RING_BYTES_MAX (64 MiB)
//! in_flight_max = 32               # transactions in flight per connection
//! connections_max = 64             # connections open at once, per node
//! outcome_full_ms_max = 1000       # a client leaving its outcome ring full longer is disconnected
//! start = "on-load"                # or "empty": serve applications at once, from an empty store
//! ```

use super::raw::RawClients;
use super::ConfigError;
use splitkv_layout::app::memory::{APP_RING_CAPACITY_MAX_BYTES, APP_RING_CAPACITY_MIN_BYTES};
use splitkv_nic::NODES_MAX;
use std::path::{Path, PathBuf};

/// Bytes of a Unix socket path, without its terminating NUL
/// (`sockaddr_un.sun_path` holds 108 on Linux).
pub const SOCKET_PATH_BYTES_MAX: usize = 107;
/// Smallest ring a connection may use (bytes of its data area): one entry
/// of the largest request or outcome fits
/// ([`APP_RING_CAPACITY_MIN_BYTES`], 128 KiB).
pub const RING_BYTES_MIN: usize = APP_RING_CAPACITY_MIN_BYTES;
/// Largest ring a connection may use (bytes of its data area,
/// [`APP_RING_CAPACITY_MAX_BYTES`], 64 MiB).
pub const RING_BYTES_MAX: usize = APP_RING_CAPACITY_MAX_BYTES;
/// Default size of each of a connection's rings (bytes): two entries of
/// the largest transaction (16 values of 4 KiB) fit.
pub const RING_BYTES_DEFAULT: usize = 2 * APP_RING_CAPACITY_MIN_BYTES;
/// Most transactions in flight per connection a file may allow.
pub const IN_FLIGHT_MAX_MAX: usize = 4096;
/// Default transactions in flight per connection.
pub const IN_FLIGHT_MAX_DEFAULT: usize = 32;
/// Most connections a node may take at once, as a file may set it.
pub const CONNECTIONS_MAX_MAX: usize = 4096;
/// Default connections a node takes at once.
pub const CONNECTIONS_MAX_DEFAULT: usize = 64;
/// Default time a client may leave its outcome ring full (ms).
pub const OUTCOME_FULL_MS_DEFAULT: u64 = 1_000;
/// Longest time a file may let a client leave its outcome ring full (ms).
pub const OUTCOME_FULL_MS_MAX: u64 = 600_000;
/// Most user ids `allowed_uids` may list.
pub const ALLOWED_UIDS_MAX: usize = 64;

const _: () = assert!(RING_BYTES_DEFAULT.is_power_of_two());
const _: () = assert!(RING_BYTES_DEFAULT <= RING_BYTES_MAX);

/// When a node's runtime starts, and so when it takes application
/// connections (`[clients] start`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientsStart {
    /// When a workload is loaded (`splitkv bench … --cluster`); the default.
    #[default]
    OnLoad,
    /// At once, from an empty store with no built-in workload: the cluster
    /// serves applications only (a later load of a workload is refused).
    Empty,
}

/// Application connections of a node (`[clients]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// The directory of the nodes' sockets (absolute).
    pub socket_dir: PathBuf,
    /// User ids allowed to connect; `None`: only the node process's own.
    pub allowed_uids: Option<Vec<u32>>,
    /// Data-area bytes of a connection's request ring (power of two): the
    /// largest a client may bring; smaller powers of two down to
    /// [`RING_BYTES_MIN`] are accepted too.
    pub request_ring_bytes: usize,
    /// Data-area bytes of a connection's outcome ring (power of two), the
    /// largest a client may bring, as `request_ring_bytes`.
    pub outcome_ring_bytes: usize,
    /// Transactions in flight per connection, 1 ..= [`IN_FLIGHT_MAX_MAX`]:
    /// a client asking for more is granted this many.
    pub in_flight_max: usize,
    /// Connections open at once, 1 ..= [`CONNECTIONS_MAX_MAX`].
    pub connections_max: usize,
    /// How long a client may leave its outcome ring full before it is
    /// disconnected (ms, 1 ..= [`OUTCOME_FULL_MS_MAX`]).
    pub outcome_full_ms_max: u64,
    /// When the runtime starts serving them.
    pub start: ClientsStart,
}

impl ClientSettings {
    /// Settings with every field at its `[clients]` default but the socket
    /// directory: rings of [`RING_BYTES_DEFAULT`] bytes each way,
    /// [`IN_FLIGHT_MAX_DEFAULT`] requests in flight, [`CONNECTIONS_MAX_DEFAULT`]
    /// connections, [`OUTCOME_FULL_MS_DEFAULT`] ms, the node's own user only,
    /// serving once a workload is loaded. For embedders
    /// ([`ClusterBuilder::serve_applications`](crate::cluster::ClusterBuilder::serve_applications));
    /// `socket_dir` is not checked here (the listener refuses a path too
    /// long for a socket).
    pub fn new(socket_dir: PathBuf) -> ClientSettings {
        ClientSettings {
            socket_dir,
            allowed_uids: None,
            request_ring_bytes: RING_BYTES_DEFAULT,
            outcome_ring_bytes: RING_BYTES_DEFAULT,
            in_flight_max: IN_FLIGHT_MAX_DEFAULT,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            outcome_full_ms_max: OUTCOME_FULL_MS_DEFAULT,
            start: ClientsStart::default(),
        }
    }

    /// The socket node `node` listens on: `<socket_dir>/node-<node>.sock`.
    pub fn socket_path(&self, node: u16) -> PathBuf {
        socket_path(&self.socket_dir, node)
    }
}

fn socket_path(dir: &Path, node: u16) -> PathBuf {
    dir.join(format!("node-{node}.sock"))
}

/// Checks `[clients]` of cluster `cluster_id` (`None`: no section, no
/// application connections).
pub(super) fn check(
    raw: Option<&RawClients>,
    cluster_id: u32,
) -> Result<Option<ClientSettings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let socket_dir = raw
        .socket_dir
        .clone()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/splitkv-{cluster_id}")));
    if !socket_dir.is_absolute() {
        return Err(ConfigError::invalid(
            "clients.socket_dir",
            format!("must be an absolute path, got \"{}\"", socket_dir.display()),
        ));
    }
    // The longest socket name is the highest node id's.
    let longest = socket_path(&socket_dir, (NODES_MAX - 1) as u16);
    let bytes = longest.as_os_str().len();
    if bytes > SOCKET_PATH_BYTES_MAX {
        return Err(ConfigError::invalid(
            "clients.socket_dir",
            format!(
                "too long: a socket path in it ({}) has {bytes} bytes, at most {SOCKET_PATH_BYTES_MAX}",
                longest.display()
            ),
        ));
    }
    let allowed_uids = match &raw.allowed_uids {
        Some(u) if u.is_empty() || u.len() > ALLOWED_UIDS_MAX => {
            return Err(ConfigError::invalid(
                "clients.allowed_uids",
                format!(
                    "must list 1 to {ALLOWED_UIDS_MAX} user ids, got {}",
                    u.len()
                ),
            ))
        }
        other => other.clone(),
    };
    Ok(Some(ClientSettings {
        socket_dir,
        allowed_uids,
        request_ring_bytes: ring_bytes("clients.request_ring_bytes", raw.request_ring_bytes)?,
        outcome_ring_bytes: ring_bytes("clients.outcome_ring_bytes", raw.outcome_ring_bytes)?,
        in_flight_max: bounded(
            "clients.in_flight_max",
            raw.in_flight_max,
            IN_FLIGHT_MAX_DEFAULT,
            IN_FLIGHT_MAX_MAX,
        )?,
        connections_max: bounded(
            "clients.connections_max",
            raw.connections_max,
            CONNECTIONS_MAX_DEFAULT,
            CONNECTIONS_MAX_MAX,
        )?,
        outcome_full_ms_max: bounded(
            "clients.outcome_full_ms_max",
            raw.outcome_full_ms_max,
            OUTCOME_FULL_MS_DEFAULT as usize,
            OUTCOME_FULL_MS_MAX as usize,
        )? as u64,
        start: match raw.start.as_deref() {
            None | Some("on-load") => ClientsStart::OnLoad,
            Some("empty") => ClientsStart::Empty,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "clients.start",
                    format!("must be \"on-load\" or \"empty\", got \"{other}\""),
                ))
            }
        },
    }))
}

fn ring_bytes(field: &str, value: Option<u64>) -> Result<usize, ConfigError> {
    let v = value.unwrap_or(RING_BYTES_DEFAULT as u64);
    let ok = v.is_power_of_two() && (RING_BYTES_MIN as u64..=RING_BYTES_MAX as u64).contains(&v);
    if !ok {
        return Err(ConfigError::invalid(
            field,
            format!("must be a power of two from {RING_BYTES_MIN} to {RING_BYTES_MAX}, got {v}"),
        ));
    }
    Ok(v as usize)
}

fn bounded(
    field: &str,
    value: Option<u64>,
    default: usize,
    max: usize,
) -> Result<usize, ConfigError> {
    let v = value.unwrap_or(default as u64);
    if v == 0 || v > max as u64 {
        return Err(ConfigError::invalid(
            field,
            format!("must be between 1 and {max}, got {v}"),
        ));
    }
    Ok(v as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw() -> RawClients {
        RawClients::default()
    }

    #[test]
    fn an_empty_section_takes_the_defaults() {
        let c = check(Some(&raw()), 7).unwrap().expect("clients on");
        assert_eq!(c.socket_dir, PathBuf::from("/tmp/splitkv-7"));
        assert_eq!(
            c.socket_path(2),
            PathBuf::from("/tmp/splitkv-7/node-2.sock")
        );
        assert_eq!(c.allowed_uids, None);
        assert_eq!(
            (c.request_ring_bytes, c.outcome_ring_bytes),
            (RING_BYTES_DEFAULT, RING_BYTES_DEFAULT)
        );
        assert_eq!(c.in_flight_max, IN_FLIGHT_MAX_DEFAULT);
        assert_eq!(c.connections_max, CONNECTIONS_MAX_DEFAULT);
        assert_eq!(c.outcome_full_ms_max, OUTCOME_FULL_MS_DEFAULT);
        assert_eq!(check(None, 7).unwrap(), None);
    }

    #[test]
    fn bad_values_name_their_field() {
        let field = |r: RawClients| check(Some(&r), 7).unwrap_err().field().map(str::to_string);
        let f = |s: &str| Some(s.to_string());
        let mut r = raw();
        r.socket_dir = Some("relative/dir".into());
        assert_eq!(field(r), f("clients.socket_dir"));
        let mut r = raw();
        r.socket_dir = Some(format!("/{}", "d".repeat(100)));
        assert_eq!(field(r), f("clients.socket_dir"));
        let mut r = raw();
        r.allowed_uids = Some(vec![]);
        assert_eq!(field(r), f("clients.allowed_uids"));
        for bad in [
            0,
            3000,
            RING_BYTES_MIN as u64 / 2,
            RING_BYTES_MAX as u64 * 2,
        ] {
            let mut r = raw();
            r.request_ring_bytes = Some(bad);
            assert_eq!(field(r), f("clients.request_ring_bytes"), "{bad}");
        }
        let mut r = raw();
        r.outcome_ring_bytes = Some(100);
        assert_eq!(field(r), f("clients.outcome_ring_bytes"));
        let mut r = raw();
        r.in_flight_max = Some(0);
        assert_eq!(field(r), f("clients.in_flight_max"));
        let mut r = raw();
        r.connections_max = Some(CONNECTIONS_MAX_MAX as u64 + 1);
        assert_eq!(field(r), f("clients.connections_max"));
        let mut r = raw();
        r.outcome_full_ms_max = Some(OUTCOME_FULL_MS_MAX + 1);
        assert_eq!(field(r), f("clients.outcome_full_ms_max"));
    }

    #[test]
    fn the_longest_allowed_directory_fits_every_node_socket() {
        // "/" + k bytes + "/" + the highest node's socket name: the
        // boundary, checked on both sides.
        let name = socket_path(Path::new("/"), (NODES_MAX - 1) as u16)
            .as_os_str()
            .len()
            - 1;
        let fits = SOCKET_PATH_BYTES_MAX - name - 2;
        let mut r = raw();
        r.socket_dir = Some(format!("/{}", "d".repeat(fits)));
        assert!(check(Some(&r), 7).is_ok());
        r.socket_dir = Some(format!("/{}", "d".repeat(fits + 1)));
        assert!(check(Some(&r), 7).is_err());
    }
}

//! A client's connection to its node (L5 §III-B): connect the node's Unix
//! socket, create the shared memory for an [`AppMemoryLayout`] of the chosen
//! ring sizes, initialise both rings and both doorbells, send the
//! [`Hello`] and then the memory's descriptor (`SCM_RIGHTS`), and read the
//! node's `Welcome` or `Refused`. Every wait is bounded by
//! [`ConnectOptions::timeout`].
//!
//! A [`Connection`] owns the producing end of the request ring, the consuming
//! end of the outcome ring and both doorbells, and moves entry bytes:
//! [`Connection::send`] pushes one request entry and rings the node;
//! [`Connection::recv`] waits adaptively (spin, yield, futex sleep;
//! [`crate::doorbell`]) for one outcome entry. The entries' formats are
//! `splitkv_layout::app::{Request, Outcome}`; the calls built on them are
//! [`crate::Client`]'s. The socket stays open for the connection's life: the node learns
//! that the client is gone when it closes.

use crate::doorbell::{Doorbell, DoorbellError, WaitOutcome, WaitPolicy};
use crate::fd_pass::{send_fd, FdPassError};
use crate::handshake_io::{read_frame, write_frame, FrameError};
use crate::memory::{MemoryError, SharedMemory};
use splitkv_layout::app::{
    AppEncodeError, AppLimits, AppMemoryLayout, HandshakeError, HandshakeMsg, Hello, RefusedReason,
    APP_RING_CAPACITY_MIN_BYTES,
};
use splitkv_layout::doorbell::init_doorbell;
use splitkv_layout::ring::{init_ring, RingConsumer, RingError, RingProducer};
use splitkv_layout::{DecodeError, RegionError};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default bound on the whole set-up (connect, Hello, descriptor, answer), ms.
pub const CONNECT_TIMEOUT_MS_DEFAULT: u64 = 5_000;

/// Sleep between tries of [`Connection::send`] on a request ring that stays
/// full past the wait policy's spins and yields, µs.
pub const RING_FULL_SLEEP_US: u64 = 100;

/// What a client asks for when it connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Data-area bytes of the request ring: a power of two from
    /// `APP_RING_CAPACITY_MIN_BYTES` (128 KiB) to the node's configured size.
    pub request_ring_bytes: usize,
    /// Data-area bytes of the outcome ring (same bounds).
    pub outcome_ring_bytes: usize,
    /// Requests wanted in flight at once (1 to `APP_IN_FLIGHT_MAX`); the
    /// node may grant fewer ([`Connection::limits`]).
    pub in_flight_max: u32,
    /// Registered procedures to resolve to ids (at most
    /// `PROCEDURES_PER_HELLO_MAX` names).
    pub procedures: Vec<String>,
    /// Bound on the whole set-up.
    pub timeout: Duration,
    /// How [`Connection::recv`] waits.
    pub wait: WaitPolicy,
}

impl Default for ConnectOptions {
    /// Rings of 256 KiB each, 32 requests in flight, no procedures, a 5 s
    /// set-up bound, the default wait policy.
    fn default() -> Self {
        ConnectOptions {
            request_ring_bytes: 2 * APP_RING_CAPACITY_MIN_BYTES,
            outcome_ring_bytes: 2 * APP_RING_CAPACITY_MIN_BYTES,
            in_flight_max: 32,
            procedures: Vec::new(),
            timeout: Duration::from_millis(CONNECT_TIMEOUT_MS_DEFAULT),
            wait: WaitPolicy::default(),
        }
    }
}

/// Why a connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The options are not a valid Hello (ring size, in-flight count or a
    /// procedure name out of bounds); nothing was sent.
    #[error("invalid connect options: {0}")]
    Options(#[from] AppEncodeError),
    /// The socket could not be connected.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The shared memory could not be created.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The rings or doorbells could not be laid out in the memory (not
    /// expected: the layout is checked).
    #[error("cannot lay out the connection memory: {0}")]
    Layout(String),
    /// The handshake could not be sent or its answer read (timeout, peer
    /// closed, socket error, or an answer whose prefix is malformed).
    #[error(transparent)]
    Handshake(#[from] FrameError),
    /// The descriptor could not be passed, and the node sent no answer.
    #[error(transparent)]
    FdPass(#[from] FdPassError),
    /// The node refused the connection.
    #[error("the node refused the connection: {0:?}")]
    Refused(RefusedReason),
    /// The node speaks another layout version.
    #[error("application layout version mismatch: ours is {ours}, the node's is {theirs}")]
    VersionMismatch {
        /// Ours.
        ours: u32,
        /// The node's.
        theirs: u32,
    },
    /// The node's answer is not a valid Welcome or Refused, or does not fit
    /// the Hello (a procedure id count that differs, a grant above the ask).
    #[error("malformed answer from the node: {0}")]
    Malformed(DecodeError),
}

/// Why an entry could not be sent or received on a connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The ring stayed full (send) or empty (recv) until the deadline.
    #[error("timed out")]
    TimedOut,
    /// The ring refused the entry (too large) or its shared indices are
    /// corrupt (the connection is then unusable).
    #[error(transparent)]
    Ring(#[from] RingError),
}

/// One set-up connection to a node (module docs).
#[derive(Debug)]
pub struct Connection {
    socket: UnixStream,
    memory: SharedMemory,
    requests: RingProducer,
    request_bell: Doorbell,
    outcomes: RingConsumer,
    outcome_bell: Doorbell,
    wait: WaitPolicy,
    node_id: u16,
    limits: AppLimits,
    procedure_ids: Vec<Option<u32>>,
}

fn layout_error(e: impl std::fmt::Display) -> ConnectError {
    ConnectError::Layout(e.to_string())
}

/// Writes empty rings and idle doorbells at every part of `layout`.
fn init_memory(memory: &SharedMemory, layout: &AppMemoryLayout) -> Result<(), ConnectError> {
    let region = memory.region();
    init_ring(
        region,
        layout.request_ring_offset,
        layout.request_ring_capacity_bytes,
    )
    .map_err(layout_error)?;
    init_ring(
        region,
        layout.outcome_ring_offset,
        layout.outcome_ring_capacity_bytes,
    )
    .map_err(layout_error)?;
    for at in [
        layout.request_doorbell_offset,
        layout.outcome_doorbell_offset,
    ] {
        init_doorbell(region, at).map_err(|e: RegionError| layout_error(e))?;
    }
    Ok(())
}

impl Connection {
    /// Connects to the node listening on `path` (its
    /// `<socket_dir>/node-N.sock`) with `options`; blocks at most
    /// `options.timeout`.
    ///
    /// # Errors
    /// [`ConnectError::Options`] before anything is sent;
    /// [`ConnectError::Connect`], [`ConnectError::Memory`],
    /// [`ConnectError::Handshake`] (including `TimedOut` and `PeerClosed`),
    /// [`ConnectError::FdPass`]; from the answer [`ConnectError::Refused`]
    /// with the node's reason, [`ConnectError::VersionMismatch`] or
    /// [`ConnectError::Malformed`].
    pub fn connect(
        path: impl AsRef<Path>,
        options: &ConnectOptions,
    ) -> Result<Connection, ConnectError> {
        let deadline = Instant::now() + options.timeout;
        let layout = AppMemoryLayout::new(
            options.request_ring_bytes as u64,
            options.outcome_ring_bytes as u64,
        )
        .map_err(AppEncodeError::from)?;
        let names: Vec<&str> = options.procedures.iter().map(String::as_str).collect();
        let mut hello = Vec::new();
        Hello::encode(&layout, options.in_flight_max, &names, &mut hello)?;
        let path = path.as_ref();
        let mut socket = UnixStream::connect(path).map_err(|source| ConnectError::Connect {
            path: path.to_path_buf(),
            source,
        })?;
        let memory = SharedMemory::create(layout.memory_bytes)?;
        init_memory(&memory, &layout)?;
        // A node that refuses early (user, connection count, Hello) may
        // close before the Hello or the descriptor arrive: its answer is
        // still in the socket, so it is read even after a failed send.
        let sent = write_frame(&mut socket, &hello, deadline)
            .map_err(ConnectError::from)
            .and_then(|()| {
                socket
                    .set_write_timeout(Some(options.timeout))
                    .map_err(|e| FrameError::Io(e).into())
            })
            .and_then(|()| send_fd(&socket, memory.fd()).map_err(ConnectError::from));
        let mut answer = Vec::new();
        if let Err(e) = read_frame(&mut socket, &mut answer, deadline) {
            return Err(sent.err().unwrap_or(e.into()));
        }
        let welcome = match HandshakeMsg::decode(&answer) {
            Ok(HandshakeMsg::Welcome(w)) => w,
            Ok(HandshakeMsg::Refused(r)) => return Err(ConnectError::Refused(r.reason)),
            Ok(HandshakeMsg::Hello(_)) => {
                return Err(ConnectError::Malformed(DecodeError::Inconsistent {
                    what: "node answer",
                    detail: "a Hello where a Welcome or Refused was expected",
                }))
            }
            Err(HandshakeError::VersionMismatch { ours, theirs }) => {
                return Err(ConnectError::VersionMismatch { ours, theirs })
            }
            Err(HandshakeError::Decode(e)) => return Err(ConnectError::Malformed(e)),
        };
        let procedure_ids: Vec<Option<u32>> = welcome.procedure_ids().collect();
        if procedure_ids.len() != names.len()
            || welcome.limits.in_flight_max > options.in_flight_max
        {
            return Err(ConnectError::Malformed(DecodeError::Inconsistent {
                what: "Welcome",
                detail: "procedure ids or in-flight grant do not fit the Hello",
            }));
        }
        Self::attach(
            socket,
            memory,
            &layout,
            options,
            welcome.node_id,
            welcome.limits,
            procedure_ids,
        )
    }

    fn attach(
        socket: UnixStream,
        memory: SharedMemory,
        layout: &AppMemoryLayout,
        options: &ConnectOptions,
        node_id: u16,
        limits: AppLimits,
        procedure_ids: Vec<Option<u32>>,
    ) -> Result<Connection, ConnectError> {
        let region = memory.region().clone();
        let bell =
            |at| Doorbell::attach(region.clone(), at).map_err(|e: DoorbellError| layout_error(e));
        Ok(Connection {
            requests: RingProducer::attach(region.clone(), layout.request_ring_offset)
                .map_err(layout_error)?,
            request_bell: bell(layout.request_doorbell_offset)?,
            outcomes: RingConsumer::attach(region.clone(), layout.outcome_ring_offset)
                .map_err(layout_error)?,
            outcome_bell: bell(layout.outcome_doorbell_offset)?,
            socket,
            memory,
            wait: options.wait,
            node_id,
            limits,
            procedure_ids,
        })
    }

    /// The node's id in its cluster.
    pub fn node_id(&self) -> u16 {
        self.node_id
    }

    /// The node's limits for this connection (in flight, value, arguments
    /// and result bytes).
    pub fn limits(&self) -> AppLimits {
        self.limits
    }

    /// The ids of the procedures asked for, in the order of
    /// [`ConnectOptions::procedures`]; `None` for a name the node does not
    /// know.
    pub fn procedure_ids(&self) -> &[Option<u32>] {
        &self.procedure_ids
    }

    /// Bytes of the connection's shared memory.
    pub fn memory_bytes(&self) -> usize {
        self.memory.len_bytes()
    }

    /// The socket to the node (open for the connection's life).
    pub fn socket(&self) -> &UnixStream {
        &self.socket
    }

    /// Whether the node closed its end of the socket (it stopped, or dropped
    /// this connection): a non-blocking peek that reads nothing. A socket
    /// error counts as closed.
    pub fn peer_closed(&self) -> bool {
        use rustix::net::{recv, RecvFlags};
        let mut byte = [0u8; 1];
        match recv(
            &self.socket,
            &mut byte[..],
            RecvFlags::PEEK | RecvFlags::DONTWAIT,
        ) {
            Ok((n, _)) => n == 0,
            Err(e) => e != rustix::io::Errno::AGAIN && e != rustix::io::Errno::INTR,
        }
    }

    /// Pushes one request entry of `entry.len()` bytes and rings the node;
    /// `Ok(false)` if the ring has no room now.
    ///
    /// # Errors
    /// [`ConnectionError::Ring`]: too large for the ring, or corrupt indices.
    pub fn try_send(&mut self, entry: &[u8]) -> Result<bool, ConnectionError> {
        let pushed = match self.requests.try_push(entry) {
            Ok(_) => true,
            Err(RingError::Full) => false,
            Err(e) => return Err(e.into()),
        };
        // Also after `Full`: a padding entry may have been published.
        self.request_bell.ring();
        Ok(pushed)
    }

    /// Pushes one request entry, waiting while the ring is full, until
    /// `deadline` (`None`: no bound). The node rings no doorbell when it
    /// frees room, so a full ring is polled: spins and yields as
    /// [`ConnectOptions::wait`] says, then sleeps of
    /// [`RING_FULL_SLEEP_US`] between tries (a node that stalls costs the
    /// client little CPU).
    ///
    /// # Errors
    /// [`ConnectionError::TimedOut`] if the ring stayed full;
    /// [`ConnectionError::Ring`] as [`Connection::try_send`].
    pub fn send(&mut self, entry: &[u8], deadline: Option<Instant>) -> Result<(), ConnectionError> {
        let mut tries: u64 = 0;
        let spins = u64::from(self.wait.spins());
        let yields = spins + u64::from(self.wait.yields());
        while !self.try_send(entry)? {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(ConnectionError::TimedOut);
            }
            tries += 1;
            if tries <= spins {
                std::hint::spin_loop();
            } else if tries <= yields {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(RING_FULL_SLEEP_US));
            }
        }
        Ok(())
    }

    /// Pops one outcome entry into `out` if there is one.
    ///
    /// # Errors
    /// [`ConnectionError::Ring`] for corrupt indices or lengths.
    pub fn try_recv(&mut self, out: &mut Vec<u8>) -> Result<bool, ConnectionError> {
        Ok(self.outcomes.try_pop(out)?)
    }

    /// Waits adaptively ([`ConnectOptions::wait`]) for one outcome entry and
    /// pops it into `out`, until `deadline` (`None`: no bound).
    ///
    /// # Errors
    /// [`ConnectionError::TimedOut`]; [`ConnectionError::Ring`] as
    /// [`Connection::try_recv`].
    pub fn recv(
        &mut self,
        out: &mut Vec<u8>,
        deadline: Option<Instant>,
    ) -> Result<(), ConnectionError> {
        loop {
            if self.try_recv(out)? {
                return Ok(());
            }
            let outcomes = &mut self.outcomes;
            if self
                .outcome_bell
                .wait(&self.wait, || !outcomes.is_empty(), deadline)
                == WaitOutcome::TimedOut
            {
                return Err(ConnectionError::TimedOut);
            }
        }
    }
}

#[cfg(test)]
mod tests;

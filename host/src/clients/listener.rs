//! [`ClientListener`]: the driver that owns a node's application socket and
//! the thread that accepts on it (drivers own threads; the set-up of each
//! connection is [`super::attach()`]).
//!
//! The socket lives at `ClientSettings::socket_path(node)`:
//!
//! - a missing socket directory is created (with its parents). With
//!   `allowed_uids` unset (only the node's own user may connect) it is made
//!   `0700` and the socket `0600`; when other users are allowed, the
//!   directory is `0711` (they may reach the socket, not list the directory)
//!   and the socket `0666`, and `SO_PEERCRED` is the check. An existing
//!   directory keeps its mode: several nodes of one machine share it, and
//!   whoever made it chose;
//! - a socket file left by a node that is gone (connecting to it is refused)
//!   is removed; a live one (someone accepts on it) stops the start with
//!   [`ListenerError::AlreadyServing`]; a path that is not a socket is never
//!   removed ([`ListenerError::NotASocket`]);
//! - when the listener stops, it removes the socket file if it is still the
//!   one it bound.
//!
//! Threads: one accepts, waiting for a connection at most
//! [`LISTENER_POLL_MS`] at a time (so a stop takes effect within that), and
//! hands each accepted socket through a queue of [`HANDSHAKE_THREADS`]
//! places to one of [`HANDSHAKE_THREADS`] set-up threads, which run
//! [`super::attach()`] (each set-up bounded by
//! `AttachPolicy::handshake_timeout`). A client that stalls its handshake
//! thus holds one set-up thread for at most that bound, and the others keep
//! serving; when every thread and queue place is busy, a new connection is
//! answered `Refused(Unavailable)` at once. Every result is counted in
//! [`super::AttachStats`]; attached connections reach the
//! owner through a bounded channel of `connections_max` places. Every
//! attached connection holds one of `connections_max` places until dropped,
//! so the channel cannot be full when one is handed over; a connection
//! handed to an owner that dropped its receiver is closed.

use super::{
    attach, AttachFailure, AttachPolicy, AttachStats, AttachedConnection, ConnectionSlots,
};
use crate::deploy::config::ClientSettings;
use crossbeam::channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use splitkv_client::handshake_io::write_frame;
use splitkv_layout::app::{HandshakeMsg, Refused, RefusedReason};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest wait for a connection before the listener thread checks whether
/// it should stop, ms.
pub const LISTENER_POLL_MS: u64 = 50;

/// Connection set-ups a listener runs at once (threads), and accepted
/// sockets it queues for them.
pub const HANDSHAKE_THREADS: usize = 4;

/// Why a listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenerError {
    /// The socket directory could not be created.
    #[error("cannot create the socket directory {dir}: {source}")]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// Another process accepts connections on the socket.
    #[error("{path} is served by a live listener")]
    AlreadyServing {
        /// The socket path.
        path: PathBuf,
    },
    /// Something other than a socket sits at the socket path.
    #[error("{path} exists and is not a socket")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// A call on the socket or its file failed (bind, chmod, remove, thread).
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// A node's listener on its application socket (module docs); stops and
/// removes its socket when dropped.
#[derive(Debug)]
pub struct ClientListener {
    path: PathBuf,
    inode: u64,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    stats: Arc<AttachStats>,
    slots: ConnectionSlots,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ListenerError + 'a {
    move |source| ListenerError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` (and parents) with `mode` if missing.
fn ensure_dir(dir: &Path, mode: u32) -> Result<(), ListenerError> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|source| ListenerError::Directory {
            dir: dir.to_path_buf(),
            source,
        })
}

/// Removes a stale socket at `path`; refuses a live one or a non-socket.
fn clear_stale(path: &Path) -> Result<(), ListenerError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("inspect", path)(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(ListenerError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(ListenerError::AlreadyServing {
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            std::fs::remove_file(path).map_err(io("remove stale socket", path))
        }
        Err(e) => Err(io("probe existing socket", path)(e)),
    }
}

impl ClientListener {
    /// Starts listening for node `policy.node_id` under `settings`, at
    /// `settings.socket_path(node)`; attached connections arrive on the
    /// returned receiver.
    ///
    /// # Errors
    /// [`ListenerError`]: the directory cannot be made, the path is served
    /// or is not a socket, or binding, setting the socket's mode or spawning
    /// the thread fails.
    pub fn start(
        settings: &ClientSettings,
        policy: AttachPolicy,
    ) -> Result<(ClientListener, Receiver<AttachedConnection>), ListenerError> {
        let only_own_user = settings.allowed_uids.is_none();
        let (dir_mode, socket_mode) = if only_own_user {
            (0o700, 0o600)
        } else {
            (0o711, 0o666)
        };
        ensure_dir(&settings.socket_dir, dir_mode)?;
        let path = settings.socket_path(policy.node_id);
        clear_stale(&path)?;
        let listener = UnixListener::bind(&path).map_err(io("bind", &path))?;
        let started = Self::serve_on(listener, path.clone(), socket_mode, settings, policy);
        if started.is_err() {
            // Bound but not serving: leave no socket behind.
            let _ = std::fs::remove_file(&path);
        }
        started
    }

    /// Sets the bound socket's mode and starts the threads on it.
    fn serve_on(
        listener: UnixListener,
        path: PathBuf,
        socket_mode: u32,
        settings: &ClientSettings,
        policy: AttachPolicy,
    ) -> Result<(ClientListener, Receiver<AttachedConnection>), ListenerError> {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(socket_mode))
            .map_err(io("set the mode of", &path))?;
        let inode = std::fs::symlink_metadata(&path)
            .map_err(io("inspect", &path))?
            .ino();
        listener
            .set_nonblocking(true)
            .map_err(io("make non-blocking", &path))?;
        let slots = ConnectionSlots::new(settings.connections_max);
        let (tx, rx) = bounded(settings.connections_max);
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(AttachStats::default());
        let shared = Arc::new(Shared {
            policy,
            slots: slots.clone(),
            stats: stats.clone(),
            stop: stop.clone(),
            tx,
        });
        let threads = spawn_threads(listener, &shared)
            .map_err(io("spawn the listener threads for", &path))?;
        Ok((
            ClientListener {
                path,
                inode,
                stop,
                threads,
                stats,
                slots,
            },
            rx,
        ))
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The set-up counters now.
    pub fn stats(&self) -> super::AttachCounts {
        self.stats.snapshot()
    }

    /// The set-up counters, for readers on other threads.
    pub fn shared_stats(&self) -> Arc<AttachStats> {
        self.stats.clone()
    }

    /// Application connections open now (attached and not yet dropped).
    pub fn connections_open(&self) -> usize {
        self.slots.open()
    }

    /// Stops the threads (within [`LISTENER_POLL_MS`] plus one set-up's
    /// bound) and removes the socket file.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        self.stop.store(true, Ordering::Release);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ClientListener {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// What the listener's threads share.
struct Shared {
    policy: AttachPolicy,
    slots: ConnectionSlots,
    stats: Arc<AttachStats>,
    stop: Arc<AtomicBool>,
    tx: Sender<AttachedConnection>,
}

/// Starts the accepting thread and the set-up threads. On an error, the
/// threads already started stop (the stop flag is set) and are joined.
fn spawn_threads(
    listener: UnixListener,
    shared: &Arc<Shared>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let node = shared.policy.node_id;
    let (pending_tx, pending_rx) = bounded::<UnixStream>(HANDSHAKE_THREADS);
    let mut threads = Vec::with_capacity(HANDSHAKE_THREADS + 1);
    let mut spawn = |name: String, body: Box<dyn FnOnce() + Send>| match std::thread::Builder::new()
        .name(name)
        .spawn(body)
    {
        Ok(t) => {
            threads.push(t);
            Ok(())
        }
        Err(e) => {
            shared.stop.store(true, Ordering::Release);
            for t in threads.drain(..) {
                let _ = t.join();
            }
            Err(e)
        }
    };
    for i in 0..HANDSHAKE_THREADS {
        let (shared, pending) = (shared.clone(), pending_rx.clone());
        spawn(
            format!("clients-setup-{node}-{i}"),
            Box::new(move || set_up_loop(&shared, &pending)),
        )?;
    }
    let shared = shared.clone();
    spawn(
        format!("clients-listen-{node}"),
        Box::new(move || accept_loop(&listener, &shared, &pending_tx)),
    )?;
    Ok(threads)
}

fn accept_loop(listener: &UnixListener, shared: &Shared, pending: &Sender<UnixStream>) {
    while !shared.stop.load(Ordering::Acquire) {
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                wait_readable(listener);
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                // EMFILE and the like: back off, then try again.
                tracing::warn!(error = %e, "application socket accept failed");
                std::thread::sleep(Duration::from_millis(LISTENER_POLL_MS));
                continue;
            }
        };
        if let Err(TrySendError::Full(stream) | TrySendError::Disconnected(stream)) =
            pending.try_send(stream)
        {
            refuse_busy(stream, &shared.stats);
        }
    }
}

/// Answers `Refused(Unavailable)` without reading anything (a few bytes into
/// an empty socket buffer: the write does not block) and closes.
fn refuse_busy(mut stream: UnixStream, stats: &AttachStats) {
    let mut msg = Vec::new();
    HandshakeMsg::Refused(Refused {
        reason: RefusedReason::Unavailable,
    })
    .encode(&mut msg);
    let _ = write_frame(
        &mut stream,
        &msg,
        Instant::now() + Duration::from_millis(LISTENER_POLL_MS),
    );
    let result: Result<(), AttachFailure> = Err(AttachFailure::Refused {
        reason: RefusedReason::Unavailable,
        detail: "every set-up thread busy".into(),
    });
    tracing::info!("application refused: every set-up thread busy");
    stats.count(&result);
}

fn wait_readable(listener: &UnixListener) {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let mut fds = [PollFd::new(listener, PollFlags::IN)];
    let timeout = Timespec {
        tv_sec: 0,
        tv_nsec: (LISTENER_POLL_MS * 1_000_000) as _,
    };
    let _ = poll(&mut fds, Some(&timeout));
}

fn set_up_loop(shared: &Shared, pending: &Receiver<UnixStream>) {
    while !shared.stop.load(Ordering::Acquire) {
        match pending.recv_timeout(Duration::from_millis(LISTENER_POLL_MS)) {
            Ok(stream) => serve(shared, stream),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn serve(shared: &Shared, stream: UnixStream) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let node = shared.policy.node_id;
    let result = attach(stream, &shared.policy, &shared.slots);
    shared.stats.count(&result);
    match result {
        Ok(conn) => {
            let peer = conn.peer();
            tracing::info!(node, pid = peer.pid, uid = peer.uid, "application attached");
            if shared.tx.try_send(conn).is_err() {
                tracing::warn!(node, "attached application dropped: its owner is gone");
            }
        }
        Err(why) => tracing::info!(node, reason = %why, "application not attached"),
    }
}

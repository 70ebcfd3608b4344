//! # splitkv-client
//!
//! The library an application in its own process links to reach its splitkv
//! node over the shared-memory ring API (L5 §III). It depends on the formats
//! of `splitkv-layout` and on small crates only, never on the store itself.
//!
//! ## First steps
//!
//! 1. **Connect** to the node's Unix socket, `<socket_dir>/node-N.sock` of
//!    the `[clients]` section of its cluster file ([`Client::connect`] with
//!    [`ConnectOptions`]: ring sizes, calls wanted in flight, the names of
//!    the registered procedures to resolve). The node checks your user id,
//!    maps the sealed memory you created and grants its limits
//!    ([`Client::limits`]). One client per thread: open one connection each.
//! 2. **Call** ([`KvClient`]; bring the trait into scope): single-key calls
//!    `get` / `put` / `insert` / `delete` (Dandelion §3), a registered
//!    procedure by name or id with `call` (Xenic §4.2.2), each blocking; or
//!    `submit` any [`Call`] and collect its [`Completion`] with `poll_one`,
//!    `poll_all` or `wait(ticket, deadline)`.
//! 3. **Transact** with a [`Txn`] (etcd's shape: compares, then the success
//!    or the failure branch), checked against every bound before it is sent;
//!    it needs no code in the node.
//!
//! ```no_run
//! use splitkv_client::{Client, Cmp, ConnectOptions, KvClient, Txn, TxnOp};
//! use splitkv_layout::Key;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut c = Client::connect("/tmp/splitkv-1/node-0.sock", &ConnectOptions::default())?;
//! let key = Key::new(90, 1);
//! c.put(key, b"5")?;
//! let read = c.get(key)?;
//! let swap = Txn::new()
//!     .when([Cmp::version_eq(key, read.version)])
//!     .then([TxnOp::put(key, *b"6")])
//!     .otherwise([TxnOp::get(key)]);
//! if !c.txn(&swap)?.succeeded() {
//!     // Someone wrote the key since: read again and retry.
//! }
//! # Ok(())
//! # }
//! ```
//!
//! ## Errors
//!
//! A committed call returns its results; anything else is a [`CallError`]:
//! aborted with its reason (a conflict, a user abort, an insert's failed
//! compare), key not found, too large, unknown procedure, rejected, not
//! connected (the node's socket closed), node unavailable (recovering, NIC
//! runtime restarting, draining), outcome unknown (never resubmit such a call
//! blindly), and the client's own: the granted in-flight bound reached, a
//! full ring, a wait past its deadline, an invalid [`Txn`] ([`TxnError`]),
//! and outcomes the node should not have sent (the node is untrusted: a
//! typed error, never a panic). [`CallError::is_retryable`] says which are
//! worth sending again. [`ConnectError`] says why a connection failed.
//!
//! The embedding API's in-process client (`splitkv_host::Client`) offers the
//! same [`KvClient`] calls with the same results.
//!
//! ## Modules
//!
//! - [`calls`]: [`KvClient`], [`Call`], [`Reply`], [`TxnOutput`];
//! - [`client`]: the out-of-process [`Client`] over a [`Connection`];
//! - [`txn_builder`]: [`Txn`], [`Cmp`], [`TxnOp`];
//! - [`error`]: [`CallError`], [`TxnError`], [`Ticket`];
//! - [`connection`]: [`Connection::connect`], the client's side of the
//!   set-up (L5 §III-B), and entry-level `send` / `recv` on the rings;
//! - [`memory`]: shared memory the client creates — a sealed memfd mapped
//!   `MAP_SHARED` and seen as a [`splitkv_layout::Region`] — and the receiving
//!   side's checks (a memfd, sealed against shrinking and growing, of the
//!   expected size) before it maps a descriptor it was handed
//!   (L5 §III-A.1);
//! - [`doorbell`]: adaptive waiting for a ring to fill — spin, then yield, then
//!   sleep on a shared futex that the producer wakes only when the sleeper
//!   asked for it (L5 §III-A.3);
//! - [`handshake_io`]: one set-up message read or written on the node's
//!   socket within a deadline, for both ends;
//! - [`fd_pass`]: one descriptor sent or received with `SCM_RIGHTS` over a Unix
//!   stream socket, and the peer's credentials (`SO_PEERCRED`).
//!
//! Linux only (memfd, seals and futexes are Linux system calls), and
//! little-endian only (the futex watches the low half of a 64-bit word).
#![warn(missing_docs)]

#[cfg(not(target_endian = "little"))]
compile_error!("splitkv-client's doorbell futex watches the low half of a little-endian word");

pub mod calls;
#[cfg(not(loom))]
pub mod client;
#[cfg(not(loom))]
pub mod connection;
pub mod doorbell;
pub mod error;
pub mod fd_pass;
#[cfg(not(loom))]
pub mod handshake_io;
#[cfg(not(loom))]
pub mod memory;
pub mod txn_builder;

pub use calls::{
    Call, Completion, Expect, KvClient, ProcedureRef, Reply, TxnOutput, Versioned,
    CALL_TIMEOUT_MS_DEFAULT,
};
#[cfg(not(loom))]
pub use client::Client;
pub use error::{CallError, Ticket, TxnError};
pub use splitkv_layout::app::{AbortReason, Branch, CmpOp, UnavailableReason};
pub use txn_builder::{Cmp, CmpTarget, Txn, TxnOp};

#[cfg(not(loom))]
pub use connection::{ConnectError, ConnectOptions, Connection, ConnectionError};
pub use doorbell::{Doorbell, DoorbellError, WaitOutcome, WaitPolicy};
pub use fd_pass::{peer_credentials, recv_fd, send_fd, FdPassError, PeerCredentials};
#[cfg(not(loom))]
pub use handshake_io::FrameError;
#[cfg(not(loom))]
pub use memory::{MemoryError, SharedMemory, SHARED_MEMORY_BYTES_MAX};

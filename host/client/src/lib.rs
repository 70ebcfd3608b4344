//! # splitkv-client
//!
//! The library an application in its own process links to reach its splitkv
//! node over the shared-memory ring API (L5 §III-A). It depends on the formats
//! of `splitkv-layout` and on small crates only, never on the store itself.
//!
//! This is the transport layer of that API, which the connection handshake,
//! the node's acceptor and the calls are built on:
//!
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
//! - [`connection`]: [`Connection::connect`], the client's side of the
//!   set-up, and entry-level `send` / `recv` on the connected rings;
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

//! A node that starts empty (`[clients] start = "empty"`) opens its
//! application socket once every peer's control endpoint answers `/status`
//! — each peer's NIC runtime is then polling, so an application's first
//! calls are not answered `Unavailable` for a peer still starting — or,
//! with a peer still silent, after [`PEERS_WAIT_MAX`] (logged: the cluster
//! then serves without it, as after a crash).
//!
//! It runs on a thread of its own (the main thread renews the lease
//! meanwhile), as `rejoin` does; every call is bounded ([`crate::http`]'s
//! timeouts).

use super::NodeHandler;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest an empty-starting node waits for its peers before it serves
/// applications without the silent ones.
pub(super) const PEERS_WAIT_MAX: Duration = Duration::from_secs(20);

/// How long the thread waits between two rounds of asking the peers.
const ASK_EVERY: Duration = Duration::from_millis(100);

/// Starts the thread that waits for `peers` (node id and control address)
/// and then loads `handler`'s node with the empty store.
pub(super) fn spawn(
    handler: Arc<NodeHandler>,
    peers: Vec<(u16, SocketAddr)>,
    token: String,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("empty-start".into())
        .spawn(move || {
            wait_for_peers(&handler, peers, &token);
            if handler.drain.load(Ordering::Acquire) {
                return;
            }
            match super::load_empty(&handler) {
                Ok(()) => tracing::info!("serving applications from an empty store"),
                Err(e) => tracing::error!(error = ?e, "the empty store did not start"),
            }
        })
}

/// Asks each silent peer's `/status` every [`ASK_EVERY`] until all have
/// answered, the node drains, or [`PEERS_WAIT_MAX`] has passed.
fn wait_for_peers(handler: &NodeHandler, mut silent: Vec<(u16, SocketAddr)>, token: &str) {
    let end = Instant::now() + PEERS_WAIT_MAX;
    let mut logged = false;
    while !silent.is_empty() && !handler.drain.load(Ordering::Acquire) {
        silent.retain(|&(_, addr)| crate::http::call(addr, "GET", "/status", token, None).is_err());
        if silent.is_empty() {
            return;
        }
        let ids: Vec<u16> = silent.iter().map(|&(id, _)| id).collect();
        if Instant::now() >= end {
            tracing::warn!(silent = ?ids, "peers still silent after {PEERS_WAIT_MAX:?}: serving applications without them");
            return;
        }
        if !logged {
            tracing::info!(waiting_for = ?ids, "waiting for the peers' control endpoints before serving applications");
            logged = true;
        }
        std::thread::sleep(ASK_EVERY);
    }
}

//! A restarted node loads itself (rejoin): a process that starts *joining*
//! (its node's earlier process died and the cluster's generation lives on
//! without it) asks its peers' control endpoints which workload they run
//! (`GET /workload`) and loads the same one with `rejoin` (its runtime
//! built empty; its shards are copied to it once a configuration admits
//! it). So starting the process again is all an operator does; a `/load`
//! from outside still works until this one is done (then it is refused as
//! a second load).
//!
//! It runs on a thread of its own (a peer may be slow to answer, and the
//! main thread renews the lease meanwhile), asks each peer in turn every
//! [`ASK_EVERY`], and stops once the node is loaded (by itself or from
//! outside), drains, or fails. Every call is bounded
//! ([`crate::http`]'s timeouts).

use super::NodeHandler;
use serde_json::Value;
use splitkv_host::deploy::{CallError, ControlHandler, Route};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long the thread waits between two rounds of asking the peers.
pub(super) const ASK_EVERY: Duration = Duration::from_millis(500);

/// Starts the thread that loads `handler`'s node with the workload of the
/// first peer (of `peers`: node id and control address) that has one.
pub(super) fn spawn(
    handler: Arc<NodeHandler>,
    peers: Vec<(u16, SocketAddr)>,
    token: String,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rejoin-load".into())
        .spawn(move || run(&handler, &peers, &token))
}

/// Whether the thread has nothing more to do: the node is loaded, draining
/// or failed.
fn done(handler: &NodeHandler) -> bool {
    handler.drain.load(Ordering::Acquire) || handler.stats().is_some()
}

fn run(handler: &NodeHandler, peers: &[(u16, SocketAddr)], token: &str) {
    let mut waiting_logged = false;
    while !done(handler) {
        for &(peer, addr) in peers {
            if done(handler) {
                return;
            }
            let Some(body) = ask(peer, addr, token) else {
                continue;
            };
            match handler.call(Route::Load, &body) {
                Ok(answer) => {
                    tracing::info!(peer, workload = %body["workload"], ?answer, "rejoin: loaded the workload a peer runs; waiting to be admitted");
                    return;
                }
                // Loaded from outside meanwhile: nothing left to do.
                Err(CallError::Conflict(_)) => return,
                Err(e) => {
                    tracing::error!(peer, error = %e, "rejoin: the load failed");
                    return;
                }
            }
        }
        if !waiting_logged {
            tracing::info!("rejoin: no peer runs a workload yet; asking again every {ASK_EVERY:?}");
            waiting_logged = true;
        }
        std::thread::sleep(ASK_EVERY);
    }
}

/// Peer `peer`'s workload as a `/load` body with `rejoin`, or `None` when
/// it answers none (unreachable, not loaded, or a malformed answer).
fn ask(peer: u16, addr: SocketAddr, token: &str) -> Option<Value> {
    match crate::http::call(addr, "GET", Route::Workload.path(), token, None) {
        Ok(mut body) if body.is_object() => {
            body["rejoin"] = Value::Bool(true);
            Some(body)
        }
        Ok(other) => {
            tracing::warn!(peer, answer = %other, "rejoin: a peer's workload is not an object");
            None
        }
        Err(e) => {
            tracing::debug!(peer, error = %e, "rejoin: no workload from this peer");
            None
        }
    }
}

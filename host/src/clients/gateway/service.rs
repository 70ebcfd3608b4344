//! [`ClientService`]: the driver that serves a node's application socket —
//! it owns the [`ClientListener`] (and so its threads) and one gateway
//! thread that polls a [`Gateway`] (DESIGN.md: drivers own threads).
//!
//! The gateway thread waits adaptively (L5 §III-A.3's shape, on the node's
//! side): after a step that did nothing it spins up to [`GATEWAY_SPINS`]
//! times, then yields up to [`GATEWAY_YIELDS`] times, then — only when no
//! request of its own is at the NIC runtime — sleeps. With no connection
//! open it waits on the listener's channel, [`GATEWAY_UNCONNECTED_SLEEP_MS`]
//! at a time, and a new connection wakes it at once; with connections, it
//! sleeps plainly (a channel's timed wait spins and yields first, which
//! cost an idle thread about 1% of a core), from [`GATEWAY_IDLE_SLEEP_US`]
//! doubling while nothing happens up to [`GATEWAY_IDLE_SLEEP_MAX_US`]:
//! measured at about 0.2% of a core with one idle connection
//! (`host/tests/app_gateway.rs`, `idle_gateway_cpu_share`). Each sleep is
//! taken on the request doorbell of the connection a request came from
//! last ([`Doorbell::sleep_once`](splitkv_client::Doorbell::sleep_once)):
//! that client's next request rings it awake at once, while the timeout is
//! the plain sleep's, so a client can shorten the thread's sleep but never
//! hold it. A request of another connection waits at most the current
//! sleep: up to [`GATEWAY_IDLE_SLEEP_MAX_US`] after a long idle spell.
//!
//! Stopping ([`ClientService::stop`], or dropping it) stops the listener,
//! which removes the socket file, then drains the gateway: requests taken
//! from then on are answered "unavailable: draining", and the outcomes of
//! requests already at the NIC runtime are still delivered, for at most
//! [`GATEWAY_DRAIN_MS_MAX`] (the node's polling threads still run: the
//! cluster stops its applications first). Then the gateway thread closes
//! every connection ([`CloseReason::Stopped`](super::CloseReason::Stopped)).

use super::{Gateway, GatewayConfig, GatewayCounts, GatewayError, GatewayStats};
use crate::client::Client;
use crate::clients::{
    AttachCounts, AttachPolicy, AttachedConnection, ClientListener, ListenerError,
    ProcedureResolver,
};
use crate::deploy::config::ClientSettings;
use crossbeam::channel::{Receiver, RecvTimeoutError};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Idle steps the gateway thread spins through before it yields.
pub const GATEWAY_SPINS: u32 = 256;
/// Idle steps it yields through (after spinning) before it sleeps.
pub const GATEWAY_YIELDS: u32 = 64;
/// First sleep of an idle gateway thread with connections open, µs.
pub const GATEWAY_IDLE_SLEEP_US: u64 = 50;
/// Longest sleep of an idle gateway thread with connections open, µs.
pub const GATEWAY_IDLE_SLEEP_MAX_US: u64 = 4_000;
/// Sleep of a gateway thread with no connection open, ms (a new
/// connection ends it at once).
pub const GATEWAY_UNCONNECTED_SLEEP_MS: u64 = 100;

/// Longest a stopping service waits for the outcomes of requests already
/// at the NIC runtime before it closes the connections, ms.
pub const GATEWAY_DRAIN_MS_MAX: u64 = 2_000;

/// Why a service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The listener could not start.
    #[error("application socket: {0}")]
    Listener(#[from] ListenerError),
    /// The gateway could not be built.
    #[error("gateway: {0}")]
    Gateway(#[from] GatewayError),
    /// The gateway thread could not be started.
    #[error("cannot start the gateway thread: {0}")]
    Spawn(std::io::Error),
}

/// A node's application service (module docs).
#[derive(Debug)]
pub struct ClientService {
    listener: Option<ClientListener>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<GatewayStats>,
}

impl ClientService {
    /// Listens for node `node` under `settings` (at
    /// `settings.socket_path(node)`) and serves attached connections
    /// through the NIC client ports `ports`, resolving procedure names with
    /// `resolve`; while `nic_restarting` is set, new requests are answered
    /// [`UnavailableReason::NicRestarting`](splitkv_layout::app::UnavailableReason::NicRestarting)
    /// ([`Gateway::watch_nic_restart`]).
    ///
    /// # Errors
    /// [`ServiceError::Listener`] (the socket cannot be served),
    /// [`ServiceError::Gateway`] (no port), [`ServiceError::Spawn`]; the
    /// socket is removed again on an error after the listener started.
    pub fn start(
        settings: &ClientSettings,
        node: u16,
        ports: Vec<Client>,
        resolve: ProcedureResolver,
        nic_restarting: Arc<AtomicBool>,
    ) -> Result<ClientService, ServiceError> {
        let stats = Arc::new(GatewayStats::default());
        let config = GatewayConfig {
            node,
            outcome_full_ms_max: settings.outcome_full_ms_max,
        };
        let mut gateway = Gateway::new(config, ports, stats.clone())?;
        gateway.watch_nic_restart(nic_restarting);
        let policy = AttachPolicy::from_settings(settings, node, resolve);
        let (listener, attached) = ClientListener::start(settings, policy)?;
        stats.watch_set_ups(listener.shared_stats());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name(format!("clients-gateway-{node}"))
            .spawn(move || drive(gateway, &attached, &flag))
            .map_err(ServiceError::Spawn)?;
        Ok(ClientService {
            listener: Some(listener),
            stop,
            thread: Some(thread),
            stats,
        })
    }

    /// The socket path.
    pub fn path(&self) -> Option<&Path> {
        self.listener.as_ref().map(ClientListener::path)
    }

    /// The gateway's counters now.
    pub fn counts(&self) -> GatewayCounts {
        self.stats.snapshot()
    }

    /// The gateway's counters, for readers on other threads.
    pub fn stats(&self) -> Arc<GatewayStats> {
        self.stats.clone()
    }

    /// The listener's set-up counters now.
    pub fn attach_counts(&self) -> AttachCounts {
        self.listener
            .as_ref()
            .map(ClientListener::stats)
            .unwrap_or_default()
    }

    /// Stops serving: the socket is removed, every connection closed.
    pub fn stop(mut self) {
        self.shut_down();
    }

    fn shut_down(&mut self) {
        if let Some(l) = self.listener.take() {
            l.stop();
        }
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ClientService {
    fn drop(&mut self) {
        self.shut_down();
    }
}

/// The gateway thread's loop (module docs).
fn drive(mut gateway: Gateway, attached: &Receiver<AttachedConnection>, stop: &AtomicBool) {
    let origin = Instant::now();
    let mut idle: u32 = 0;
    let mut sleep_us = GATEWAY_IDLE_SLEEP_US;
    let mut drain_until: Option<Instant> = None;
    loop {
        if drain_until.is_none() && stop.load(Ordering::Acquire) {
            gateway.begin_drain();
            drain_until = Some(Instant::now() + Duration::from_millis(GATEWAY_DRAIN_MS_MAX));
        }
        if let Some(deadline) = drain_until {
            if gateway.drained() || Instant::now() >= deadline {
                break;
            }
        }
        let mut work = false;
        while let Ok(c) = attached.try_recv() {
            gateway.add(c);
            work = true;
        }
        work |= gateway.run_iteration(origin.elapsed().as_nanos() as u64);
        if work {
            idle = 0;
            sleep_us = GATEWAY_IDLE_SLEEP_US;
            continue;
        }
        idle = idle.saturating_add(1);
        if idle <= GATEWAY_SPINS {
            std::hint::spin_loop();
        } else if idle <= GATEWAY_SPINS + GATEWAY_YIELDS
            || gateway.in_flight() > 0
            || drain_until.is_some()
        {
            std::thread::yield_now();
        } else {
            if gateway.connections() > 0 {
                // Not a channel's timed wait, which spins and yields first.
                // A new connection waits for the end of the sleep.
                if sleep_on_requests(&mut gateway, Duration::from_micros(sleep_us)) {
                    idle = 0;
                    sleep_us = GATEWAY_IDLE_SLEEP_US;
                } else {
                    sleep_us = (sleep_us * 2).min(GATEWAY_IDLE_SLEEP_MAX_US);
                }
                continue;
            }
            let sleep = Duration::from_millis(GATEWAY_UNCONNECTED_SLEEP_MS);
            match attached.recv_timeout(sleep) {
                Ok(c) => {
                    gateway.add(c);
                    idle = 0;
                    sleep_us = GATEWAY_IDLE_SLEEP_US;
                }
                Err(RecvTimeoutError::Timeout) => {}
                // The listener is gone (stopping): sleep without it.
                Err(RecvTimeoutError::Disconnected) => std::thread::sleep(sleep),
            }
        }
    }
    gateway.close_all();
}

/// Sleeps at most `timeout` on the request doorbell of the connection a
/// request came from last (plainly if it is gone); true if that connection
/// has a request waiting afterwards.
fn sleep_on_requests(gateway: &mut Gateway, timeout: Duration) -> bool {
    let place = gateway.last_request_place;
    let Some(c) = gateway.conns.get_mut(place).and_then(Option::as_mut) else {
        std::thread::sleep(timeout);
        return false;
    };
    c.conn.sleep_until_request(timeout)
}

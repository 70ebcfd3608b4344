//! The client's run: connect, drive the load generator for the spec's
//! warm-up and run, drain, collect the results.

use crate::port::{AppPort, PortError};
use splitkv_client::{ConnectError, ConnectOptions, Connection};
use splitkv_layout::app::APP_IN_FLIGHT_MAX;
use splitkv_workloads::loadgen::LoadGen;
use splitkv_workloads::results::{
    latency_pairs, ClientResults, HistorySummary, SmallbankSummary, CLIENT_RESULTS_VERSION,
};
use splitkv_workloads::spec::{ClientSpec, ClientSpecError};
use splitkv_workloads::{Nanos, TxGenerator};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the program was asked (its command line).
#[derive(Debug)]
pub struct Options {
    /// The node's socket.
    pub socket: PathBuf,
    /// The node's id.
    pub node: u16,
    /// The spec, JSON.
    pub spec: String,
    /// Where the results go (`None`: standard output).
    pub out: Option<PathBuf>,
    /// Wait for the socket (ms).
    pub connect_wait_ms: u64,
    /// Drain bound (ms).
    pub drain_ms: u64,
}

/// Why the client could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The spec is not JSON of a `ClientSpec`.
    #[error("bad spec: {0}")]
    SpecJson(#[from] serde_json::Error),
    /// The spec's parameters are refused.
    #[error("bad spec: {0}")]
    Spec(#[from] ClientSpecError),
    /// No connection within the wait.
    #[error("cannot connect to {path}: {error}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The last error.
        error: ConnectError,
    },
    /// The node is another than `--node` says.
    #[error("the socket is node {actual}'s, not node {expected}'s")]
    WrongNode {
        /// `--node`.
        expected: u16,
        /// The node's own id.
        actual: u16,
    },
    /// The node does not serve a procedure of the workload.
    #[error("the node has no procedure named {0:?} (is it running this workload?)")]
    MissingProcedure(&'static str),
    /// The results cannot be written.
    #[error("cannot write the results to {path}: {error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
}

/// Pause between connection attempts while the node starts.
const CONNECT_RETRY_MS: u64 = 20;

/// Runs the client (module docs).
///
/// # Errors
/// [`RunError`]; a connection that fails during the run is not one (the
/// results say so, with the transactions in flight then unknown).
pub fn main(o: &Options) -> Result<(), RunError> {
    let spec: ClientSpec = serde_json::from_str(&o.spec)?;
    spec.check()?;
    let names = spec.workload.procedure_names();
    let conn = connect(o, &spec, &names)?;
    if conn.node_id() != o.node {
        return Err(RunError::WrongNode {
            expected: o.node,
            actual: conn.node_id(),
        });
    }
    let ids = names
        .iter()
        .zip(conn.procedure_ids())
        .map(|(name, id)| id.ok_or(RunError::MissingProcedure(name)))
        .collect::<Result<Vec<u32>, _>>()?;
    let mut cfg = spec.loadgen_config();
    cfg.inflight_max = cfg.inflight_max.min(conn.limits().in_flight_max as usize);
    let port = AppPort::new(conn, ids);
    let mut r = ClientResults {
        version: CLIENT_RESULTS_VERSION,
        node: o.node,
        client: spec.client,
        ..ClientResults::default()
    };
    let drain = Duration::from_millis(o.drain_ms);
    if let Some(gen) = spec.smallbank_generator() {
        let mut l = LoadGen::new(o.node, port, gen, cfg);
        drive(&mut l, &spec, drain, &mut r);
        let g = l.generator();
        if let Some(c) = g.txn_client() {
            // Through the `Txn`: the Smallbank transactions' latency.
            r.latency_ns = latency_pairs(c.latency_ns());
        }
        r.smallbank = Some(SmallbankSummary::of(g));
    } else if let Some(gen) = spec.history_generator() {
        let mut l = LoadGen::new(o.node, port, gen, cfg);
        drive(&mut l, &spec, drain, &mut r);
        let g = l.generator();
        r.history = Some(HistorySummary {
            stats: g.stats().into(),
            ops: g.ops().iter().map(|op| op.to_json()).collect(),
        });
    }
    (r.cpu_ns, r.run_queue_wait_ns) = schedstat();
    write(o, &r)
}

/// This process's CPU time and run-queue wait (ns), from Linux's
/// `/proc/self/schedstat` (its main thread: the only one); zeros where it
/// cannot be read.
fn schedstat() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/schedstat").unwrap_or_default();
    let mut fields = text
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
}

/// Connects, retrying while the node's socket is not there yet.
fn connect(o: &Options, spec: &ClientSpec, names: &[&str]) -> Result<Connection, RunError> {
    let options = ConnectOptions {
        in_flight_max: spec.inflight.clamp(1, APP_IN_FLIGHT_MAX) as u32,
        procedures: names.iter().map(|n| n.to_string()).collect(),
        ..ConnectOptions::default()
    };
    let deadline = Instant::now() + Duration::from_millis(o.connect_wait_ms);
    loop {
        match Connection::connect(&o.socket, &options) {
            Ok(c) => return Ok(c),
            Err(error) if Instant::now() >= deadline => {
                return Err(RunError::Connect {
                    path: o.socket.clone(),
                    error,
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(CONNECT_RETRY_MS)),
        }
    }
}

/// Runs `l` through the warm-up and the run, then lets what is in flight
/// finish within `drain`; fills the counters, window and latency of `r`.
fn drive<G: TxGenerator>(
    l: &mut LoadGen<G, AppPort>,
    spec: &ClientSpec,
    drain: Duration,
    r: &mut ClientResults,
) {
    let origin = Instant::now();
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    r.clock_origin_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
    let now = || origin.elapsed().as_nanos() as Nanos;
    let from = spec.warmup_ms * 1_000_000;
    let until = from + spec.run_ms * 1_000_000;
    l.set_window(from, until);
    let mut stop_at: Option<Nanos> = None;
    loop {
        let t = now();
        if stop_at.is_none() && t >= until {
            l.stop();
            stop_at = Some(t);
        }
        if !l.run_iteration(t) {
            if l.is_done() || l.error().is_some() {
                break;
            }
            std::thread::yield_now();
        }
        if stop_at.is_some_and(|s| t.saturating_sub(s) >= drain.as_nanos() as Nanos) {
            break;
        }
    }
    let end = now();
    l.finish(end);
    r.node_closed = matches!(l.error(), Some(PortError::Closed));
    r.error = match (l.error(), l.is_done()) {
        (Some(e), _) => Some(error_text(e)),
        (None, false) => Some("transactions still in flight after the drain".to_string()),
        (None, true) => None,
    };
    r.all = l.stats().into();
    r.window = l.window_stats().into();
    r.window_ns = end.min(until).saturating_sub(from);
    r.latency_ns = latency_pairs(l.latency_ns());
}

fn error_text(e: &PortError) -> String {
    e.to_string()
}

/// Writes `r` as JSON to `--out` or standard output.
fn write(o: &Options, r: &ClientResults) -> Result<(), RunError> {
    let text = serde_json::to_string(r)?;
    match &o.out {
        Some(path) => std::fs::write(path, text).map_err(|error| RunError::Write {
            path: path.clone(),
            error,
        }),
        None => {
            println!("{text}");
            Ok(())
        }
    }
}

//! `--clients external` on a deployed cluster: each node's workload client
//! runs as a `splitkv-app-client` process on this machine (`crate::external`),
//! attached to the node's application socket (the file's `[clients]`
//! section, served once the workload is loaded) instead of inside the node.
//! The nodes start no client of their own (`StartRequest::external`); their
//! `/results` give the rows and counters, the clients' results the rest,
//! and the checks run over both as over the in-node clients' results.
//!
//! A node killed by `--kill` closes its socket: its client ends its run
//! with the transactions it had in flight indeterminate (`node_closed` in
//! its results), so no journal is needed to cover it.

use crate::cli::ClusterArgs;
use crate::external::{client_program, Clients, ClientsMode, RunDir};
use crate::Failure;
use splitkv_bench::remote::protocol::{BuiltWorkload, ClockOrigin, StartRequest};
use splitkv_bench::remote::Results;
use splitkv_host::deploy::{ClientSettings, ClientsStart, ClusterConfig};
use splitkv_workloads::results::ClientResults;
use splitkv_workloads::spec::{ClientSpec, ClientWorkload};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long the clients may take to exit once the nodes' run ended.
const CLIENT_EXIT_WAIT: Duration = Duration::from_secs(10);

/// The external clients of a deployed run.
#[derive(Debug)]
pub(super) struct ExternalClients {
    program: PathBuf,
    settings: ClientSettings,
    /// Where the clients write their results.
    dir: RunDir,
    clients: Option<Clients>,
}

impl ExternalClients {
    /// The external clients `mode` asks for (`None` for in-node clients),
    /// as [`Self::prepare`].
    ///
    /// # Errors
    /// As [`Self::prepare`].
    pub(super) fn of(
        mode: ClientsMode,
        config: &ClusterConfig,
        args: &ClusterArgs,
    ) -> Result<Option<ExternalClients>, Failure> {
        match mode {
            ClientsMode::InNode => Ok(None),
            ClientsMode::External => Self::prepare(config, args).map(Some),
        }
    }

    /// Checks that the cluster of `config` can serve external clients and
    /// that `args` ask nothing they cannot do.
    ///
    /// # Errors
    /// [`Failure::BadInput`]: no `[clients]` section, one that serves from
    /// an empty store (no workload procedures), `--journal`, `--restart`
    /// or `--replace`, or no client program.
    pub(super) fn prepare(
        config: &ClusterConfig,
        args: &ClusterArgs,
    ) -> Result<ExternalClients, Failure> {
        let bad = |m: &str| Err(Failure::BadInput(format!("--clients external: {m}")));
        let Some(settings) = config.clients.clone() else {
            return bad(
                "the cluster file has no [clients] section (the nodes serve no application socket)",
            );
        };
        if settings.start != ClientsStart::OnLoad {
            return bad("the cluster file's [clients] start must be \"on-load\" (the workload's procedures are registered when it is loaded)");
        }
        if args.journal {
            return bad("--journal journals in-node clients only (an external client's results cover a killed node)");
        }
        if args.restart.is_some() || args.replace.is_some() {
            return bad("not with --restart or --replace yet");
        }
        Ok(ExternalClients {
            program: client_program()?,
            settings,
            dir: RunDir::new()?,
            clients: None,
        })
    }

    /// Starts one client per node (`nodes` of them) for `workload`, with
    /// the parameters of `start`.
    ///
    /// # Errors
    /// [`Failure::BadInput`] for a workload no external client runs;
    /// [`Failure::Internal`] if a process cannot start.
    pub(super) fn start(
        &mut self,
        nodes: u16,
        workload: &BuiltWorkload,
        start: &StartRequest,
        drain: Duration,
    ) -> Result<(), Failure> {
        let workload = client_workload(workload)?;
        let specs: Vec<(u16, ClientSpec)> = (0..nodes)
            .map(|n| {
                let spec = ClientSpec {
                    workload,
                    client: n,
                    seed: start.seed,
                    inflight: start.inflight,
                    max_tries: start.max_tries,
                    budget: start.budget,
                    warmup_ms: start.warmup_ms,
                    run_ms: start
                        .run_ms
                        .unwrap_or(super::RUN_TIMEOUT.as_millis() as u64),
                };
                (n, spec)
            })
            .collect();
        let clients = Clients::start(
            &self.program,
            &self.settings,
            self.dir.path(),
            &specs,
            drain,
        )?;
        self.clients = Some(clients);
        Ok(())
    }

    /// Whether every client has exited (true before any started).
    pub(super) fn all_exited(&mut self) -> bool {
        self.clients.as_mut().is_none_or(Clients::all_exited)
    }

    /// Waits for the clients and reads their results, by node; the client
    /// of `killed` may have lost its node.
    ///
    /// # Errors
    /// As [`Clients::finish`].
    pub(super) fn finish(&mut self, killed: Option<u16>) -> Result<Vec<ClientResults>, Failure> {
        let clients = (self.clients.take())
            .ok_or_else(|| Failure::Internal("the external clients were not started".into()))?;
        clients.finish(Instant::now() + CLIENT_EXIT_WAIT, killed)
    }
}

/// The external client's workload of the loaded `workload`.
fn client_workload(workload: &BuiltWorkload) -> Result<ClientWorkload, Failure> {
    use splitkv_bench::history::HistoryKind;
    match workload {
        BuiltWorkload::Smallbank(w) => Ok(ClientWorkload::Smallbank { workload: *w }),
        BuiltWorkload::History(w) if w.api() != splitkv_bench::TxApi::Shipped => {
            Err(Failure::BadInput(
                "--clients external runs the history workloads through their shipped procedure only (--api shipped)".into(),
            ))
        }
        BuiltWorkload::History(w) => Ok(match w.kind {
            HistoryKind::ListAppend(config) => ClientWorkload::ListAppend { config },
            HistoryKind::Register(config) => ClientWorkload::Register { config },
        }),
        BuiltWorkload::Applications => Err(Failure::BadInput(
            "--clients external needs a workload".into(),
        )),
    }
}

/// `node`'s results: its own (rows, counters, roles) with what its client
/// saw (counters, latency, summaries, history, clock). `node` is `None`
/// for a node that was killed: its rows are gone, its client's results
/// stand alone.
pub(super) fn merged(node: Option<Results>, client: &ClientResults) -> Results {
    let origin = client.clock_origin_ns;
    let mut r = node.unwrap_or_else(|| Results::empty(client.node, ClockOrigin::default(), true));
    r.all = client.all.clone();
    r.window = client.window.clone();
    r.latency_ns = client.latency_ns.clone();
    r.smallbank = client.smallbank;
    r.history = client.history.clone();
    r.clock = ClockOrigin {
        lo_ns: origin,
        hi_ns: origin,
    };
    r
}

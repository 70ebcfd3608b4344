//! `splitkv bench smallbank|list-append|register --cluster FILE [--spawn]`:
//! drives a deployed cluster through its nodes' control endpoints
//! (`splitkv_host::deploy::control`, bodies in `splitkv_bench::remote::protocol`):
//! load on every node (each loads the rows it replicates), start every
//! node's client, wait (progress bar), collect every node's results, then
//! run the workload's checks across processes (`splitkv_bench::remote::check`)
//! and print the in-process bench's report.
//!
//! `--spawn` first starts the file's node processes on this machine and
//! stops them at the end ([`spawn::Spawned`], also on error paths). A node
//! that cannot be reached, or dies during the run, is one line and exit 2;
//! a failed check is exit 1.
//!
//! `--kill NODE@SECS` (with `--spawn`) SIGKILLs that node SECS into the run;
//! the run goes on with the survivors, whose results are collected as usual,
//! while the killed node's client is replayed from its journal
//! (`splitkv_bench::remote::journal`, written to the run's directory before
//! each transaction is submitted; `--journal` turns it on without a kill).
//! The checks then read every key at its first surviving replica, compare
//! the surviving replicas, and allow the indeterminate transactions either
//! outcome (history) or their money range (Smallbank). The report says which
//! node was killed, when, and what the survivors committed after it.
//!
//! `--nic-crash NODE@SECS` crashes only that node's NIC runtime SECS into
//! the run (`POST /fault/nic-restart`): it restarts and rebuilds
//! from its peers; the node's host, data and client live on (its
//! transactions in flight are `Unknown`, which the checks allow), every
//! node's results are collected as usual, and the run ends only once the
//! node serves again. The report says when, whether it serves again, and
//! what the cluster committed after it.
//!
//! `--restart NODE@SECS` (with `--kill` of that node) starts it again
//! ([`restart`]): it rejoins empty, is copied, and the run ends once it is
//! a replica again; its rows are then checked like every node's.
//! `--replace NODE@SECS` does the same on a "new machine": the new process
//! listens at fresh addresses, which the peers learn through etcd
//! ([`replace`]). The new process is brought up (control endpoint, `/load`,
//! client) on a thread of its own, so the loop keeps polling and sampling.
//!
//! Times: what the bench does (the kill, the restart) is on its own clock,
//! from the run's start; what happens at the nodes (a new epoch installed,
//! a recovery's resume and first commit, a copy done, the degree restored)
//! is dated by the nodes' clocks (`/status` `events_unix_ms`, [`clock`]),
//! not by when the loop's poll saw it. The timeline is sampled every
//! [`SAMPLE_INTERVAL`] throughout.

mod clock;
mod end;
mod external;
mod kill;
mod nic_crash;
mod replace;
mod restart;
mod spawn;

use crate::cli::{ClusterArgs, HistoryRunArgs, KillAt, SmallbankArgs};
use crate::external::ClientsMode;
use crate::report::{history, replica_line, NicTotals, SessionTotals};
use crate::report::{Report, RunFigures, SmallbankReport};
use crate::timeline::{Timeline, SAMPLE_INTERVAL};
use crate::Failure;
use clock::{NodeClock, RunClock};
use indicatif::{ProgressBar, ProgressStyle};
use nic_crash::NicCrash;
use serde::de::DeserializeOwned;
use serde_json::Value;
use splitkv_bench::history_gen::TxShape;
use splitkv_bench::remote::check::history_stats;
use splitkv_bench::remote::protocol::*;
use splitkv_bench::remote::replay::results_from_journal;
use splitkv_bench::remote::Results;
use splitkv_host::deploy::ClusterConfig;
use splitkv_nic::CommitProtocol;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Longest spawned nodes' control endpoints may take to answer at the start
/// (without `--spawn` the nodes must answer at once).
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How often the driver polls the nodes while waiting.
const POLL_PERIOD: Duration = Duration::from_millis(50);
/// How long the transactions in flight when the run ends may take.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest a run without a duration may take.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// Pause between the last client finishing and collecting results, so
/// messages still on their way (commits to primaries and backups) land.
const SETTLE: Duration = Duration::from_millis(200);

/// A deployed cluster being driven.
struct Deployed {
    config: ClusterConfig,
    spawned: Option<spawn::Spawned>,
    /// `--kill`: the node to kill and when.
    kill: Option<KillAt>,
    /// The node killed, and when after the run's start.
    killed: Option<(u16, Duration)>,
    /// The survivors' committed transactions (`/status`) just after the
    /// kill, and at the end of the run.
    committed_around_kill: (Option<u64>, u64),
    /// Where the clients' journals go (`--journal`, `--kill`).
    run_dir: Option<PathBuf>,
    /// `--timeline`: the survivors' committed count over the run, with the
    /// kill, each new epoch and each recovery's resume marked.
    timeline: Option<Timeline>,
    /// When the next timeline sample is due (every [`SAMPLE_INTERVAL`]).
    next_sample: Duration,
    /// The bench's wall clock at the run's start, to place the nodes'
    /// event times ([`clock`]).
    run_clock: RunClock,
    /// What happened at the nodes and when, by their clocks.
    node_clock: NodeClock,
    /// Each node's committed count as last seen (a killed node's stays at
    /// its last value, so the timeline's total never drops at the kill).
    committed_by_node: Vec<u64>,
    /// `--nic-crash`, and what came of it.
    nic_crash: Option<NicCrash>,
    /// `--restart`, and what came of it.
    restart: Option<restart::Restart>,
    /// The epoch of the first configuration a survivor served with every
    /// shard back at the degree without the killed node (with more nodes
    /// than replicas).
    restored_without_killed: Option<u64>,
    /// `--clients external`: the clients' processes ([`external`]).
    external: Option<external::ExternalClients>,
}

fn bad(e: impl std::fmt::Display) -> Failure {
    Failure::BadInput(e.to_string())
}

impl Deployed {
    /// Reads the file, refuses a `protocol` other than the file's and
    /// external `clients` the file cannot serve, spawns the nodes if asked,
    /// waits until every control endpoint answers.
    fn open(
        args: &ClusterArgs,
        threads: usize,
        seed: u64,
        protocol: Option<CommitProtocol>,
        clients: ClientsMode,
    ) -> Result<Deployed, Failure> {
        let path = args
            .cluster
            .as_ref()
            .ok_or_else(|| bad("--cluster is needed"))?;
        let config =
            ClusterConfig::from_file(path).map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if let Some(p) = protocol.filter(|&p| p != config.protocol.commit) {
            return Err(bad(format!(
                "--protocol {p}: the cluster of {} runs {} (its [protocol] commit)",
                path.display(),
                config.protocol.commit
            )));
        }
        let external = external::ExternalClients::of(clients, &config, args)?;
        let mut d = Deployed {
            config,
            spawned: None,
            kill: args.kill,
            killed: None,
            committed_around_kill: (None, 0),
            run_dir: None,
            timeline: None,
            next_sample: Duration::ZERO,
            run_clock: RunClock::start().1,
            node_clock: NodeClock::default(),
            committed_by_node: Vec::new(),
            nic_crash: args.nic_crash.map(|at| NicCrash {
                at,
                posted: None,
                committed: (None, 0),
                own: (None, 0),
                serving_at: None,
                status: Value::Null,
            }),
            restart: (args.restart.map(|at| restart::Restart::new(at, false)))
                .or(args.replace.map(|at| restart::Restart::new(at, true))),
            restored_without_killed: None,
            external,
        };
        kill::check_flags(args, &d.config)?;
        if args.journal || args.kill.is_some() {
            let dir = std::env::temp_dir().join(format!("splitkv-run-{}", std::process::id()));
            std::fs::create_dir_all(&dir)
                .map_err(|e| bad(format!("cannot create {}: {e}", dir.display())))?;
            d.run_dir = Some(dir);
        }
        if args.spawn {
            // Started one after another below, each once the previous
            // answers (it holds its lease and registered with its
            // membership), so no node reads the membership while another
            // is half-registered.
            d.spawned =
                Some(spawn::Spawned::start(path, &[], threads.clamp(1, 2), seed).map_err(bad)?);
        }
        let start = Instant::now();
        for n in 0..d.config.nodes.len() as u16 {
            if let Some(s) = d.spawned.as_mut() {
                s.start_node(d.config.nodes[n as usize].id).map_err(bad)?;
            }
            loop {
                match d.call_raw(n, "GET", "/status", None) {
                    Ok(_) => break,
                    Err(e) if d.spawned.is_none() || start.elapsed() >= READY_TIMEOUT => {
                        return Err(d.dead(n, e))
                    }
                    Err(e) => {
                        if let Some(f) = d.exited() {
                            return Err(f.unwrap_or_else(|| d.dead(n, e)));
                        }
                        std::thread::sleep(POLL_PERIOD);
                    }
                }
            }
        }
        Ok(d)
    }

    /// A spawned node that exited, as a failure.
    fn exited(&mut self) -> Option<Option<Failure>> {
        let (id, status) = self.spawned.as_mut()?.exited()?;
        Some(Some(bad(format!("node {id} exited ({status})"))))
    }

    fn dead(&mut self, node: u16, e: crate::http::CallFailed) -> Failure {
        match self.exited() {
            Some(Some(f)) => f,
            _ => bad(format!("node {node}: {e}")),
        }
    }

    fn call_raw(
        &self,
        node: u16,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, crate::http::CallFailed> {
        crate::http::call(
            self.control_of(node),
            method,
            path,
            &self.config.token,
            body,
        )
    }

    /// A control call to `node`, its answer decoded as `T`.
    fn call<T: DeserializeOwned>(
        &mut self,
        node: u16,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<T, Failure> {
        let v = self
            .call_raw(node, method, path, body)
            .map_err(|e| self.dead(node, e))?;
        serde_json::from_value(v).map_err(|e| bad(format!("node {node}: {path}: {e}")))
    }

    fn nodes(&self) -> u16 {
        self.config.nodes.len() as u16
    }

    /// Loads, starts, waits and collects (see the module docs).
    fn run(
        &mut self,
        workload: WorkloadSpec,
        start: StartRequest,
        expected: Duration,
    ) -> Result<(Vec<Results>, Duration), Failure> {
        let load = serde_json::to_value(LoadRequest {
            version: PROTOCOL_VERSION,
            workload,
            rejoin: false,
        })
        .map_err(|e| Failure::Internal(e.to_string()))?;
        let bar = ProgressBar::new(self.nodes() as u64).with_style(
            ProgressStyle::with_template("loading  {bar:40} {pos}/{len} nodes {elapsed}")
                .expect("valid template"),
        );
        for n in 0..self.nodes() {
            let _: LoadAnswer = self.call(n, "POST", "/load", Some(&load))?;
            bar.inc(1);
        }
        bar.finish_and_clear();
        let built = workload.build().map_err(bad)?;
        let (t0, run_clock) = RunClock::start();
        self.run_clock = run_clock;
        for n in 0..self.nodes() {
            let mut start = start.clone();
            start.journal = self.journal(n).map(|p| p.display().to_string());
            start.external = self.external.is_some();
            let body =
                serde_json::to_value(&start).map_err(|e| Failure::Internal(e.to_string()))?;
            let _: StartAnswer = self.call(n, "POST", "/workload/start", Some(&body))?;
        }
        let nodes = self.nodes();
        if let Some(e) = self.external.as_mut() {
            e.start(nodes, &built, &start, DRAIN_TIMEOUT)?;
        }
        self.wait(expected, t0, &start)?;
        let elapsed = t0.elapsed();
        std::thread::sleep(SETTLE);
        let killed = self.killed.map(|(k, _)| k);
        let clients = match self.external.as_mut() {
            Some(e) => Some(e.finish(killed)?),
            None => None,
        };
        let mut results = Vec::with_capacity(self.nodes() as usize);
        for n in 0..self.nodes() {
            self.not_fenced(n)?;
            let r = match &clients {
                // The killed node's rows are gone; its client's results stand.
                Some(c) if self.is_killed(n) => external::merged(None, &c[n as usize]),
                Some(c) => external::merged(Some(self.results_of(n, &built)?), &c[n as usize]),
                None => self.results_of(n, &built)?,
            };
            results.push(r);
        }
        Ok((results, elapsed))
    }

    /// A node that is not the `--kill` one and stopped serving by its
    /// membership (a fail-stop: its lease ran out, or a configuration left
    /// it out) is named with its reason, as what it is, before any check
    /// reads its rows (which it no longer serves: a replica check would
    /// blame the rows, not the fence).
    fn not_fenced(&mut self, n: u16) -> Result<(), Failure> {
        if self.is_killed(n) {
            return Ok(());
        }
        let s: Value = self.call(n, "GET", "/status", None)?;
        let m = &s["membership"];
        let why = m["fail_stop"].as_str().or(m["agent"]["stopped"].as_str());
        match why {
            Some(why) => Err(Failure::Check(format!(
                "node {n} stopped serving during the run (membership fail-stop: {why}); last etcd error: {}",
                m["last_error"].as_str().unwrap_or("none")
            ))),
            None => Ok(()),
        }
    }

    /// `node`'s results: from its control endpoint, or replayed from its
    /// client's journal if it was killed.
    fn results_of(&mut self, n: u16, built: &BuiltWorkload) -> Result<Results, Failure> {
        if self.is_killed(n) {
            let path = self.journal(n).ok_or_else(|| bad("no journal directory"))?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| Failure::Check(format!("journal {}: {e}", path.display())))?;
            let mut r = results_from_journal(built, n, &text)
                .map_err(|e| Failure::Check(format!("journal {}: {e}", path.display())))?;
            if self.restored() {
                // Its old client's history from the journal; its rows from
                // the process that rejoined.
                let fresh: Results = self.call(n, "GET", "/results", None)?;
                r.rows = fresh.rows;
            }
            return Ok(r);
        }
        let r: Results = self.call(n, "GET", "/results", None)?;
        if r.version != PROTOCOL_VERSION || r.node != n || !r.done {
            return Err(bad(format!(
                "node {n}: unexpected results (version {}, node {}, done {})",
                r.version, r.node, r.done
            )));
        }
        Ok(r)
    }

    /// Waits until every surviving node's client is done (and the `--kill`
    /// node was killed, the `--nic-crash` node serves again), with a
    /// progress bar.
    fn wait(
        &mut self,
        expected: Duration,
        t0: Instant,
        start: &StartRequest,
    ) -> Result<(), Failure> {
        let bar = ProgressBar::new(expected.as_millis().max(1) as u64).with_style(
            ProgressStyle::with_template("running  {bar:40} {elapsed}/{msg}")
                .expect("valid template"),
        );
        bar.set_message(format!("{expected:?}"));
        let deadline = expected + DRAIN_TIMEOUT;
        loop {
            self.kill_if_due(t0.elapsed())?;
            self.nic_crash_if_due(t0.elapsed())?;
            self.restart_if_due(t0.elapsed(), start)?;
            self.restart_progress(t0.elapsed())?;
            let mut all = self.kill.is_none() || self.killed.is_some();
            let mut committed = 0;
            for n in 0..self.nodes() {
                if self.is_killed(n) && !self.is_restarted(n) {
                    continue;
                }
                let s: Value = self.call(n, "GET", "/status", None)?;
                if let Some(f) = s.get("failure").and_then(Value::as_str) {
                    return Err(bad(format!("node {n} failed: {f}")));
                }
                let kill_ms = (self.killed.filter(|(k, _)| *k != n))
                    .map(|(_, at)| self.run_clock.unix_ms(at));
                self.node_clock.note(n, &s, kill_ms);
                if self.is_killed(n) {
                    // Restarted: no client; its count stays its old one's.
                    self.note_restart(t0.elapsed(), &s);
                    continue;
                }
                all &= s.get("run_done").and_then(Value::as_bool) == Some(true);
                all &= self.note_nic_crash(t0.elapsed(), n, &s, None);
                self.note_restored_without_killed(&s);
                let c = s["transactions"]["committed"].as_u64().unwrap_or(0);
                committed += c;
                if self.committed_by_node.len() <= n as usize {
                    self.committed_by_node.resize(n as usize + 1, 0);
                }
                self.committed_by_node[n as usize] = c;
            }
            let total = self.committed_by_node.iter().sum();
            self.sample(t0.elapsed(), total);
            if self.killed.is_some() {
                self.committed_around_kill.0.get_or_insert(committed);
            }
            self.committed_around_kill.1 = committed;
            self.note_nic_crash(t0.elapsed(), u16::MAX, &Value::Null, Some(committed));
            all &= self.restart_settled(t0.elapsed())?;
            all &= self.external.as_mut().is_none_or(|e| e.all_exited());
            if all {
                break;
            }
            if t0.elapsed() > deadline {
                return Err(bad(format!("the run did not end within {deadline:?}")));
            }
            bar.set_position(t0.elapsed().as_millis() as u64);
            std::thread::sleep(POLL_PERIOD);
        }
        bar.finish_and_clear();
        Ok(())
    }

    /// Samples the timeline (if any) when [`SAMPLE_INTERVAL`] has passed
    /// since the last sample, keeping to the interval's grid unless a pass
    /// came late.
    fn sample(&mut self, t: Duration, committed: u64) {
        let Some(tl) = self.timeline.as_mut() else {
            return;
        };
        if t < self.next_sample {
            return;
        }
        self.next_sample = (self.next_sample + SAMPLE_INTERVAL).max(t);
        tl.sample(t, committed);
    }

    /// Marks on the timeline what the nodes' clocks dated: each new epoch
    /// and each recovery's resume, the restored degree (with or without
    /// the killed node).
    fn mark_node_events(&mut self) {
        let mut events = self.node_clock.events(&self.run_clock);
        if let Some(t) = self.restored_at() {
            events.push((t, "replication restored".into()));
        }
        if let (Some(t), Some((n, _))) = (self.restored_without_killed_at(), self.killed) {
            events.push((t, format!("replication restored without node {n}")));
        }
        if let Some(tl) = self.timeline.as_mut() {
            events.iter().for_each(|(t, label)| tl.event(*t, label));
        }
    }

    /// Writes the timeline, if one was asked for, with the nodes' events.
    fn write_timeline(&mut self, path: Option<&Path>) -> Result<(), Failure> {
        self.mark_node_events();
        match (&self.timeline, path) {
            (Some(t), Some(p)) => t.write_reported(p).map(|_| ()),
            _ => Ok(()),
        }
    }

    /// Stops spawned nodes; a node that did not drain cleanly is reported.
    fn close(mut self) {
        if let Some(mut s) = self.spawned.take() {
            for (id, status) in s.close() {
                let log = std::env::temp_dir()
                    .join(format!("splitkv-node-{}-{id}.log", std::process::id()));
                eprintln!(
                    "warning: node {id} did not exit cleanly ({status}; log {})",
                    log.display()
                );
            }
        }
    }
}

/// `bench smallbank --cluster`.
pub fn smallbank(args: &SmallbankArgs) -> Result<(), Failure> {
    if let Some(p) = &args.timeline {
        crate::timeline::check_path(p)?;
    }
    let mut d = Deployed::open(
        &args.deployed,
        args.threads,
        args.seed,
        args.protocol,
        args.clients,
    )?;
    d.timeline = args
        .timeline
        .as_ref()
        .map(|_| Timeline::new("Smallbank, deployed cluster"));
    let nodes = d.config.nodes.len();
    let replication = d.config.replication;
    let spec = WorkloadSpec::Smallbank {
        accounts: args.accounts_per_node * nodes as u64,
        hot_accounts: args.hot_accounts,
        api: args.api,
    };
    let BuiltWorkload::Smallbank(workload) = spec.build().map_err(bad)? else {
        return Err(Failure::Internal("not smallbank".into()));
    };
    let total = args.warmup + args.duration;
    let start = StartRequest {
        version: PROTOCOL_VERSION,
        seed: args.seed,
        inflight: args.inflight,
        budget: None,
        max_tries: args.max_tries,
        warmup_ms: args.warmup.as_millis() as u64,
        run_ms: Some(total.as_millis() as u64),
        journal: None,
        external: false,
    };
    let (results, _) = d.run(spec, start, total)?;
    let end = d.end(args.timeline.as_deref())?;
    let mirror = end.mirror(&workload, nodes, replication, &results)?;
    let money = mirror.check_money(&workload, &results);
    let replicas = mirror.check_replicas();
    Report::smallbank(SmallbankReport {
        args,
        nodes,
        replication,
        accounts: workload.accounts,
        figures: &RunFigures::of_results(&results),
        money: &money,
        replicas: &replicas,
    })
    .print(args.json)?;
    if !args.json {
        outln!("{}", SessionTotals::of_results(&results).line());
    }
    end.finish(args.json, [money.map(drop), replicas.map(drop)])
}

/// `bench list-append|register|micro --cluster`: `keys` keys, transactions
/// of `shape`, on registers if `register` (else lists).
pub fn history(
    args: &HistoryRunArgs,
    keys: u64,
    shape: TxShape,
    register: bool,
) -> Result<(), Failure> {
    if let Some(p) = &args.timeline {
        crate::timeline::check_path(p)?;
    }
    if !register && args.api == splitkv_bench::TxApi::Txn {
        let e = splitkv_bench::ApiError::ListAppendTxn;
        return Err(Failure::BadInput(format!("--api txn: {e}")));
    }
    let mut d = Deployed::open(
        &args.deployed,
        args.threads,
        args.seed,
        args.protocol,
        args.clients,
    )?;
    d.timeline = args.timeline.as_ref().map(|_| {
        let name = if register { "register" } else { "list-append" };
        Timeline::new(format!("{name}, deployed cluster"))
    });
    let nodes = d.config.nodes.len();
    let replication = d.config.replication;
    let shape = ShapeSpec::from(shape);
    let spec = if register {
        WorkloadSpec::Register {
            keys,
            shape,
            api: args.api,
        }
    } else {
        WorkloadSpec::ListAppend {
            keys,
            clients: nodes as u64,
            transactions_per_client: args.transactions,
            shape,
            api: args.api,
        }
    };
    let BuiltWorkload::History(workload) = spec.build().map_err(bad)? else {
        return Err(Failure::Internal("not a history workload".into()));
    };
    let start = StartRequest {
        version: PROTOCOL_VERSION,
        seed: args.seed,
        inflight: args.inflight,
        budget: Some(args.transactions),
        max_tries: 1,
        warmup_ms: 0,
        run_ms: args.duration.map(|d| d.as_millis() as u64),
        journal: None,
        external: false,
    };
    let expected = args.duration.unwrap_or(RUN_TIMEOUT);
    let (results, elapsed) = d.run(spec, start, expected)?;
    let end = d.end(args.timeline.as_deref())?;
    let mirror = end.mirror(&workload, nodes, replication, &results)?;
    let replicas = mirror.check_replicas();
    let checked = mirror.check_history(&workload, &results, args.history.as_deref());
    history::Summary {
        workload: spec.name(),
        args,
        keys,
        shape: TxShape::from(shape),
        nodes,
        replication,
        stats: history_stats(&results),
        elapsed,
        checked: checked.as_ref().map(history::Checked::from),
        deployed: Some(history::Deployed {
            nic: NicTotals::of_results(&results),
            sessions: SessionTotals::of_results(&results),
            replica_check: replica_line(&replicas),
        }),
    }
    .print(args.json);
    end.finish(args.json, [checked.map(drop), replicas.map(drop)])
}

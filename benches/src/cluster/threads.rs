//! [`BenchCluster::run_threads`]: the local threaded driver (DESIGN.md driver
//! 2) for a bench cluster, through the embedding API. The nodes' parts and
//! the load generators (as application components, `ClusterParts::add_app`)
//! go onto the API's polling threads (`ClusterParts::start`); the calling
//! thread waits until every load generator is done, watching for a
//! panicking thread (the API stops the whole cluster and reports
//! `ClusterError::Panicked`), then takes everything back with
//! `Cluster::shutdown`.

use super::{BenchCluster, BuildError};
use crate::loadgen::LoadGen;
use crate::workload::{TxGenerator, Workload};
use splitkv_host::cluster::{AppComponent, Cluster};
use splitkv_nic::{Component, Nanos};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the waiting thread checks the cluster and calls its progress
/// callback.
pub const PROGRESS_PERIOD: Duration = Duration::from_millis(20);

/// How a threaded run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadRun {
    /// Load generators stop drawing at this time of the cluster's clock
    /// (`None`: when their budget is spent).
    pub stop_after: Option<Duration>,
    /// The run is cut short (the load generators stopped, the cluster shut
    /// down and drained on the caller's thread) if it has not ended by then.
    pub timeout: Duration,
    /// Adds a component that panics when first polled (the binary's
    /// `--inject-panic`, a test hook of the internal-error path).
    pub inject_panic: bool,
}

/// A load generator on a polling thread: stops drawing at `stop_at_ns` and
/// counts itself in `done` once it has nothing left to do.
struct Polled<G> {
    loadgen: LoadGen<G>,
    stop_at_ns: Nanos,
    done: Arc<AtomicUsize>,
    counted: bool,
}

impl<G: TxGenerator> Component for Polled<G> {
    fn run_iteration(&mut self, now: Nanos) -> bool {
        if now >= self.stop_at_ns {
            self.loadgen.stop();
        }
        let work = self.loadgen.run_iteration(now);
        if !self.counted && self.loadgen.is_done() {
            self.counted = true;
            self.done.fetch_add(1, Ordering::Release);
        }
        work
    }
}

/// A component that panics when first run (`ThreadRun::inject_panic`).
struct InjectedPanic;

impl Component for InjectedPanic {
    fn run_iteration(&mut self, _now: Nanos) -> bool {
        panic!("injected panic (--inject-panic)");
    }
}

impl<W: Workload> BenchCluster<W>
where
    W::Generator: 'static,
{
    /// Runs the cluster on the embedding API's polling threads
    /// ([`ClusterSpec::threads`](super::ClusterSpec::threads)) until every
    /// load generator is done (budget spent, or `run.stop_after` reached and
    /// its transactions finished) or `run.timeout`; `tick(elapsed)` is called
    /// every [`PROGRESS_PERIOD`] meanwhile. Returns the cluster, shut down
    /// (its parts drained; call [`BenchCluster::drain`] on the caller's thread
    /// before the checks, starting from `parts.now()`), and the time run. The
    /// cluster's clock starts at 0 when the threads start, so a window set
    /// before ([`BenchCluster::set_window`]) is in that clock.
    ///
    /// # Errors
    /// [`BuildError::Cluster`] with `ClusterError::Panicked` (the thread and
    /// the panic's message) if a polling thread panicked, or
    /// `ClusterError::Spawn`; [`BuildError::LostLoadGen`] should the API
    /// hand back a component of another type.
    pub fn run_threads(
        self,
        run: ThreadRun,
        mut tick: impl FnMut(Duration),
    ) -> Result<(BenchCluster<W>, Duration), BuildError> {
        self.run_threads_watched(run, |t, _| tick(t))
    }

    /// [`BenchCluster::run_threads`], with `tick(elapsed, cluster)` given
    /// the running cluster too (its published counters, `Cluster::stats`,
    /// and clock, `Cluster::now`: what `splitkv bench --timeline` samples).
    ///
    /// # Errors
    /// As [`BenchCluster::run_threads`].
    pub fn run_threads_watched(
        self,
        run: ThreadRun,
        mut tick: impl FnMut(Duration, &Cluster),
    ) -> Result<(BenchCluster<W>, Duration), BuildError> {
        self.run_threads_until(run, true, |t, c| {
            tick(t, c);
            true
        })
    }

    /// [`BenchCluster::run_threads_watched`] for a run whose clients are
    /// (also) outside the cluster — processes attached to the nodes'
    /// application sockets ([`ClusterSpec::applications`](super::ClusterSpec::applications)):
    /// the run goes on until every load generator is done and
    /// `clients_done(elapsed, cluster)` (called every [`PROGRESS_PERIOD`])
    /// says the outside clients are, or `run.timeout`.
    ///
    /// # Errors
    /// As [`BenchCluster::run_threads`].
    pub fn run_threads_with_outside_clients(
        self,
        run: ThreadRun,
        clients_done: impl FnMut(Duration, &Cluster) -> bool,
    ) -> Result<(BenchCluster<W>, Duration), BuildError> {
        self.run_threads_until(run, false, clients_done)
    }

    /// The threaded run: until every load generator is done and the last
    /// `outside_done(elapsed, cluster)` (starting at `outside_done_at_start`)
    /// said true, or `run.timeout`.
    fn run_threads_until(
        self,
        run: ThreadRun,
        outside_done_at_start: bool,
        mut outside_done: impl FnMut(Duration, &Cluster) -> bool,
    ) -> Result<(BenchCluster<W>, Duration), BuildError> {
        let BenchCluster {
            spec,
            workload,
            mut parts,
            loadgens,
            failed,
        } = self;
        let nodes = loadgens.len();
        let done = Arc::new(AtomicUsize::new(0));
        let stop_at_ns = run.stop_after.map_or(Nanos::MAX, |d| d.as_nanos() as Nanos);
        for loadgen in loadgens {
            parts.add_app(Polled {
                loadgen,
                stop_at_ns,
                done: done.clone(),
                counted: false,
            });
        }
        if run.inject_panic {
            parts.add_app(InjectedPanic);
        }
        let cluster = parts.start()?;
        let start = Instant::now();
        let mut outside = outside_done_at_start;
        while (done.load(Ordering::Acquire) < nodes || !outside) && start.elapsed() < run.timeout {
            cluster.check()?;
            outside = outside_done(start.elapsed(), &cluster);
            std::thread::sleep(PROGRESS_PERIOD);
        }
        let elapsed = start.elapsed();
        let mut parts = cluster.shutdown()?;
        let mut loadgens = Vec::with_capacity(nodes);
        for (i, app) in std::mem::take(&mut parts.apps).into_iter().enumerate() {
            let any: Box<dyn Any> = app;
            let polled = any
                .downcast::<Polled<W::Generator>>()
                .map_err(|_| BuildError::LostLoadGen(i))?;
            let mut loadgen = polled.loadgen;
            loadgen.stop();
            loadgens.push(loadgen);
        }
        Ok((
            BenchCluster {
                spec,
                workload,
                parts,
                loadgens,
                failed,
            },
            elapsed,
        ))
    }
}

// `AppComponent` is what `add_app` takes: any `'static` component.
const _: fn() = || {
    fn is_app<T: AppComponent>() {}
    is_app::<Polled<crate::smallbank::SmallbankGenerator>>();
};

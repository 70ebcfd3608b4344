//! `splitkv sim`: many seeds of one workload under the deterministic
//! simulator (DESIGN.md driver 1), each run checked, with a progress bar.
//!
//! Seeds run on `--jobs` threads at once; each seed is one thread's
//! single-threaded, virtual-time run, so a seed reproduces its run whatever
//! else runs beside it. A failing seed prints what failed and the one command
//! that replays it alone (with `--trace`, which prints the simulator's last
//! events and each node's state at the end,
//! `splitkv_sim::cluster::SimCluster::describe_state`). Exit code 1 when any
//! seed failed.

pub mod args;
pub mod faults;
mod seed;

use crate::Failure;
use args::SimArgs;
use indicatif::{ProgressBar, ProgressStyle};
use seed::{run_seed, SeedOutcome};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Runs every seed of `args` and prints the summary.
pub fn run(args: &SimArgs) -> Result<(), Failure> {
    if args.list_faults {
        for m in splitkv_sim::faults::FaultMix::ALL {
            outln!("{m}");
        }
        return Ok(());
    }
    if let Some(dir) = &args.history {
        std::fs::create_dir_all(dir)
            .map_err(|e| Failure::BadInput(format!("history directory {}: {e}", dir.display())))?;
    }
    let seeds = args.seeds.range();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .min(args.seeds.len() as usize)
        .max(1);
    let bar = ProgressBar::new(args.seeds.len());
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} seeds, {msg} [{elapsed}, eta {eta}]")
            .expect("static template"),
    );
    let next = AtomicU64::new(seeds.start);
    let stop = AtomicBool::new(false);
    let outcomes = Mutex::new(Vec::new());
    let failed = AtomicU64::new(0);
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end {
                    break;
                }
                let out = run_caught(args, seed);
                if let Some(why) = &out.failure {
                    failed.fetch_add(1, Ordering::Relaxed);
                    bar.println(format!("seed {seed} FAILED: {why}"));
                    bar.println(format!("  replay: {}", args.replay_command(seed)));
                    if !args.keep_going {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                bar.set_message(format!("{} failed", failed.load(Ordering::Relaxed)));
                bar.inc(1);
                outcomes.lock().expect("outcomes lock").push(out);
            });
        }
    });
    bar.finish_and_clear();
    let mut outcomes = outcomes.into_inner().expect("outcomes lock");
    outcomes.sort_by_key(|o| o.seed);
    summarize(args, &outcomes, started.elapsed())
}

/// One seed's run; a panic inside it is that seed's failure, not the run's.
fn run_caught(args: &SimArgs, seed: u64) -> SeedOutcome {
    std::panic::catch_unwind(|| run_seed(args, seed)).unwrap_or_else(|p| {
        SeedOutcome::failed(seed, format!("panicked: {}", crate::panic_message(&*p)))
    })
}

fn summarize(
    args: &SimArgs,
    outcomes: &[SeedOutcome],
    wall: std::time::Duration,
) -> Result<(), Failure> {
    let failed: Vec<&SeedOutcome> = outcomes.iter().filter(|o| o.failure.is_some()).collect();
    let committed: u64 = outcomes.iter().map(|o| o.committed).sum();
    let virtual_ns: u64 = outcomes.iter().map(|o| o.virtual_ns).sum();
    let crashes: usize = outcomes.iter().map(|o| o.crashes).sum();
    let undecided: u64 = outcomes.iter().map(|o| o.undecided_rows).sum();
    outln!(
        "{} / {} / faults {}: {} seeds run, {} passed, {} failed; {} transactions committed, {} node crashes, {} undecided replica rows, {:.3} s simulated in {:.1} s",
        args.workload.flag(),
        args.protocol.as_str(),
        args.faults,
        outcomes.len(),
        outcomes.len() - failed.len(),
        failed.len(),
        committed,
        crashes,
        undecided,
        virtual_ns as f64 / 1e9,
        wall.as_secs_f64()
    );
    let restored: Vec<u64> = outcomes
        .iter()
        .flat_map(|o| o.restored_ns.iter().copied())
        .collect();
    if !restored.is_empty() {
        let rejoins: usize = outcomes.iter().map(|o| o.rejoins).sum();
        let (min, max) = (
            restored.iter().min().unwrap(),
            restored.iter().max().unwrap(),
        );
        let mean = restored.iter().sum::<u64>() / restored.len() as u64;
        outln!(
            "rejoins: {rejoins} restarted nodes, {} restored to replicas; crash to restored replication degree {:.2} / {:.2} / {:.2} ms simulated (min / mean / max)",
            restored.len(),
            *min as f64 / 1e6,
            mean as f64 / 1e6,
            *max as f64 / 1e6
        );
    }
    let chaos = outcomes.iter().fold([0; 4], |mut t, o| {
        t.iter_mut().zip(o.chaos).for_each(|(a, b)| *a += b);
        t
    });
    if chaos.iter().any(|&c| c > 0) {
        outln!(
            "chaos: NIC restarts {} inside a recovery epoch, {} of a copy source, {} of the copying node; {} second crashes during a copy",
            chaos[0], chaos[1], chaos[2], chaos[3]
        );
    }
    if outcomes.len() < args.seeds.len() as usize {
        outln!(
            "stopped after the first failing seed ({} of {} not run; --keep-going runs them all)",
            args.seeds.len() as usize - outcomes.len(),
            args.seeds.len()
        );
    }
    for o in &failed {
        outln!(
            "seed {} FAILED: {}",
            o.seed,
            o.failure.as_deref().unwrap_or("")
        );
        if let Some(trace) = &o.trace {
            outln!("  last simulator events of seed {}:\n{trace}", o.seed);
        }
        outln!("  replay: {}", args.replay_command(o.seed));
    }
    if let Some(dir) = &args.history {
        outln!("histories written to {}", dir.display());
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Check(format!(
            "{} of {} seeds failed",
            failed.len(),
            outcomes.len()
        )))
    }
}

//! Shared set-up of the loom model tests (`dlht_loom.rs`, `robinhood_loom.rs`).

/// Runs `f` under loom with at most `preemptions` preemptions per execution.
pub fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b.max_branches = 100_000;
    b.check(f);
}

//! The local-cluster driver (DESIGN.md driver 2, the embedded default): several
//! in-process nodes whose components are spread over a few OS threads, each
//! thread polling its fixed set of components. Components stay owned by the
//! caller (scoped threads borrow them), so the caller can inspect them after
//! the run.

use splitkv_nic::{Component, Nanos};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Idle passes over a thread's components before it yields the CPU.
pub const IDLE_PASSES_BEFORE_YIELD: u32 = 16;

/// Runs each group of components on its own thread until `stop` is set, passing
/// the time since `epoch` in nanoseconds as `now`. Returns when all threads
/// have stopped.
pub fn run_threads(groups: Vec<Vec<&mut dyn Component>>, epoch: Instant, stop: &AtomicBool) {
    std::thread::scope(|s| {
        for (i, mut group) in groups.into_iter().enumerate() {
            std::thread::Builder::new()
                .name(format!("splitkv-poll-{i}"))
                .spawn_scoped(s, move || {
                    let mut idle = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        let now = epoch.elapsed().as_nanos() as Nanos;
                        let mut work = false;
                        for c in group.iter_mut() {
                            work |= c.run_iteration(now);
                        }
                        if work {
                            idle = 0;
                        } else {
                            idle += 1;
                            if idle >= IDLE_PASSES_BEFORE_YIELD {
                                std::thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                        }
                    }
                })
                .expect("spawn polling thread");
        }
    });
}

/// Splits `components` round-robin into `threads` groups.
pub fn round_robin(
    components: Vec<&mut dyn Component>,
    threads: usize,
) -> Vec<Vec<&mut dyn Component>> {
    let threads = threads.max(1);
    let mut groups: Vec<Vec<&mut dyn Component>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, c) in components.into_iter().enumerate() {
        groups[i % threads].push(c);
    }
    groups.retain(|g| !g.is_empty());
    groups
}

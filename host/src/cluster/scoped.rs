//! The scoped driver: runs components the caller owns on scoped threads, so
//! the caller can inspect them after the run (the Smallbank bench's driver).

use super::poll::poll_until_stopped;
use super::ClusterError;
use splitkv_nic::Component;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Runs each group of components on its own thread until `stop` is set,
/// passing the time since `clock_origin` in nanoseconds as `now`. Returns when all
/// threads have stopped.
///
/// # Panics
/// When a polling thread panicked: every thread is stopped first, then this
/// panics with that thread's name and message ([`try_run_threads`] returns
/// it as an error instead).
pub fn run_threads(groups: Vec<Vec<&mut dyn Component>>, clock_origin: Instant, stop: &AtomicBool) {
    if let Err(e) = try_run_threads(groups, clock_origin, stop) {
        panic!("{e}");
    }
}

/// [`run_threads`] (each component's `now` is the nanoseconds since
/// `clock_origin`), reporting a panicking polling thread as
/// [`ClusterError::Panicked`] (its name and the panic's message) and a
/// component that stopped on a fault as [`ClusterError::ComponentStopped`],
/// after stopping every other thread (it sets `stop`).
///
/// # Errors
/// [`ClusterError::Panicked`] or [`ClusterError::ComponentStopped`] (the
/// first, if several), or [`ClusterError::Spawn`] if a thread could not be
/// started.
pub fn try_run_threads(
    groups: Vec<Vec<&mut dyn Component>>,
    clock_origin: Instant,
    stop: &AtomicBool,
) -> Result<(), ClusterError> {
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        let mut first_err = None;
        for (i, mut group) in groups.into_iter().enumerate() {
            let name = format!("splitkv-poll-{i}");
            let thread = name.clone();
            let spawned =
                std::thread::Builder::new()
                    .name(name.clone())
                    .spawn_scoped(s, move || {
                        let mut fault = None;
                        let run = poll_until_stopped(&thread, clock_origin, stop, |now| {
                            let mut work = false;
                            for c in group.iter_mut() {
                                work |= c.run_iteration(now);
                                if fault.is_none() {
                                    fault = c.fault();
                                    if fault.is_some() {
                                        stop.store(true, std::sync::atomic::Ordering::Relaxed);
                                    }
                                }
                            }
                            work
                        });
                        run.map(|()| fault)
                    });
            match spawned {
                Ok(h) => handles.push((name, h)),
                Err(e) => {
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                    first_err = Some(ClusterError::Spawn {
                        thread: name,
                        message: e.to_string(),
                    });
                    break;
                }
            }
        }
        for (thread, h) in handles {
            match h.join() {
                // `poll_until_stopped` catches panics, so `join` itself succeeds.
                Ok(Err(c)) => {
                    first_err.get_or_insert(ClusterError::Panicked {
                        thread: c.thread,
                        message: c.message,
                    });
                }
                Ok(Ok(Some(reason))) => {
                    first_err.get_or_insert(ClusterError::ComponentStopped { thread, reason });
                }
                Ok(Ok(None)) | Err(_) => {}
            }
        }
        first_err.map_or(Ok(()), Err)
    })
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

//! Helpers shared by the microbenchmarks and profiling examples
//! (`benches/tables.rs`, `examples/*.rs`).

use std::time::Duration;

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`). The
/// single-threaded measurements report it instead of wall time: the project
/// machine's two cores are shared with other jobs, and time the thread spends
/// descheduled would otherwise count as its own.
///
/// # Panics
/// If the clock cannot be read (not on Linux-like systems).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

pub use splitkv_workloads::loadgen::mix64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_is_injective_on_a_range_and_cpu_time_advances() {
        let ids: std::collections::HashSet<u64> = (0..10_000).map(mix64).collect();
        assert_eq!(ids.len(), 10_000);
        let t0 = thread_cpu_time();
        let mut x = 0u64;
        while thread_cpu_time() == t0 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_time() > t0);
    }
}

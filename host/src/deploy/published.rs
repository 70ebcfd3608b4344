//! [`Published`]: counters a node's polling thread publishes and its
//! control thread reads, one snapshot at a time (the DPDK and verbs
//! transports' counters: [`super::DpdkCounters`], [`super::VerbsCounters`]).
//! One uncontended lock per publish, never per packet; a snapshot is a
//! plain copy.

use std::sync::{Arc, Mutex};

/// The last snapshot of `T` a polling thread published (`Clone` shares it;
/// two handles are equal when they share one snapshot).
#[derive(Debug, Clone, Default)]
pub struct Published<T>(Arc<Mutex<T>>);

impl<T: Copy + Default> Published<T> {
    /// A handle holding `T::default()`.
    pub fn new() -> Published<T> {
        Published(Arc::new(Mutex::new(T::default())))
    }

    /// The last published snapshot.
    pub fn snapshot(&self) -> T {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the published snapshot.
    pub fn publish(&self, snapshot: T) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = snapshot;
    }
}

impl<T> PartialEq for Published<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<T> Eq for Published<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_snapshot_and_compare_equal() {
        let a: Published<u64> = Published::new();
        let b = a.clone();
        a.publish(7);
        assert_eq!(b.snapshot(), 7);
        assert_eq!(a, b);
        assert_ne!(a, Published::new());
    }
}

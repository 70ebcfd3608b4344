//! Shared memory in one process: what `create` makes, and the size bound.
//! (Hostile descriptors handed to another process: `two_process.rs`.)
// Shared memory is not modelled under loom (see `Region::from_memory`).
#![cfg(not(loom))]

use rustix::fs::SealFlags;
use splitkv_client::{MemoryError, SharedMemory, SHARED_MEMORY_BYTES_MAX};
use splitkv_layout::sync::Ordering;

#[test]
fn created_memory_is_sealed_sized_and_shared() {
    let memory = SharedMemory::create(8192).unwrap();
    assert_eq!(memory.len_bytes(), 8192);
    let seals = rustix::fs::fcntl_get_seals(memory.fd()).unwrap();
    assert!(seals.contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL));
    assert!(
        !seals.contains(SealFlags::WRITE),
        "both sides must be able to write"
    );
    // The seals hold: no shrinking, growing or further sealing.
    assert!(rustix::fs::ftruncate(memory.fd(), 4096).is_err());
    assert!(rustix::fs::ftruncate(memory.fd(), 16384).is_err());
    assert!(rustix::fs::fcntl_add_seals(memory.fd(), SealFlags::WRITE).is_err());
    let flags = rustix::io::fcntl_getfd(memory.fd()).unwrap();
    assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    // A second mapping of the same descriptor sees the first one's stores.
    let dup = rustix::io::fcntl_dupfd_cloexec(memory.fd(), 0).unwrap();
    let other = SharedMemory::from_fd(dup, 8192).unwrap();
    memory.region().store(8184, 42, Ordering::Release);
    assert_eq!(other.region().load(8184, Ordering::Acquire), 42);
}

#[test]
fn sizes_outside_the_bound_are_refused() {
    for len_bytes in [0, 100, SHARED_MEMORY_BYTES_MAX + 64] {
        assert!(matches!(
            SharedMemory::create(len_bytes),
            Err(MemoryError::BadSize { len_bytes: l }) if l == len_bytes
        ));
    }
    // The receiving side checks the size it agreed to before anything else.
    let memory = SharedMemory::create(4096).unwrap();
    let dup = rustix::io::fcntl_dupfd_cloexec(memory.fd(), 0).unwrap();
    assert!(matches!(
        SharedMemory::from_fd(dup, SHARED_MEMORY_BYTES_MAX + 64),
        Err(MemoryError::BadSize { .. })
    ));
}

//! Shared memory for the ring API (L5 §III-A.1): the client creates it, the
//! node maps it only after checking it.
//!
//! The client makes an anonymous memfd (`memfd_create` with `MFD_CLOEXEC |
//! MFD_ALLOW_SEALING`), sizes it with `ftruncate`, seals it with
//! `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL` and maps it `MAP_SHARED`
//! ([`SharedMemory::create`]). It then hands the descriptor to the node, which
//! maps it with [`SharedMemory::from_fd`] only if the descriptor is a sealable
//! shared-memory file, carries at least the shrink, grow and seal seals, and
//! has exactly the size the handshake announced. Hence:
//!
//! - the client cannot make the node fault: with `F_SEAL_SHRINK` the file can
//!   never get shorter than the mapping, so no access through it raises
//!   SIGBUS, and `F_SEAL_SEAL` forbids any further seal;
//! - the client cannot make the node allocate on its behalf: the memory is
//!   the client's (charged to it), its size is fixed by `F_SEAL_GROW`, and the
//!   node maps only the size it agreed to, at most
//!   [`SHARED_MEMORY_BYTES_MAX`].
//!
//! The contents stay untrusted: the client can write any byte at any time,
//! which the ring consumer and the doorbell already tolerate.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};
use splitkv_layout::{Region, RegionMemory, RegionMemoryError, CACHE_LINE_BYTES};
use std::ffi::c_void;
use std::sync::Arc;

/// Largest shared memory of one connection, in bytes (1 GiB): the bound the
/// node checks before it maps anything a client hands it.
pub const SHARED_MEMORY_BYTES_MAX: usize = 1 << 30;

/// Seals a shared memory must carry before it is mapped.
const SEALS_REQUIRED: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// Name of the memfd (shown in `/proc/PID/fd` and `/proc/PID/maps` only).
const MEMFD_NAME: &str = "splitkv-ring-api";

/// Why shared memory could not be created or accepted.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The size is zero, over [`SHARED_MEMORY_BYTES_MAX`], or not a multiple of
    /// [`CACHE_LINE_BYTES`].
    #[error("shared memory of {len_bytes} B is empty, over {SHARED_MEMORY_BYTES_MAX} B or not a multiple of {CACHE_LINE_BYTES} B")]
    BadSize {
        /// The size asked for, in bytes.
        len_bytes: usize,
    },
    /// The descriptor does not support sealing (`F_GET_SEALS` fails): a pipe,
    /// socket or ordinary file rather than a memfd.
    #[error("descriptor is not a sealable memfd ({errno})")]
    NotMemfd {
        /// What `F_GET_SEALS` returned.
        errno: Errno,
    },
    /// The memfd lacks a required seal (shrink, grow and seal).
    #[error("memfd seals {present:?} lack {missing:?}")]
    MissingSeals {
        /// Seals the memfd carries.
        present: SealFlags,
        /// Required seals it does not carry.
        missing: SealFlags,
    },
    /// The memfd's size differs from the size agreed on.
    #[error("memfd holds {actual_bytes} B, expected {expected_bytes} B")]
    WrongSize {
        /// The size agreed on, in bytes.
        expected_bytes: usize,
        /// The memfd's size, in bytes.
        actual_bytes: u64,
    },
    /// A system call failed (`memfd_create`, `ftruncate`, `fcntl`, `fstat`,
    /// `mmap`).
    #[error("{call} failed: {errno}")]
    Sys {
        /// The call that failed.
        call: &'static str,
        /// Its error.
        errno: Errno,
    },
    /// The mapping could not become a region (unaligned or odd-sized; not
    /// expected from `mmap`).
    #[error(transparent)]
    Region(#[from] RegionMemoryError),
}

fn sys(call: &'static str) -> impl FnOnce(Errno) -> MemoryError {
    move |errno| MemoryError::Sys { call, errno }
}

/// A shared `MAP_SHARED` mapping; unmapped when dropped.
struct Mapping {
    base: *mut c_void,
    len_bytes: usize,
}

// SAFETY: the mapping is plain shared memory, reachable from any thread; this
// process touches it only through atomics (`Region`).
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl RegionMemory for Mapping {
    fn base(&self) -> *mut u8 {
        self.base.cast()
    }
    fn len_bytes(&self) -> usize {
        self.len_bytes
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len_bytes` is a mapping this value made and owns; the
        // last region over it is being dropped, so nothing refers to it.
        // An error (not expected) leaves the mapping in place: a leak, not UB.
        let _ = unsafe { rustix::mm::munmap(self.base, self.len_bytes) };
    }
}

/// Shared memory of a ring-API connection: the sealed memfd and a
/// [`Region`] over its `MAP_SHARED` mapping. Dropping it closes the
/// descriptor; the mapping lives until the last clone of the region is gone.
pub struct SharedMemory {
    fd: OwnedFd,
    region: Region,
}

impl std::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedMemory({:?}, {:?})", self.fd, self.region)
    }
}

fn check_size(len_bytes: usize) -> Result<(), MemoryError> {
    if len_bytes == 0
        || len_bytes > SHARED_MEMORY_BYTES_MAX
        || !len_bytes.is_multiple_of(CACHE_LINE_BYTES)
    {
        return Err(MemoryError::BadSize { len_bytes });
    }
    Ok(())
}

impl SharedMemory {
    /// Creates zeroed shared memory of `len_bytes`: a memfd (`MFD_CLOEXEC |
    /// MFD_ALLOW_SEALING`) of that size, sealed with `F_SEAL_SHRINK |
    /// F_SEAL_GROW | F_SEAL_SEAL`, mapped read-write and shared. The client side
    /// of L5 §III-A.1.
    ///
    /// # Errors
    /// [`MemoryError::BadSize`] for a size of zero, over
    /// [`SHARED_MEMORY_BYTES_MAX`] or not a multiple of [`CACHE_LINE_BYTES`];
    /// [`MemoryError::Sys`] if a system call fails (e.g. `ENOMEM`, `EMFILE`).
    pub fn create(len_bytes: usize) -> Result<SharedMemory, MemoryError> {
        check_size(len_bytes)?;
        let fd =
            rustix::fs::memfd_create(MEMFD_NAME, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)
                .map_err(sys("memfd_create"))?;
        rustix::fs::ftruncate(&fd, len_bytes as u64).map_err(sys("ftruncate"))?;
        rustix::fs::fcntl_add_seals(&fd, SEALS_REQUIRED).map_err(sys("fcntl(F_ADD_SEALS)"))?;
        Self::map(fd, len_bytes)
    }

    /// Accepts shared memory a peer handed over (the node side of
    /// L5 §III-A.1): checks, in this order and before mapping anything, that
    /// `expected_bytes` is a valid size, that `fd` supports seals (a memfd),
    /// that it carries `F_SEAL_SHRINK`, `F_SEAL_GROW` and `F_SEAL_SEAL`, and
    /// that its size is exactly `expected_bytes`; then maps it read-write and
    /// shared. The contents are not cleared or trusted.
    ///
    /// # Errors
    /// [`MemoryError::BadSize`], [`MemoryError::NotMemfd`],
    /// [`MemoryError::MissingSeals`], [`MemoryError::WrongSize`] for the checks
    /// above (the descriptor is closed, nothing is mapped);
    /// [`MemoryError::Sys`] if `fstat` or `mmap` fails (e.g. a read-only
    /// descriptor: `EACCES`).
    pub fn from_fd(fd: OwnedFd, expected_bytes: usize) -> Result<SharedMemory, MemoryError> {
        check_size(expected_bytes)?;
        let present =
            rustix::fs::fcntl_get_seals(&fd).map_err(|errno| MemoryError::NotMemfd { errno })?;
        let missing = SEALS_REQUIRED.difference(present);
        if !missing.is_empty() {
            return Err(MemoryError::MissingSeals { present, missing });
        }
        let actual_bytes = rustix::fs::fstat(&fd).map_err(sys("fstat"))?.st_size as u64;
        if actual_bytes != expected_bytes as u64 {
            return Err(MemoryError::WrongSize {
                expected_bytes,
                actual_bytes,
            });
        }
        Self::map(fd, expected_bytes)
    }

    /// Maps `len_bytes` of a sealed `fd` shared and read-write.
    fn map(fd: OwnedFd, len_bytes: usize) -> Result<SharedMemory, MemoryError> {
        // SAFETY: a fresh mapping at an address the kernel picks overlaps no
        // Rust object.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len_bytes,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(sys("mmap"))?;
        let mapping = Mapping { base, len_bytes };
        // SAFETY: the mapping stays mapped until `Mapping` is dropped, i.e.
        // while any region over it lives; the file is sealed against
        // shrinking and is `len_bytes` long, so no access faults; this process
        // reaches the mapping only through the region (atomics).
        let region = unsafe { Region::from_memory(Arc::new(mapping)) }?;
        Ok(SharedMemory { fd, region })
    }

    /// The mapped memory as a region of atomic words (clones share it).
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// The memfd, to hand to the peer ([`crate::fd_pass::send_fd`]).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Size in bytes.
    pub fn len_bytes(&self) -> usize {
        self.region.len_bytes()
    }
}

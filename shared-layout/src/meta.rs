//! Object metadata: a version plus the LOCKED, READABLE and DELETED bits
//! (Dandelion Table 3), packed into one `u64` so it can be read and written
//! atomically in host memory and in NIC-index entries.

use bitflags::bitflags;

bitflags! {
    /// Flag bits of [`ObjectMeta`] (Dandelion Table 3).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct ObjectFlags: u64 {
        /// Held by a transaction's write lock. Only ever set in the NIC index
        /// (Xenic §4.2.1 (a)); never stored in the host table.
        const LOCKED = 1 << 61;
        /// The replica may serve reads (Dandelion §4.3): cleared on backups while
        /// a write is in flight.
        const READABLE = 1 << 62;
        /// The object has been deleted; the version stays valid for validation.
        const DELETED = 1 << 63;
    }
}

/// Largest representable version (61 bits).
pub const VERSION_MAX: u64 = (1 << 61) - 1;

/// Version (low 61 bits) and [`ObjectFlags`] (top 3 bits) of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct ObjectMeta(pub u64);

impl ObjectMeta {
    /// Builds metadata from a version and flags.
    ///
    /// # Panics
    /// If `version > VERSION_MAX` (versions grow by one per committed write;
    /// 2^61 writes to one key is not reachable).
    #[inline]
    pub fn new(version: u64, flags: ObjectFlags) -> ObjectMeta {
        assert!(version <= VERSION_MAX, "version overflow");
        ObjectMeta(version | flags.bits())
    }

    /// The version: 0 for a never-written object, +1 per committed write.
    #[inline]
    pub fn version(self) -> u64 {
        self.0 & VERSION_MAX
    }

    /// The flag bits.
    #[inline]
    pub fn flags(self) -> ObjectFlags {
        ObjectFlags::from_bits_truncate(self.0)
    }

    /// Same version, other flags.
    #[inline]
    pub fn with_flags(self, flags: ObjectFlags) -> ObjectMeta {
        ObjectMeta(self.version() | flags.bits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_version_and_flags() {
        let m = ObjectMeta::new(42, ObjectFlags::READABLE | ObjectFlags::DELETED);
        assert_eq!(m.version(), 42);
        assert!(m.flags().contains(ObjectFlags::READABLE));
        assert!(!m.flags().contains(ObjectFlags::LOCKED));
        let m2 = m.with_flags(ObjectFlags::LOCKED);
        assert_eq!(m2.version(), 42);
        assert_eq!(m2.flags(), ObjectFlags::LOCKED);
        assert_eq!(
            ObjectMeta::new(VERSION_MAX, ObjectFlags::all()).version(),
            VERSION_MAX
        );
    }

    #[test]
    #[should_panic(expected = "version overflow")]
    fn rejects_oversized_version() {
        ObjectMeta::new(VERSION_MAX + 1, ObjectFlags::empty());
    }
}

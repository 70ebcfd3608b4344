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

    /// The metadata a committed write of this object gets: the next version,
    /// no flags (Xenic §4.2 step 5).
    ///
    /// # Errors
    /// [`MetaError::VersionOverflow`] at [`VERSION_MAX`].
    #[inline]
    pub fn next_write(self) -> Result<ObjectMeta, MetaError> {
        if self.version() >= VERSION_MAX {
            return Err(MetaError::VersionOverflow);
        }
        Ok(ObjectMeta(self.version() + 1))
    }

    /// Checks metadata a peer sent with a written value of `value_len`
    /// bytes (LOG and COMMIT items): a version of at least 1, never LOCKED
    /// (locks live only in the NIC index, Xenic §4.2.1 (a)), and a DELETED
    /// write (a delete's tombstone: the next version, kept so validation
    /// still sees the key change) carries no value.
    ///
    /// # Errors
    /// [`MetaError::PlantedLocked`], [`MetaError::PlantedDeleted`] (DELETED
    /// with a value) or [`MetaError::VersionZero`].
    pub fn check_written(self, value_len: usize) -> Result<(), MetaError> {
        let flags = self.flags();
        if flags.contains(ObjectFlags::LOCKED) {
            Err(MetaError::PlantedLocked)
        } else if flags.contains(ObjectFlags::DELETED) && value_len > 0 {
            Err(MetaError::PlantedDeleted)
        } else if self.version() == 0 {
            Err(MetaError::VersionZero)
        } else {
            Ok(())
        }
    }

    /// The metadata a committed delete of this object gets: its tombstone,
    /// the next version with DELETED set (no value). The tombstone stays in
    /// every table so a later insert takes the version after it and a
    /// reader that validated the older version sees the change; tombstones
    /// are not reclaimed (that needs a per-shard version floor).
    ///
    /// # Errors
    /// [`MetaError::VersionOverflow`] at [`VERSION_MAX`].
    #[inline]
    pub fn next_delete(self) -> Result<ObjectMeta, MetaError> {
        Ok(self.next_write()?.with_flags(ObjectFlags::DELETED))
    }

    /// Whether this is a tombstone or an absent object (DELETED): reads see
    /// no value.
    #[inline]
    pub fn is_deleted(self) -> bool {
        self.flags().contains(ObjectFlags::DELETED)
    }

    /// Checks metadata a peer sent with a value it read (EXECUTE response
    /// items): never LOCKED, and an absent object (DELETED) carries no value
    /// (`value_len` bytes).
    ///
    /// # Errors
    /// [`MetaError::PlantedLocked`] or [`MetaError::PlantedDeleted`].
    pub fn check_read(self, value_len: usize) -> Result<(), MetaError> {
        let flags = self.flags();
        if flags.contains(ObjectFlags::LOCKED) {
            Err(MetaError::PlantedLocked)
        } else if flags.contains(ObjectFlags::DELETED) && value_len > 0 {
            Err(MetaError::PlantedDeleted)
        } else {
            Ok(())
        }
    }
}

/// Why metadata from a peer is refused (a rule the fuzz targets check: metadata
/// from a peer is validated, never trusted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// The LOCKED bit, which only a NIC index sets and never sends.
    #[error("LOCKED bit in metadata from a peer")]
    PlantedLocked,
    /// The DELETED bit with a value (an absent object or a tombstone has none).
    #[error("DELETED bit with a value in metadata from a peer")]
    PlantedDeleted,
    /// A written value with version 0 (the version of a never-written object).
    #[error("written value with version 0")]
    VersionZero,
    /// A write of an object already at [`VERSION_MAX`].
    #[error("version overflow: object at VERSION_MAX")]
    VersionOverflow,
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
    fn peer_metadata_checks() {
        let plain = ObjectMeta::new(7, ObjectFlags::empty());
        assert_eq!(plain.check_written(3), Ok(()));
        assert_eq!(plain.check_written(0), Ok(()), "an empty value");
        assert_eq!(plain.check_read(3), Ok(()));
        assert_eq!(
            plain.next_write(),
            Ok(ObjectMeta::new(8, ObjectFlags::empty()))
        );
        let locked = plain.with_flags(ObjectFlags::LOCKED);
        assert_eq!(locked.check_written(0), Err(MetaError::PlantedLocked));
        assert_eq!(locked.check_read(0), Err(MetaError::PlantedLocked));
        let deleted = plain.with_flags(ObjectFlags::DELETED);
        assert_eq!(deleted.check_written(1), Err(MetaError::PlantedDeleted));
        assert_eq!(deleted.check_written(0), Ok(()), "a tombstone");
        assert_eq!(
            ObjectMeta(ObjectFlags::DELETED.bits()).check_written(0),
            Err(MetaError::VersionZero),
            "a tombstone has a version"
        );
        assert_eq!(
            ObjectMeta::new(7, ObjectFlags::DELETED | ObjectFlags::LOCKED).check_written(0),
            Err(MetaError::PlantedLocked)
        );
        assert_eq!(deleted.check_read(1), Err(MetaError::PlantedDeleted));
        assert_eq!(deleted.check_read(0), Ok(()), "an absent object");
        assert_eq!(ObjectMeta(0).check_written(0), Err(MetaError::VersionZero));
        assert_eq!(
            ObjectMeta(VERSION_MAX).next_write(),
            Err(MetaError::VersionOverflow)
        );
        // READABLE is not a planted bit.
        assert_eq!(
            plain.with_flags(ObjectFlags::READABLE).check_written(1),
            Ok(())
        );
    }

    #[test]
    fn a_delete_takes_the_next_version_as_a_tombstone() {
        let plain = ObjectMeta::new(7, ObjectFlags::empty());
        let tomb = plain.next_delete().unwrap();
        assert_eq!((tomb.version(), tomb.is_deleted()), (8, true));
        assert!(!plain.is_deleted());
        // An insert over the tombstone takes the version after it.
        assert_eq!(
            tomb.next_write(),
            Ok(ObjectMeta::new(9, ObjectFlags::empty()))
        );
        assert_eq!(
            ObjectMeta(VERSION_MAX).next_delete(),
            Err(MetaError::VersionOverflow)
        );
    }

    proptest::proptest! {
        /// Every word a peer can send: written metadata is taken iff it is
        /// not LOCKED, has a version, and is not DELETED with a value; a
        /// taken tombstone reads as absent with its version.
        #[test]
        fn written_metadata_rule_over_every_word(word: u64, value_len in 0usize..3) {
            let m = ObjectMeta(word);
            let ok = !m.flags().contains(ObjectFlags::LOCKED)
                && m.version() > 0
                && !(m.is_deleted() && value_len > 0);
            proptest::prop_assert_eq!(m.check_written(value_len).is_ok(), ok);
            if ok && m.is_deleted() {
                proptest::prop_assert_eq!(m.check_read(value_len), Ok(()));
            }
        }
    }

    #[test]
    #[should_panic(expected = "version overflow")]
    fn rejects_oversized_version() {
        ObjectMeta::new(VERSION_MAX + 1, ObjectFlags::empty());
    }
}

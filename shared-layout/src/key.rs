//! Keys and the key hash that every node and the NIC runtime agree on.
//!
//! A key is `(table_id, u64)` (DESIGN.md, "Data and metadata"). The hash decides
//! both placement (shard) and the home slot in the host table, so it is part of
//! the layout contract between host and NIC runtime and lives here.

/// Encoded size of a [`Key`] in bytes: `table: u32` then `id: u64`, little endian.
pub const KEY_BYTES: usize = 12;

/// A key: table id plus a 64-bit row id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(C)]
pub struct Key {
    /// Table id (for Smallbank: SAVINGS = 0, CHECKING = 1).
    pub table: u32,
    /// Row id within the table.
    pub id: u64,
}

impl Key {
    /// Builds a key.
    #[inline]
    pub const fn new(table: u32, id: u64) -> Key {
        Key { table, id }
    }

    /// 64-bit hash of the key: a fixed, seedless mix (splitmix64 finalizer over
    /// `id ^ table·φ`), identical on every node, so placement and home slots agree.
    #[inline]
    pub fn hash64(&self) -> u64 {
        let mut z = self.id ^ (self.table as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Writes the 12-byte encoding into `out[..KEY_BYTES]`.
    ///
    /// # Panics
    /// If `out` is shorter than [`KEY_BYTES`] (a caller bug, not bad input).
    #[inline]
    pub fn encode(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.table.to_le_bytes());
        out[4..12].copy_from_slice(&self.id.to_le_bytes());
    }

    /// Reads a key from the first [`KEY_BYTES`] of `bytes`; `None` if too short.
    #[inline]
    pub fn decode(bytes: &[u8]) -> Option<Key> {
        if bytes.len() < KEY_BYTES {
            return None;
        }
        let table = u32::from_le_bytes(bytes[0..4].try_into().ok()?);
        let id = u64::from_le_bytes(bytes[4..12].try_into().ok()?);
        Some(Key { table, id })
    }
}

/// A `BuildHasher` for maps keyed by [`Key`] or integers: deterministic (no random
/// seed), so the simulator reproduces a run from its seed alone.
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedState;

/// The hasher behind [`FixedState`]: a multiply-rotate mix (FxHash-like) with a
/// splitmix finalizer.
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedHasher(u64);

impl std::hash::Hasher for FixedHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7C_C1_B7_27_22_0A_95);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64)
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64)
    }
}

impl std::hash::BuildHasher for FixedState {
    type Hasher = FixedHasher;
    #[inline]
    fn build_hasher(&self) -> FixedHasher {
        FixedHasher(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_round_trip() {
        let k = Key::new(7, u64::MAX - 3);
        let mut buf = [0u8; KEY_BYTES];
        k.encode(&mut buf);
        assert_eq!(Key::decode(&buf), Some(k));
        assert_eq!(Key::decode(&buf[..11]), None);
    }

    #[test]
    fn hash_separates_tables_and_ids() {
        assert_ne!(Key::new(0, 1).hash64(), Key::new(1, 1).hash64());
        assert_ne!(Key::new(0, 1).hash64(), Key::new(0, 2).hash64());
        // Low bits are well mixed: consecutive ids spread over 16 buckets.
        let mut buckets = [0u32; 16];
        for id in 0..1600u64 {
            buckets[(Key::new(0, id).hash64() & 15) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| b > 60 && b < 140), "{buckets:?}");
    }
}

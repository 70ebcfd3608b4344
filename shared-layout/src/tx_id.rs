//! The transaction id: which coordinator runs a transaction, in which of its
//! slots, and which generation of that slot.
//!
//! One `u64`, the same on the wire, in host log records, in recovery and
//! rebuild messages and in every table the NIC runtime keys by transaction:
//!
//! | bits | field | type |
//! |---|---|---|
//! | 63..48 | coordinator | [`NodeId`] |
//! | 47..32 | slot | `u16` (a coordinator's transaction slot, or a copy slot of re-replication above them) |
//! | 31..0 | generation | `u32` |
//!
//! Encoded little-endian in [`TX_ID_BYTES`] bytes ([`TxId::to_le_bytes`],
//! read back by [`crate::Reader::tx_id`]). Every `u64` is a valid id, so
//! decoding never fails for a reason of its own: whether the named
//! coordinator and slot exist is the reader's policy, not the format's.

use crate::wire::NodeId;
use std::fmt;

/// Encoded size of a [`TxId`], in bytes.
pub const TX_ID_BYTES: usize = 8;

/// A transaction id (module docs for the bit layout).
///
/// Its three fields, in the glossary's sense (DESIGN.md):
/// - **generation**: the per-slot counter in a transaction id, raised each
///   time the coordinator reuses the slot, so an old message of a finished
///   transaction never matches the slot's current one.
/// - **incarnation**: one process's life of a node, fresh per start; not part
///   of the id (a restarted node's coordinator continues its generations past
///   the newest its peers saw instead).
/// - **epoch**: a configuration's number, raised by every membership change;
///   not part of the id either (packets carry it in their header).
///
/// Ordering, equality and hashing are those of the `u64`
/// ([`TxId::to_bits`]): a map keyed by `TxId` hashes exactly what a map keyed
/// by the raw id did, so seeded runs stay deterministic. The default is id 0
/// (coordinator 0, slot 0, generation 0), which no coordinator issues: its
/// generations start at 1.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TxId(u64);

impl TxId {
    /// Bits of the generation field (the low bits).
    pub const GENERATION_BITS: u32 = 32;
    /// Bits of the slot field (above the generation).
    pub const SLOT_BITS: u32 = 16;
    /// Bits of the coordinator field (the high bits).
    pub const COORDINATOR_BITS: u32 = 16;
    /// Shift of the slot field.
    const SLOT_SHIFT: u32 = Self::GENERATION_BITS;
    /// Shift of the coordinator field.
    const COORDINATOR_SHIFT: u32 = Self::GENERATION_BITS + Self::SLOT_BITS;
    /// Slots one coordinator can number: slot indices are `0..SLOTS`.
    pub const SLOTS: usize = 1 << Self::SLOT_BITS;

    /// The id of generation `generation` of slot `slot` of coordinator
    /// `coordinator`. `slot` must be below [`TxId::SLOTS`] (checked in debug
    /// builds; release builds keep its low [`TxId::SLOT_BITS`] bits).
    #[inline]
    pub const fn new(coordinator: NodeId, slot: usize, generation: u32) -> TxId {
        debug_assert!(slot < Self::SLOTS, "transaction slot out of range");
        let slot = (slot & (Self::SLOTS - 1)) as u64;
        TxId(
            (coordinator as u64) << Self::COORDINATOR_SHIFT
                | slot << Self::SLOT_SHIFT
                | generation as u64,
        )
    }

    /// The id whose encoding is `bits` (any `u64` is one).
    #[inline]
    pub const fn from_bits(bits: u64) -> TxId {
        TxId(bits)
    }

    /// The id as one `u64`, the value [`TxId::to_le_bytes`] encodes.
    #[inline]
    pub const fn to_bits(self) -> u64 {
        self.0
    }

    /// The node that coordinates the transaction.
    #[inline]
    pub const fn coordinator(self) -> NodeId {
        (self.0 >> Self::COORDINATOR_SHIFT) as NodeId
    }

    /// The coordinator's slot the transaction runs in, `0..`[`TxId::SLOTS`].
    #[inline]
    pub const fn slot(self) -> usize {
        ((self.0 >> Self::SLOT_SHIFT) as usize) & (Self::SLOTS - 1)
    }

    /// The slot's generation (see the type's docs).
    #[inline]
    pub const fn generation(self) -> u32 {
        self.0 as u32
    }

    /// The [`TX_ID_BYTES`]-byte little-endian encoding.
    #[inline]
    pub const fn to_le_bytes(self) -> [u8; TX_ID_BYTES] {
        self.0.to_le_bytes()
    }

    /// Decodes [`TxId::to_le_bytes`]' encoding (every pattern is an id).
    #[inline]
    pub const fn from_le_bytes(bytes: [u8; TX_ID_BYTES]) -> TxId {
        TxId(u64::from_le_bytes(bytes))
    }
}

const _: () = assert!(TxId::COORDINATOR_BITS + TxId::SLOT_BITS + TxId::GENERATION_BITS == 64);
const _: () = assert!(TxId::COORDINATOR_BITS == NodeId::BITS);
const _: () = assert!(TX_ID_BYTES == size_of::<TxId>());

/// `coordinator:slot:generation`, e.g. `2:5:17`.
impl fmt::Display for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}",
            self.coordinator(),
            self.slot(),
            self.generation()
        )
    }
}

/// `TxId(coordinator:slot:generation)`, e.g. `TxId(2:5:17)`.
impl fmt::Debug for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TxId({self})")
    }
}

/// The raw `u64` in hex, as messages printed the id before it had a type
/// (`{tx_id:#x}`).
impl fmt::LowerHex for TxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_sit_where_the_layout_says() {
        let t = TxId::new(2, 5, 17);
        assert_eq!(t.to_bits(), (2u64 << 48) | (5 << 32) | 17);
        assert_eq!(t.to_string(), "2:5:17");
        assert_eq!(format!("{t:?}"), "TxId(2:5:17)");
        assert_eq!(format!("{t:#x}"), "0x2000500000011");
        let max = TxId::new(NodeId::MAX, TxId::SLOTS - 1, u32::MAX);
        assert_eq!(max.to_bits(), u64::MAX);
        assert_eq!(TxId::from_le_bytes(max.to_le_bytes()), max);
    }
}

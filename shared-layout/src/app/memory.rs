//! Where the request ring, the outcome ring and their doorbell lines sit in
//! the memory a client creates for its connection (`memfd`, sealed, mapped
//! by both processes; L5 §III-A). One function, [`AppMemoryLayout::new`],
//! computes every offset from the two ring capacities; client and node both
//! call it, so the [`crate::app::Hello`] carries only the capacities and the
//! memory size, and the node checks that size against the layout before it
//! maps anything.
//!
//! | offset from the memory's start | bytes | contents |
//! |---|---|---|
//! | 0 | [`ring_region_bytes`]`(request capacity)` | request ring (client → node), [`crate::ring`] layout |
//! | `request_doorbell_offset` | [`DOORBELL_BYTES`] | request doorbell line: the node sleeps on it, the client wakes it |
//! | `outcome_ring_offset` | [`ring_region_bytes`]`(outcome capacity)` | outcome ring (node → client) |
//! | `outcome_doorbell_offset` | [`DOORBELL_BYTES`] | outcome doorbell line: the client sleeps on it, the node wakes it |
//!
//! Every part starts on a 64-byte line and the parts do not overlap; the
//! memory is exactly `memory_bytes` long. A capacity is a power of two in
//! [[`APP_RING_CAPACITY_MIN_BYTES`], [`APP_RING_CAPACITY_MAX_BYTES`]]: at
//! least one entry of the largest request or outcome fits, and the memory a
//! client can make the node map is bounded ([`APP_MEMORY_BYTES_MAX`]). All
//! arithmetic is checked, so no capacity a hostile client sends yields an
//! offset outside the memory. The doorbell lines' contents belong to the
//! doorbell (its words and their protocol are defined beside it).

use crate::doorbell::DOORBELL_BYTES;
use crate::error::DecodeError;
use crate::region::CACHE_LINE_BYTES;
use crate::ring::{ring_entry_bytes, ring_region_bytes};

use super::outcome::OUTCOME_BYTES_MAX;
use super::request::REQUEST_BYTES_MAX;

/// Smallest ring capacity, in bytes: the smallest power of two that holds one
/// entry of the largest request or outcome (128 KiB).
pub const APP_RING_CAPACITY_MIN_BYTES: usize = {
    let entry = if REQUEST_BYTES_MAX > OUTCOME_BYTES_MAX {
        REQUEST_BYTES_MAX
    } else {
        OUTCOME_BYTES_MAX
    };
    ring_entry_bytes(entry).next_power_of_two()
};

/// Largest ring capacity, in bytes (64 MiB).
pub const APP_RING_CAPACITY_MAX_BYTES: usize = 1 << 26;

/// Largest memory of one connection, in bytes: both rings at
/// [`APP_RING_CAPACITY_MAX_BYTES`] with their headers and doorbell lines.
pub const APP_MEMORY_BYTES_MAX: usize =
    2 * (crate::ring::RING_HEADER_BYTES + APP_RING_CAPACITY_MAX_BYTES + DOORBELL_BYTES);

const _: () = assert!(APP_RING_CAPACITY_MIN_BYTES.is_power_of_two());
const _: () = assert!(APP_RING_CAPACITY_MIN_BYTES >= crate::ring::RING_CAPACITY_MIN_BYTES);
const _: () = assert!(APP_RING_CAPACITY_MAX_BYTES <= crate::ring::RING_CAPACITY_MAX_BYTES);
const _: () = assert!(APP_RING_CAPACITY_MIN_BYTES <= APP_RING_CAPACITY_MAX_BYTES);
const _: () = assert!(crate::ring::RING_HEADER_BYTES.is_multiple_of(CACHE_LINE_BYTES));

/// The offsets of one connection's memory (module docs), all in bytes from
/// the memory's start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AppMemoryLayout {
    /// Where the request ring's header starts (0).
    pub request_ring_offset: usize,
    /// The request ring's data-area capacity.
    pub request_ring_capacity_bytes: usize,
    /// Where the request doorbell line starts.
    pub request_doorbell_offset: usize,
    /// Where the outcome ring's header starts.
    pub outcome_ring_offset: usize,
    /// The outcome ring's data-area capacity.
    pub outcome_ring_capacity_bytes: usize,
    /// Where the outcome doorbell line starts.
    pub outcome_doorbell_offset: usize,
    /// The whole memory's size.
    pub memory_bytes: usize,
}

impl AppMemoryLayout {
    /// The layout for rings of these data-area capacities.
    ///
    /// # Errors
    /// [`DecodeError::TooLarge`] for a capacity over
    /// [`APP_RING_CAPACITY_MAX_BYTES`]; [`DecodeError::Inconsistent`] for one
    /// under [`APP_RING_CAPACITY_MIN_BYTES`] or not a power of two.
    pub fn new(
        request_ring_capacity_bytes: u64,
        outcome_ring_capacity_bytes: u64,
    ) -> Result<AppMemoryLayout, DecodeError> {
        let request = check_capacity("request ring capacity", request_ring_capacity_bytes)?;
        let outcome = check_capacity("outcome ring capacity", outcome_ring_capacity_bytes)?;
        let overflow = DecodeError::Inconsistent {
            what: "connection memory layout",
            detail: "offsets overflow",
        };
        // Each doorbell line right after its ring (`doorbell_offset`).
        let request_doorbell_offset = crate::doorbell::doorbell_offset(0, request);
        let outcome_ring_offset = request_doorbell_offset
            .checked_add(DOORBELL_BYTES)
            .ok_or(overflow)?;
        let outcome_doorbell_offset = outcome_ring_offset
            .checked_add(ring_region_bytes(outcome))
            .ok_or(overflow)?;
        let memory_bytes = outcome_doorbell_offset
            .checked_add(DOORBELL_BYTES)
            .ok_or(overflow)?;
        Ok(AppMemoryLayout {
            request_ring_offset: 0,
            request_ring_capacity_bytes: request,
            request_doorbell_offset,
            outcome_ring_offset,
            outcome_ring_capacity_bytes: outcome,
            outcome_doorbell_offset,
            memory_bytes,
        })
    }

    /// The `(offset, bytes)` of every part, in address order: request ring,
    /// request doorbell, outcome ring, outcome doorbell.
    pub fn parts(&self) -> [(usize, usize); 4] {
        [
            (
                self.request_ring_offset,
                ring_region_bytes(self.request_ring_capacity_bytes),
            ),
            (self.request_doorbell_offset, DOORBELL_BYTES),
            (
                self.outcome_ring_offset,
                ring_region_bytes(self.outcome_ring_capacity_bytes),
            ),
            (self.outcome_doorbell_offset, DOORBELL_BYTES),
        ]
    }

    /// Checks that a memory of `memory_bytes` is exactly this layout's size
    /// (the node calls it with the size the client announced, and again with
    /// the size of the memory it received, before mapping).
    ///
    /// # Errors
    /// [`DecodeError::Inconsistent`] for any other size.
    pub fn check_size(&self, memory_bytes: u64) -> Result<(), DecodeError> {
        if usize::try_from(memory_bytes).ok() != Some(self.memory_bytes) {
            return Err(DecodeError::Inconsistent {
                what: "connection memory",
                detail: "size differs from the ring layout's",
            });
        }
        Ok(())
    }
}

fn check_capacity(what: &'static str, capacity_bytes: u64) -> Result<usize, DecodeError> {
    let c = usize::try_from(capacity_bytes).unwrap_or(usize::MAX);
    super::check_len(what, c, APP_RING_CAPACITY_MAX_BYTES)?;
    if c < APP_RING_CAPACITY_MIN_BYTES || !c.is_power_of_two() {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "not a power of two at or above the minimum capacity",
        });
    }
    Ok(c)
}

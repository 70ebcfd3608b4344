//! # splitkv-layout
//!
//! Every format that crosses a boundary in splitkv, and nothing else: the
//! shared-memory ring, host↔NIC messages, wire messages between nodes, host log
//! records, the host table's slot and segment layout, and object metadata.
//! Each format has encode, decode and validate; decoders return
//! [`DecodeError`] for bad bytes and never panic. No policy lives here.
//!
//! Host memory is modelled as a [`Region`] of atomic words, so the host and the
//! NIC runtime's DMA engine can share it without data races.
#![warn(missing_docs)]

pub mod dlht_layout;
pub mod error;
pub mod host_nic;
pub mod key;
pub mod log_record;
pub mod meta;
pub mod region;
pub mod ring;
pub mod sync;
pub mod table;
pub mod wire;

pub use error::{DecodeError, Reader};
pub use key::{FixedHasher, FixedState, Key, KEY_BYTES};
pub use meta::{ObjectFlags, ObjectMeta, VERSION_MAX};
pub use region::{Region, RegionError, CACHE_LINE_BYTES};

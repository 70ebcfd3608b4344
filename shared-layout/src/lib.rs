//! # splitkv-layout
//!
//! Every format that crosses a boundary in splitkv, and nothing else: the
//! shared-memory ring, host↔NIC messages, wire messages between nodes, host log
//! records, the host table's slot and segment layout, object metadata, and the
//! transaction id ([`TxId`]) that messages and records carry.
//! Each format has encode, decode and validate; decoders return
//! [`DecodeError`] for bad bytes and never panic. No policy lives here.
//!
//! Host memory is modelled as a [`Region`] of atomic words, so the host and the
//! NIC runtime's DMA engine can share it without data races.
#![warn(missing_docs)]

pub mod app;
pub mod dlht_layout;
pub mod doorbell;
pub mod error;
pub mod host_nic;
pub mod key;
pub mod log_record;
pub mod meta;
pub mod region;
pub mod ring;
pub mod robinhood_layout;
pub mod sync;
pub mod tx_id;
pub mod wire;

pub use error::{DecodeError, Reader};
pub use key::{FixedHasher, FixedState, Key, KEY_BYTES};
pub use meta::{ObjectFlags, ObjectMeta, VERSION_MAX};
pub use region::{Region, RegionError, RegionMemory, RegionMemoryError, CACHE_LINE_BYTES};
pub use tx_id::{TxId, TX_ID_BYTES};

/// Largest value of an object, in bytes: what one wire item
/// ([`wire::Item`]), one host log record ([`log_record::LogRecord`]) and a
/// node's table (its configured `value_bytes_max`) carry. The one constant for
/// this limit; the tables' own format limits are larger and named per table
/// ([`robinhood_layout::ROBINHOOD_VALUE_BYTES_MAX`], [`dlht_layout::DLHT_VALUE_BYTES_MAX`]),
/// and so are the values each table keeps inline
/// ([`robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX`],
/// [`dlht_layout::DLHT_VALUE_INLINE_BYTES_MAX`]).
pub const VALUE_BYTES_MAX: usize = 4096;

/// Most full-size values one transaction carries: its write set of 16 keys
/// (the NIC runtime's `WRITE_SET_MAX` is this constant), each with a value of
/// [`VALUE_BYTES_MAX`] bytes. The host↔NIC ring messages
/// ([`host_nic::ARGS_BYTES_MAX`], [`host_nic::RESULT_BYTES_MAX`]) and host-log
/// entries ([`log_record::LOG_ENTRY_BYTES_MAX`]) are sized from it, so that a
/// transaction writing 16 keys of 4 KiB fits every layer below the network
/// (the Dnl stack's batching layer).
pub const TX_VALUES_MAX: usize = 16;

/// Value bytes of the largest transaction, [`TX_VALUES_MAX`] ×
/// [`VALUE_BYTES_MAX`] = 64 KiB.
pub const TX_VALUE_BYTES_MAX: usize = TX_VALUES_MAX * VALUE_BYTES_MAX;

// Every table can hold every value a node may carry, and a value's length
// fits the wire item's `u16` length field.
const _: () = assert!(VALUE_BYTES_MAX <= robinhood_layout::ROBINHOOD_VALUE_BYTES_MAX);
const _: () = assert!(VALUE_BYTES_MAX <= dlht_layout::DLHT_VALUE_BYTES_MAX);
const _: () = assert!(VALUE_BYTES_MAX <= u16::MAX as usize);
// The Robinhood slot and block info words store a value's length as a `u16`.
const _: () = assert!(robinhood_layout::ROBINHOOD_VALUE_BYTES_MAX <= u16::MAX as usize);
// Each table's inline limit is below the largest value it holds.
const _: () = assert!(
    robinhood_layout::ROBINHOOD_VALUE_INLINE_BYTES_MAX
        < robinhood_layout::ROBINHOOD_VALUE_BYTES_MAX
);
const _: () = assert!(dlht_layout::DLHT_VALUE_INLINE_BYTES_MAX < dlht_layout::DLHT_VALUE_BYTES_MAX);

//! The host tables: the data store the NIC runtime reads by DMA.
//!
//! - [`robinhood`] is Xenic's Robinhood table (Xenic §4.1.2) laid out in a shared
//!   [`splitkv_layout::Region`] as `splitkv_layout::table` defines;
//! - [`dlht`] is Dandelion's lock-free DLHT (Dandelion §6), laid out as
//!   `splitkv_layout::dlht_layout` defines.

pub mod dlht;
pub mod robinhood;

pub use robinhood::{RobinhoodTable, TableError, TableStats};
pub use splitkv_layout::table::{TableConfig, TableLayout};

//! The host table: the data store the NIC runtime reads by DMA.
//!
//! [`robinhood`] is Xenic's Robinhood table (Xenic §4.1.2) laid out in a shared
//! [`splitkv_layout::Region`] as `splitkv_layout::table` defines.

pub mod robinhood;

pub use robinhood::{RobinhoodTable, TableError, TableStats};
pub use splitkv_layout::table::{TableConfig, TableLayout};

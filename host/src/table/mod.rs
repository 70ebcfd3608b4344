//! The host table: the data store the NIC runtime reads by DMA.
pub mod dlht;

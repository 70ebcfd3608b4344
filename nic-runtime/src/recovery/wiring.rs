//! The runtime's side of the fault wing: `impl NicRuntime` blocks (and the
//! state they keep in the runtime) for recovery epochs, re-replication and
//! admission. The NIC restart keeps its own in [`super::restart`].

pub(crate) mod admission;
pub mod epoch;
pub mod mode;
pub(crate) mod rereplication;

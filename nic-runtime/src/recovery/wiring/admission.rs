//! A restarted node's new process before the membership admits it (issue
//! 12, rejoin): it must behave as the crashed process it replaces — answer
//! nothing and start nothing — until a configuration names this
//! incarnation.
//!
//! Why (chaos list-append seed 107): node 2's process crashed and a new one
//! (incarnation 2, an empty host table) started 8 ms before the membership
//! configured the old one out. Peers reset their sessions on the new
//! incarnation's first packet (as for a NIC-runtime-only restart, which they
//! cannot tell apart at the session layer), and in the old configuration
//! node 2 was still shard 2's primary: node 0's EXECUTE of an append to a
//! key at version 1 was answered "absent" from the empty table, the
//! transaction committed version 1 again, the survivors skipped it as
//! stale (a lost committed append), and the copy later spread their
//! version-1 value next to the new one (two replicas, one version, two
//! values). The data a node serves is only right once a configuration
//! admitted it as copying and its copies finished, so until admission every
//! peer message but recovery's is dropped here (a crashed node answers
//! nothing; its coordinators' waits end with the old incarnation's
//! exclusion). Recovery messages are queued as before: the recovery machine
//! acts on them only in an epoch this node began, and the only
//! configuration a joining node takes is the one that admits it, whose
//! recovery messages may arrive before the configuration does (dropping
//! them stalled that epoch: chaos list-append seed 1 on the first version
//! of this gate).

use crate::membership::Configuration;
use crate::runtime::NicRuntime;

/// Whether this runtime waits for the membership to admit it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Admission {
    /// The incarnation a configuration must name (or exceed) for this node
    /// to be admitted; `None` once admitted, or for a runtime that started
    /// with the cluster.
    awaiting: Option<u32>,
    /// Peer messages dropped while waiting.
    dropped: u64,
}

impl Admission {
    /// Whether every peer message is dropped and no transaction started.
    pub(crate) fn waiting(&self) -> bool {
        self.awaiting.is_some()
    }

    /// Counts one peer message dropped while waiting.
    pub(crate) fn count_drop(&mut self) {
        self.dropped += 1;
    }
}

impl NicRuntime {
    /// Marks this runtime as a restarted node's new process (rejoin;
    /// call it right after building the runtime, before its first
    /// iteration): until a configuration applied here
    /// ([`NicRuntime::apply_configuration`]) lists this node live with an
    /// incarnation at or above this runtime's current one
    /// ([`Configuration::rejoining`]), it drops every message from its peers
    /// (protocol, copy and rebuild messages alike; recovery messages are
    /// queued for the admitting epoch, see the module docs) and starts no
    /// client transaction (requests wait in their rings), as the crashed
    /// process it replaces would. Its host holds no data the cluster may
    /// read yet (see the module docs for the seed that showed why).
    pub fn await_admission(&mut self) {
        self.admission.awaiting = Some(self.incarnation());
    }

    /// Whether this runtime still waits for its admission
    /// ([`NicRuntime::await_admission`]).
    pub fn awaiting_admission(&self) -> bool {
        self.admission.waiting()
    }

    /// Peer messages dropped while waiting for admission.
    pub fn admission_drops(&self) -> u64 {
        self.admission.dropped
    }

    /// Ends the wait if `config` admits this node's awaited incarnation.
    pub(crate) fn admit_if(&mut self, config: &Configuration) {
        let Some(inc) = self.admission.awaiting else {
            return;
        };
        let me = self.io.node as usize;
        let live = config.live & (1 << me) != 0;
        if live && config.incarnation.get(me).is_some_and(|&i| i >= inc) {
            self.admission.awaiting = None;
        }
    }
}

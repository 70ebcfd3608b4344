//! Which commit protocol a cluster runs (DESIGN.md "Commit protocols";
//! Dandelion §4.2 Table 4 for the Dnl rows, Xenic §4.2 for Xenic OCC).
//!
//! One value per cluster: every node of a cluster runs the same protocol
//! (a deployed cluster stores it in its etcd configuration record and a node
//! whose file disagrees refuses to join). The names are the ones the
//! command line (`--protocol`), `cluster.toml` (`[protocol] commit`) and
//! `/status` use: `xenic-occ`, `dnl4`, `dnl2`, `dnl1`. Read-only
//! transactions run Dnl-RO under every Dnl protocol, so Dnl-RO is not a
//! value here.
//!
//! Every protocol runs today: Xenic OCC, and the Dnl rows Dnl-4, Dnl-2
//! and Dnl-1 (`protocol/coordinator/dnl.rs` and the servers' Dnl steps,
//! with crash recovery, checked by the simulator under every fault mix but
//! a NIC runtime restarting alone, which is not built for them). [`CommitProtocol::check_implemented`]
//! stays the one gate every entry point that builds a node calls (a
//! protocol added later is refused there with
//! [`CommitProtocolError::NotImplemented`] until it runs). A cluster file
//! (node processes, which must survive every crash) takes only a protocol
//! with every recovery ([`CommitProtocol::check_deployable`]): Xenic OCC
//! today.

use std::fmt;
use std::str::FromStr;

/// A commit protocol of the codebase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CommitProtocol {
    /// Xenic's OCC with primary-backup replication (Xenic §4.2;
    /// `tla/XenicOCC.tla`): the default.
    #[default]
    XenicOcc,
    /// Dnl-4: lock the write set at primaries, validate reads, replicate to
    /// backups, unlock (Dandelion §4.2.3; `tla/Dnl4.tla`).
    Dnl4,
    /// Dnl-2: lock reads and writes at primaries, replicate to every replica,
    /// unlock (Dandelion §4.2.4; `tla/Dnl2.tla`).
    Dnl2,
    /// Dnl-1: lock reads and writes at every replica; commit is reported
    /// after one round trip (Dandelion §4.2.5; `tla/Dnl1.tla`).
    Dnl1,
}

/// Why a commit protocol cannot be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommitProtocolError {
    /// A name that is none of [`CommitProtocol::ALL`]'s.
    #[error("unknown commit protocol \"{0}\" (expected xenic-occ, dnl4, dnl2 or dnl1)")]
    Unknown(String),
    /// A protocol whose coordinator and server are not built yet.
    #[error("commit protocol {0} is not implemented yet")]
    NotImplemented(CommitProtocol),
    /// A protocol that runs but cannot recover yet from every crash node
    /// processes must survive (its NIC runtime restarting alone), named
    /// for node processes.
    #[error("commit protocol {0} does not recover yet from a NIC runtime restarting alone, so node processes cannot run it (xenic-occ can; {0} runs in the in-process cluster and in the simulator under every fault mix but nic-crash and chaos)")]
    NoCrashRecovery(CommitProtocol),
}

impl CommitProtocol {
    /// Every protocol, in the order the docs list them.
    pub const ALL: [CommitProtocol; 4] = [
        CommitProtocol::XenicOcc,
        CommitProtocol::Dnl4,
        CommitProtocol::Dnl2,
        CommitProtocol::Dnl1,
    ];

    /// Its name on the command line, in `cluster.toml` and in `/status`.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitProtocol::XenicOcc => "xenic-occ",
            CommitProtocol::Dnl4 => "dnl4",
            CommitProtocol::Dnl2 => "dnl2",
            CommitProtocol::Dnl1 => "dnl1",
        }
    }

    /// Whether this protocol runs in this build (every one of
    /// [`CommitProtocol::ALL`] does).
    pub fn is_implemented(self) -> bool {
        matches!(
            self,
            CommitProtocol::XenicOcc
                | CommitProtocol::Dnl4
                | CommitProtocol::Dnl2
                | CommitProtocol::Dnl1
        )
    }

    /// `self` if it runs in this build.
    ///
    /// # Errors
    /// [`CommitProtocolError::NotImplemented`] for a protocol not driven
    /// yet (none today).
    pub fn check_implemented(self) -> Result<CommitProtocol, CommitProtocolError> {
        if self.is_implemented() {
            Ok(self)
        } else {
            Err(CommitProtocolError::NotImplemented(self))
        }
    }
}

impl CommitProtocol {
    /// Whether a crash of a node, or of its NIC runtime alone, is
    /// recovered from under this protocol: Xenic OCC's recovery epoch, NIC
    /// restart and re-replication; the Dnl protocols have the recovery
    /// epoch (their rules `dnl4::decide`, `dnl1::decide`) and
    /// re-replication, not yet the NIC restart.
    pub fn has_crash_recovery(self) -> bool {
        self == CommitProtocol::XenicOcc
    }

    /// `self` if node processes may run it: implemented, with crash
    /// recovery.
    ///
    /// # Errors
    /// [`CommitProtocolError::NotImplemented`], or
    /// [`CommitProtocolError::NoCrashRecovery`] for Dnl-4, Dnl-2 and Dnl-1.
    pub fn check_deployable(self) -> Result<CommitProtocol, CommitProtocolError> {
        match self.check_implemented()?.has_crash_recovery() {
            true => Ok(self),
            false => Err(CommitProtocolError::NoCrashRecovery(self)),
        }
    }
}

impl fmt::Display for CommitProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CommitProtocol {
    type Err = CommitProtocolError;

    /// Parses one of [`CommitProtocol::as_str`]'s names (exact, lower case).
    /// A known but unimplemented protocol parses; building a node with it is
    /// what fails ([`CommitProtocol::check_implemented`]).
    ///
    /// # Errors
    /// [`CommitProtocolError::Unknown`] for any other text.
    fn from_str(s: &str) -> Result<CommitProtocol, CommitProtocolError> {
        CommitProtocol::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| CommitProtocolError::Unknown(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_are_refused() {
        for p in CommitProtocol::ALL {
            assert_eq!(p.as_str().parse::<CommitProtocol>(), Ok(p));
            assert_eq!(p.to_string(), p.as_str());
        }
        for bad in ["", "XENIC-OCC", "dnl3", "dnl-ro", "xenic"] {
            assert_eq!(
                bad.parse::<CommitProtocol>(),
                Err(CommitProtocolError::Unknown(bad.into()))
            );
        }
    }

    #[test]
    fn every_protocol_is_implemented() {
        assert_eq!(CommitProtocol::default(), CommitProtocol::XenicOcc);
        for p in CommitProtocol::ALL {
            assert_eq!(p.check_implemented(), Ok(p));
        }
    }

    #[test]
    fn only_xenic_occ_is_deployable_until_dnl_recovery_exists() {
        let x = CommitProtocol::XenicOcc;
        assert_eq!(x.check_deployable(), Ok(x));
        for d in [
            CommitProtocol::Dnl4,
            CommitProtocol::Dnl2,
            CommitProtocol::Dnl1,
        ] {
            let e = d.check_deployable().unwrap_err();
            assert_eq!(e, CommitProtocolError::NoCrashRecovery(d));
            assert!(e.to_string().contains("does not recover yet"), "{e}");
        }
    }
}

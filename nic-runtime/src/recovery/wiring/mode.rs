//! The NIC runtime's mode: one name for the state its fault flags put it
//! in ([`NicRuntime::mode`]), read by `start_requests`, the node's
//! `/status` (`nic.mode`) and the simulator's state descriptions.

use crate::runtime::NicRuntime;

/// What a NIC runtime does now, as its fault handling leaves it (its own
/// states; draining and fencing are the host node's).
///
/// When several hold at once the highest wins, in this order:
/// **`Stopped` > `Rebuilding` > `Recovering` > `AwaitingAdmission` >
/// `Serving`** (chaos puts a NIC restart's rebuild inside a recovery epoch;
/// a restarted node's process may be taken into a recovery epoch before
/// the configuration that admits it). Every state but `Serving` starts no
/// client transaction: requests wait in their rings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum NicMode {
    /// Serving: client transactions start, every peer message is handled.
    /// Steps: the polling iteration of `NicRuntime::run_iteration`, in full.
    #[default]
    Serving,
    /// A restarted node's new process before a configuration admits it
    /// (`recovery/wiring/admission.rs`): every peer message but recovery's
    /// is dropped and no transaction starts. Leaves when
    /// `NicRuntime::apply_configuration` takes a configuration naming this
    /// incarnation live.
    AwaitingAdmission,
    /// A recovery epoch runs (`recovery/epoch/`, Xenic §4.2.1, Dandelion
    /// §4.4): evidence to the leader, decisions recorded, `Resume`. No new
    /// transaction starts and no copy steps until the machine's `Resume`.
    Recovering,
    /// The NIC runtime crashed alone and restarted (`recovery/restart.rs`):
    /// it queries its peers and rebuilds its locks and decisions from their
    /// reports; no transaction starts until every report is in.
    Rebuilding,
    /// Stopped for good ([`NicRuntime::fault`]): a write it cannot apply or
    /// a host ring that failed. `run_iteration` does nothing any more.
    Stopped,
}

impl NicMode {
    /// The lower-case name `/status` reports (`"serving"`,
    /// `"awaiting_admission"`, `"recovering"`, `"rebuilding"`, `"stopped"`).
    pub fn as_str(self) -> &'static str {
        match self {
            NicMode::Serving => "serving",
            NicMode::AwaitingAdmission => "awaiting_admission",
            NicMode::Recovering => "recovering",
            NicMode::Rebuilding => "rebuilding",
            NicMode::Stopped => "stopped",
        }
    }

    /// The mode of a runtime whose flags are these, by the precedence in
    /// the type's docs (the one place it is decided).
    fn of(stopped: bool, rebuilding: bool, recovering: bool, awaiting_admission: bool) -> NicMode {
        if stopped {
            NicMode::Stopped
        } else if rebuilding {
            NicMode::Rebuilding
        } else if recovering {
            NicMode::Recovering
        } else if awaiting_admission {
            NicMode::AwaitingAdmission
        } else {
            NicMode::Serving
        }
    }
}

impl std::fmt::Display for NicMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl NicRuntime {
    /// This runtime's mode ([`NicMode`], with its precedence): stopped if
    /// [`NicRuntime::fault`] is set, else rebuilding after a NIC restart,
    /// else in a recovery epoch ([`NicRuntime::recovering`]), else awaiting
    /// admission ([`NicRuntime::awaiting_admission`]), else serving.
    pub fn mode(&self) -> NicMode {
        NicMode::of(
            self.fault().is_some(),
            self.restart.rebuilding(),
            self.recovery.paused(),
            self.admission.waiting(),
        )
    }

    /// The mode within an iteration: [`NicRuntime::mode`] without the
    /// fault, which `run_iteration` checks at its start only (a fault
    /// raised by one of its steps lets the remaining steps of that
    /// iteration run, as they always did).
    pub(crate) fn mode_in_iteration(&self) -> NicMode {
        NicMode::of(
            false,
            self.restart.rebuilding(),
            self.recovery.paused(),
            self.admission.waiting(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::NicMode;

    #[test]
    fn precedence_is_stopped_rebuilding_recovering_awaiting_admission_serving() {
        assert_eq!(NicMode::of(true, true, true, true), NicMode::Stopped);
        assert_eq!(NicMode::of(false, true, true, true), NicMode::Rebuilding);
        assert_eq!(NicMode::of(false, false, true, true), NicMode::Recovering);
        assert_eq!(
            NicMode::of(false, false, false, true),
            NicMode::AwaitingAdmission
        );
        assert_eq!(NicMode::of(false, false, false, false), NicMode::Serving);
        assert_eq!(NicMode::AwaitingAdmission.to_string(), "awaiting_admission");
    }
}

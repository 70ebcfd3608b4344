//! The Dandelion commit-protocol skeleton (Dandelion §4.2.2, Table 4;
//! DESIGN.md "Commit protocols"): a lock-free execution phase, then four
//! customisable steps — Locking → Read validation → Replication →
//! Unlocking — each parameterised by the replicas it visits (primary P,
//! backups B) and the set it carries (read set R, write set W); any step may
//! be elided. A protocol is one [`Row`]: Dnl-4 ([`super::dnl4::ROW`]),
//! Dnl-2 ([`super::dnl2::ROW`]) and Dnl-1 ([`super::dnl1::ROW`]);
//! read-only transactions run Dnl-RO under every row ([`super::dnl_ro`]).
//!
//! The coordinator's Dnl path (`coordinator/dnl.rs`) is driven by
//! [`Row::step_done`], and its requests (`coordinator/dnl_steps.rs`) by
//! [`Row::visit`]; no wire message is sent from here. Every row runs
//! (without crash recovery yet). Xenic OCC is not a row:
//! its locking is fused with execution on the declared write set and its
//! commit point and recovery differ, so it stays beside the skeleton.
//!
//! The names transliterate `tla/DnlSkeleton.tla`: [`Row`] is a row of its
//! `Table`, [`Step`] its `Order`, [`Row::has`] `Has`, [`Row::next_step`]
//! `NextPhase`, [`Step::is_check`] `IsCheck`, [`Row::visit`] the key sets
//! `LockKeysAt`, `ValKeysAt` and `ReplKeysAt`, and [`Row::step_done`] the
//! coordinator's `StepDone` (TLA actions `ExecDone`, `LockDone`,
//! `ValidateReadsDone`, `ReplicateDone`, `UnlockDone`). The unit tests
//! check each row and transition against the spec's definitions.
//!
//! A transaction is described by its [`Shape`]: how many keys it reads
//! without writing and how many it writes. Writes are read-modify-write
//! (every written key is read first, the spec's `WS(t) ⊆ RS(t)`), so the
//! read set is both together.

/// Which replicas of a key a step visits (the spec's `lockAt` and `replAt`,
/// subsets of `{"P", "B"}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct At {
    /// The key's primary ("P").
    pub primary: bool,
    /// The key's backups ("B").
    pub backups: bool,
}

impl At {
    /// No replica: the step is elided (`{}`).
    pub const NONE: At = At {
        primary: false,
        backups: false,
    };
    /// Primaries only (`{"P"}`).
    pub const P: At = At {
        primary: true,
        backups: false,
    };
    /// Backups only (`{"B"}`).
    pub const B: At = At {
        primary: false,
        backups: true,
    };
    /// Primaries and backups (`{"P", "B"}`).
    pub const PB: At = At {
        primary: true,
        backups: true,
    };

    /// Whether no replica is visited.
    pub const fn is_empty(self) -> bool {
        !self.primary && !self.backups
    }
}

/// The steps of a transaction, in order (the spec's `Order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// Execution: lock-free Gets of the read set at the keys' primaries (or
    /// a local replica, Dandelion §4.3); values come back even when locked
    /// (Dandelion §4.2.1). TLA `Read`, `ReadLocal`, `ExecDone`.
    Exec,
    /// Locking, no-wait, checking each read version (TLA `Lock`, `LockDone`).
    Lock,
    /// Read validation: unlocked and version unchanged (TLA
    /// `ValidateReads`, `ValidateReadsDone`).
    Validate,
    /// Replication of the write set (TLA `Replicate`, `ReplicateDone`).
    Replicate,
    /// Unlocking: install (commit) or drop (abort), and unlock (TLA
    /// `Unlock`, `UnlockDone`).
    Unlock,
    /// Finished.
    Done,
}

impl Step {
    /// Every step in order (the spec's `Order`).
    pub const ORDER: [Step; 6] = [
        Step::Exec,
        Step::Lock,
        Step::Validate,
        Step::Replicate,
        Step::Unlock,
        Step::Done,
    ];

    /// Whether the step can still make the transaction abort (TLA
    /// `IsCheck`): the decision is commit once the last check passed.
    pub const fn is_check(self) -> bool {
        matches!(self, Step::Exec | Step::Lock | Step::Validate)
    }

    /// The spec's name of the step (`"exec"`, `"lock"`, …).
    pub const fn tla_name(self) -> &'static str {
        match self {
            Step::Exec => "exec",
            Step::Lock => "lock",
            Step::Validate => "validate",
            Step::Replicate => "replicate",
            Step::Unlock => "unlock",
            Step::Done => "done",
        }
    }
}

/// When an outcome is reported to the client (the spec's `reportCommit`
/// and `reportAbort`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Report {
    /// As soon as it is decided (`"decision"`): commit once every check
    /// passed, abort once one failed.
    Decision,
    /// Once the last response of this step is in (`"replicate"`,
    /// `"unlock"`).
    After(Step),
}

/// Which rule recovery applies to a transaction whose coordinator crashed
/// (the spec's `evidence`; the rules themselves come with the recovery
/// step of the protocols).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Evidence {
    /// Commit iff a live node holds a REPL or COMMIT record (`"record"`:
    /// Dnl-4, Dnl-2).
    Records,
    /// Commit iff a live node holds COMMIT, or every live replica of every
    /// locked key holds the LOCK and none an ABORT (`"all-locked"`: Dnl-1).
    AllLocked,
}

/// One protocol of the skeleton (a row of Dandelion Table 4 and of the
/// spec's `Table`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Row {
    /// Replicas the Locking step visits (`lockAt`); [`At::NONE`] elides
    /// Locking and Unlocking.
    pub lock_at: At,
    /// Whether Locking takes the read set too (`lockR`); otherwise only the
    /// write set.
    pub lock_reads: bool,
    /// Whether the reads not locked by the transaction are validated
    /// (`validate`).
    pub validate: bool,
    /// Replicas the Replication step visits (`replAt`); [`At::NONE`]
    /// elides it.
    pub replicate_at: At,
    /// When a commit is reported (`reportCommit`).
    pub report_commit: Report,
    /// When an abort is reported (`reportAbort`).
    pub report_abort: Report,
    /// Recovery's rule (`evidence`).
    pub evidence: Evidence,
    /// Whether Replication lowers READABLE at backups until the commit is
    /// reported (`readable`).
    pub readable: bool,
}

/// The keys of a transaction, by role (its read set is both fields
/// together: writes are read-modify-write).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Shape {
    /// Keys read and not written (`RS(t) \ WS(t)`).
    pub reads_not_written: usize,
    /// Keys written, each also read (`WS(t)`).
    pub written: usize,
}

impl Shape {
    /// Whether the transaction writes nothing: it runs Dnl-RO.
    pub const fn is_read_only(self) -> bool {
        self.written == 0
    }
}

/// A set of a transaction's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySet {
    /// No key.
    Empty,
    /// The read set, written keys included (`RS(t)`).
    Reads,
    /// The write set (`WS(t)`).
    Writes,
    /// The keys read and not written (`RS(t) \ WS(t)`).
    ReadsNotWritten,
}

impl KeySet {
    /// How many keys of `shape` the set holds.
    pub const fn len(self, shape: Shape) -> usize {
        match self {
            KeySet::Empty => 0,
            KeySet::Reads => shape.reads_not_written + shape.written,
            KeySet::Writes => shape.written,
            KeySet::ReadsNotWritten => shape.reads_not_written,
        }
    }
}

/// What one step's requests carry and where they go: the keys of `set`, to
/// each key's replicas in `at` (the spec's `LockKeysAt`, `ValKeysAt`,
/// `ReplKeysAt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Visit {
    /// The keys carried.
    pub set: KeySet,
    /// The replicas of each key visited.
    pub at: At,
}

impl Visit {
    /// Visits nothing.
    pub const NONE: Visit = Visit {
        set: KeySet::Empty,
        at: At::NONE,
    };

    /// Whether the step sends nothing for `shape`.
    pub const fn is_empty(self, shape: Shape) -> bool {
        self.at.is_empty() || self.set.len(shape) == 0
    }
}

/// A decided outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    /// Every check passed.
    Commit,
    /// A lock or a validation was refused.
    Abort,
}

/// What the coordinator does when the last response of a step is in (the
/// result of [`Row::step_done`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepDone {
    /// The step to run next ([`Step::Done`]: finished).
    pub next: Step,
    /// The transaction's decision after the step (`None`: undecided).
    pub decision: Option<Decision>,
    /// The outcome to report to the client now, if any (at most once per
    /// transaction).
    pub report: Option<Decision>,
}

impl Row {
    /// The keys a step locks and unlocks (`LockKeys`).
    const fn lock_set(&self) -> KeySet {
        if self.lock_reads {
            KeySet::Reads
        } else {
            KeySet::Writes
        }
    }

    /// The keys the Read validation step checks (`ValKeys`): every read of
    /// a read-only transaction (Dnl-RO), else the reads not locked, if the
    /// row validates.
    fn validate_set(&self, shape: Shape) -> KeySet {
        if shape.is_read_only() {
            KeySet::Reads
        } else if self.validate && !self.lock_reads {
            KeySet::ReadsNotWritten
        } else {
            KeySet::Empty
        }
    }

    /// What `step`'s requests carry for a transaction of `shape`, and to
    /// which replicas ([`Visit::NONE`] for a step the transaction skips).
    /// Execution reads the whole read set at the primaries (or a local
    /// replica); Locking and Unlocking visit the same keys and replicas.
    pub fn visit(&self, step: Step, shape: Shape) -> Visit {
        let writes = !shape.is_read_only();
        match step {
            Step::Exec => Visit {
                set: KeySet::Reads,
                at: At::P,
            },
            Step::Lock | Step::Unlock if writes => Visit {
                set: self.lock_set(),
                at: self.lock_at,
            },
            Step::Validate => Visit {
                set: self.validate_set(shape),
                at: At::P,
            },
            Step::Replicate if writes => Visit {
                set: KeySet::Writes,
                at: self.replicate_at,
            },
            _ => Visit::NONE,
        }
    }

    /// Whether a transaction of `shape` goes through `step` (`Has`).
    pub fn has(&self, step: Step, shape: Shape) -> bool {
        let writes = !shape.is_read_only();
        match step {
            Step::Exec | Step::Done => true,
            Step::Lock | Step::Unlock => writes && !self.lock_at.is_empty(),
            Step::Validate => self.validate_set(shape).len(shape) > 0,
            Step::Replicate => writes && !self.replicate_at.is_empty(),
        }
    }

    /// The first step after `step` that a transaction of `shape` goes
    /// through (`NextPhase`); [`Step::Done`] after the last.
    pub fn next_step(&self, step: Step, shape: Shape) -> Step {
        Step::ORDER
            .into_iter()
            .filter(|&s| s > step)
            .find(|&s| self.has(s, shape))
            .unwrap_or(Step::Done)
    }

    /// The coordinator's reaction to the last response of `step` (`StepDone`):
    /// `failed` if a lock or a validation of the step was refused,
    /// `decision` the transaction's decision so far, `reported` whether its
    /// outcome was already reported.
    ///
    /// A failure decides abort and goes to Unlocking if the row locks (the
    /// locks taken are released), reporting at once unless the row reports
    /// aborts later (Dnl-1: after the Unlock acks). Otherwise the decision
    /// is commit once the last check passed, and it is reported at the
    /// row's report point, or when the transaction is done.
    pub fn step_done(
        &self,
        step: Step,
        shape: Shape,
        failed: bool,
        decision: Option<Decision>,
        reported: bool,
    ) -> StepDone {
        if failed {
            let next = if self.has(Step::Unlock, shape) {
                Step::Unlock
            } else {
                Step::Done
            };
            let report = !reported && (self.report_abort == Report::Decision || next == Step::Done);
            return StepDone {
                next,
                decision: Some(Decision::Abort),
                report: report.then_some(Decision::Abort),
            };
        }
        let next = self.next_step(step, shape);
        let decide = step.is_check() && !next.is_check();
        let decision = if decide {
            Some(Decision::Commit)
        } else {
            decision
        };
        let commit = decision == Some(Decision::Commit);
        let report = !reported
            && (next == Step::Done
                || commit && decide && self.report_commit == Report::Decision
                || commit && self.report_commit == Report::After(step));
        StepDone {
            next,
            decision,
            report: if report { decision } else { None },
        }
    }

    /// The commit-phase steps (every step after Execution) a transaction of
    /// `shape` runs before its commit is reported, on the path where every
    /// check passes: each is one round trip (Dnl-4: up to 4, Dnl-2: 2,
    /// Dnl-1: 1).
    pub fn round_trips_to_commit_report(&self, shape: Shape) -> usize {
        self.round_trips_to_report(shape, None)
    }

    /// The commit-phase steps a transaction of `shape` whose step `fails`
    /// is refused runs before its abort is reported (the failing step
    /// included; Dnl-1 reports after the Unlock acks, the others at once).
    pub fn round_trips_to_abort_report(&self, shape: Shape, fails: Step) -> usize {
        self.round_trips_to_report(shape, Some(fails))
    }

    fn round_trips_to_report(&self, shape: Shape, fails: Option<Step>) -> usize {
        let (mut step, mut decision, mut trips) = (Step::Exec, None, 0);
        while step != Step::Done {
            let failed = fails == Some(step);
            let done = self.step_done(step, shape, failed, decision, false);
            trips += usize::from(step != Step::Exec);
            if done.report.is_some() {
                return trips;
            }
            (step, decision) = (done.next, done.decision);
        }
        trips
    }
}

/// The broken rows of the Dnl mutation build (`--cfg splitkv_mutation="dnl"`,
/// `scripts/mutation`; the mutant picked at run time,
/// [`super::dnl_mutant`]), each the code's counterpart of a must-fail
/// model:
/// - `dnl4_skip_validation`: Dnl-4 without Read validation
///   (`tla/Dnl4NoValidation.cfg`: write skew commits);
/// - `dnl2_ignore_read_locks`: Dnl-2 locking the write set only
///   (`tla/Dnl2NoReadLocks.cfg`: with no Read validation, its reads are
///   never checked);
/// - `dnl1_backups_not_locked`: Dnl-1 locking at primaries only
///   (`tla/Dnl1NoBackupLocks.cfg`: the commit it reports at the Lock acks
///   is not at the backups).
#[cfg(splitkv_mutation = "dnl")]
fn mutant_row(protocol: super::CommitProtocol) -> Option<&'static Row> {
    use super::CommitProtocol;
    const DNL4_SKIP_VALIDATION: Row = Row {
        validate: false,
        ..super::dnl4::ROW
    };
    const DNL2_IGNORE_READ_LOCKS: Row = Row {
        lock_reads: false,
        ..super::dnl2::ROW
    };
    const DNL1_BACKUPS_NOT_LOCKED: Row = Row {
        lock_at: At::P,
        ..super::dnl1::ROW
    };
    match (super::dnl_mutant()?, protocol) {
        ("dnl4_skip_validation", CommitProtocol::Dnl4) => Some(&DNL4_SKIP_VALIDATION),
        ("dnl2_ignore_read_locks", CommitProtocol::Dnl2) => Some(&DNL2_IGNORE_READ_LOCKS),
        ("dnl1_backups_not_locked", CommitProtocol::Dnl1) => Some(&DNL1_BACKUPS_NOT_LOCKED),
        _ => None,
    }
}

/// The row of `protocol`, or `None` for Xenic OCC (not a row: see the
/// module docs).
pub fn row_of(protocol: super::CommitProtocol) -> Option<&'static Row> {
    use super::CommitProtocol;
    #[cfg(splitkv_mutation = "dnl")]
    if let Some(row) = mutant_row(protocol) {
        return Some(row);
    }
    match protocol {
        CommitProtocol::XenicOcc => None,
        CommitProtocol::Dnl4 => Some(&super::dnl4::ROW),
        CommitProtocol::Dnl2 => Some(&super::dnl2::ROW),
        CommitProtocol::Dnl1 => Some(&super::dnl1::ROW),
    }
}

#[cfg(test)]
mod tests;

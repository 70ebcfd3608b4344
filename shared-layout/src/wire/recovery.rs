//! Crash-recovery messages (Xenic §4.2.1, Dandelion §4.4, FaRM-style):
//! the evidence each surviving node reports for an epoch change and the
//! decisions the recovery leader broadcasts.
//!
//! These travel on [`super::Flow::Recovery`]. A message is self-describing
//! (its first byte is a [`RecoveryTag`]), so the runtime can carry it as one
//! opaque body; it is not on the hot path, and decoding returns owned vectors.
//!
//! Encoding (little-endian):
//!
//! | message | bytes |
//! |---|---|
//! | Evidence | tag u8 = 1, epoch u32, part u16, parts u16, n_coord u16, n_records u16, n_gens u8, coord entries, record entries, generations u32 × n_gens |
//! | Decisions | tag u8 = 2, epoch u32, part u16, parts u16, n u16, generation u32, decision entries |
//! | Applied | tag u8 = 3, epoch u32 |
//! | Resume | tag u8 = 4, epoch u32 |
//!
//! - coordinator entry ([`COORD_EVIDENCE_BYTES`]): tx_id u64, phase u8,
//!   outcome u8, reported u8 (0/1), write_shards u16;
//! - record entry ([`RECORD_EVIDENCE_BYTES`]): tx_id u64, shard u16, kind u8,
//!   write_shards u16;
//! - decision entry ([`DECISION_BYTES`]): tx_id u64, outcome u8 (Commit or Abort);
//! - generations (at most [`MASK_NODES_MAX`]): entry `n` is the newest
//!   generation of node `n`'s transaction ids the sender's per-slot fences
//!   saw (0: none); a Decisions message's `generation` is the newest over
//!   every live node of the recipient's own ids. A coordinator whose process
//!   restarted numbers its new transactions above it, so no id is used twice
//!   and none is refused as late (a restarted node or NIC runtime).
//!
//! A node's evidence for one epoch may span several messages (`part` of
//! `parts`, at most [`RECOVERY_PARTS_MAX`]); so may the leader's decisions.

use super::NodeId;
use crate::error::{DecodeError, Reader};
use crate::TxId;

/// Most shards (= nodes) a [`NodeMask`] can name.
pub const MASK_NODES_MAX: usize = 16;
/// Most coordinator plus record entries in one Evidence message: 256 × 13 B
/// = 3.3 KB, well inside one packet.
pub const EVIDENCE_ENTRIES_PER_MESSAGE_MAX: usize = 256;
/// Most decisions in one Decisions message: 512 × 9 B = 4.6 KB.
pub const DECISIONS_PER_MESSAGE_MAX: usize = 512;
/// Most parts one node's evidence (or the leader's decisions) spans in one
/// epoch: 64 × 256 = 16 384 entries.
pub const RECOVERY_PARTS_MAX: usize = 64;
/// Encoded size of a [`CoordEvidence`].
pub const COORD_EVIDENCE_BYTES: usize = 8 + 1 + 1 + 1 + 2;
/// Encoded size of a [`RecordEvidence`].
pub const RECORD_EVIDENCE_BYTES: usize = 8 + 2 + 1 + 2;
/// Encoded size of a [`Decision`].
pub const DECISION_BYTES: usize = 8 + 1;
const fn max(a: usize, b: usize) -> usize {
    if a > b {
        a
    } else {
        b
    }
}
/// Bytes of any recovery message besides its entries: tag, epoch, part,
/// parts, two counts, and the generations (a count and at most
/// [`MASK_NODES_MAX`] of them).
const RECOVERY_FIXED_BYTES: usize = 1 + 4 + 2 + 2 + 2 + 2 + 1 + 4 * MASK_NODES_MAX;
/// Largest encoded recovery message (bytes): 4 686 B.
pub const RECOVERY_MESSAGE_BYTES_MAX: usize = RECOVERY_FIXED_BYTES
    + max(
        EVIDENCE_ENTRIES_PER_MESSAGE_MAX * max(COORD_EVIDENCE_BYTES, RECORD_EVIDENCE_BYTES),
        DECISIONS_PER_MESSAGE_MAX * DECISION_BYTES,
    );
const _: () = assert!(RECOVERY_MESSAGE_BYTES_MAX + 8 + 40 <= super::PACKET_BYTES_MAX);

/// A set of node ids (or shard ids: one shard per node) below [`MASK_NODES_MAX`], one bit each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeMask(pub u16);

impl NodeMask {
    /// The empty set.
    pub const EMPTY: NodeMask = NodeMask(0);

    /// Whether `n` is in the set (false for `n` ≥ [`MASK_NODES_MAX`]).
    pub fn contains(self, n: NodeId) -> bool {
        (n as usize) < MASK_NODES_MAX && self.0 & (1 << n) != 0
    }
    /// The set with `n` added; `n` must be below [`MASK_NODES_MAX`] (others are ignored).
    #[must_use]
    pub fn with(self, n: NodeId) -> NodeMask {
        if (n as usize) < MASK_NODES_MAX {
            NodeMask(self.0 | (1 << n))
        } else {
            self
        }
    }
    /// Number of members.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }
    /// Whether empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Whether every member of `self` is in `other`.
    pub fn is_subset(self, other: NodeMask) -> bool {
        self.0 & !other.0 == 0
    }
    /// The members, ascending.
    pub fn iter(self) -> impl Iterator<Item = NodeId> {
        (0..MASK_NODES_MAX as NodeId).filter(move |&n| self.contains(n))
    }
}

macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident, $what:literal, { $($(#[$vm:meta])* $v:ident = $n:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name { $($(#[$vm])* $v = $n),+ }
        impl $name {
            /// Every value, in wire order.
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            /// The value with wire tag `tag`.
            ///
            /// # Errors
            /// [`DecodeError::BadTag`] for an unknown tag.
            pub fn from_u8(tag: u8) -> Result<$name, DecodeError> {
                $name::ALL.iter().copied().find(|v| *v as u8 == tag)
                    .ok_or(DecodeError::BadTag { what: $what, tag: tag as u64 })
            }
        }
    };
}

wire_enum!(
    /// How far a coordinator got with a transaction (Xenic §4.2 steps).
    CoordPhase, "coordinator phase", {
        /// Reading and locking (step 1); no LOG sent.
        Execute = 0,
        /// Validating reads (step 3); no LOG sent.
        Validate = 1,
        /// LOG sent to the replicas of the write set (step 4); not all acknowledged.
        Log = 2,
        /// Every LOG acknowledged; COMMIT sent (step 5).
        Commit = 3,
        /// Dnl execution: Gets sent (Dandelion §4.2.1); nothing locked.
        Get = 4,
        /// Dnl Locking: Lock sent (Dandelion §4.2.2); not all acknowledged.
        Lock = 5,
        /// Dnl Replication: decided commit, Replicate sent.
        Replicate = 6,
        /// Dnl Unlocking: decided, Unlock sent.
        Unlock = 7,
    }
);

wire_enum!(
    /// A transaction's outcome as far as one party knows it.
    CoordOutcome, "outcome", {
        /// Not decided yet.
        Undecided = 0,
        /// Decided commit.
        Commit = 1,
        /// Decided abort.
        Abort = 2,
    }
);

wire_enum!(
    /// The latest record a replica holds for a transaction in its host log.
    RecordKind, "record kind", {
        /// A LOG record (the new values) with no decision yet: pending.
        Log = 0,
        /// A COMMIT (decision) record; the LOG was applied.
        Commit = 1,
        /// An ABORT (decision) record after a LOG; the LOG was dropped.
        Abort = 2,
        /// Dnl: the transaction's LOCK here (with its written values, if
        /// any), no decision yet.
        Lock = 3,
        /// Dnl: its REPL here (written after the decision), no decision
        /// record yet.
        Repl = 4,
    }
);

wire_enum!(
    /// First byte of every recovery message.
    RecoveryTag, "recovery message", {
        /// [`RecoveryMsg::Evidence`].
        Evidence = 1,
        /// [`RecoveryMsg::Decisions`].
        Decisions = 2,
        /// [`RecoveryMsg::Applied`].
        Applied = 3,
        /// [`RecoveryMsg::Resume`].
        Resume = 4,
    }
);

/// What a surviving coordinator reports about one transaction it coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CoordEvidence {
    /// Transaction id (its coordinator is [`TxId::coordinator`]).
    pub tx_id: TxId,
    /// How far the commit protocol got.
    pub phase: CoordPhase,
    /// The coordinator's own decision, if it made one.
    pub outcome: CoordOutcome,
    /// Whether the decision was reported to the client.
    pub reported: bool,
    /// The shards the transaction writes (empty for a read-only transaction).
    pub write_shards: NodeMask,
}

/// What a replica reports about one transaction's record for one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordEvidence {
    /// Transaction id.
    pub tx_id: TxId,
    /// The shard the record's keys belong to.
    pub shard: NodeId,
    /// The latest record for `(tx_id, shard)`: `Log` means undecided.
    pub kind: RecordKind,
    /// Every shard the transaction writes, as carried by its LOG (FaRM's LOCK
    /// records name all written regions for the same reason).
    pub write_shards: NodeMask,
}

/// The leader's decision for one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Transaction id.
    pub tx_id: TxId,
    /// `true`: committed; `false`: aborted.
    pub commit: bool,
}

/// A recovery message (see the module docs for the encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryMsg {
    /// Part of one node's evidence for `epoch`, sent to the recovery leader.
    Evidence {
        /// The epoch being recovered into.
        epoch: u32,
        /// This part's index (`< parts`).
        part: u16,
        /// How many parts the sender's evidence spans (1..=[`RECOVERY_PARTS_MAX`]).
        parts: u16,
        /// Transactions the sender coordinates.
        coordinated: Vec<CoordEvidence>,
        /// Records the sender holds for transactions.
        records: Vec<RecordEvidence>,
        /// Per coordinator node (index), the newest generation of its
        /// transaction ids the sender's per-slot fences saw (0: none); at
        /// most [`MASK_NODES_MAX`] entries.
        generations: Vec<u32>,
    },
    /// Part of the leader's decisions for `epoch`, sent to every live node.
    Decisions {
        /// The epoch being recovered into.
        epoch: u32,
        /// This part's index (`< parts`).
        part: u16,
        /// How many parts the decisions span (1..=[`RECOVERY_PARTS_MAX`]).
        parts: u16,
        /// One decision per transaction.
        decisions: Vec<Decision>,
        /// The newest generation of the recipient's own transaction ids
        /// that any live node's per-slot fences saw (0: none).
        generation: u32,
    },
    /// To the leader: every decision of `epoch` is recorded in this node's
    /// host log (COMMIT or ABORT records appended).
    Applied {
        /// The epoch being recovered into.
        epoch: u32,
    },
    /// From the leader: every live node recorded the decisions of `epoch`;
    /// report outcomes to clients and serve again.
    Resume {
        /// The epoch now served.
        epoch: u32,
    },
}

/// Why a [`RecoveryMsg`] cannot be encoded (the caller broke a bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryEncodeError {
    /// More entries than one message holds.
    #[error("{what}: {len} entries exceed the maximum {max} per message")]
    TooMany {
        /// Which list.
        what: &'static str,
        /// Entries given.
        len: usize,
        /// The bound.
        max: usize,
    },
    /// `parts` zero or over [`RECOVERY_PARTS_MAX`], or `part >= parts`.
    #[error("part {part} of {parts} is not a valid part number")]
    Part {
        /// The part index.
        part: u16,
        /// The part count.
        parts: u16,
    },
}

fn check_part(part: u16, parts: u16) -> bool {
    parts >= 1 && parts as usize <= RECOVERY_PARTS_MAX && part < parts
}

impl RecoveryMsg {
    /// The epoch the message belongs to.
    pub fn epoch(&self) -> u32 {
        match self {
            RecoveryMsg::Evidence { epoch, .. }
            | RecoveryMsg::Decisions { epoch, .. }
            | RecoveryMsg::Applied { epoch }
            | RecoveryMsg::Resume { epoch } => *epoch,
        }
    }

    /// Appends the encoding to `out`.
    ///
    /// # Errors
    /// [`RecoveryEncodeError`] when a list is over its per-message bound or the
    /// part numbers are invalid; nothing is appended then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), RecoveryEncodeError> {
        match self {
            RecoveryMsg::Evidence {
                epoch,
                part,
                parts,
                coordinated,
                records,
                generations,
            } => {
                if generations.len() > MASK_NODES_MAX {
                    return Err(RecoveryEncodeError::TooMany {
                        what: "generations",
                        len: generations.len(),
                        max: MASK_NODES_MAX,
                    });
                }
                let n = coordinated.len() + records.len();
                if n > EVIDENCE_ENTRIES_PER_MESSAGE_MAX {
                    return Err(RecoveryEncodeError::TooMany {
                        what: "evidence",
                        len: n,
                        max: EVIDENCE_ENTRIES_PER_MESSAGE_MAX,
                    });
                }
                if !check_part(*part, *parts) {
                    return Err(RecoveryEncodeError::Part {
                        part: *part,
                        parts: *parts,
                    });
                }
                out.push(RecoveryTag::Evidence as u8);
                out.extend_from_slice(&epoch.to_le_bytes());
                out.extend_from_slice(&part.to_le_bytes());
                out.extend_from_slice(&parts.to_le_bytes());
                out.extend_from_slice(&(coordinated.len() as u16).to_le_bytes());
                out.extend_from_slice(&(records.len() as u16).to_le_bytes());
                out.push(generations.len() as u8);
                for c in coordinated {
                    out.extend_from_slice(&c.tx_id.to_le_bytes());
                    out.extend_from_slice(&[c.phase as u8, c.outcome as u8, c.reported as u8]);
                    out.extend_from_slice(&c.write_shards.0.to_le_bytes());
                }
                for r in records {
                    out.extend_from_slice(&r.tx_id.to_le_bytes());
                    out.extend_from_slice(&r.shard.to_le_bytes());
                    out.push(r.kind as u8);
                    out.extend_from_slice(&r.write_shards.0.to_le_bytes());
                }
                for g in generations {
                    out.extend_from_slice(&g.to_le_bytes());
                }
            }
            RecoveryMsg::Decisions {
                epoch,
                part,
                parts,
                decisions,
                generation,
            } => {
                if decisions.len() > DECISIONS_PER_MESSAGE_MAX {
                    return Err(RecoveryEncodeError::TooMany {
                        what: "decisions",
                        len: decisions.len(),
                        max: DECISIONS_PER_MESSAGE_MAX,
                    });
                }
                if !check_part(*part, *parts) {
                    return Err(RecoveryEncodeError::Part {
                        part: *part,
                        parts: *parts,
                    });
                }
                out.push(RecoveryTag::Decisions as u8);
                out.extend_from_slice(&epoch.to_le_bytes());
                out.extend_from_slice(&part.to_le_bytes());
                out.extend_from_slice(&parts.to_le_bytes());
                out.extend_from_slice(&(decisions.len() as u16).to_le_bytes());
                out.extend_from_slice(&generation.to_le_bytes());
                for d in decisions {
                    out.extend_from_slice(&d.tx_id.to_le_bytes());
                    let o = if d.commit {
                        CoordOutcome::Commit
                    } else {
                        CoordOutcome::Abort
                    };
                    out.push(o as u8);
                }
            }
            RecoveryMsg::Applied { epoch } => {
                out.push(RecoveryTag::Applied as u8);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
            RecoveryMsg::Resume { epoch } => {
                out.push(RecoveryTag::Resume as u8);
                out.extend_from_slice(&epoch.to_le_bytes());
            }
        }
        Ok(())
    }

    /// Decodes a message that spans exactly `bytes`.
    ///
    /// # Errors
    /// [`DecodeError`] for truncated input, unknown tags, counts over their
    /// bounds (generations over [`MASK_NODES_MAX`]), invalid part numbers, a shard id outside [`NodeMask`]'s range,
    /// an undecided decision, a reported flag other than 0/1, or trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<RecoveryMsg, DecodeError> {
        let mut r = Reader::new(bytes, "recovery message");
        let tag = RecoveryTag::from_u8(r.u8()?)?;
        let epoch = r.u32()?;
        let msg = match tag {
            RecoveryTag::Applied => RecoveryMsg::Applied { epoch },
            RecoveryTag::Resume => RecoveryMsg::Resume { epoch },
            RecoveryTag::Evidence => decode_parts(true, epoch, &mut r)?,
            RecoveryTag::Decisions => decode_parts(false, epoch, &mut r)?,
        };
        r.finish()?;
        Ok(msg)
    }
}

/// The rest of an Evidence (`evidence`) or Decisions message after its tag
/// and epoch.
fn decode_parts(
    evidence: bool,
    epoch: u32,
    r: &mut Reader<'_>,
) -> Result<RecoveryMsg, DecodeError> {
    let part = r.u16()?;
    let parts = r.u16()?;
    if !check_part(part, parts) {
        return Err(DecodeError::Inconsistent {
            what: "recovery message",
            detail: "part number not below a part count in 1..=RECOVERY_PARTS_MAX",
        });
    }
    if evidence {
        let nc = r.u16()? as usize;
        let nr = r.u16()? as usize;
        check_count(
            "evidence entries",
            nc + nr,
            EVIDENCE_ENTRIES_PER_MESSAGE_MAX,
        )?;
        let ng = r.u8()? as usize;
        check_count("generations", ng, MASK_NODES_MAX)?;
        let coordinated = (0..nc).map(|_| read_coord(r)).collect::<Result<_, _>>()?;
        let records = (0..nr).map(|_| read_record(r)).collect::<Result<_, _>>()?;
        let generations = (0..ng).map(|_| r.u32()).collect::<Result<_, _>>()?;
        Ok(RecoveryMsg::Evidence {
            epoch,
            part,
            parts,
            coordinated,
            records,
            generations,
        })
    } else {
        let n = r.u16()? as usize;
        check_count("decisions", n, DECISIONS_PER_MESSAGE_MAX)?;
        let generation = r.u32()?;
        let decisions = (0..n).map(|_| read_decision(r)).collect::<Result<_, _>>()?;
        Ok(RecoveryMsg::Decisions {
            epoch,
            part,
            parts,
            decisions,
            generation,
        })
    }
}

pub(super) fn check_count(what: &'static str, len: usize, max: usize) -> Result<(), DecodeError> {
    if len > max {
        Err(DecodeError::TooLarge { what, len, max })
    } else {
        Ok(())
    }
}

fn read_coord(r: &mut Reader<'_>) -> Result<CoordEvidence, DecodeError> {
    let tx_id = r.tx_id()?;
    let phase = CoordPhase::from_u8(r.u8()?)?;
    let outcome = CoordOutcome::from_u8(r.u8()?)?;
    let reported = match r.u8()? {
        0 => false,
        1 => true,
        t => {
            return Err(DecodeError::BadTag {
                what: "reported flag",
                tag: t as u64,
            })
        }
    };
    let write_shards = NodeMask(r.u16()?);
    Ok(CoordEvidence {
        tx_id,
        phase,
        outcome,
        reported,
        write_shards,
    })
}

pub(super) fn read_record(r: &mut Reader<'_>) -> Result<RecordEvidence, DecodeError> {
    let tx_id = r.tx_id()?;
    let shard = r.u16()?;
    if shard as usize >= MASK_NODES_MAX {
        return Err(DecodeError::TooLarge {
            what: "record shard",
            len: shard as usize,
            max: MASK_NODES_MAX - 1,
        });
    }
    let kind = RecordKind::from_u8(r.u8()?)?;
    let write_shards = NodeMask(r.u16()?);
    Ok(RecordEvidence {
        tx_id,
        shard,
        kind,
        write_shards,
    })
}

pub(super) fn read_decision(r: &mut Reader<'_>) -> Result<Decision, DecodeError> {
    let tx_id = r.tx_id()?;
    let commit = match CoordOutcome::from_u8(r.u8()?)? {
        CoordOutcome::Commit => true,
        CoordOutcome::Abort => false,
        CoordOutcome::Undecided => {
            return Err(DecodeError::Inconsistent {
                what: "decision",
                detail: "a decision must be commit or abort",
            })
        }
    };
    Ok(Decision { tx_id, commit })
}

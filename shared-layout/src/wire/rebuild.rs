//! NIC-restart rebuild messages (after a NIC-runtime-only crash; Xenic
//! §4.2.1 (a): locks live only in the NIC index, so a NIC runtime that
//! restarts must learn them again from the coordinators that hold them).
//!
//! A restarted NIC runtime (a new session incarnation) asks every peer
//! which of its transactions in flight touch it ([`RebuildMsg::Query`]);
//! each peer answers with [`RebuildMsg::Report`] parts: its coordinator's
//! transactions that locked keys there, logged there or wait for an answer
//! from there, the keys they locked there, and the host-log records the
//! peer holds for transactions the restarted node coordinated (which it
//! lost), and the newest generation of the restarted node's transaction
//! ids the peer's per-slot fence has seen (the restarted coordinator numbers
//! its new transactions above it, so no id is used twice and none is
//! refused as late). The restarted node decides those and sends
//! [`RebuildMsg::Decisions`].
//!
//! These travel on [`super::Flow::Recovery`] as one self-describing body
//! (first byte a tag), like [`super::RecoveryMsg`]; they are not on the hot
//! path, and decoding returns owned vectors.
//!
//! Encoding (little-endian):
//!
//! | message | bytes |
//! |---|---|
//! | Query | tag u8 = 1, restart u32 |
//! | Report | tag u8 = 2, restart u32, part u16, last u8 (0/1), generation u32, n_txs u16, n_locks u16, n_records u16, tx entries, lock entries, record entries |
//! | Decisions | tag u8 = 3, restart u32, n u16, decision entries |
//!
//! - tx entry ([`PEER_TX_BYTES`]): tx_id u64, phase u8 ([`CoordPhase`]), waiting u8 (0/1);
//! - lock entry ([`LOCK_ENTRY_BYTES`]): tx_id u64, key (table u32, id u64);
//! - record entry: as [`super::RecordEvidence`] (tx_id u64, shard u16, kind u8, write_shards u16);
//! - decision entry: as [`super::Decision`] (tx_id u64, outcome u8: Commit or Abort).

use super::recovery::{
    check_count, read_decision, read_record, CoordOutcome, CoordPhase, Decision, RecordEvidence,
};
use super::{DECISION_BYTES, RECORD_EVIDENCE_BYTES};
use crate::error::{DecodeError, Reader};
use crate::key::KEY_BYTES;
use crate::{Key, TxId};

/// Most tx, lock and record entries in one Report message (at most
/// 20 B each: 3.8 KB, well inside one packet).
pub const REBUILD_ENTRIES_PER_MESSAGE_MAX: usize = 192;
/// Most decisions in one rebuild Decisions message (9 B each: 3.5 KB).
pub const REBUILD_DECISIONS_PER_MESSAGE_MAX: usize = 384;
/// Encoded size of a [`PeerTx`].
pub const PEER_TX_BYTES: usize = 8 + 1 + 1;
/// Encoded size of a [`LockEntry`].
pub const LOCK_ENTRY_BYTES: usize = 8 + KEY_BYTES;
/// Bytes of a Report before its entries.
const REPORT_FIXED_BYTES: usize = 1 + 4 + 2 + 1 + 4 + 2 + 2 + 2;
/// Largest encoded rebuild message (bytes).
pub const REBUILD_MESSAGE_BYTES_MAX: usize = {
    let report = REPORT_FIXED_BYTES + REBUILD_ENTRIES_PER_MESSAGE_MAX * LOCK_ENTRY_BYTES;
    let decisions = 1 + 4 + 2 + REBUILD_DECISIONS_PER_MESSAGE_MAX * DECISION_BYTES;
    if report > decisions {
        report
    } else {
        decisions
    }
};
const _: () = assert!(REBUILD_MESSAGE_BYTES_MAX + 8 + 40 <= super::PACKET_BYTES_MAX);
const _: () =
    assert!(LOCK_ENTRY_BYTES >= PEER_TX_BYTES && LOCK_ENTRY_BYTES >= RECORD_EVIDENCE_BYTES);

/// Tags of rebuild messages (first byte).
const TAG_QUERY: u8 = 1;
const TAG_REPORT: u8 = 2;
const TAG_DECISIONS: u8 = 3;

/// One transaction a peer's coordinator has in flight that touches the
/// restarted node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerTx {
    /// Transaction id (its coordinator is [`TxId::coordinator`]).
    pub tx_id: TxId,
    /// The coordinator's phase (Xenic §4.2 steps).
    pub phase: CoordPhase,
    /// Whether the current phase still waits for the restarted node's answer.
    pub waiting: bool,
}

/// A key a peer's transaction holds locked at the restarted node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockEntry {
    /// The lock holder.
    pub tx_id: TxId,
    /// The key.
    pub key: Key,
}

/// A rebuild message (see the module docs for the encoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildMsg {
    /// From the restarted node (incarnation `restart`) to every peer.
    Query {
        /// The restarted node's new incarnation, echoed by the answers.
        restart: u32,
    },
    /// One part of a peer's answer; `last` marks the final part.
    Report {
        /// The incarnation this answers.
        restart: u32,
        /// This part's index, from 0.
        part: u16,
        /// Whether this is the answer's final part.
        last: bool,
        /// The newest generation ([`TxId::generation`]) of
        /// the restarted node's transactions the peer has seen, over every
        /// coordinator slot, compared with wrap-around (0: none seen).
        generation: u32,
        /// The peer coordinator's transactions touching the restarted node.
        txs: Vec<PeerTx>,
        /// Keys those transactions hold locked at the restarted node.
        locks: Vec<LockEntry>,
        /// Records the peer's host log holds for the restarted node's transactions.
        records: Vec<RecordEvidence>,
    },
    /// From the restarted node: its decisions for transactions it coordinated.
    Decisions {
        /// The restarted node's incarnation.
        restart: u32,
        /// One decision per transaction.
        decisions: Vec<Decision>,
    },
}

/// Why a [`RebuildMsg`] cannot be encoded (the caller broke a bound).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {len} entries exceed the maximum {max} per message")]
pub struct RebuildEncodeError {
    /// Which list.
    pub what: &'static str,
    /// Entries given.
    pub len: usize,
    /// The bound.
    pub max: usize,
}

impl RebuildMsg {
    /// The restarted node's incarnation the message belongs to.
    pub fn restart(&self) -> u32 {
        match self {
            RebuildMsg::Query { restart }
            | RebuildMsg::Report { restart, .. }
            | RebuildMsg::Decisions { restart, .. } => *restart,
        }
    }

    /// Appends the encoding to `out`.
    ///
    /// # Errors
    /// [`RebuildEncodeError`] when a list is over its per-message bound
    /// ([`REBUILD_ENTRIES_PER_MESSAGE_MAX`] for a Report's three lists
    /// together, [`REBUILD_DECISIONS_PER_MESSAGE_MAX`]); nothing is appended then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), RebuildEncodeError> {
        match self {
            RebuildMsg::Query { restart } => {
                out.push(TAG_QUERY);
                out.extend_from_slice(&restart.to_le_bytes());
            }
            RebuildMsg::Report {
                restart,
                part,
                last,
                generation,
                txs,
                locks,
                records,
            } => {
                let n = txs.len() + locks.len() + records.len();
                if n > REBUILD_ENTRIES_PER_MESSAGE_MAX {
                    return Err(RebuildEncodeError {
                        what: "rebuild report",
                        len: n,
                        max: REBUILD_ENTRIES_PER_MESSAGE_MAX,
                    });
                }
                out.push(TAG_REPORT);
                out.extend_from_slice(&restart.to_le_bytes());
                out.extend_from_slice(&part.to_le_bytes());
                out.push(*last as u8);
                out.extend_from_slice(&generation.to_le_bytes());
                for n in [txs.len(), locks.len(), records.len()] {
                    out.extend_from_slice(&(n as u16).to_le_bytes());
                }
                for t in txs {
                    out.extend_from_slice(&t.tx_id.to_le_bytes());
                    out.extend_from_slice(&[t.phase as u8, t.waiting as u8]);
                }
                let mut k = [0u8; KEY_BYTES];
                for l in locks {
                    out.extend_from_slice(&l.tx_id.to_le_bytes());
                    l.key.encode(&mut k);
                    out.extend_from_slice(&k);
                }
                for r in records {
                    out.extend_from_slice(&r.tx_id.to_le_bytes());
                    out.extend_from_slice(&r.shard.to_le_bytes());
                    out.push(r.kind as u8);
                    out.extend_from_slice(&r.write_shards.0.to_le_bytes());
                }
            }
            RebuildMsg::Decisions { restart, decisions } => {
                if decisions.len() > REBUILD_DECISIONS_PER_MESSAGE_MAX {
                    return Err(RebuildEncodeError {
                        what: "rebuild decisions",
                        len: decisions.len(),
                        max: REBUILD_DECISIONS_PER_MESSAGE_MAX,
                    });
                }
                out.push(TAG_DECISIONS);
                out.extend_from_slice(&restart.to_le_bytes());
                out.extend_from_slice(&(decisions.len() as u16).to_le_bytes());
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
        }
        Ok(())
    }

    /// Decodes a message that spans exactly `bytes`.
    ///
    /// # Errors
    /// [`DecodeError`] for truncated input, an unknown tag, phase, record
    /// kind or outcome, counts over their bounds, a flag other than 0/1, a
    /// shard outside [`super::NodeMask`]'s range, an undecided decision, or
    /// trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<RebuildMsg, DecodeError> {
        let mut r = Reader::new(bytes, "rebuild message");
        let tag = r.u8()?;
        let restart = r.u32()?;
        let msg = match tag {
            TAG_QUERY => RebuildMsg::Query { restart },
            TAG_REPORT => decode_report(restart, &mut r)?,
            TAG_DECISIONS => {
                let n = r.u16()? as usize;
                check_count("rebuild decisions", n, REBUILD_DECISIONS_PER_MESSAGE_MAX)?;
                let decisions = (0..n)
                    .map(|_| read_decision(&mut r))
                    .collect::<Result<_, _>>()?;
                RebuildMsg::Decisions { restart, decisions }
            }
            t => {
                return Err(DecodeError::BadTag {
                    what: "rebuild message",
                    tag: t as u64,
                })
            }
        };
        r.finish()?;
        Ok(msg)
    }
}

fn decode_report(restart: u32, r: &mut Reader<'_>) -> Result<RebuildMsg, DecodeError> {
    let part = r.u16()?;
    let last = flag(r.u8()?, "last-part flag")?;
    let generation = r.u32()?;
    let (nt, nl, nr) = (r.u16()? as usize, r.u16()? as usize, r.u16()? as usize);
    check_count(
        "rebuild report entries",
        nt + nl + nr,
        REBUILD_ENTRIES_PER_MESSAGE_MAX,
    )?;
    let txs = (0..nt)
        .map(|_| {
            Ok(PeerTx {
                tx_id: r.tx_id()?,
                phase: CoordPhase::from_u8(r.u8()?)?,
                waiting: flag(r.u8()?, "waiting flag")?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let locks = (0..nl)
        .map(|_| {
            Ok(LockEntry {
                tx_id: r.tx_id()?,
                key: r.key()?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let records = (0..nr).map(|_| read_record(r)).collect::<Result<_, _>>()?;
    Ok(RebuildMsg::Report {
        restart,
        part,
        last,
        generation,
        txs,
        locks,
        records,
    })
}

fn flag(v: u8, what: &'static str) -> Result<bool, DecodeError> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        t => Err(DecodeError::BadTag {
            what,
            tag: t as u64,
        }),
    }
}

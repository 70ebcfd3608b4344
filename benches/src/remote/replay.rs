//! The driver side of a node's client journal ([`super::journal`]): the
//! journal of a node that died (SIGKILL) replayed through a fresh generator
//! of the same workload, node and seed, which then reports what the live one
//! would have ([`results_from_journal`]): its history (list-append,
//! register) or its Smallbank summary. The generator is deterministic given
//! its seed and its inputs, so each journaled draw must come out of it again
//! byte for byte ([`JournalError::Diverged`] otherwise: a journal of another
//! run, or a corrupted one). Transactions drawn without a last outcome in
//! the journal are then ended by [`TxGenerator::finish`]: indeterminate
//! (`info`; their money joins Smallbank's unknown range).

use super::journal::JOURNAL_VERSION;
use super::protocol::*;
use crate::workload::{AttemptOutcome, TxCall, TxGenerator, Workload};
use splitkv_layout::host_nic::TxStatus;
use splitkv_nic::Nanos;
use std::collections::HashMap;

/// Why a journal cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// No header, or a header of another version or node.
    #[error("journal header: {0}")]
    Header(String),
    /// A line that does not parse, or an outcome of no drawn transaction.
    #[error("journal line {line}: {detail}")]
    Malformed {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        detail: String,
    },
    /// A journaled draw the generator did not draw again.
    #[error("journal line {line}: draw {seq} differs from the generator's (another run's journal, or corrupted)")]
    Diverged {
        /// 1-based line number.
        line: usize,
        /// The draw's sequence number.
        seq: u64,
    },
}

/// A journal's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalHeader {
    /// The node whose client wrote it.
    pub node: u16,
    /// The generator's seed.
    pub seed: u64,
    /// The node's clock origin.
    pub clock: ClockOrigin,
}

/// What a replay saw, counted as the load generator counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Outcome counters (transactions without a last outcome are `unknown`).
    pub counters: LoadCounters,
    /// The last journaled time (node clock, ns).
    pub last_ns: Nanos,
}

/// The complete lines of `text` (a torn last line, cut by the kill in the
/// middle of a write, is left out), numbered from 1.
fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let complete = match text.rfind('\n') {
        Some(i) => &text[..=i],
        None => "",
    };
    complete.lines().enumerate().map(|(i, l)| (i + 1, l))
}

fn field<T: std::str::FromStr>(
    it: &mut std::str::SplitWhitespace<'_>,
    line: usize,
    name: &str,
) -> Result<T, JournalError> {
    it.next()
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| JournalError::Malformed {
            line,
            detail: format!("missing or bad {name}"),
        })
}

fn hex(it: &mut std::str::SplitWhitespace<'_>, line: usize) -> Result<Vec<u8>, JournalError> {
    // An empty byte string is an empty last field.
    from_hex(it.next().unwrap_or("")).ok_or_else(|| JournalError::Malformed {
        line,
        detail: "bytes are not hex".into(),
    })
}

/// The header of `text`.
///
/// # Errors
/// [`JournalError::Header`] if the first line is not a header of
/// [`JOURNAL_VERSION`].
pub fn header(text: &str) -> Result<JournalHeader, JournalError> {
    let bad = |d: &str| JournalError::Header(d.to_string());
    let (_, first) = lines(text).next().ok_or_else(|| bad("empty journal"))?;
    let mut it = first.split_whitespace();
    if it.next() != Some("h") {
        return Err(bad("the first line is not a header"));
    }
    let version: u32 = field(&mut it, 1, "version").map_err(|_| bad("bad version"))?;
    if version != JOURNAL_VERSION {
        return Err(bad(&format!(
            "version {version}, this driver reads {JOURNAL_VERSION}"
        )));
    }
    let parse = |it: &mut std::str::SplitWhitespace<'_>| -> Result<(u16, u64, u64, u64), _> {
        Ok::<_, JournalError>((
            field(it, 1, "node")?,
            field(it, 1, "seed")?,
            field(it, 1, "lo_ns")?,
            field(it, 1, "hi_ns")?,
        ))
    };
    let (node, seed, lo_ns, hi_ns) = parse(&mut it).map_err(|e| bad(&e.to_string()))?;
    Ok(JournalHeader {
        node,
        seed,
        clock: ClockOrigin { lo_ns, hi_ns },
    })
}

/// Counts one attempt's outcome into `c` (the load generator's rule).
fn count(c: &mut LoadCounters, status: TxStatus, last: bool) {
    match status {
        TxStatus::Committed => c.committed += 1,
        TxStatus::UserAborted => c.user_aborted += 1,
        s if s.is_indeterminate() => c.unknown += 1,
        s if s.is_conflict() => {
            c.conflicts += 1;
            c.gave_up += last as u64;
        }
        _ => c.failed += 1,
    }
}

/// Replays the lines of `text` after its header through `gen` (fresh, of
/// the journal's node and seed), then ends it with [`TxGenerator::finish`]
/// at the last journaled time.
///
/// # Errors
/// [`JournalError::Malformed`] or [`JournalError::Diverged`].
pub fn replay<G: TxGenerator>(text: &str, gen: &mut G) -> Result<Replayed, JournalError> {
    let mut r = Replayed::default();
    let mut drawn: HashMap<u64, (TxCall, Nanos)> = HashMap::new();
    let mut call = TxCall::default();
    for (line, l) in lines(text).skip(1) {
        let mut it = l.split_whitespace();
        let malformed = |detail: &str| JournalError::Malformed {
            line,
            detail: detail.to_string(),
        };
        match it.next() {
            Some("t") => {
                let now: Nanos = field(&mut it, line, "time")?;
                if now < r.last_ns {
                    return Err(malformed("time goes backwards"));
                }
                r.last_ns = now;
                gen.on_iteration(now);
            }
            Some("n") => {
                let procedure: u32 = field(&mut it, line, "procedure")?;
                let args = hex(&mut it, line)?;
                let seq = r.counters.drawn;
                call.args.clear();
                gen.next(&mut call);
                if call.procedure != procedure || call.args != args {
                    return Err(JournalError::Diverged { line, seq });
                }
                r.counters.drawn += 1;
                r.counters.attempts += 1;
                drawn.insert(seq, (call.clone(), r.last_ns));
            }
            Some("o") => {
                let seq: u64 = field(&mut it, line, "seq")?;
                let status: u8 = field(&mut it, line, "status")?;
                let status = TxStatus::from_u8(status).ok_or_else(|| malformed("bad status"))?;
                let attempt: u32 = field(&mut it, line, "attempt")?;
                let last: u8 = field(&mut it, line, "last")?;
                let result = hex(&mut it, line)?;
                let (tx, invoked_ns) = drawn
                    .get(&seq)
                    .ok_or_else(|| malformed("an outcome of no outstanding draw"))?;
                gen.on_outcome(&AttemptOutcome {
                    call: tx,
                    status,
                    result: &result,
                    invoked_ns: *invoked_ns,
                    completed_ns: r.last_ns,
                    attempt,
                    last: last != 0,
                    seq,
                });
                count(&mut r.counters, status, last != 0);
                if last != 0 {
                    drawn.remove(&seq);
                }
            }
            _ => return Err(malformed("unknown record")),
        }
    }
    // Drawn without a last outcome: the generator declares them unknown.
    r.counters.unknown += drawn.len() as u64;
    gen.finish(r.last_ns);
    Ok(r)
}

/// What a dead node's client would have reported, from its journal `text`:
/// the [`Results`] the driver's checks take (no rows: the node is gone;
/// counters of the node's runtime zero), `done`.
///
/// # Errors
/// [`JournalError`] if the journal is not `node`'s or does not replay.
pub fn results_from_journal(
    workload: &BuiltWorkload,
    node: u16,
    text: &str,
) -> Result<Results, JournalError> {
    let h = header(text)?;
    if h.node != node {
        return Err(JournalError::Header(format!(
            "journal of node {}, expected node {node}",
            h.node
        )));
    }
    let mut r = Results::empty(node, h.clock, true);
    match workload {
        BuiltWorkload::Smallbank(w) => {
            let mut g = w.generator(node, h.seed);
            r.all = replay(text, &mut g)?.counters;
            r.smallbank = Some(SmallbankSummary::of(&g));
        }
        BuiltWorkload::History(w) => {
            let mut g = w.generator(node, h.seed);
            r.all = replay(text, &mut g)?.counters;
            r.history = Some(HistorySummary {
                stats: g.stats().into(),
                ops: g.ops().iter().map(|o| o.to_json()).collect(),
            });
        } // No client of its own, so no journal to replay: nothing ran.
        BuiltWorkload::Applications => {}
    }
    Ok(r)
}

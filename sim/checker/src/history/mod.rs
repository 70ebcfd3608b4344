//! Client histories in Jepsen's shape, the input of the strict-serializability
//! checker.
//!
//! A history is what clients saw, and nothing else: for every transaction one
//! `invoke` operation when a client submitted it and one completion when it
//! learned the outcome — `ok` (committed, with the values its reads returned),
//! `fail` (certainly not committed) or `info` (indeterminate: the client never
//! learned whether it committed; the checker must accept both). Each operation's
//! `value` is a list of micro-operations (Elle, Kingsbury & Alvaro, VLDB'20):
//!
//! | micro-op | JSON | workload |
//! |---|---|---|
//! | [`MicroOp::Append`] | `["append", k, v]` | list-append: append the unique element `v` to the list at `k` |
//! | [`MicroOp::Write`] | `["w", k, v]` | read-write register: set `k` to the unique value `v` |
//! | [`MicroOp::Read`] | `["r", k, [v1, v2, ..]]` or `["r", k, v]` or `["r", k, null]` | read a list or a register |
//!
//! A read's value is `null` in an `invoke` (not known yet); in an `ok` it is
//! what the read returned, and `null` means the key did not exist (a
//! list-append checker reads it as the empty list).
//!
//! On disk a history is JSON lines, one operation per line, in the field names
//! Jepsen uses so external checkers (Elle, the `adya` crate) read the same file:
//!
//! ```text
//! {"index":0,"type":"invoke","process":3,"f":"txn","value":[["append",5,17],["r",5,null]],"time":12345}
//! {"index":1,"type":"ok","process":3,"f":"txn","value":[["append",5,17],["r",5,[9,17]]],"time":23456}
//! ```
//!
//! `time` is in nanoseconds from a common origin: virtual time in the
//! simulator, the machine's monotonic clock on the local cluster and across
//! processes on one machine. Real-time order between operations recorded on
//! different machines is only as good as their clocks' synchronisation.

mod jsonl;

pub use jsonl::HistoryError;

/// A client process: the sequential issuer of operations (Jepsen's `process`).
/// A process has at most one operation outstanding.
pub type ProcessId = u64;

/// The kind of an operation (Jepsen's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpType {
    /// The client submitted the transaction.
    Invoke,
    /// The transaction committed; reads carry the values they returned.
    Ok,
    /// The transaction certainly did not commit (aborted or rejected).
    Fail,
    /// Indeterminate: the client never learned whether it committed.
    Info,
}

impl OpType {
    /// The JSON name: `invoke`, `ok`, `fail`, `info`.
    pub fn name(self) -> &'static str {
        match self {
            OpType::Invoke => "invoke",
            OpType::Ok => "ok",
            OpType::Fail => "fail",
            OpType::Info => "info",
        }
    }

    /// The type named `s`, if any.
    pub fn from_name(s: &str) -> Option<OpType> {
        match s {
            "invoke" => Some(OpType::Invoke),
            "ok" => Some(OpType::Ok),
            "fail" => Some(OpType::Fail),
            "info" => Some(OpType::Info),
            _ => None,
        }
    }
}

/// What a read returned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReadValue {
    /// A list-append read: the list's elements in order.
    List(Vec<u64>),
    /// A register read: the register's value.
    Register(u64),
}

/// One micro-operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MicroOp {
    /// Append the unique `element` to the list at `key` (`["append", k, v]`).
    Append {
        /// The key.
        key: u64,
        /// The element, unique across the whole history for this key.
        element: u64,
    },
    /// Set the register at `key` to the unique `value` (`["w", k, v]`).
    Write {
        /// The key.
        key: u64,
        /// The value, unique across the whole history for this key.
        value: u64,
    },
    /// Read `key` (`["r", k, value]`); `value` is `None` in an invoke, and in a
    /// completion when the key did not exist.
    Read {
        /// The key.
        key: u64,
        /// What the read returned.
        value: Option<ReadValue>,
    },
}

impl MicroOp {
    /// The key this micro-op touches.
    pub fn key(&self) -> u64 {
        match *self {
            MicroOp::Append { key, .. }
            | MicroOp::Write { key, .. }
            | MicroOp::Read { key, .. } => key,
        }
    }
}

/// One line of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// Position in the history, from 0 (Jepsen's `index`).
    pub index: u64,
    /// The client process that issued it.
    pub process: ProcessId,
    /// Invoke or completion kind.
    pub kind: OpType,
    /// The transaction's micro-ops (Jepsen's `value`; `f` is always `txn`).
    pub value: Vec<MicroOp>,
    /// Nanoseconds from the history's time origin.
    pub time_ns: u64,
    /// Why a `fail` or `info` completion ended so (for example "lock
    /// conflict"); written as Jepsen's `error` field.
    pub error: Option<String>,
}

/// A whole history: operations in the order they were observed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    /// The operations, `ops[i].index == i`.
    pub ops: Vec<Op>,
}

impl History {
    /// An empty history.
    pub fn new() -> History {
        History::default()
    }

    /// Appends an operation, setting its `index`; returns the index.
    pub fn push(&mut self, mut op: Op) -> u64 {
        let index = self.ops.len() as u64;
        op.index = index;
        self.ops.push(op);
        index
    }

    /// Merges operations recorded separately (for example one list per client
    /// thread) into one history ordered by time: a stable sort on `time_ns`
    /// (ties keep their order within each input, and a completion never sorts
    /// before its own invoke), then indices renumbered from 0.
    pub fn merge(parts: impl IntoIterator<Item = Vec<Op>>) -> History {
        let mut ops: Vec<Op> = parts.into_iter().flatten().collect();
        ops.sort_by_key(|o| o.time_ns);
        for (i, o) in ops.iter_mut().enumerate() {
            o.index = i as u64;
        }
        History { ops }
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the history has no operations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

#[cfg(test)]
mod tests;

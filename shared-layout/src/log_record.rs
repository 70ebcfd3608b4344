//! Host-log records (Xenic §4.2 steps 4–7, with the commit point at every
//! replica's LOG acknowledgement): the
//! NIC runtime appends a LOG record per write on every replica of the key,
//! primary and backups (step 4), held **pending**; at the decision it appends
//! one COMMIT or ABORT *decision record* for the transaction (step 6). Host
//! workers poll the log and apply a transaction's pending records to the host
//! table at its COMMIT record, or drop them at its ABORT record (step 7). A
//! LOG record without a decision is the evidence crash recovery reads. The host log is a [`crate::ring`] ring; one ring entry
//! holds one or more concatenated records (e.g. a transaction's write set for
//! one shard), read back with [`LogRecords`]. An entry holds at most
//! [`TX_VALUES_MAX`] records, so at most [`LOG_ENTRY_BYTES_MAX`] bytes: a
//! transaction writing 16 values of 4 KiB at one node is one entry.
//!
//! Encoding of one record (all integers little endian), [`LOG_RECORD_HEADER_BYTES`]
//! plus the value:
//!
//! | field | bytes |
//! |---|---|
//! | kind ([`LogKind`]) | 1 |
//! | `tx_id` ([`TxId`]) | 8 |
//! | key ([`Key`], `table: u32`, `id: u64`) | 12 |
//! | meta ([`ObjectMeta`] word) | 8 |
//! | `value_len: u32` | 4 |
//! | value | `value_len` ≤ [`VALUE_BYTES_MAX`] |
//!
//! The meta word is carried verbatim: every `u64` is a valid [`ObjectMeta`], and
//! which flags an applier keeps (LOCKED never reaches the host table) is policy
//! for the host, not this layer.

use crate::error::{DecodeError, Reader};
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::ring::RING_ENTRY_BYTES_MAX;
use crate::{TxId, TX_VALUES_MAX, VALUE_BYTES_MAX};

/// Encoded bytes of a record without its value.
pub const LOG_RECORD_HEADER_BYTES: usize = 1 + 8 + KEY_BYTES + 8 + 4;

/// Largest encoded record, in bytes.
pub const LOG_RECORD_BYTES_MAX: usize = LOG_RECORD_HEADER_BYTES + VALUE_BYTES_MAX;

/// Largest host-log entry, in bytes: the records of one LOG or COMMIT request,
/// at most [`TX_VALUES_MAX`] of [`LOG_RECORD_BYTES_MAX`] (16 × 4129 = 66 064).
/// [`log_entry_bytes_max`] gives the bound for a smaller value limit.
pub const LOG_ENTRY_BYTES_MAX: usize = TX_VALUES_MAX * LOG_RECORD_BYTES_MAX;

const _: () = assert!(LOG_ENTRY_BYTES_MAX <= RING_ENTRY_BYTES_MAX);

/// Largest host-log entry, in bytes, of a node whose values are at most
/// `value_bytes_max` bytes: [`TX_VALUES_MAX`] records of
/// [`LOG_RECORD_HEADER_BYTES`] + `value_bytes_max` (saturating). Equals
/// [`LOG_ENTRY_BYTES_MAX`] at [`VALUE_BYTES_MAX`]. A host log must accept
/// entries of this size ([`crate::ring::ring_payload_bytes_max`]).
pub const fn log_entry_bytes_max(value_bytes_max: usize) -> usize {
    TX_VALUES_MAX.saturating_mul(LOG_RECORD_HEADER_BYTES.saturating_add(value_bytes_max))
}

const _: () = assert!(log_entry_bytes_max(VALUE_BYTES_MAX) == LOG_ENTRY_BYTES_MAX);

/// Which step of the commit protocol wrote a record.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogKind {
    /// On any replica: a write from a LOG request (Xenic §4.2 step 4), pending
    /// until its transaction's decision record. (Under the mutation switch
    /// `log_backups_only` a host applies it at once.)
    Log = 1,
    /// Decision record: transaction `tx_id` committed; apply its pending
    /// records (Xenic §4.2 step 6). Key, meta and value are unused (zero,
    /// empty).
    Commit = 2,
    /// Decision record: transaction `tx_id` aborted after its LOG; drop its
    /// pending records. Key, meta and value are unused (zero, empty).
    Abort = 3,
    /// Dnl marker: transaction `tx_id` holds locks here and wrote no key
    /// here (its values, if any, are `Log` records). Nothing to apply: host
    /// workers skip it. Key, meta and value are unused.
    Lock = 4,
    /// Dnl marker: transaction `tx_id` was replicated here after its
    /// decision (a Dnl-2 primary, whose values came with its Lock). Host
    /// workers skip it. Key, meta and value are unused.
    Repl = 5,
}

impl LogKind {
    /// The kind with wire value `tag`, if any.
    pub fn from_u8(tag: u8) -> Option<LogKind> {
        match tag {
            1 => Some(LogKind::Log),
            2 => Some(LogKind::Commit),
            3 => Some(LogKind::Abort),
            4 => Some(LogKind::Lock),
            5 => Some(LogKind::Repl),
            _ => None,
        }
    }
}

/// One write in the host log: install `value` with `meta` under `key`, on behalf
/// of transaction `tx_id`. Decoding borrows `value` from the log bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRecord<'a> {
    /// A pending write, or a decision.
    pub kind: LogKind,
    /// Transaction that wrote it (coordinator-assigned id).
    pub tx_id: TxId,
    /// The object written.
    pub key: Key,
    /// New version and flags of the object.
    pub meta: ObjectMeta,
    /// New value, at most [`VALUE_BYTES_MAX`] bytes.
    pub value: &'a [u8],
}

impl LogRecord<'static> {
    /// The decision record (`kind` [`LogKind::Commit`] or [`LogKind::Abort`])
    /// or Dnl marker ([`LogKind::Lock`], [`LogKind::Repl`]) of transaction
    /// `tx_id`: zero key and meta, no value, [`LOG_RECORD_HEADER_BYTES`]
    /// encoded.
    pub fn decision(kind: LogKind, tx_id: TxId) -> LogRecord<'static> {
        LogRecord {
            kind,
            tx_id,
            key: Key::new(0, 0),
            meta: ObjectMeta(0),
            value: &[],
        }
    }
}

impl<'a> LogRecord<'a> {
    /// Appends the encoding (module docs) to `out`; [`Self::encoded_len`] bytes.
    ///
    /// # Panics
    /// If `value` exceeds [`VALUE_BYTES_MAX`] (callers validate first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        assert!(
            self.value.len() <= VALUE_BYTES_MAX,
            "log record value over VALUE_BYTES_MAX"
        );
        out.reserve(self.encoded_len());
        out.push(self.kind as u8);
        out.extend_from_slice(&self.tx_id.to_le_bytes());
        let mut key = [0u8; KEY_BYTES];
        self.key.encode(&mut key);
        out.extend_from_slice(&key);
        out.extend_from_slice(&self.meta.0.to_le_bytes());
        out.extend_from_slice(&(self.value.len() as u32).to_le_bytes());
        out.extend_from_slice(self.value);
    }

    /// Bytes [`Self::encode`] appends: [`LOG_RECORD_HEADER_BYTES`] + value length.
    pub fn encoded_len(&self) -> usize {
        LOG_RECORD_HEADER_BYTES + self.value.len()
    }

    /// Decodes the record at the start of `bytes` and returns it with the number
    /// of bytes it occupies; bytes after it are left for the caller (see
    /// [`LogRecords`]).
    ///
    /// # Errors
    /// [`DecodeError::BadTag`] for an unknown kind, [`DecodeError::Truncated`] for
    /// missing bytes, [`DecodeError::TooLarge`] for `value_len` over
    /// [`VALUE_BYTES_MAX`].
    pub fn decode(bytes: &'a [u8]) -> Result<(LogRecord<'a>, usize), DecodeError> {
        let mut r = Reader::new(bytes, "log record");
        let raw_kind = r.u8()?;
        let kind = LogKind::from_u8(raw_kind).ok_or(DecodeError::BadTag {
            what: "log record kind",
            tag: raw_kind as u64,
        })?;
        let tx_id = r.tx_id()?;
        let key = r.key()?;
        let meta = ObjectMeta(r.u64()?);
        let len = r.u32()? as usize;
        if len > VALUE_BYTES_MAX {
            return Err(DecodeError::TooLarge {
                what: "log record value",
                len,
                max: VALUE_BYTES_MAX,
            });
        }
        let value = r.take(len)?;
        let record = LogRecord {
            kind,
            tx_id,
            key,
            meta,
            value,
        };
        Ok((record, r.position()))
    }
}

/// Iterator over the records of one host-log entry (concatenated encodings).
/// Yields each record in order; on the first malformed record it yields that
/// `Err` once and then stops. An empty entry yields nothing.
#[derive(Debug, Clone)]
pub struct LogRecords<'a> {
    bytes: &'a [u8],
    failed: bool,
}

impl<'a> LogRecords<'a> {
    /// Iterates over the records in `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        LogRecords {
            bytes,
            failed: false,
        }
    }
}

impl<'a> Iterator for LogRecords<'a> {
    type Item = Result<LogRecord<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.bytes.is_empty() {
            return None;
        }
        match LogRecord::decode(self.bytes) {
            Ok((record, used)) => {
                self.bytes = &self.bytes[used..];
                Some(Ok(record))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

impl std::iter::FusedIterator for LogRecords<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::ObjectFlags;

    #[test]
    fn record_layout() {
        let rec = LogRecord {
            kind: LogKind::Commit,
            tx_id: TxId::from_bits(9),
            key: Key::new(1, 2),
            meta: ObjectMeta::new(3, ObjectFlags::READABLE),
            value: b"xyz",
        };
        let mut out = Vec::new();
        rec.encode(&mut out);
        assert_eq!(out.len(), rec.encoded_len());
        assert_eq!(out[0], 2);
        assert_eq!(&out[1..9], &9u64.to_le_bytes());
        assert_eq!(&out[9..13], &1u32.to_le_bytes());
        assert_eq!(&out[13..21], &2u64.to_le_bytes());
        assert_eq!(&out[21..29], &rec.meta.0.to_le_bytes());
        assert_eq!(&out[29..33], &3u32.to_le_bytes());
        assert_eq!(&out[33..], b"xyz");
        assert_eq!(LogRecord::decode(&out), Ok((rec, out.len())));
    }

    #[test]
    fn iterator_stops_after_error() {
        let rec = LogRecord {
            kind: LogKind::Log,
            tx_id: TxId::from_bits(1),
            key: Key::new(0, 0),
            meta: ObjectMeta(0),
            value: &[],
        };
        let mut bytes = Vec::new();
        rec.encode(&mut bytes);
        rec.encode(&mut bytes);
        bytes.push(0); // bad kind tag
        rec.encode(&mut bytes);
        let items: Vec<_> = LogRecords::new(&bytes).collect();
        assert_eq!(items.len(), 3);
        assert!(items[..2].iter().all(|r| *r == Ok(rec)));
        assert!(matches!(items[2], Err(DecodeError::BadTag { tag: 0, .. })));
    }
}

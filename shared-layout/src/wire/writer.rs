//! [`BodyWriter`]: encodes message bodies.

use super::{
    MsgKind, NodeMask, ReplyStatus, ITEMS_PER_MESSAGE_MAX, ONE_WRITE_ARGS_BYTES_MAX,
    ONE_WRITE_RESULT_BYTES_MAX,
};
use crate::host_nic::TxStatus;
use crate::key::{Key, KEY_BYTES};
use crate::meta::ObjectMeta;
use crate::TxId;
use crate::VALUE_BYTES_MAX;

/// Encodes message bodies into a reusable buffer. Each `begin_*` call clears the
/// buffer; item pushes append. Counts are patched as items are added.
///
/// Callers keep counts within [`ITEMS_PER_MESSAGE_MAX`] and values within
/// [`VALUE_BYTES_MAX`]; exceeding them is a caller bug and panics.
#[derive(Debug, Default, Clone)]
pub struct BodyWriter {
    buf: Vec<u8>,
    kind: Option<MsgKind>,
    count_at: usize,
    count: usize,
    second_count_at: usize,
    second_count: usize,
}

impl BodyWriter {
    /// An empty writer.
    pub fn new() -> BodyWriter {
        BodyWriter {
            buf: Vec::with_capacity(1024),
            ..Default::default()
        }
    }

    /// The kind of the body being written.
    ///
    /// # Panics
    /// If no `begin_*` was called.
    pub fn kind(&self) -> MsgKind {
        self.kind.expect("begin a body first")
    }

    /// The encoded body.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    fn begin(&mut self, kind: MsgKind, tx_id: TxId) {
        self.buf.clear();
        self.kind = Some(kind);
        self.buf.extend_from_slice(&tx_id.to_le_bytes());
        self.count = 0;
        self.second_count = 0;
    }

    fn open_count(&mut self) {
        self.count_at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_le_bytes());
    }

    fn bump(&mut self, second: bool) {
        let (at, c) = if second {
            self.second_count += 1;
            (self.second_count_at, self.second_count)
        } else {
            self.count += 1;
            (self.count_at, self.count)
        };
        assert!(
            self.count + self.second_count <= ITEMS_PER_MESSAGE_MAX,
            "too many items"
        );
        self.buf[at..at + 2].copy_from_slice(&(c as u16).to_le_bytes());
    }

    /// Starts an EXECUTE body; then call [`BodyWriter::push_read`] for every read
    /// key and [`BodyWriter::push_lock`] for every lock key, reads first.
    pub fn begin_execute(&mut self, tx_id: TxId) {
        self.begin(MsgKind::Execute, tx_id);
        self.open_count();
        self.second_count_at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_le_bytes());
    }

    /// Adds a read key to an EXECUTE body (before any lock key).
    pub fn push_read(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Execute));
        assert_eq!(self.second_count, 0, "reads come before locks");
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Adds a lock key to an EXECUTE body.
    pub fn push_lock(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Execute));
        self.push_key_raw(key);
        self.bump(true);
    }

    fn push_key_raw(&mut self, key: &Key) {
        let at = self.buf.len();
        self.buf.resize(at + KEY_BYTES, 0);
        key.encode(&mut self.buf[at..]);
    }

    /// Starts an EXECUTE response; push items with [`BodyWriter::push_item`].
    pub fn begin_execute_resp(&mut self, tx_id: TxId, status: ReplyStatus) {
        self.begin(MsgKind::ExecuteResp, tx_id);
        self.buf.push(status as u8);
        self.open_count();
    }

    /// Starts a VALIDATE body; push pairs with [`BodyWriter::push_version`].
    pub fn begin_validate(&mut self, tx_id: TxId) {
        self.begin(MsgKind::Validate, tx_id);
        self.open_count();
    }

    /// Adds a `(key, version)` pair to a VALIDATE or Lock body (a Lock's
    /// before its items).
    pub fn push_version(&mut self, key: &Key, version: u64) {
        debug_assert!(matches!(self.kind, Some(MsgKind::Validate | MsgKind::Lock)));
        assert_eq!(self.second_count, 0, "versions come before items");
        self.push_key_raw(key);
        self.buf.extend_from_slice(&version.to_le_bytes());
        self.bump(false);
    }

    /// Starts a LOG (`kind = Log`, no written-shard set: see
    /// [`BodyWriter::begin_log`]) or COMMIT (`kind = Commit`) body.
    ///
    /// # Panics
    /// If `kind` is neither.
    pub fn begin_items(&mut self, kind: MsgKind, tx_id: TxId) {
        assert!(
            matches!(kind, MsgKind::Log | MsgKind::Commit),
            "not an item message"
        );
        if kind == MsgKind::Log {
            return self.begin_log(tx_id, NodeMask::EMPTY);
        }
        self.begin(kind, tx_id);
        self.open_count();
    }

    /// Starts a LOG body naming every shard the transaction writes
    /// (`write_shards`, the evidence crash recovery needs).
    pub fn begin_log(&mut self, tx_id: TxId, write_shards: NodeMask) {
        self.begin(MsgKind::Log, tx_id);
        self.buf.extend_from_slice(&write_shards.0.to_le_bytes());
        self.open_count();
    }

    /// Adds an item to an EXECUTE response, LOG, COMMIT, GetOne reply or
    /// Dnl body (GetResp, Lock, Replicate, Unlock, Readable; a Lock's or an
    /// Unlock's after its versions or keys).
    pub fn push_item(&mut self, key: &Key, meta: ObjectMeta, value: &[u8]) {
        assert!(
            value.len() <= VALUE_BYTES_MAX,
            "value too large for the wire"
        );
        self.push_key_raw(key);
        self.buf.extend_from_slice(&meta.0.to_le_bytes());
        self.buf
            .extend_from_slice(&(value.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(value);
        let second = matches!(self.kind, Some(MsgKind::Lock | MsgKind::Unlock));
        self.bump(second);
    }

    /// Starts an ABORT body; push keys with [`BodyWriter::push_abort_key`].
    pub fn begin_abort(&mut self, tx_id: TxId) {
        self.begin(MsgKind::Abort, tx_id);
        self.open_count();
    }

    /// Adds a key to an ABORT body.
    pub fn push_abort_key(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Abort));
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Writes a complete ABORT-after-LOG request (round 1,
    /// [`MsgKind::AbortLog`]): the transaction id alone.
    pub fn abort_log(&mut self, tx_id: TxId) {
        self.begin(MsgKind::AbortLog, tx_id);
    }

    /// Writes a complete VALIDATE response.
    pub fn validate_resp(&mut self, tx_id: TxId, status: ReplyStatus) {
        self.begin(MsgKind::ValidateResp, tx_id);
        self.buf.push(status as u8);
    }

    /// Writes a complete acknowledgement: LOG, COMMIT or ABORT-after-LOG
    /// (`kind` = LogAck, CommitAck or AbortLogAck) or of a Dnl step
    /// (LockResp, ReplicateAck, UnlockAck, ReadableAck); `status` is `Ok`
    /// or why the request was refused.
    ///
    /// # Panics
    /// If `kind` is none of these.
    pub fn ack(&mut self, kind: MsgKind, tx_id: TxId, status: ReplyStatus) {
        assert!(
            matches!(
                kind,
                MsgKind::LogAck
                    | MsgKind::CommitAck
                    | MsgKind::AbortLogAck
                    | MsgKind::LockResp
                    | MsgKind::ReplicateAck
                    | MsgKind::UnlockAck
                    | MsgKind::ReadableAck
            ),
            "not an ack"
        );
        self.begin(kind, tx_id);
        self.buf.push(status as u8);
    }

    /// Writes a complete GetOne request: read `key` at its primary under
    /// the caller's request id `tx_id`.
    pub fn get_one(&mut self, tx_id: TxId, key: &Key) {
        self.begin(MsgKind::GetOne, tx_id);
        self.push_key_raw(key);
    }

    /// Starts a GetOne reply; on `Ok` push the one item read with
    /// [`BodyWriter::push_item`].
    pub fn begin_get_one_resp(&mut self, tx_id: TxId, status: ReplyStatus) {
        self.begin(MsgKind::GetOneResp, tx_id);
        self.buf.push(status as u8);
        self.open_count();
    }

    /// Starts a Dnl Get body; push keys with [`BodyWriter::push_get_key`].
    pub fn begin_get(&mut self, tx_id: TxId) {
        self.begin(MsgKind::Get, tx_id);
        self.open_count();
    }

    /// Adds a key to a Get body.
    pub fn push_get_key(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Get));
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Starts a Get reply (`clean`: bit `i` set when item `i` was unlocked
    /// and readable); push the items read with [`BodyWriter::push_item`].
    pub fn begin_get_resp(&mut self, tx_id: TxId, status: ReplyStatus, clean: u64) {
        self.begin(MsgKind::GetResp, tx_id);
        self.buf.push(status as u8);
        self.buf.extend_from_slice(&clean.to_le_bytes());
        self.open_count();
    }

    /// Starts a Lock body naming every shard the transaction locks; push
    /// `(key, version read)` pairs with [`BodyWriter::push_version`], then
    /// the written keys' new items with [`BodyWriter::push_item`].
    pub fn begin_lock(&mut self, tx_id: TxId, lock_shards: NodeMask) {
        self.begin(MsgKind::Lock, tx_id);
        self.buf.extend_from_slice(&lock_shards.0.to_le_bytes());
        self.open_two_counts();
    }

    /// Starts a Replicate body naming every shard the transaction writes;
    /// push items with [`BodyWriter::push_item`].
    pub fn begin_replicate(&mut self, tx_id: TxId, write_shards: NodeMask) {
        self.begin(MsgKind::Replicate, tx_id);
        self.buf.extend_from_slice(&write_shards.0.to_le_bytes());
        self.open_count();
    }

    /// Starts an Unlock body (`commit`: install, else drop); push the keys
    /// released without a write with [`BodyWriter::push_unlock_key`], then
    /// the written items with [`BodyWriter::push_item`].
    pub fn begin_unlock(&mut self, tx_id: TxId, commit: bool) {
        self.begin(MsgKind::Unlock, tx_id);
        self.buf.push(u8::from(commit));
        self.open_two_counts();
    }

    /// Adds a released key to an Unlock body (before its items).
    pub fn push_unlock_key(&mut self, key: &Key) {
        debug_assert_eq!(self.kind, Some(MsgKind::Unlock));
        assert_eq!(self.second_count, 0, "keys come before items");
        self.push_key_raw(key);
        self.bump(false);
    }

    /// Starts a Readable body; push items with [`BodyWriter::push_item`].
    pub fn begin_readable(&mut self, tx_id: TxId) {
        self.begin(MsgKind::Readable, tx_id);
        self.open_count();
    }

    fn open_two_counts(&mut self) {
        self.open_count();
        self.second_count_at = self.buf.len();
        self.buf.extend_from_slice(&0u16.to_le_bytes());
    }

    /// Writes a complete WriteOne request carrying a one-key transaction's
    /// arguments.
    ///
    /// # Panics
    /// If `args` exceed [`ONE_WRITE_ARGS_BYTES_MAX`] (callers check first).
    pub fn write_one(&mut self, tx_id: TxId, args: &[u8]) {
        assert!(
            args.len() <= ONE_WRITE_ARGS_BYTES_MAX,
            "WriteOne args too large"
        );
        self.begin(MsgKind::WriteOne, tx_id);
        self.buf.push_len_bytes(args);
    }

    /// Writes a complete WriteOne reply.
    ///
    /// # Panics
    /// If `result` exceeds [`ONE_WRITE_RESULT_BYTES_MAX`] (callers check first).
    pub fn write_one_resp(&mut self, tx_id: TxId, status: TxStatus, result: &[u8]) {
        assert!(
            result.len() <= ONE_WRITE_RESULT_BYTES_MAX,
            "WriteOneResp result too large"
        );
        self.begin(MsgKind::WriteOneResp, tx_id);
        self.buf.push(status as u8);
        self.buf.push_len_bytes(result);
    }
}

/// Appends a `u32` length and the bytes.
trait PushLenBytes {
    fn push_len_bytes(&mut self, bytes: &[u8]);
}

impl PushLenBytes for Vec<u8> {
    fn push_len_bytes(&mut self, bytes: &[u8]) {
        self.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        self.extend_from_slice(bytes);
    }
}

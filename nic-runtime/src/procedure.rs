//! Shipped procedures (Xenic §4.2.2): transactions registered with the NIC
//! runtime and run there by the coordinator, so a transaction costs one request
//! from the application instead of one per read.
//!
//! A procedure is two pure functions of its arguments: [`Procedure::plan`]
//! declares the read set and write set, and [`Procedure::execute`] computes the new
//! values from the values read. Both run on the coordinator's NIC runtime.

use splitkv_layout::{Key, ObjectMeta};
use std::sync::Arc;

pub mod txn;

/// Most keys in a read set (write-set keys excluded).
pub const READ_SET_MAX: usize = 16;
/// Most keys in a write set: the transaction size every layer below the
/// network is built for ([`splitkv_layout::TX_VALUES_MAX`]).
pub const WRITE_SET_MAX: usize = splitkv_layout::TX_VALUES_MAX;
// The one-shot transaction's bounds (checked when it decodes) are these.
const _: () = assert!(
    READ_SET_MAX == splitkv_layout::app::TXN_READS_MAX
        && WRITE_SET_MAX == splitkv_layout::app::TXN_WRITES_MAX
);

/// Why a request cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcError {
    /// No procedure has this id.
    #[error("unknown procedure {0}")]
    Unknown(u32),
    /// The arguments do not decode.
    #[error("bad arguments: {0}")]
    BadArgs(&'static str),
    /// The plan exceeds [`READ_SET_MAX`] or [`WRITE_SET_MAX`].
    #[error("read or write set too large")]
    TooManyKeys,
}

/// The keys a transaction touches, declared before it runs.
#[derive(Debug, Default, Clone)]
pub struct TxPlan {
    /// Keys only read (validated at commit).
    pub reads: Vec<Key>,
    /// Keys read and written (locked during execution).
    pub writes: Vec<Key>,
}

impl TxPlan {
    /// Empties both sets, keeping their allocations.
    pub fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
    }

    /// Adds a read key (ignored if already present in either set).
    pub fn read(&mut self, key: Key) {
        if !self.reads.contains(&key) && !self.writes.contains(&key) {
            self.reads.push(key);
        }
    }

    /// Adds a write key (moved out of the read set if it was there).
    pub fn write(&mut self, key: Key) {
        self.reads.retain(|k| *k != key);
        if !self.writes.contains(&key) {
            self.writes.push(key);
        }
    }

    /// Checks the bounds.
    pub fn check(&self) -> Result<(), ProcError> {
        if self.reads.len() > READ_SET_MAX || self.writes.len() > WRITE_SET_MAX {
            return Err(ProcError::TooManyKeys);
        }
        Ok(())
    }
}

/// Values a transaction read: one entry per planned key.
#[derive(Debug, Default, Clone)]
pub struct ReadView {
    entries: Vec<(Key, ObjectMeta, Vec<u8>, bool)>,
    len: usize,
}

impl ReadView {
    /// Empties the view, keeping allocations.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Records the value of `key` (`present = false` for a key that does not exist).
    pub fn insert(&mut self, key: Key, meta: ObjectMeta, value: &[u8], present: bool) {
        if self.len == self.entries.len() {
            self.entries.push((key, meta, Vec::new(), present));
        }
        let e = &mut self.entries[self.len];
        e.0 = key;
        e.1 = meta;
        e.2.clear();
        e.2.extend_from_slice(value);
        e.3 = present;
        self.len += 1;
    }

    /// The value of `key`, or `None` if it was not read or does not exist.
    pub fn get(&self, key: &Key) -> Option<&[u8]> {
        self.entries[..self.len]
            .iter()
            .find(|e| e.0 == *key && e.3)
            .map(|e| e.2.as_slice())
    }

    /// The metadata `key` was read with (version 0 for a key that does not exist).
    pub fn meta(&self, key: &Key) -> Option<ObjectMeta> {
        self.entries[..self.len]
            .iter()
            .find(|e| e.0 == *key)
            .map(|e| e.1)
    }

    /// Number of keys read.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing was read.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// New values a transaction writes: at most one per write-set key, each a
/// value or a delete (a tombstone: DELETED, the next version, no value;
/// [`splitkv_layout::ObjectMeta::next_delete`]).
#[derive(Debug, Default, Clone)]
pub struct WriteSet {
    /// Key, value (empty for a delete), whether it is a delete.
    entries: Vec<(Key, Vec<u8>, bool)>,
    len: usize,
}

impl WriteSet {
    /// Empties the set, keeping allocations.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Sets the new value of `key` (replacing an earlier put or delete of
    /// the same key).
    pub fn put(&mut self, key: Key, value: &[u8]) {
        self.set(key, value, false);
    }

    /// Deletes `key` (replacing an earlier put of the same key): the commit
    /// writes its tombstone. A procedure deletes only keys it read present;
    /// a delete of an absent key is a write all the same (a tombstone at the
    /// next version).
    pub fn delete(&mut self, key: Key) {
        self.set(key, b"", true);
    }

    fn set(&mut self, key: Key, value: &[u8], delete: bool) {
        let i = match self.entries[..self.len].iter().position(|e| e.0 == key) {
            Some(i) => i,
            None => {
                if self.len == self.entries.len() {
                    self.entries.push((key, Vec::new(), false));
                }
                self.len += 1;
                self.len - 1
            }
        };
        let e = &mut self.entries[i];
        e.0 = key;
        e.1.clear();
        e.1.extend_from_slice(value);
        e.2 = delete;
    }

    /// The writes in first-write order: key and value (empty for a delete).
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &[u8])> {
        self.entries[..self.len]
            .iter()
            .map(|e| (&e.0, e.1.as_slice()))
    }

    /// Whether the write of `key` is a delete (false if it is not written).
    pub fn is_delete(&self, key: &Key) -> bool {
        self.entries[..self.len].iter().any(|e| e.0 == *key && e.2)
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The procedure chose to abort (for example, insufficient funds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserAbort;

/// A transaction shipped to the NIC runtime (Xenic §4.2.2).
pub trait Procedure: Send + Sync {
    /// Name for logs and reports.
    fn name(&self) -> &'static str;

    /// Declares the read and write sets from `args`.
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError>;

    /// Computes the writes from the values read. Every write must be to a key in
    /// the plan's write set (others are rejected by the coordinator). `result` is
    /// returned to the application on commit.
    fn execute(
        &self,
        args: &[u8],
        reads: &ReadView,
        writes: &mut WriteSet,
        result: &mut Vec<u8>,
    ) -> Result<(), UserAbort>;
}

/// Procedures by id: the index of registration, and the built-ins at
/// reserved ids at the top of the id space ([`txn::TXN_PROCEDURE_ID`]: the
/// one-shot transaction), which every registry has, so an application
/// reaches them with no code in the node.
#[derive(Clone)]
pub struct ProcedureRegistry {
    procs: Vec<Arc<dyn Procedure>>,
    txn: Arc<dyn Procedure>,
}

impl Default for ProcedureRegistry {
    fn default() -> ProcedureRegistry {
        ProcedureRegistry {
            procs: Vec::new(),
            txn: Arc::new(txn::TxnProcedure),
        }
    }
}

impl std::fmt::Debug for ProcedureRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.procs.iter().map(|p| p.name()))
            .finish()
    }
}

impl ProcedureRegistry {
    /// A registry with only the built-ins.
    pub fn new() -> ProcedureRegistry {
        ProcedureRegistry::default()
    }

    /// Registers `p` and returns its id (below the built-ins' reserved ids).
    pub fn register(&mut self, p: Arc<dyn Procedure>) -> u32 {
        self.procs.push(p);
        (self.procs.len() - 1) as u32
    }

    /// The id of the procedure registered as `name` (the first, if several
    /// share it), or of the built-in of that name
    /// ([`txn::TXN_PROCEDURE_NAME`]); `None` for an unknown name. What a
    /// node resolves an application's procedure names with at connection
    /// time.
    pub fn id_of(&self, name: &str) -> Option<u32> {
        if let Some(i) = self.procs.iter().position(|p| p.name() == name) {
            return Some(i as u32);
        }
        (name == txn::TXN_PROCEDURE_NAME).then_some(txn::TXN_PROCEDURE_ID)
    }

    /// The procedure with id `id` (a registered one, or a built-in).
    pub fn get(&self, id: u32) -> Result<&Arc<dyn Procedure>, ProcError> {
        if id == txn::TXN_PROCEDURE_ID {
            return Ok(&self.txn);
        }
        self.procs.get(id as usize).ok_or(ProcError::Unknown(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Procedure for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn plan(&self, _: &[u8], _: &mut TxPlan) -> Result<(), ProcError> {
            Ok(())
        }
        fn execute(
            &self,
            _: &[u8],
            _: &ReadView,
            _: &mut WriteSet,
            _: &mut Vec<u8>,
        ) -> Result<(), UserAbort> {
            Ok(())
        }
    }

    #[test]
    fn names_resolve_to_registration_ids_and_the_built_in() {
        let mut r = ProcedureRegistry::new();
        assert_eq!(
            r.id_of(txn::TXN_PROCEDURE_NAME),
            Some(txn::TXN_PROCEDURE_ID)
        );
        assert_eq!(r.register(Arc::new(Named("a"))), 0);
        assert_eq!(r.register(Arc::new(Named("b"))), 1);
        assert_eq!(r.id_of("b"), Some(1));
        assert_eq!(r.id_of("a"), Some(0));
        assert_eq!(r.id_of("missing"), None);
    }

    #[test]
    fn plan_keeps_sets_disjoint() {
        let mut p = TxPlan::default();
        p.read(Key::new(0, 1));
        p.read(Key::new(0, 2));
        p.write(Key::new(0, 1));
        p.read(Key::new(0, 1));
        assert_eq!(p.reads, vec![Key::new(0, 2)]);
        assert_eq!(p.writes, vec![Key::new(0, 1)]);
        for i in 0..READ_SET_MAX as u64 + 1 {
            p.read(Key::new(3, i));
        }
        assert_eq!(p.check(), Err(ProcError::TooManyKeys));
    }

    #[test]
    fn views_reuse_and_replace() {
        let mut w = WriteSet::default();
        w.put(Key::new(0, 1), b"a");
        w.put(Key::new(0, 1), b"bb");
        assert_eq!(
            w.iter().collect::<Vec<_>>(),
            vec![(&Key::new(0, 1), &b"bb"[..])]
        );
        assert!(!w.is_delete(&Key::new(0, 1)));
        w.delete(Key::new(0, 1));
        w.put(Key::new(0, 2), b"c");
        assert!(w.is_delete(&Key::new(0, 1)) && !w.is_delete(&Key::new(0, 2)));
        assert_eq!(
            w.iter().collect::<Vec<_>>(),
            vec![(&Key::new(0, 1), &b""[..]), (&Key::new(0, 2), &b"c"[..])],
            "a delete has no value and keeps its place"
        );
        w.put(Key::new(0, 1), b"d");
        assert!(!w.is_delete(&Key::new(0, 1)), "a put after a delete");
        w.clear();
        assert!(w.is_empty() && !w.is_delete(&Key::new(0, 1)));
        let mut r = ReadView::default();
        r.insert(Key::new(0, 1), ObjectMeta(4), b"x", true);
        r.insert(Key::new(0, 2), ObjectMeta(0), b"", false);
        assert_eq!(r.get(&Key::new(0, 1)), Some(&b"x"[..]));
        assert_eq!(r.get(&Key::new(0, 2)), None);
        assert_eq!(r.meta(&Key::new(0, 2)), Some(ObjectMeta(0)));
    }
}

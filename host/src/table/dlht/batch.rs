//! The batch API (Dandelion §6, Figure 7): prefetch every request's bin, then
//! execute the requests in order, so the memory latencies of a batch overlap
//! instead of adding up.

#[cfg(not(loom))]
use super::sync::Ordering;
use super::sync::{pin, prefetch, Line};
use super::{Dlht, DlhtError, TABLE_ID_MAX};
#[cfg(not(loom))]
use splitkv_layout::dlht_layout::{tags, WORD_TAGS};
use splitkv_layout::{Key, ObjectMeta};

/// One request of a [`Dlht::batch`], with the field its result is written to.
/// Write results start as `Ok(false)` and Get results as `None` until the batch
/// runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// [`Dlht::get`]: `value` receives the value (its capacity is reused).
    Get {
        /// The key.
        key: Key,
        /// Output buffer for the value.
        value: Vec<u8>,
        /// The key's metadata, or `None` if absent.
        result: Option<ObjectMeta>,
    },
    /// [`Dlht::insert`].
    Insert {
        /// The key.
        key: Key,
        /// Its metadata.
        meta: ObjectMeta,
        /// Its value.
        value: Vec<u8>,
        /// Whether it was inserted.
        result: Result<bool, DlhtError>,
    },
    /// [`Dlht::put`].
    Put {
        /// The key.
        key: Key,
        /// Its new metadata.
        meta: ObjectMeta,
        /// Its new value.
        value: Vec<u8>,
        /// Whether it was present (and so updated).
        result: Result<bool, DlhtError>,
    },
    /// [`Dlht::upsert`].
    Upsert {
        /// The key.
        key: Key,
        /// Its metadata.
        meta: ObjectMeta,
        /// Its value.
        value: Vec<u8>,
        /// Whether it was inserted (rather than replaced).
        result: Result<bool, DlhtError>,
    },
    /// [`Dlht::remove`].
    Delete {
        /// The key.
        key: Key,
        /// Whether it was present.
        result: bool,
    },
}

impl Request {
    /// A Get of `key`.
    pub fn get(key: Key) -> Request {
        Request::Get {
            key,
            value: Vec::new(),
            result: None,
        }
    }
    /// An Insert.
    pub fn insert(key: Key, meta: ObjectMeta, value: impl Into<Vec<u8>>) -> Request {
        Request::Insert {
            key,
            meta,
            value: value.into(),
            result: Ok(false),
        }
    }
    /// A Put (update of a present key).
    pub fn put(key: Key, meta: ObjectMeta, value: impl Into<Vec<u8>>) -> Request {
        Request::Put {
            key,
            meta,
            value: value.into(),
            result: Ok(false),
        }
    }
    /// An Upsert.
    pub fn upsert(key: Key, meta: ObjectMeta, value: impl Into<Vec<u8>>) -> Request {
        Request::Upsert {
            key,
            meta,
            value: value.into(),
            result: Ok(false),
        }
    }
    /// A Delete.
    pub fn delete(key: Key) -> Request {
        Request::Delete { key, result: false }
    }

    /// The request's key.
    pub fn key(&self) -> &Key {
        match self {
            Request::Get { key, .. }
            | Request::Insert { key, .. }
            | Request::Put { key, .. }
            | Request::Upsert { key, .. }
            | Request::Delete { key, .. } => key,
        }
    }
}

impl Dlht {
    /// Executes `reqs` in order, writing each result into its request, after
    /// first issuing a software prefetch for every request's bin (Dandelion §6,
    /// Figure 7; `_mm_prefetch` on x86-64, nothing elsewhere). The result is
    /// the same as running the requests one at a time. Prefetches beyond what
    /// the cache holds are wasted: batches of tens of requests suit it best.
    pub fn batch(&self, reqs: &mut [Request]) {
        // Pinned for the whole batch: the operations below pin again, which is
        // then only a counter increment.
        let guard = pin();
        let g = self.current(&guard);
        for r in reqs.iter() {
            let key = r.key();
            if key.table <= TABLE_ID_MAX {
                prefetch(&g.bins[g.bin_of(key)] as *const Line);
            }
        }
        // Second pass (not under loom, where prefetch is a no-op): by now the
        // first bins have arrived; read each bin's first link index and
        // prefetch that link bucket too, so keys chained past their bin do not
        // take a dependent miss during execution. A stale index only costs a
        // useless prefetch.
        #[cfg(not(loom))]
        for r in reqs.iter() {
            let key = r.key();
            if key.table <= TABLE_ID_MAX {
                let tags = g.bins[g.bin_of(key)].w[WORD_TAGS].load(Ordering::Relaxed);
                let link = tags::link(tags) as usize;
                if link != 0 {
                    if let Some(line) = g.links.get(link) {
                        prefetch(line as *const Line);
                    }
                }
            }
        }
        for r in reqs.iter_mut() {
            match r {
                Request::Get { key, value, result } => *result = self.get(key, value),
                Request::Insert {
                    key,
                    meta,
                    value,
                    result,
                } => *result = self.insert(*key, *meta, value),
                Request::Put {
                    key,
                    meta,
                    value,
                    result,
                } => *result = self.put(*key, *meta, value),
                Request::Upsert {
                    key,
                    meta,
                    value,
                    result,
                } => *result = self.upsert(*key, *meta, value),
                Request::Delete { key, result } => *result = self.remove(key),
            }
        }
    }
}

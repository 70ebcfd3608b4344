//! The batch API (Dandelion §6, Figure 7): prefetch every request's bin, then
//! execute the requests in order, so the memory latencies of a batch overlap
//! instead of adding up.

use super::bin::Gen;
use super::{Dlht, DlhtError, Mode, Wrote, TABLE_ID_MAX};
#[cfg(not(loom))]
use crate::table::sync::Ordering;
use crate::table::sync::{pin, prefetch, Guard, Line};
use crate::table::{Request as TableRequest, Upserted};
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

/// Requests whose bins [`Dlht::batch`] prefetches before running any of them;
/// a longer batch runs as consecutive chunks of this many (prefetching more
/// lines than the L1 holds would only evict the first ones).
pub const BATCH_CHUNK_MAX: usize = 32;

impl Dlht {
    /// Executes `reqs` in order, writing each result into its request, after
    /// first issuing a software prefetch for every request's bin (Dandelion §6,
    /// Figure 7; `_mm_prefetch` on x86-64, nothing elsewhere). The result is
    /// the same as running the requests one at a time. Prefetches beyond what
    /// the cache holds are wasted: batches of tens of requests suit it best
    /// (longer ones run in chunks of [`BATCH_CHUNK_MAX`]).
    ///
    /// The whole batch runs under one epoch pin (a `pin()` is a full barrier on
    /// x86), and each request's bin index is computed once, while prefetching.
    pub fn batch(&self, reqs: &mut [Request]) {
        let guard = pin();
        for chunk in reqs.chunks_mut(BATCH_CHUNK_MAX) {
            self.batch_chunk(chunk, &guard);
        }
    }

    /// [`Dlht::batch`] of at most [`BATCH_CHUNK_MAX`] requests.
    #[inline(always)]
    fn batch_chunk(&self, reqs: &mut [Request], guard: &Guard) {
        debug_assert!(reqs.len() <= BATCH_CHUNK_MAX);
        let g = self.current(guard);
        let mut bins = [0usize; BATCH_CHUNK_MAX];
        prefetch_bins(g, reqs.iter().map(Request::key), &mut bins);
        // `g` may stop being current during the batch (a write in it can start
        // a resize): Gets follow `Moved` bins from `g` (still alive: we are
        // pinned), and writes use the bin hint only while `g` is current.
        for (r, &b) in reqs.iter_mut().zip(bins.iter()) {
            match r {
                Request::Get { key, value, result } => {
                    value.clear();
                    *result = if key.table > TABLE_ID_MAX {
                        None
                    } else {
                        self.get_at(g, b, key, value)
                    };
                }
                Request::Insert {
                    key,
                    meta,
                    value,
                    result,
                } => {
                    *result = self
                        .batch_write(g, b, *key, *meta, value, Mode::Insert, guard)
                        .map(|w| w == Wrote::Inserted)
                }
                Request::Put {
                    key,
                    meta,
                    value,
                    result,
                } => {
                    *result = self
                        .batch_write(g, b, *key, *meta, value, Mode::Update, guard)
                        .map(|w| w == Wrote::Updated)
                }
                Request::Upsert {
                    key,
                    meta,
                    value,
                    result,
                } => {
                    *result = self
                        .batch_write(g, b, *key, *meta, value, Mode::Upsert, guard)
                        .map(|w| w == Wrote::Inserted)
                }
                Request::Delete { key, result } => {
                    *result = key.table <= TABLE_ID_MAX && {
                        let (cur, b) = self.current_bin(Some((g, b)), key, guard);
                        self.remove_at(cur, b, key, guard)
                    }
                }
            }
        }
    }

    /// One write of a batch: [`Dlht::write`] under the batch's pin, starting
    /// at bin `b` if `g` is still current.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn batch_write<'g>(
        &self,
        g: &'g Gen,
        b: usize,
        key: Key,
        meta: ObjectMeta,
        value: &[u8],
        mode: Mode,
        guard: &'g Guard,
    ) -> Result<Wrote, DlhtError> {
        Dlht::check_write(&key, value, mode)?;
        self.write_pinned(Some((g, b)), key, meta, value, mode, guard)
    }
}

impl Dlht {
    /// Executes a batch of the host tables' one request type
    /// ([`crate::table::Request`]: Get, Upsert with or without `only_if_newer`,
    /// Remove) in slice order, with the same prefetch passes as [`Dlht::batch`]
    /// (Dandelion §6), under one epoch pin, in chunks of [`BATCH_CHUNK_MAX`].
    /// Each request's result is what the single operation ([`Dlht::get`],
    /// [`Dlht::upsert`], [`Dlht::upsert_if_newer`], [`Dlht::remove`]) returns,
    /// its error converted into `E`; a failed write does not stop the requests
    /// after it. This is the path the host log worker takes (through
    /// [`crate::table::HostTable::batch`]); [`Dlht::batch`] serves callers that
    /// want owned buffers and the DLHT's insert-only and update-only writes.
    pub fn apply_batch<E: From<DlhtError>>(&self, reqs: &mut [TableRequest<'_, E>]) {
        let guard = pin();
        for chunk in reqs.chunks_mut(BATCH_CHUNK_MAX) {
            let g = self.current(&guard);
            let mut bins = [0usize; BATCH_CHUNK_MAX];
            prefetch_bins(g, chunk.iter().map(TableRequest::key), &mut bins);
            for (r, &b) in chunk.iter_mut().zip(bins.iter()) {
                self.apply_one(g, b, r, &guard);
            }
        }
    }

    /// One request of [`Dlht::apply_batch`], starting at bin `b` if `g` is
    /// still current.
    #[inline(always)]
    fn apply_one<'g, E: From<DlhtError>>(
        &self,
        g: &'g Gen,
        b: usize,
        req: &mut TableRequest<'_, E>,
        guard: &'g Guard,
    ) {
        match req {
            TableRequest::Get { key, value, result } => {
                value.clear();
                *result = if key.table > TABLE_ID_MAX {
                    None
                } else {
                    self.get_at(g, b, key, value)
                };
            }
            TableRequest::Upsert {
                key,
                meta,
                value,
                only_if_newer,
                result,
            } => {
                let mode = match only_if_newer {
                    true => Mode::UpsertIfNewer,
                    false => Mode::Upsert,
                };
                let wrote = self.batch_write(g, b, *key, *meta, value, mode, guard);
                *result = Some(match wrote {
                    Ok(Wrote::Inserted) => Ok(Upserted::Inserted),
                    Ok(Wrote::Updated) => Ok(Upserted::Updated),
                    Ok(Wrote::Stale(stored)) => Ok(Upserted::Stale(stored)),
                    Ok(Wrote::Unchanged) => unreachable!("an upsert always writes or is stale"),
                    Err(e) => Err(E::from(e)),
                });
            }
            TableRequest::Remove { key, result } => {
                *result = key.table <= TABLE_ID_MAX && {
                    let (cur, b) = self.current_bin(Some((g, b)), key, guard);
                    self.remove_at(cur, b, key, guard)
                }
            }
        }
    }
}

/// The prefetch passes of a batch chunk (Dandelion §6, Figure 7): stores each
/// key's bin of `g` in `bins` (in order; at most [`BATCH_CHUNK_MAX`] keys) and
/// issues a software prefetch for it, then for each bin's first link bucket.
#[inline(always)]
pub(super) fn prefetch_bins<'k>(
    g: &Gen,
    keys: impl Iterator<Item = &'k Key>,
    bins: &mut [usize; BATCH_CHUNK_MAX],
) {
    let mut n = 0;
    for (key, b) in keys.zip(bins.iter_mut()) {
        *b = g.bin_of(key);
        prefetch(g.bin(*b) as *const Line);
        n += 1;
    }
    // Second pass (not under loom, where prefetch is a no-op): by now the
    // first bins have arrived; read each bin's first link index and
    // prefetch that link bucket too, so keys chained past their bin do not
    // take a dependent miss during execution. A stale index only costs a
    // useless prefetch.
    // Without a branch: index 0 is the pool's unused line, so a bin
    // without a link prefetches that one line (cached after the first
    // time), and whether a bin has a link is random, so a branch would be
    // mispredicted often. Prefetching never faults, so an out-of-range
    // index (none is expected) needs no check either.
    #[cfg(not(loom))]
    for &b in &bins[..n] {
        let link = tags::link(g.bin(b).w[WORD_TAGS].load(Ordering::Relaxed)) as usize;
        prefetch(g.links.as_ptr().wrapping_add(link));
    }
    #[cfg(loom)]
    let _ = n;
}

//! Packet buffers of the send path, and the reserve/commit calls that let
//! the batching layer write a packet straight into memory the transport
//! owns (eRPC's and Dandelion §5.2's "fill the NIC's buffer in place").
//!
//! **The path.** The batcher asks the transport's [`TxLender`] for a buffer
//! ([`TxLender::reserve`]: DPDK lends an mbuf's data area behind room for
//! its frame headers) and appends the packet header and each message body
//! into it — the one copy of payload bytes on the send path. The session
//! layer numbers the sealed packet in place and commits it
//! ([`Transport::tx_commit`](super::Transport::tx_commit)): a transport
//! that recognises its own buffer queues it by reference (DPDK: one more
//! mbuf reference for the driver), any other packet is copied as
//! [`Transport::tx_burst`](super::Transport::tx_burst) always did. On a
//! lossy transport the session keeps its own reference until the packet is
//! acknowledged, so a retransmission commits the same buffer again instead
//! of a copy.
//!
//! **Who may write.** A [`PacketBuf`] is written only while its holder is
//! the buffer's only holder ([`PacketBuf::try_mut`]): once the driver or a
//! receiver (net_ring hands the very mbuf to the other port) holds a
//! reference, the bytes are read-only until they let go. A retransmission
//! that finds its buffer still shared re-patches a heap copy instead
//! (counted by the sessions), which is the only second copy.
//!
//! **Transports without lent memory** (kernel UDP, in-process, verbs, the
//! simulator, fault injection) offer no lender; the batcher then writes
//! into heap buffers of its own and `tx_commit`'s default copies them with
//! `tx_burst`, exactly the path they always had.

use std::cell::Cell;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

/// A source of transport-owned packet buffers and the reference counting
/// of the buffers it lent (DPDK: a mempool and `rte_mbuf_refcnt_update`).
/// A lender lives as long as the process (transports leak theirs, as their
/// buffer pools are never freed), so buffers may outlive the transport.
///
/// # Safety
/// Implementors guarantee that a token passed to [`TxLender::retain`],
/// [`TxLender::release`] or [`TxLender::refs`] came from one of their own
/// [`TxBuf`]s, that `data..data + capacity` of a buffer stays valid while
/// one reference is held, that the three calls are safe from any thread,
/// and that [`TxLender::refs`] returning 1 orders the caller after every
/// other holder's last access (an acquire on the count).
pub unsafe trait TxLender: Send + Sync + fmt::Debug {
    /// One fresh buffer (one reference, the caller's, no bytes), or `None`
    /// when none is free (the caller falls back to memory of its own).
    fn reserve(&'static self) -> Option<TxBuf>;

    /// Bytes a buffer holds: the transport's MTU.
    fn capacity(&self) -> usize;

    /// Adds one reference to buffer `token`.
    ///
    /// # Safety
    /// `token` belongs to a live buffer of this lender.
    unsafe fn retain(&self, token: usize);

    /// Drops one reference to buffer `token` (the last gives it back).
    ///
    /// # Safety
    /// `token` belongs to a live buffer of this lender, and the caller owns
    /// the reference it drops.
    unsafe fn release(&self, token: usize);

    /// References held on buffer `token` (1: the caller's alone).
    ///
    /// # Safety
    /// `token` belongs to a live buffer of this lender.
    unsafe fn refs(&self, token: usize) -> u32;
}

/// One reference to a buffer lent by a [`TxLender`]: `len` bytes written of
/// `capacity`. Dropping it drops the reference.
pub struct TxBuf {
    token: usize,
    data: NonNull<u8>,
    capacity: usize,
    len: usize,
    lender: &'static dyn TxLender,
    /// Whether another reference may exist: set once the token was handed
    /// out ([`TxBuf::token`], [`TxBuf::share`]). Until then the buffer is
    /// this holder's alone without asking the lender (the batcher appends
    /// every message of a packet with no reference-count read).
    exposed: Cell<bool>,
}

// SAFETY: the lender's calls are safe from any thread (TxLender's
// contract); the bytes are written only by the only holder (`try_mut`).
unsafe impl Send for TxBuf {}

impl TxBuf {
    /// Wraps one reference to the buffer `token` of `lender`, whose bytes
    /// are `data..data + capacity` (none written yet).
    ///
    /// # Safety
    /// The caller owns one reference to `token` (handed to the new
    /// `TxBuf`) and `data..data + capacity` is valid, writable memory of
    /// that buffer for as long as a reference is held.
    pub unsafe fn from_raw(
        lender: &'static dyn TxLender,
        token: usize,
        data: NonNull<u8>,
        capacity: usize,
    ) -> TxBuf {
        TxBuf {
            token,
            data,
            capacity,
            len: 0,
            lender,
            exposed: Cell::new(false),
        }
    }

    /// The lender's token of this buffer (DPDK: the mbuf's address). From
    /// now on [`TxBuf::is_exclusive`] asks the lender, since whoever has
    /// the token may add references.
    pub fn token(&self) -> usize {
        self.exposed.set(true);
        self.token
    }

    /// Whether `lender` lent this buffer.
    pub fn is_from(&self, lender: &dyn TxLender) -> bool {
        std::ptr::addr_eq(self.lender as *const dyn TxLender, lender)
    }

    /// Whether this is the buffer's only reference (nobody else reads it).
    pub fn is_exclusive(&self) -> bool {
        // SAFETY: this reference keeps the token live.
        !self.exposed.get() || unsafe { self.lender.refs(self.token) == 1 }
    }

    /// A second reference to the same bytes (a driver's, say).
    pub fn share(&self) -> TxBuf {
        // SAFETY: this reference keeps the token live; the new TxBuf owns
        // the reference added here.
        unsafe { self.lender.retain(self.token) };
        self.exposed.set(true);
        TxBuf {
            token: self.token,
            data: self.data,
            capacity: self.capacity,
            len: self.len,
            lender: self.lender,
            exposed: Cell::new(true),
        }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes the buffer holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The written bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` ≤ capacity bytes were written; valid while held.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }

    /// The written bytes for writing, if this is the only reference.
    pub fn try_mut(&mut self) -> Option<&mut [u8]> {
        if !self.is_exclusive() {
            return None;
        }
        // SAFETY: only holder (checked with acquire ordering), so nobody
        // else reads; borrowed no longer than &mut self.
        Some(unsafe { std::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) })
    }

    /// Appends `bytes`; false (nothing written) past the capacity or while
    /// the buffer is shared.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> bool {
        if self.len + bytes.len() > self.capacity || !self.is_exclusive() {
            return false;
        }
        // SAFETY: within capacity; only holder.
        unsafe {
            let at = self.data.as_ptr().add(self.len);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
        }
        self.len += bytes.len();
        true
    }

    /// Gives up this reference without dropping it: the token, whose
    /// reference the caller now owns (a transport queueing the buffer).
    pub fn into_token(self) -> usize {
        let token = self.token();
        std::mem::forget(self);
        token
    }
}

impl Drop for TxBuf {
    fn drop(&mut self) {
        // SAFETY: this reference is owned and dropped once, here.
        unsafe { self.lender.release(self.token) }
    }
}

impl fmt::Debug for TxBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxBuf")
            .field("token", &format_args!("{:#x}", self.token))
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

/// One packet's bytes on the send path: in memory of the stack's own, or
/// in a buffer the transport lent. Reads as a byte slice.
#[derive(Debug)]
pub enum PacketBuf {
    /// Stack memory (reused through the batcher's spare list).
    Heap(Vec<u8>),
    /// Transport memory ([`TxLender::reserve`]).
    Lent(TxBuf),
}

impl Default for PacketBuf {
    fn default() -> PacketBuf {
        PacketBuf::Heap(Vec::new())
    }
}

impl From<Vec<u8>> for PacketBuf {
    fn from(v: Vec<u8>) -> PacketBuf {
        PacketBuf::Heap(v)
    }
}

impl Deref for PacketBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            PacketBuf::Heap(v) => v,
            PacketBuf::Lent(b) => b.as_slice(),
        }
    }
}

impl PacketBuf {
    /// The bytes for writing, unless a lent buffer is shared (see the
    /// module docs: read-only while the driver or a receiver holds it).
    pub fn try_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            PacketBuf::Heap(v) => Some(v),
            PacketBuf::Lent(b) => b.try_mut(),
        }
    }

    /// The bytes for writing; a shared lent buffer is first replaced by a
    /// heap copy. Returns the bytes and whether that copy was made.
    pub fn make_mut(&mut self) -> (&mut [u8], bool) {
        let copied = self.try_mut().is_none();
        if copied {
            *self = PacketBuf::Heap(self.to_vec());
        }
        (self.try_mut().expect("a heap buffer is writable"), copied)
    }

    /// Appends `bytes`; false (nothing written) when a lent buffer has no
    /// room or is shared.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> bool {
        match self {
            PacketBuf::Heap(v) => {
                v.extend_from_slice(bytes);
                true
            }
            PacketBuf::Lent(b) => b.extend_from_slice(bytes),
        }
    }

    /// Whether the bytes are in transport memory.
    pub fn is_lent(&self) -> bool {
        matches!(self, PacketBuf::Lent(_))
    }

    /// The heap buffer, for reuse (`None` for a lent one, which is dropped:
    /// its lender reuses it).
    pub fn into_heap(self) -> Option<Vec<u8>> {
        match self {
            PacketBuf::Heap(v) => Some(v),
            PacketBuf::Lent(_) => None,
        }
    }
}

/// One packet handed to [`Transport::tx_commit`](super::Transport::tx_commit):
/// a destination and the buffer, borrowed for the call.
#[derive(Debug, Clone, Copy)]
pub struct TxCommit<'a> {
    /// Destination node.
    pub dst: splitkv_layout::wire::NodeId,
    /// The packet, at most the transport's MTU bytes.
    pub buf: &'a PacketBuf,
}

#[cfg(test)]
pub(crate) mod testing {
    //! A lender over heap memory with counted references, so the layers
    //! above can be tested on lent buffers without DPDK.

    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

    /// Lends boxed buffers of `capacity` bytes, at most `max` at once
    /// (leaked: a test's few buffers live until the process ends).
    #[derive(Debug)]
    pub struct HeapLender {
        capacity: usize,
        max: usize,
        /// Buffers out (reserved, not yet given back).
        pub out: AtomicUsize,
        /// Reservations granted so far.
        pub reserved: AtomicUsize,
    }

    struct Slot {
        refs: AtomicU32,
        bytes: Box<[u8]>,
    }

    impl HeapLender {
        /// A leaked lender (lenders live for the process).
        pub fn leak(capacity: usize, max: usize) -> &'static HeapLender {
            Box::leak(Box::new(HeapLender {
                capacity,
                max,
                out: AtomicUsize::new(0),
                reserved: AtomicUsize::new(0),
            }))
        }
    }

    // SAFETY: tokens are leaked-box addresses of Slots this lender made;
    // counts are atomic with acquire/release ordering.
    unsafe impl TxLender for HeapLender {
        fn reserve(&'static self) -> Option<TxBuf> {
            if self.out.load(Ordering::Relaxed) >= self.max {
                return None;
            }
            self.out.fetch_add(1, Ordering::Relaxed);
            self.reserved.fetch_add(1, Ordering::Relaxed);
            let slot = Box::leak(Box::new(Slot {
                refs: AtomicU32::new(1),
                bytes: vec![0; self.capacity].into_boxed_slice(),
            }));
            let data = NonNull::new(slot.bytes.as_mut_ptr()).expect("boxed");
            let token = slot as *mut Slot as usize;
            // SAFETY: one reference, owned by the TxBuf; the box is never freed.
            Some(unsafe { TxBuf::from_raw(self, token, data, self.capacity) })
        }

        fn capacity(&self) -> usize {
            self.capacity
        }

        unsafe fn retain(&self, token: usize) {
            (*(token as *const Slot))
                .refs
                .fetch_add(1, Ordering::AcqRel);
        }

        unsafe fn release(&self, token: usize) {
            if (*(token as *const Slot))
                .refs
                .fetch_sub(1, Ordering::AcqRel)
                == 1
            {
                self.out.fetch_sub(1, Ordering::Relaxed);
            }
        }

        unsafe fn refs(&self, token: usize) -> u32 {
            (*(token as *const Slot)).refs.load(Ordering::Acquire)
        }
    }

    #[test]
    fn a_lent_buffer_is_written_only_while_held_alone() {
        let lender = HeapLender::leak(16, 4);
        let mut b = lender.reserve().unwrap();
        assert!(b.extend_from_slice(b"0123456789"));
        assert!(!b.extend_from_slice(b"0123456789"), "past the capacity");
        let shared = b.share();
        assert!(!b.is_exclusive() && b.try_mut().is_none());
        assert!(!b.extend_from_slice(b"x"), "shared: read-only");
        let mut p = PacketBuf::Lent(b);
        let (bytes, copied) = p.make_mut();
        bytes[0] = b'X';
        assert!(copied && !p.is_lent());
        assert_eq!(&p[..], b"X123456789");
        assert_eq!(
            shared.as_slice(),
            b"0123456789",
            "the shared bytes are untouched"
        );
        assert_eq!(lender.out.load(Ordering::Relaxed), 1);
        drop(shared);
        assert_eq!(
            lender.out.load(Ordering::Relaxed),
            0,
            "the last reference gave it back"
        );
    }

    #[test]
    fn a_lender_at_its_bound_lends_nothing() {
        let lender = HeapLender::leak(8, 2);
        let held: Vec<_> = (0..2).map(|_| lender.reserve().unwrap()).collect();
        assert!(lender.reserve().is_none());
        assert!(held[0].is_from(lender));
        drop(held);
        assert!(lender.reserve().is_some());
    }
}

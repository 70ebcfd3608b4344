//! Safe wrappers over the DPDK calls the transport makes: a mempool, owned
//! mbufs, one port with one RX/TX queue pair, and ring-joined port pairs.
//! Every `unsafe` block of the transport but EAL's lives here.
//!
//! Threads: an [`Mbuf`] and a [`Mempool`] may move between threads. Mempool
//! get and put are safe from any thread (the default ring handler is
//! multi-producer, multi-consumer; threads EAL did not create use no
//! per-lcore cache). A [`Port`]'s queue pair is used by whichever thread
//! holds the `Port` (`&mut self`), one at a time, as DPDK requires.

use super::eal::{strerror, Eal};
use super::frame::MacAddr;
use crate::net::{TxBuf, TxLender};
use dpdk_sys as sys;
use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The queue both directions of a [`Port`] use.
const QUEUE: u16 = 0;
/// Per-lcore mempool cache, in mbufs (only threads EAL created use it).
const MEMPOOL_CACHE_MBUFS: u32 = 256;

/// A DPDK call that failed during set-up: what it was doing and `rte_errno`
/// (or the negative return value's errno).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SysError {
    pub step: &'static str,
    pub errno: i32,
    pub message: String,
}

fn sys_error(step: &'static str, errno: i32) -> SysError {
    SysError {
        step,
        errno,
        message: strerror(errno),
    }
}

fn rte_errno() -> i32 {
    // SAFETY: reads the calling thread's rte_errno.
    unsafe { sys::splitkv_dpdk_errno() }
}

/// A process-unique DPDK object name (`prefix` and a counter; DPDK names are
/// global and at most 26 characters for mempools).
fn unique_name(prefix: &str) -> CString {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    CString::new(format!("skv_{prefix}{n}")).expect("no NUL in a generated name")
}

/// A packet mbuf pool. Never freed: mbufs of a pool can outlive the port
/// that sent them (net_ring hands the very mbuf to the receiving port, which
/// frees it into this pool later), so a pool lives until the process ends.
#[derive(Debug)]
pub(super) struct Mempool(NonNull<sys::rte_mempool>);

// SAFETY: the pool pointer is never freed; get/put are thread-safe (module docs).
unsafe impl Send for Mempool {}

impl Mempool {
    /// A pool of `mbufs` mbufs of `data_room_bytes` (headroom included).
    pub fn new(
        _eal: &Eal,
        mbufs: u32,
        data_room_bytes: u16,
        socket: i32,
    ) -> Result<Mempool, SysError> {
        let name = unique_name("mp");
        let cache = MEMPOOL_CACHE_MBUFS.min(mbufs / 2);
        // SAFETY: EAL is initialised (`_eal`); name is NUL-terminated.
        let mp = unsafe {
            sys::rte_pktmbuf_pool_create(name.as_ptr(), mbufs, cache, 0, data_room_bytes, socket)
        };
        NonNull::new(mp)
            .map(Mempool)
            .ok_or_else(|| sys_error("rte_pktmbuf_pool_create", rte_errno()))
    }

    /// One mbuf, or `None` when the pool is empty.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: the pool is valid for the process's life.
        NonNull::new(unsafe { sys::splitkv_dpdk_pktmbuf_alloc(self.0.as_ptr()) }).map(Mbuf)
    }

    /// Mbufs free in the pool (approximate while others allocate).
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is valid for the process's life.
        unsafe { sys::rte_mempool_avail_count(self.0.as_ptr()) }
    }
}

/// One packet mbuf (possibly the head of a chain), owned: dropping it frees
/// the whole chain into its pool.
#[repr(transparent)]
#[derive(Debug)]
pub(super) struct Mbuf(NonNull<sys::rte_mbuf>);

// SAFETY: an Mbuf is the only reference to its buffer; freeing it from any
// thread is safe (module docs).
unsafe impl Send for Mbuf {}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: owned, not freed before (ownership ends here).
        unsafe { sys::splitkv_dpdk_pktmbuf_free(self.0.as_ptr()) }
    }
}

impl Mbuf {
    /// The first segment's data.
    pub fn data(&self) -> &[u8] {
        // SAFETY: the mbuf is owned and valid; its first segment holds
        // data_len initialised bytes at mtod, borrowed no longer than &self.
        unsafe {
            let m = self.0.as_ptr();
            let len = usize::from(sys::splitkv_dpdk_mbuf_data_len(m));
            std::slice::from_raw_parts(sys::splitkv_dpdk_mbuf_data(m), len)
        }
    }

    /// Segments in the chain (1 for a single mbuf).
    pub fn segments(&self) -> u16 {
        // SAFETY: the mbuf is owned and valid.
        unsafe { sys::splitkv_dpdk_mbuf_nb_segs(self.0.as_ptr()) }
    }

    /// The whole packet's length over every segment, bytes.
    pub fn packet_len(&self) -> u32 {
        // SAFETY: the mbuf is owned and valid.
        unsafe { sys::splitkv_dpdk_mbuf_pkt_len(self.0.as_ptr()) }
    }

    /// Appends `len` bytes to the (single-segment) mbuf and returns them
    /// for writing, or `None` when the tailroom is too small.
    pub fn append(&mut self, len: u16) -> Option<&mut [u8]> {
        // SAFETY: the mbuf is owned; rte_pktmbuf_append returns `len`
        // writable bytes inside its buffer (or NULL), borrowed no longer
        // than &mut self.
        unsafe {
            let p = sys::splitkv_dpdk_mbuf_append(self.0.as_ptr(), len);
            (!p.is_null()).then(|| std::slice::from_raw_parts_mut(p, usize::from(len)))
        }
    }

    /// Chains `tail` after this mbuf's last segment; gives `tail` back when
    /// the chain would be too long.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: both are owned and distinct; on success the head owns the
        // tail (freed with it), so the tail must not be dropped separately.
        let rc = unsafe { sys::splitkv_dpdk_mbuf_chain(self.0.as_ptr(), tail.0.as_ptr()) };
        if rc == 0 {
            std::mem::forget(tail);
            Ok(())
        } else {
            Err(tail)
        }
    }
}

impl Mbuf {
    /// Sets the (single-segment) mbuf's length to `len` bytes from its data
    /// start and returns the first `prefix` of them for writing, or `None`
    /// past what was appended before (the lent buffer's full length).
    fn set_len(&mut self, len: u16, appended: u16, prefix: u16) -> Option<&mut [u8]> {
        if len > appended || prefix > len {
            return None;
        }
        // SAFETY: owned; `appended` bytes from the data start were appended
        // (by the lender), so `len` of them lie in the buffer; only the
        // `prefix` is borrowed.
        unsafe {
            let m = self.0.as_ptr();
            sys::splitkv_dpdk_mbuf_set_len(m, len);
            Some(std::slice::from_raw_parts_mut(
                sys::splitkv_dpdk_mbuf_data(m),
                usize::from(prefix),
            ))
        }
    }
}

/// Lends mbufs of one pool to the batching layer ([`TxLender`], the
/// reserve/commit send path): each lent buffer is an mbuf's data after room
/// for the frame headers, `capacity` bytes (the MTU) long. At most
/// `lent_max` references are out at once, so the receive queue and the
/// send queue always find mbufs in the pool (the rest). Leaked at creation
/// (one per transport), like the pool.
#[derive(Debug)]
pub(super) struct MbufLender {
    pool: NonNull<sys::rte_mempool>,
    capacity: usize,
    headroom: usize,
    lent: AtomicU32,
    lent_max: u32,
    refused: AtomicU64,
}

// SAFETY: the pool is never freed; mempool get/put and mbuf reference
// counts are thread-safe (module docs); the counters are atomics.
unsafe impl Send for MbufLender {}
// SAFETY: as above.
unsafe impl Sync for MbufLender {}

impl MbufLender {
    /// A lender of `pool`'s mbufs holding `capacity` bytes after
    /// `headroom` bytes (the frame headers), at most `lent_max` at once.
    pub fn leak(
        pool: &Mempool,
        capacity: usize,
        headroom: usize,
        lent_max: u32,
    ) -> &'static MbufLender {
        Box::leak(Box::new(MbufLender {
            pool: pool.0,
            capacity,
            headroom,
            lent: AtomicU32::new(0),
            lent_max,
            refused: AtomicU64::new(0),
        }))
    }

    /// References out now.
    pub fn lent(&self) -> u32 {
        self.lent.load(Ordering::Relaxed)
    }

    /// Reservations refused (the bound reached, or the pool empty).
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// The mbuf of a buffer this lender lent, with one more reference (the
    /// caller's, to hand to the port), its length set to the headroom plus
    /// the buffer's bytes and `head` (the frame headers, exactly the
    /// headroom) written before them. `None` when `head` is not the
    /// headroom's length. The caller checked that `buf` is the buffer's
    /// only reference ([`TxBuf::is_exclusive`]), so nobody reads the
    /// headroom while it is written.
    pub fn commit(&self, buf: &TxBuf, head: &[u8]) -> Option<Mbuf> {
        if !buf.is_from(self) || head.len() != self.headroom {
            return None;
        }
        let total = u16::try_from(self.headroom + buf.len()).ok()?;
        let appended = u16::try_from(self.headroom + self.capacity).ok()?;
        // SAFETY: the buffer's token is a live mbuf of this lender
        // (`is_from`); the reference added here is owned by the Mbuf.
        let mut m = unsafe {
            sys::splitkv_dpdk_mbuf_refcnt_update(buf.token() as *mut sys::rte_mbuf, 1);
            Mbuf(NonNull::new_unchecked(buf.token() as *mut sys::rte_mbuf))
        };
        // The headroom lies before the lent bytes, disjoint from what `buf`
        // reads.
        let prefix = self.headroom as u16; // < total
        m.set_len(total, appended, prefix)?.copy_from_slice(head);
        Some(m)
    }
}

// SAFETY: tokens are mbufs of `pool` handed out by `reserve` (TxBuf keeps
// them live); refcnt calls are DPDK's atomics, and the read is followed by
// an acquire fence (the shim).
unsafe impl TxLender for MbufLender {
    fn reserve(&'static self) -> Option<TxBuf> {
        if self.lent.load(Ordering::Relaxed) >= self.lent_max {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        // SAFETY: the pool is valid for the process's life.
        let m = unsafe { sys::splitkv_dpdk_pktmbuf_alloc(self.pool.as_ptr()) };
        let Some(mut m) = NonNull::new(m).map(Mbuf) else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let len = u16::try_from(self.headroom + self.capacity).ok()?;
        let data = NonNull::new(m.append(len)?[self.headroom..].as_mut_ptr())?;
        self.lent.fetch_add(1, Ordering::Relaxed);
        let token = m.0.as_ptr() as usize;
        std::mem::forget(m);
        // SAFETY: the mbuf's one reference goes to the TxBuf; its data
        // holds headroom + capacity appended bytes, valid while referenced.
        Some(unsafe { TxBuf::from_raw(self, token, data, self.capacity) })
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    unsafe fn retain(&self, token: usize) {
        self.lent.fetch_add(1, Ordering::Relaxed);
        sys::splitkv_dpdk_mbuf_refcnt_update(token as *mut sys::rte_mbuf, 1);
    }

    unsafe fn release(&self, token: usize) {
        self.lent.fetch_sub(1, Ordering::Relaxed);
        sys::splitkv_dpdk_pktmbuf_free(token as *mut sys::rte_mbuf);
    }

    unsafe fn refs(&self, token: usize) -> u32 {
        u32::from(sys::splitkv_dpdk_mbuf_refcnt_read(
            token as *const sys::rte_mbuf,
        ))
    }
}

/// Frees every mbuf of `mbufs` in one call and empties it.
pub(super) fn free_all(mbufs: &mut Vec<Mbuf>) {
    if mbufs.is_empty() {
        return;
    }
    // SAFETY: Mbuf is a transparent wrapper of a non-null rte_mbuf pointer,
    // so the Vec's buffer is an array of len owned mbuf pointers; they are
    // freed once here and forgotten by set_len(0).
    unsafe {
        sys::rte_pktmbuf_free_bulk(mbufs.as_mut_ptr().cast(), mbufs.len() as u32);
        mbufs.set_len(0);
    }
}

/// One started ethdev port with one RX and one TX queue. Stopped and
/// closed when dropped.
#[derive(Debug)]
pub(super) struct Port {
    id: u16,
}

/// How to set a [`Port`] up.
pub(super) struct PortSetup<'a> {
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
    /// MTU to ask the port for (IPv4 datagram bytes), or 0 for its default.
    pub mtu: u32,
    pub pool: &'a Mempool,
}

impl Port {
    /// The port named `name` (a `--vdev` name, a PCI address, or a name
    /// [`ring_port_pair`] returned), not yet set up; `None` if no port has it.
    pub fn find(_eal: &Eal, name: &str) -> Option<u16> {
        let c = CString::new(name).ok()?;
        let mut id = 0u16;
        // SAFETY: EAL is up; c is NUL-terminated; id is a valid out-pointer.
        let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
        (rc == 0).then_some(id)
    }

    /// Ports EAL found.
    pub fn count(_eal: &Eal) -> u16 {
        // SAFETY: EAL is up.
        unsafe { sys::rte_eth_dev_count_avail() }
    }

    /// The NUMA socket of port `id` (or `SOCKET_ID_ANY`).
    pub fn socket(id: u16) -> i32 {
        // SAFETY: any port id is accepted (-1 for an unknown one).
        unsafe { sys::rte_eth_dev_socket_id(id) }
    }

    /// Configures port `id` with one queue pair fed by `setup.pool` and
    /// starts it.
    pub fn start(id: u16, setup: PortSetup<'_>) -> Result<Port, SysError> {
        let check = |step, rc: i32| {
            if rc < 0 {
                Err(sys_error(step, -rc))
            } else {
                Ok(())
            }
        };
        let mut conf = sys::rte_eth_conf::default();
        conf.rxmode.mtu = setup.mtu;
        // SAFETY: conf is a valid configuration (zeroes but the MTU); one
        // queue each way.
        check("rte_eth_dev_configure", unsafe {
            sys::rte_eth_dev_configure(id, 1, 1, &conf)
        })?;
        // From here on a failure closes the port (Drop).
        let port = Port { id };
        let (mut rx, mut tx) = (setup.rx_descriptors, setup.tx_descriptors);
        // SAFETY: valid out-pointers; the port is configured.
        check("rte_eth_dev_adjust_nb_rx_tx_desc", unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rx, &mut tx)
        })?;
        let socket = Port::socket(id) as u32; // SOCKET_ID_ANY stays "any" as u32
                                              // SAFETY: NULL queue configurations mean the driver's defaults; the
                                              // pool outlives the port (never freed).
        check("rte_eth_rx_queue_setup", unsafe {
            sys::rte_eth_rx_queue_setup(
                id,
                QUEUE,
                rx,
                socket,
                std::ptr::null(),
                setup.pool.0.as_ptr(),
            )
        })?;
        // SAFETY: as above.
        check("rte_eth_tx_queue_setup", unsafe {
            sys::rte_eth_tx_queue_setup(id, QUEUE, tx, socket, std::ptr::null())
        })?;
        // SAFETY: the port is configured with its queues.
        check("rte_eth_dev_start", unsafe { sys::rte_eth_dev_start(id) })?;
        Ok(port)
    }

    /// The port's MAC address.
    pub fn mac(&self) -> Result<MacAddr, SysError> {
        let mut a = sys::rte_ether_addr::default();
        // SAFETY: valid port and out-pointer.
        let rc = unsafe { sys::rte_eth_macaddr_get(self.id, &mut a) };
        if rc < 0 {
            return Err(sys_error("rte_eth_macaddr_get", -rc));
        }
        Ok(MacAddr(a.addr_bytes))
    }

    /// The driver's counters of the port.
    pub fn stats(&self) -> Result<sys::rte_eth_stats, SysError> {
        let mut st = sys::rte_eth_stats::default();
        // SAFETY: valid port and out-pointer.
        let rc = unsafe { sys::rte_eth_stats_get(self.id, &mut st) };
        if rc < 0 {
            return Err(sys_error("rte_eth_stats_get", -rc));
        }
        Ok(st)
    }

    /// Receives up to `n` (≤ `out`'s spare capacity) packets into `out`.
    /// Returns how many.
    pub fn rx_burst(&mut self, out: &mut Vec<Mbuf>, n: usize) -> usize {
        let n = n.min(out.capacity() - out.len()).min(usize::from(u16::MAX));
        // SAFETY: the spare capacity holds n pointer slots (Mbuf is a
        // transparent pointer); the driver writes `got` owned mbufs there,
        // which set_len then hands to the Vec. Queue 0 is used only through
        // &mut self.
        unsafe {
            let spare = out.as_mut_ptr().add(out.len()).cast();
            let got = sys::splitkv_dpdk_rx_burst(self.id, QUEUE, spare, n as u16);
            out.set_len(out.len() + usize::from(got));
            usize::from(got)
        }
    }

    /// Offers the first up to `n` mbufs of `mbufs` to the port; the ones it
    /// takes (a prefix) leave the Vec. Returns how many.
    pub fn tx_burst(&mut self, mbufs: &mut Vec<Mbuf>, n: usize) -> usize {
        let n = n.min(mbufs.len()).min(usize::from(u16::MAX));
        // SAFETY: the first n elements are owned mbuf pointers; the driver
        // takes ownership of the first `sent`, which are then removed from
        // the Vec without being dropped (ptr::copy shifts the rest down).
        unsafe {
            let sent = usize::from(sys::splitkv_dpdk_tx_burst(
                self.id,
                QUEUE,
                mbufs.as_mut_ptr().cast(),
                n as u16,
            ));
            let rest = mbufs.len() - sent;
            let base = mbufs.as_mut_ptr();
            std::ptr::copy(base.add(sent), base, rest);
            mbufs.set_len(rest);
            sent
        }
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        // SAFETY: the port is ours; stop then close (both tolerate a port
        // that never started).
        unsafe {
            sys::rte_eth_dev_stop(self.id);
            sys::rte_eth_dev_close(self.id);
        }
    }
}

/// Creates two ethdev ports joined back to back by two rings of
/// `ring_slots` (a power of two) packets: what one port sends, the other
/// receives (the net_ring driver; no hardware, no copy). Returns the two
/// ports' names for [`Port::find`].
pub(super) fn ring_port_pair(_eal: &Eal, ring_slots: u32) -> Result<[String; 2], SysError> {
    let flags = sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ;
    let mut rings = [std::ptr::null_mut(); 2];
    for r in &mut rings {
        let name = unique_name("rg");
        // SAFETY: EAL is up; name is NUL-terminated. Rings are never freed
        // (the ports keep using them).
        *r = unsafe { sys::rte_ring_create(name.as_ptr(), ring_slots, sys::SOCKET_ID_ANY, flags) };
        if r.is_null() {
            return Err(sys_error("rte_ring_create", rte_errno()));
        }
    }
    let mut names = [String::new(), String::new()];
    for (i, out) in names.iter_mut().enumerate() {
        let name = unique_name("pt");
        let (rx, tx) = (rings[i], rings[1 - i]);
        // SAFETY: one valid ring each way, borrowed by the new port for the
        // process's life.
        let id = unsafe { sys::rte_eth_from_rings(name.as_ptr(), &rx, 1, &tx, 1, 0) };
        if id < 0 {
            return Err(sys_error("rte_eth_from_rings", rte_errno()));
        }
        let mut buf = [0 as libc::c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: buf is a valid buffer of at least RTE_ETH_NAME_MAX_LEN
        // bytes, NUL-terminated by DPDK on success.
        let rc = unsafe { sys::rte_eth_dev_get_name_by_port(id as u16, buf.as_mut_ptr()) };
        if rc < 0 {
            return Err(sys_error("rte_eth_dev_get_name_by_port", -rc));
        }
        // SAFETY: NUL-terminated by DPDK.
        *out = unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned();
    }
    Ok(names)
}

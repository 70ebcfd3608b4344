//! The UDP transport's system calls (`sendmmsg`, `recvmmsg`, socket options)
//! behind safe functions. Every `unsafe` block of the transport lives here; each
//! function builds the kernel's descriptors itself from borrowed Rust values,
//! so no caller can hand the kernel a dangling pointer.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Most datagrams one `sendmmsg` or `recvmmsg` call carries: the size of the
/// descriptor arrays the wrappers build on the stack.
pub(super) const SYSCALL_BATCH_MAX: usize = 32;

/// Control-message space per received datagram, in 8-byte words: one
/// `SO_RXQ_OVFL` message (a `u32` after a 16-byte header) needs 24 bytes.
pub(super) const RX_CONTROL_WORDS: usize = 4;

/// A socket address in the kernel's layout, used as `msg_name` when sending.
#[derive(Clone, Copy)]
pub(super) enum RawAddr {
    /// An IPv4 address and port.
    V4(libc::sockaddr_in),
    /// An IPv6 address, port, flow label and scope.
    V6(libc::sockaddr_in6),
}

impl std::fmt::Debug for RawAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RawAddr::V4(a) => write!(f, "{:?}", parse_v4(a)),
            RawAddr::V6(a) => write!(f, "{:?}", parse_v6(a)),
        }
    }
}

impl RawAddr {
    /// The kernel layout of `addr`.
    pub(super) fn new(addr: SocketAddr) -> RawAddr {
        match addr {
            SocketAddr::V4(a) => {
                // SAFETY: sockaddr_in is a plain C struct; all zeroes is a valid value.
                let mut raw: libc::sockaddr_in = unsafe { zeroed() };
                raw.sin_family = libc::AF_INET as libc::sa_family_t;
                raw.sin_port = a.port().to_be();
                raw.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
                RawAddr::V4(raw)
            }
            SocketAddr::V6(a) => {
                // SAFETY: sockaddr_in6 is a plain C struct; all zeroes is a valid value.
                let mut raw: libc::sockaddr_in6 = unsafe { zeroed() };
                raw.sin6_family = libc::AF_INET6 as libc::sa_family_t;
                raw.sin6_port = a.port().to_be();
                // The flow label is not part of a peer's identity: left 0.
                raw.sin6_addr.s6_addr = a.ip().octets();
                raw.sin6_scope_id = a.scope_id();
                RawAddr::V6(raw)
            }
        }
    }

    fn as_name(&self) -> (*mut libc::c_void, libc::socklen_t) {
        match self {
            RawAddr::V4(a) => (
                a as *const libc::sockaddr_in as *mut libc::c_void,
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            RawAddr::V6(a) => (
                a as *const libc::sockaddr_in6 as *mut libc::c_void,
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            ),
        }
    }
}

fn parse_v4(a: &libc::sockaddr_in) -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(
        Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(a.sin_port),
    ))
}

fn parse_v6(a: &libc::sockaddr_in6) -> SocketAddr {
    SocketAddr::V6(SocketAddrV6::new(
        Ipv6Addr::from(a.sin6_addr.s6_addr),
        u16::from_be(a.sin6_port),
        0, // the flow label does not identify a peer
        a.sin6_scope_id,
    ))
}

/// The source address the kernel wrote into `storage` (`len` bytes of it), or
/// `None` for a family other than IPv4/IPv6 or a short address.
pub(super) fn parse_addr(storage: &libc::sockaddr_storage, len: u32) -> Option<SocketAddr> {
    let len = len as usize;
    match storage.ss_family as libc::c_int {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: sockaddr_storage is at least as large and as aligned as
            // sockaddr_in, and the kernel wrote an AF_INET address of this size.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            Some(parse_v4(a))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for an AF_INET6 address.
            let a = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            Some(parse_v6(a))
        }
        _ => None,
    }
}

/// An empty source-address buffer for [`recv_batch`].
pub(super) fn empty_storage() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is a plain C struct; all zeroes is a valid value.
    unsafe { zeroed() }
}

/// Sets an integer socket option.
pub(super) fn set_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is a live c_int whose size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an integer socket option.
pub(super) fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into the live c_int `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut value as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `n` (≤ [`SYSCALL_BATCH_MAX`]) datagrams, the `i`-th being
/// `datagram(i) = (destination, bytes)`, with one non-blocking `sendmmsg`
/// call. Returns how many the kernel took (a prefix), or the error of the
/// first datagram when it took none.
pub(super) fn send_batch<'a>(
    fd: RawFd,
    n: usize,
    mut datagram: impl FnMut(usize) -> (&'a RawAddr, &'a [u8]),
) -> io::Result<usize> {
    let n = n.min(SYSCALL_BATCH_MAX);
    let mut iovs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; SYSCALL_BATCH_MAX];
    // SAFETY: mmsghdr is a plain C struct; all zeroes (null pointers, zero lengths) is valid.
    let mut msgs: [libc::mmsghdr; SYSCALL_BATCH_MAX] = unsafe { zeroed() };
    for i in 0..n {
        let (addr, bytes) = datagram(i);
        iovs[i].iov_base = bytes.as_ptr() as *mut libc::c_void;
        iovs[i].iov_len = bytes.len();
        let (name, name_len) = addr.as_name();
        let h = &mut msgs[i].msg_hdr;
        h.msg_name = name;
        h.msg_namelen = name_len;
        h.msg_iovlen = 1;
    }
    let iov_base = iovs.as_mut_ptr();
    for (i, m) in msgs[..n].iter_mut().enumerate() {
        m.msg_hdr.msg_iov = iov_base.wrapping_add(i);
    }
    // SAFETY: every descriptor points at an address and a byte slice borrowed
    // for this call and at an iovec on this stack frame; the kernel only reads
    // them (it writes msg_len, inside `msgs`).
    let rc =
        unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

/// What the kernel reported for one received datagram.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RecvMeta {
    /// Bytes written into the slot's buffer.
    pub len: usize,
    /// The datagram was longer than the buffer (`MSG_TRUNC`); its tail is lost.
    pub truncated: bool,
    /// Length of the source address written into the slot's name buffer.
    pub name_len: u32,
    /// The socket's kernel drop counter (`SO_RXQ_OVFL`), when reported.
    pub kernel_drops: Option<u32>,
}

/// Receive slots for [`recv_batch`]: `bufs` holds `meta.len()` buffers of
/// `buf_bytes` each, one source-address and control buffer per slot.
pub(super) struct RecvSlots<'a> {
    /// Contiguous datagram buffers.
    pub bufs: &'a mut [u8],
    /// Bytes per datagram buffer.
    pub buf_bytes: usize,
    /// Source addresses.
    pub names: &'a mut [libc::sockaddr_storage],
    /// Control-message buffers.
    pub controls: &'a mut [[u64; RX_CONTROL_WORDS]],
    /// Results, one per slot.
    pub meta: &'a mut [RecvMeta],
}

/// Receives up to `want` (≤ [`SYSCALL_BATCH_MAX`] and ≤ the slots) datagrams
/// with one non-blocking `recvmmsg` call. Returns how many arrived (0 when
/// none is waiting) or the call's error.
pub(super) fn recv_batch(fd: RawFd, slots: &mut RecvSlots<'_>, want: usize) -> io::Result<usize> {
    let n = want
        .min(SYSCALL_BATCH_MAX)
        .min(slots.meta.len())
        .min(slots.names.len())
        .min(slots.controls.len())
        .min(slots.bufs.len() / slots.buf_bytes.max(1));
    let mut iovs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; SYSCALL_BATCH_MAX];
    // SAFETY: mmsghdr is a plain C struct; all zeroes is valid.
    let mut msgs: [libc::mmsghdr; SYSCALL_BATCH_MAX] = unsafe { zeroed() };
    let chunks = slots.bufs.chunks_exact_mut(slots.buf_bytes);
    for (i, ((buf, name), control)) in chunks
        .zip(slots.names.iter_mut())
        .zip(slots.controls.iter_mut())
        .take(n)
        .enumerate()
    {
        iovs[i].iov_base = buf.as_mut_ptr() as *mut libc::c_void;
        iovs[i].iov_len = buf.len();
        let h = &mut msgs[i].msg_hdr;
        h.msg_name = name as *mut libc::sockaddr_storage as *mut libc::c_void;
        h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_iovlen = 1;
        h.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = std::mem::size_of_val(control) as _;
    }
    let iov_base = iovs.as_mut_ptr();
    for (i, m) in msgs[..n].iter_mut().enumerate() {
        m.msg_hdr.msg_iov = iov_base.wrapping_add(i);
    }
    // SAFETY: each descriptor points at a distinct buffer, address and control
    // area mutably borrowed for this call, with their true sizes; the kernel
    // writes only within them.
    let rc = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(e),
        };
    }
    let got = rc as usize;
    for (i, m) in msgs[..got].iter().enumerate() {
        slots.meta[i] = RecvMeta {
            len: (m.msg_len as usize).min(slots.buf_bytes),
            truncated: m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
            name_len: m.msg_hdr.msg_namelen,
            kernel_drops: drops_of(&m.msg_hdr),
        };
    }
    Ok(got)
}

/// The `SO_RXQ_OVFL` counter in a received message's control data, if any.
fn drops_of(h: &libc::msghdr) -> Option<u32> {
    // SAFETY: `h` is a header the kernel filled in this call, whose control
    // pointer and length describe a live buffer; the CMSG macros stay within
    // msg_controllen, and the data of an SO_RXQ_OVFL message is one u32
    // (read unaligned).
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                return Some(std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const u32));
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}

//! Passing one descriptor over a Unix stream socket (`SCM_RIGHTS`) and
//! reading the peer's credentials (`SO_PEERCRED`): how the client hands its
//! sealed shared memory to the node and how the node learns who connected
//! (L5 §III-A.1).
//!
//! A descriptor travels with one data byte ([`FD_PASS_TAG`]), so the receiver
//! tells "the peer closed" (no byte) from "the peer sent no descriptor" (a
//! byte without one). The receiver takes descriptors with `MSG_CMSG_CLOEXEC`
//! and closes every descriptor of a message it refuses.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::io::Errno;
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;

/// The data byte that carries a descriptor.
pub const FD_PASS_TAG: u8 = 0x5d;

/// Most descriptors one received message may carry before it is refused;
/// room for them is reserved so that extra ones arrive (and are closed)
/// instead of being silently dropped by the kernel.
pub const FD_PASS_FDS_MAX: usize = 4;

/// Why a descriptor could not be passed, or credentials read.
#[derive(Debug, thiserror::Error)]
pub enum FdPassError {
    /// `sendmsg` failed, or sent no byte.
    #[error("sending a descriptor failed: {0}")]
    Send(Errno),
    /// `recvmsg` failed.
    #[error("receiving a descriptor failed: {0}")]
    Receive(Errno),
    /// The peer closed the socket before sending anything.
    #[error("peer closed the socket")]
    PeerClosed,
    /// A message arrived with a byte other than [`FD_PASS_TAG`].
    #[error("unexpected data byte {byte:#04x} where a descriptor was expected")]
    BadTag {
        /// The byte received.
        byte: u8,
    },
    /// A message arrived without a descriptor.
    #[error("message carried no descriptor")]
    NoDescriptor,
    /// A message carried more than one descriptor (all were closed).
    #[error("message carried {count} descriptors, expected one")]
    TooManyDescriptors {
        /// Descriptors received (at most [`FD_PASS_FDS_MAX`] are counted).
        count: usize,
    },
    /// The kernel truncated the control data (more descriptors than
    /// [`FD_PASS_FDS_MAX`]); whatever arrived was closed.
    #[error("control data truncated: more than {FD_PASS_FDS_MAX} descriptors")]
    Truncated,
    /// `SO_PEERCRED` failed (not a Unix socket?).
    #[error("reading peer credentials failed: {0}")]
    Credentials(Errno),
}

/// The credentials of the process at the other end of a Unix socket, as the
/// kernel recorded them when the connection was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    /// Process id.
    pub pid: i32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// Sends `fd` with `SCM_RIGHTS` and the byte [`FD_PASS_TAG`] over the Unix
/// stream `socket` (blocking per the socket's mode). The sender keeps its own
/// copy of `fd`.
///
/// # Errors
/// [`FdPassError::Send`] if `sendmsg` fails (e.g. `EPIPE`, `EAGAIN` on a
/// non-blocking socket, `ENOTSOCK`).
pub fn send_fd(socket: impl AsFd, fd: BorrowedFd<'_>) -> Result<(), FdPassError> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        // The buffer is sized for exactly this message.
        return Err(FdPassError::Send(Errno::NOBUFS));
    }
    let data = [FD_PASS_TAG];
    loop {
        match rustix::net::sendmsg(
            &socket,
            &[IoSlice::new(&data)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(FdPassError::Send(Errno::PIPE)),
            Err(Errno::INTR) => continue,
            Err(e) => return Err(FdPassError::Send(e)),
        }
    }
}

/// Receives one descriptor sent by [`send_fd`] over the Unix stream `socket`
/// (blocking per the socket's mode). The descriptor arrives close-on-exec.
///
/// # Errors
/// [`FdPassError::PeerClosed`] at end of stream; [`FdPassError::BadTag`],
/// [`FdPassError::NoDescriptor`], [`FdPassError::TooManyDescriptors`] or
/// [`FdPassError::Truncated`] for a message of another shape (any
/// descriptors it carried are closed); [`FdPassError::Receive`] if `recvmsg`
/// fails.
pub fn recv_fd(socket: impl AsFd) -> Result<OwnedFd, FdPassError> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(FD_PASS_FDS_MAX))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut data = [0u8; 1];
    let msg = loop {
        match rustix::net::recvmsg(
            &socket,
            &mut [IoSliceMut::new(&mut data)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(msg) => break msg,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(FdPassError::Receive(e)),
        }
    };
    // Take ownership of everything that arrived first, so that every early
    // return below closes it.
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if msg.flags.contains(ReturnFlags::CTRUNC) {
        return Err(FdPassError::Truncated);
    }
    if msg.bytes == 0 && fds.is_empty() {
        return Err(FdPassError::PeerClosed);
    }
    if data[0] != FD_PASS_TAG {
        return Err(FdPassError::BadTag { byte: data[0] });
    }
    match fds.len() {
        0 => Err(FdPassError::NoDescriptor),
        1 => Ok(fds.pop().expect("one descriptor")),
        count => Err(FdPassError::TooManyDescriptors { count }),
    }
}

/// The credentials of the peer of the Unix socket `socket` (`SO_PEERCRED`).
///
/// # Errors
/// [`FdPassError::Credentials`] if the call fails (e.g. `ENOTSOCK`, or
/// `ENOPROTOOPT` on a socket that is not a Unix socket).
pub fn peer_credentials(socket: impl AsFd) -> Result<PeerCredentials, FdPassError> {
    let cred = rustix::net::sockopt::socket_peercred(&socket).map_err(FdPassError::Credentials)?;
    Ok(PeerCredentials {
        pid: cred.pid.as_raw_nonzero().get(),
        uid: cred.uid.as_raw(),
        gid: cred.gid.as_raw(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn pipe_fds() -> (OwnedFd, OwnedFd) {
        rustix::pipe::pipe().unwrap()
    }

    #[test]
    fn a_descriptor_round_trips() {
        let (a, b) = UnixStream::pair().unwrap();
        let (r, w) = pipe_fds();
        send_fd(&a, w.as_fd()).unwrap();
        drop(w);
        let got = recv_fd(&b).unwrap();
        rustix::io::write(&got, b"hi").unwrap();
        let mut buf = [0u8; 2];
        rustix::io::read(&r, &mut buf).unwrap();
        assert_eq!(&buf, b"hi");
        let flags = rustix::io::fcntl_getfd(&got).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
    }

    #[test]
    fn misshapen_messages_are_typed_errors() {
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&[FD_PASS_TAG]).unwrap();
        assert!(matches!(recv_fd(&b), Err(FdPassError::NoDescriptor)));
        a.write_all(&[0x00]).unwrap();
        assert!(matches!(recv_fd(&b), Err(FdPassError::BadTag { byte: 0 })));
        // Two descriptors in one message.
        let (r, w) = pipe_fds();
        let fds = [r.as_fd(), w.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        assert!(control.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &a,
            &[IoSlice::new(&[FD_PASS_TAG])],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        assert!(matches!(
            recv_fd(&b),
            Err(FdPassError::TooManyDescriptors { count: 2 })
        ));
        drop(a);
        assert!(matches!(recv_fd(&b), Err(FdPassError::PeerClosed)));
        // Not a socket at all.
        assert!(matches!(
            recv_fd(&r),
            Err(FdPassError::Receive(Errno::NOTSOCK))
        ));
        assert!(matches!(
            send_fd(&r, w.as_fd()),
            Err(FdPassError::Send(Errno::NOTSOCK))
        ));
    }

    #[test]
    fn peer_credentials_are_ours_over_a_pair() {
        let (a, _b) = UnixStream::pair().unwrap();
        let cred = peer_credentials(&a).unwrap();
        assert_eq!(cred.pid, std::process::id() as i32);
        assert_eq!(cred.uid, rustix::process::getuid().as_raw());
        assert_eq!(cred.gid, rustix::process::getgid().as_raw());
        let (r, _w) = pipe_fds();
        assert!(matches!(
            peer_credentials(&r),
            Err(FdPassError::Credentials(_))
        ));
    }
}

//! Reading and writing one handshake message ([`splitkv_layout::app::handshake`])
//! on a Unix stream socket within a deadline, for both ends of the set-up
//! (L5 §III-B: rings are set up over a socket before the data path is shared
//! memory only).
//!
//! A message is read in two steps: the fixed prefix (magic, version,
//! length), whose length is checked against
//! [`HANDSHAKE_BYTES_MAX`](splitkv_layout::app::HANDSHAKE_BYTES_MAX) before
//! anything else is read, then exactly the rest. Nothing past the message is
//! read, so a descriptor the peer sends right after it (with its own data
//! byte, [`crate::fd_pass`]) stays in the socket for [`crate::recv_fd`].

use splitkv_layout::app::handshake::handshake_frame_len;
use splitkv_layout::app::HANDSHAKE_HEADER_BYTES;
use splitkv_layout::DecodeError;
use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Bytes of the prefix that gives a message's length (magic, version, length).
const FRAME_PREFIX_BYTES: usize = HANDSHAKE_HEADER_BYTES - 1;

/// Why one handshake message could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The deadline passed before the whole message moved.
    #[error("handshake timed out")]
    TimedOut,
    /// The peer closed the socket before the whole message arrived.
    #[error("peer closed the socket during the handshake")]
    PeerClosed,
    /// The prefix is not a handshake message's (bad magic, or a length over
    /// `HANDSHAKE_BYTES_MAX` or under the header); nothing more was read.
    #[error("malformed handshake message: {0}")]
    Malformed(#[from] DecodeError),
    /// A socket call failed.
    #[error("handshake socket error: {0}")]
    Io(std::io::Error),
}

fn left(deadline: Instant) -> Result<Duration, FrameError> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(d) if !d.is_zero() => Ok(d),
        _ => Err(FrameError::TimedOut),
    }
}

fn io_error(e: std::io::Error) -> FrameError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => FrameError::TimedOut,
        ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
            FrameError::PeerClosed
        }
        _ => FrameError::Io(e),
    }
}

/// Fills `buf` from `stream`, waiting at most until `deadline` in total.
fn read_exact_by(
    stream: &mut UnixStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<(), FrameError> {
    let mut done = 0;
    while done < buf.len() {
        stream
            .set_read_timeout(Some(left(deadline)?))
            .map_err(FrameError::Io)?;
        match stream.read(&mut buf[done..]) {
            Ok(0) => return Err(FrameError::PeerClosed),
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(e)),
        }
    }
    Ok(())
}

/// Reads one whole handshake message from `stream` into `buf` (cleared
/// first; at most `HANDSHAKE_BYTES_MAX` bytes), waiting at most until
/// `deadline`. The message is not decoded (see
/// [`splitkv_layout::app::HandshakeMsg::decode`]); its version is not checked.
///
/// # Errors
/// [`FrameError::Malformed`] for a prefix that is not a handshake message's
/// (the rest is not read); [`FrameError::TimedOut`],
/// [`FrameError::PeerClosed`] or [`FrameError::Io`] from the socket.
pub fn read_frame(
    stream: &mut UnixStream,
    buf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(), FrameError> {
    buf.clear();
    buf.resize(FRAME_PREFIX_BYTES, 0);
    read_exact_by(stream, buf, deadline)?;
    let len = handshake_frame_len(buf)?;
    buf.resize(len, 0);
    read_exact_by(stream, &mut buf[FRAME_PREFIX_BYTES..], deadline)
}

/// Writes `bytes` (one encoded message) to `stream`, waiting at most until
/// `deadline`.
///
/// # Errors
/// [`FrameError::TimedOut`], [`FrameError::PeerClosed`] or [`FrameError::Io`]
/// from the socket.
pub fn write_frame(
    stream: &mut UnixStream,
    bytes: &[u8],
    deadline: Instant,
) -> Result<(), FrameError> {
    let mut done = 0;
    while done < bytes.len() {
        stream
            .set_write_timeout(Some(left(deadline)?))
            .map_err(FrameError::Io)?;
        // MSG_NOSIGNAL: a peer that closed is an error here, never a
        // SIGPIPE in a process that did not ignore it.
        match rustix::net::send(&*stream, &bytes[done..], rustix::net::SendFlags::NOSIGNAL) {
            Ok(0) => return Err(FrameError::PeerClosed),
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(io_error(e.into())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::app::{
        AppMemoryLayout, Hello, APP_RING_CAPACITY_MIN_BYTES, HANDSHAKE_BYTES_MAX,
    };
    use std::io::Write;

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    #[test]
    fn a_hello_round_trips_and_what_follows_stays_unread() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        let c = APP_RING_CAPACITY_MIN_BYTES as u64;
        let layout = AppMemoryLayout::new(c, c).unwrap();
        let mut msg = Vec::new();
        Hello::encode(&layout, 4, &["transfer"], &mut msg).unwrap();
        write_frame(&mut a, &msg, soon()).unwrap();
        a.write_all(b"x").unwrap();
        let mut got = Vec::new();
        read_frame(&mut b, &mut got, soon()).unwrap();
        assert_eq!(got, msg);
        let mut rest = [0u8; 1];
        b.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"x");
    }

    #[test]
    fn bad_prefixes_silence_and_closing_are_typed() {
        let (mut a, mut b) = UnixStream::pair().unwrap();
        a.write_all(&[0xAB; FRAME_PREFIX_BYTES]).unwrap();
        let mut buf = Vec::new();
        assert!(matches!(
            read_frame(&mut b, &mut buf, soon()),
            Err(FrameError::Malformed(DecodeError::BadMagic { .. }))
        ));
        let mut big = Vec::new();
        big.extend_from_slice(&splitkv_layout::app::HANDSHAKE_MAGIC.to_le_bytes());
        big.extend_from_slice(&1u32.to_le_bytes());
        big.extend_from_slice(&((HANDSHAKE_BYTES_MAX + 1) as u32).to_le_bytes());
        a.write_all(&big).unwrap();
        assert!(matches!(
            read_frame(&mut b, &mut buf, soon()),
            Err(FrameError::Malformed(DecodeError::TooLarge { .. }))
        ));
        let start = Instant::now();
        let r = read_frame(&mut b, &mut buf, Instant::now() + Duration::from_millis(50));
        assert!(matches!(r, Err(FrameError::TimedOut)), "{r:?}");
        assert!(start.elapsed() < Duration::from_secs(5));
        a.write_all(&big[..5]).unwrap();
        drop(a);
        assert!(matches!(
            read_frame(&mut b, &mut buf, soon()),
            Err(FrameError::PeerClosed)
        ));
    }
}

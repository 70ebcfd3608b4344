//! The set-up messages on a node's Unix socket (not the rings): the client
//! sends a [`Hello`] (with the memory it created, passed beside it), the node
//! answers [`Welcome`] or [`Refused`]. L5 §III-B sets rings up the same way,
//! over a socket, before the data path is shared memory only.
//!
//! Every message starts with the same 13-byte header, whose first 12 bytes
//! keep their meaning in every layout version, so each side can read the
//! other's version (and, on a stream socket, the message's length) before
//! anything else:
//!
//! | bytes (little endian) | field |
//! |---|---|
//! | 0..4 | [`HANDSHAKE_MAGIC`] ("SKVA") |
//! | 4..8 | `layout_version: u32`, [`APP_LAYOUT_VERSION`] |
//! | 8..12 | `len: u32`, the whole message's bytes, ≤ [`HANDSHAKE_BYTES_MAX`] |
//! | 12 | `kind: u8`: `1` Hello, `2` Welcome, `3` Refused |
//!
//! | message | body after the header |
//! |---|---|
//! | [`Hello`] | `memory_bytes: u64`, `request_ring_capacity_bytes: u64`, `outcome_ring_capacity_bytes: u64`, `in_flight_max: u32`, `name_count: u16` ≤ [`PROCEDURES_PER_HELLO_MAX`], per name `len: u8` then `len` bytes |
//! | [`Welcome`] | `node_id: u16`, `in_flight_max: u32`, `value_bytes_max: u32`, `args_bytes_max: u32`, `result_bytes_max: u32`, `id_count: u16` ≤ [`PROCEDURES_PER_HELLO_MAX`], `id: u32` each ([`PROCEDURE_ID_UNKNOWN`] for an unknown name) |
//! | [`Refused`] | `reason: u8` ([`RefusedReason`]) |
//!
//! A message whose version is not [`APP_LAYOUT_VERSION`] decodes to
//! [`HandshakeError::VersionMismatch`] on either side: the node answers a
//! Hello of another version with `Refused(VersionMismatch)` (in its own
//! version), which the client in turn decodes to the same typed error.
//! A procedure name is 1 to [`PROCEDURE_NAME_BYTES_MAX`] printable ASCII
//! bytes (no spaces); a Hello names each procedure once. The Hello's memory
//! size and ring capacities are validated by [`AppMemoryLayout::new`] and
//! [`AppMemoryLayout::check_size`], so a decoded Hello describes a layout that
//! lies inside the memory.

use super::memory::AppMemoryLayout;
use super::{check_len, AppEncodeError};
use crate::error::{DecodeError, Reader};
use crate::host_nic::{ARGS_BYTES_MAX, RESULT_BYTES_MAX};
use crate::wire::NodeId;
use crate::VALUE_BYTES_MAX;

/// Version of every format in [`crate::app`] (handshake, ring entries,
/// memory layout); raised by any change to one of them.
pub const APP_LAYOUT_VERSION: u32 = 1;

/// First word of every handshake message ("SKVA" in ASCII).
pub const HANDSHAKE_MAGIC: u32 = u32::from_le_bytes(*b"SKVA");

/// Bytes of the header every handshake message starts with.
pub const HANDSHAKE_HEADER_BYTES: usize = 4 + 4 + 4 + 1;

/// Longest procedure name, in bytes.
pub const PROCEDURE_NAME_BYTES_MAX: usize = 64;

/// Most procedure names one Hello asks for.
pub const PROCEDURES_PER_HELLO_MAX: usize = 64;

/// Most requests one connection may have in flight (the client's ask and the
/// node's grant are both at most this).
pub const APP_IN_FLIGHT_MAX: usize = 4096;

/// The procedure id that answers a name the node does not know; never the id
/// of a procedure, and contradictory in a [`crate::app::Request::Call`].
pub const PROCEDURE_ID_UNKNOWN: u32 = u32::MAX;

const HELLO_FIXED_BYTES: usize = 8 + 8 + 8 + 4 + 2;
const WELCOME_FIXED_BYTES: usize = 2 + 4 * 4 + 2;

/// Largest handshake message, in bytes: a Hello with every name at its
/// longest (4 203).
pub const HANDSHAKE_BYTES_MAX: usize = HANDSHAKE_HEADER_BYTES
    + HELLO_FIXED_BYTES
    + PROCEDURES_PER_HELLO_MAX * (1 + PROCEDURE_NAME_BYTES_MAX);

const _: () = assert!(PROCEDURE_NAME_BYTES_MAX <= u8::MAX as usize);
const _: () = assert!(PROCEDURES_PER_HELLO_MAX <= u16::MAX as usize);
const _: () = assert!(APP_IN_FLIGHT_MAX <= u32::MAX as usize);
const _: () = assert!(
    HANDSHAKE_HEADER_BYTES + WELCOME_FIXED_BYTES + 4 * PROCEDURES_PER_HELLO_MAX
        <= HANDSHAKE_BYTES_MAX
);

const KIND_HELLO: u8 = 1;
const KIND_WELCOME: u8 = 2;
const KIND_REFUSED: u8 = 3;

/// Why a handshake message is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The peer speaks another layout version; nothing after the header was
    /// read.
    #[error("application layout version mismatch: ours is {ours}, the peer's is {theirs}")]
    VersionMismatch {
        /// [`APP_LAYOUT_VERSION`].
        ours: u32,
        /// The version in the message.
        theirs: u32,
    },
    /// The bytes are not a valid message of our version.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// Client → node: the connection's memory and what the client wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello<'a> {
    /// The memory's layout, from the announced ring capacities and checked
    /// against the announced memory size.
    pub layout: AppMemoryLayout,
    /// Requests the client wants in flight at once (1 to
    /// [`APP_IN_FLIGHT_MAX`]).
    pub in_flight_max: u32,
    names: &'a [u8],
    name_count: u16,
}

/// The node's limits for one connection, sent in the [`Welcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AppLimits {
    /// Requests the client may have in flight (1 to the Hello's ask).
    pub in_flight_max: u32,
    /// Largest value the node stores (1 to [`VALUE_BYTES_MAX`]).
    pub value_bytes_max: u32,
    /// Largest call arguments (at most [`ARGS_BYTES_MAX`]).
    pub args_bytes_max: u32,
    /// Largest committed result (at most [`RESULT_BYTES_MAX`]).
    pub result_bytes_max: u32,
}

/// Node → client: the connection is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome<'a> {
    /// The node's id in its cluster.
    pub node_id: NodeId,
    /// The node's limits for this connection.
    pub limits: AppLimits,
    ids: &'a [u8],
    id_count: u16,
}

/// Node → client: the connection is refused; the node closes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Refused {
    /// Why.
    pub reason: RefusedReason,
}

/// Why a node refuses a connection.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusedReason {
    /// The Hello's layout version is not the node's.
    VersionMismatch = 1,
    /// The peer's user id is not among the allowed ones.
    UserNotAllowed = 2,
    /// The node has its most connections already.
    ConnectionsFull = 3,
    /// The memory is not sealed, or its size differs from the Hello's.
    BadMemory = 4,
    /// The Hello does not decode, or asks for more than the node's
    /// configuration allows (ring sizes, requests in flight).
    BadHello = 5,
    /// The node is not serving (recovering or draining).
    Unavailable = 6,
}

impl RefusedReason {
    /// Every reason, in wire-value order.
    pub const ALL: [RefusedReason; 6] = [
        RefusedReason::VersionMismatch,
        RefusedReason::UserNotAllowed,
        RefusedReason::ConnectionsFull,
        RefusedReason::BadMemory,
        RefusedReason::BadHello,
        RefusedReason::Unavailable,
    ];
}

/// Any handshake message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeMsg<'a> {
    /// Client → node.
    Hello(Hello<'a>),
    /// Node → client.
    Welcome(Welcome<'a>),
    /// Node → client.
    Refused(Refused),
}

/// Length of the message whose first [`HANDSHAKE_HEADER_BYTES`] − 1 bytes
/// (magic, version, length) are `prefix`, for reading one from a stream. The
/// version is not checked here (see [`HandshakeMsg::decode`]).
///
/// # Errors
/// [`DecodeError::Truncated`], [`DecodeError::BadMagic`], or
/// [`DecodeError::TooLarge`] / [`DecodeError::Inconsistent`] for a length
/// over [`HANDSHAKE_BYTES_MAX`] or under the header.
pub fn handshake_frame_len(prefix: &[u8]) -> Result<usize, DecodeError> {
    let mut r = Reader::new(prefix, "handshake header");
    let magic = r.u32()?;
    if magic != HANDSHAKE_MAGIC {
        return Err(DecodeError::BadMagic {
            what: "handshake message",
            found: magic as u64,
        });
    }
    let _version = r.u32()?;
    let len = r.u32()? as usize;
    check_len("handshake message", len, HANDSHAKE_BYTES_MAX)?;
    if len < HANDSHAKE_HEADER_BYTES {
        return Err(DecodeError::Inconsistent {
            what: "handshake message",
            detail: "length shorter than the header",
        });
    }
    Ok(len)
}

impl<'a> HandshakeMsg<'a> {
    /// Decodes one message that spans exactly `bytes`.
    ///
    /// # Errors
    /// [`HandshakeError::VersionMismatch`] for another layout version (after
    /// the magic checks); [`HandshakeError::Decode`] for a bad magic, a length
    /// field that differs from `bytes.len()`, an unknown kind or reason, a
    /// count or name over its bound, a name that is not printable ASCII or
    /// appears twice, memory that does not match its ring capacities, limits
    /// outside their bounds, or trailing bytes.
    pub fn decode(bytes: &'a [u8]) -> Result<HandshakeMsg<'a>, HandshakeError> {
        let len = handshake_frame_len(bytes)?;
        let theirs = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if theirs != APP_LAYOUT_VERSION {
            return Err(HandshakeError::VersionMismatch {
                ours: APP_LAYOUT_VERSION,
                theirs,
            });
        }
        if len != bytes.len() {
            return Err(DecodeError::Inconsistent {
                what: "handshake message",
                detail: "length field differs from the message's length",
            }
            .into());
        }
        let mut r = Reader::new(bytes, "handshake message");
        r.take(HANDSHAKE_HEADER_BYTES - 1)?;
        let msg = match r.u8()? {
            KIND_HELLO => HandshakeMsg::Hello(read_hello(&mut r)?),
            KIND_WELCOME => HandshakeMsg::Welcome(read_welcome(&mut r)?),
            KIND_REFUSED => {
                let tag = r.u8()?;
                let reason = RefusedReason::ALL
                    .into_iter()
                    .find(|x| *x as u8 == tag)
                    .ok_or(DecodeError::BadTag {
                        what: "Refused reason",
                        tag: tag as u64,
                    })?;
                HandshakeMsg::Refused(Refused { reason })
            }
            kind => {
                return Err(DecodeError::BadTag {
                    what: "handshake message kind",
                    tag: kind as u64,
                }
                .into())
            }
        };
        r.finish()?;
        Ok(msg)
    }

    /// Appends the encoding to `out` (the message was decoded, so it is
    /// valid); [`HandshakeMsg::encoded_len`] bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let kind = match self {
            HandshakeMsg::Hello(_) => KIND_HELLO,
            HandshakeMsg::Welcome(_) => KIND_WELCOME,
            HandshakeMsg::Refused(_) => KIND_REFUSED,
        };
        put_header(out, kind, self.encoded_len());
        match self {
            HandshakeMsg::Hello(h) => {
                put_hello_fixed(out, &h.layout, h.in_flight_max, h.name_count);
                out.extend_from_slice(h.names);
            }
            HandshakeMsg::Welcome(w) => {
                put_welcome_fixed(out, w.node_id, &w.limits, w.id_count);
                out.extend_from_slice(w.ids);
            }
            HandshakeMsg::Refused(f) => out.push(f.reason as u8),
        }
    }

    /// Bytes [`HandshakeMsg::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        HANDSHAKE_HEADER_BYTES
            + match self {
                HandshakeMsg::Hello(h) => HELLO_FIXED_BYTES + h.names.len(),
                HandshakeMsg::Welcome(w) => WELCOME_FIXED_BYTES + w.ids.len(),
                HandshakeMsg::Refused(_) => 1,
            }
    }
}

impl<'a> Hello<'a> {
    /// Appends a Hello for memory of `layout`, asking for `in_flight_max`
    /// requests in flight and the ids of `names`, to `out`.
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] with the error the node's decoder would
    /// return (too many names, a name too long, empty, not printable ASCII or
    /// repeated, `in_flight_max` out of bounds); nothing is appended then.
    pub fn encode(
        layout: &AppMemoryLayout,
        in_flight_max: u32,
        names: &[&str],
        out: &mut Vec<u8>,
    ) -> Result<(), AppEncodeError> {
        check_len("Hello names", names.len(), PROCEDURES_PER_HELLO_MAX)?;
        for n in names {
            check_len("procedure name", n.len(), PROCEDURE_NAME_BYTES_MAX)?;
        }
        let start = out.len();
        let len = HANDSHAKE_HEADER_BYTES
            + HELLO_FIXED_BYTES
            + names.iter().map(|n| 1 + n.len()).sum::<usize>();
        put_header(out, KIND_HELLO, len);
        put_hello_fixed(out, layout, in_flight_max, names.len() as u16);
        for n in names {
            out.push(n.len() as u8);
            out.extend_from_slice(n.as_bytes());
        }
        validate_encoding(out, start)
    }

    /// The procedure names asked for, in order.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + 'a {
        let mut r = Reader::new(self.names, "Hello names");
        (0..self.name_count).map_while(move |_| read_name(&mut r).ok())
    }

    /// Number of names asked for.
    pub fn name_count(&self) -> usize {
        self.name_count as usize
    }
}

impl<'a> Welcome<'a> {
    /// Appends a Welcome to `out`: the node's id, its limits, and for each
    /// name of the Hello in order its procedure id or `None` if unknown.
    ///
    /// # Errors
    /// [`AppEncodeError::Invalid`] for more than [`PROCEDURES_PER_HELLO_MAX`]
    /// ids, `Some(`[`PROCEDURE_ID_UNKNOWN`]`)`, or limits out of bounds;
    /// nothing is appended then.
    pub fn encode(
        node_id: NodeId,
        limits: &AppLimits,
        ids: &[Option<u32>],
        out: &mut Vec<u8>,
    ) -> Result<(), AppEncodeError> {
        check_len("Welcome procedure ids", ids.len(), PROCEDURES_PER_HELLO_MAX)?;
        if ids.contains(&Some(PROCEDURE_ID_UNKNOWN)) {
            return Err(DecodeError::Inconsistent {
                what: "Welcome",
                detail: "a procedure with the id reserved for unknown names",
            }
            .into());
        }
        let start = out.len();
        put_header(
            out,
            KIND_WELCOME,
            HANDSHAKE_HEADER_BYTES + WELCOME_FIXED_BYTES + 4 * ids.len(),
        );
        put_welcome_fixed(out, node_id, limits, ids.len() as u16);
        for id in ids {
            out.extend_from_slice(&id.unwrap_or(PROCEDURE_ID_UNKNOWN).to_le_bytes());
        }
        validate_encoding(out, start)
    }

    /// The procedure ids, in the order of the Hello's names; `None` for a
    /// name the node does not know.
    pub fn procedure_ids(&self) -> impl Iterator<Item = Option<u32>> + 'a {
        self.ids.chunks_exact(4).map(|c| {
            let id = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            (id != PROCEDURE_ID_UNKNOWN).then_some(id)
        })
    }

    /// Checks that this answers `hello`: one id per name, and no more
    /// requests in flight than asked for.
    ///
    /// # Errors
    /// [`DecodeError::Inconsistent`] otherwise.
    pub fn check_answers(&self, hello: &Hello<'_>) -> Result<(), DecodeError> {
        if self.id_count != hello.name_count {
            return Err(DecodeError::Inconsistent {
                what: "Welcome",
                detail: "procedure id count differs from the Hello's names",
            });
        }
        if self.limits.in_flight_max > hello.in_flight_max {
            return Err(DecodeError::Inconsistent {
                what: "Welcome",
                detail: "grants more requests in flight than asked",
            });
        }
        Ok(())
    }
}

impl Refused {
    /// Appends the encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        HandshakeMsg::Refused(*self).encode(out)
    }
}

fn put_header(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.extend_from_slice(&HANDSHAKE_MAGIC.to_le_bytes());
    out.extend_from_slice(&APP_LAYOUT_VERSION.to_le_bytes());
    out.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
    out.push(kind);
}

fn put_hello_fixed(out: &mut Vec<u8>, layout: &AppMemoryLayout, in_flight_max: u32, n: u16) {
    for v in [
        layout.memory_bytes,
        layout.request_ring_capacity_bytes,
        layout.outcome_ring_capacity_bytes,
    ] {
        out.extend_from_slice(&(v as u64).to_le_bytes());
    }
    out.extend_from_slice(&in_flight_max.to_le_bytes());
    out.extend_from_slice(&n.to_le_bytes());
}

fn put_welcome_fixed(out: &mut Vec<u8>, node_id: NodeId, l: &AppLimits, n: u16) {
    out.extend_from_slice(&node_id.to_le_bytes());
    for v in [
        l.in_flight_max,
        l.value_bytes_max,
        l.args_bytes_max,
        l.result_bytes_max,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&n.to_le_bytes());
}

/// One set of rules: what an encoder appended after `start` must decode;
/// otherwise it is removed and the decoder's error returned.
fn validate_encoding(out: &mut Vec<u8>, start: usize) -> Result<(), AppEncodeError> {
    match HandshakeMsg::decode(&out[start..]) {
        Ok(_) => Ok(()),
        Err(e) => {
            out.truncate(start);
            Err(match e {
                HandshakeError::Decode(d) => d.into(),
                // Unreachable: the encoder writes our version.
                HandshakeError::VersionMismatch { .. } => DecodeError::Inconsistent {
                    what: "handshake message",
                    detail: "version",
                }
                .into(),
            })
        }
    }
}

fn check_in_flight(what: &'static str, n: u32) -> Result<(), DecodeError> {
    check_len(what, n as usize, APP_IN_FLIGHT_MAX)?;
    if n == 0 {
        return Err(DecodeError::Inconsistent {
            what,
            detail: "zero requests in flight",
        });
    }
    Ok(())
}

fn read_hello<'a>(r: &mut Reader<'a>) -> Result<Hello<'a>, DecodeError> {
    let memory_bytes = r.u64()?;
    let request = r.u64()?;
    let outcome = r.u64()?;
    let layout = AppMemoryLayout::new(request, outcome)?;
    layout.check_size(memory_bytes)?;
    let in_flight_max = r.u32()?;
    check_in_flight("Hello in_flight_max", in_flight_max)?;
    let name_count = r.u16()?;
    check_len("Hello names", name_count as usize, PROCEDURES_PER_HELLO_MAX)?;
    let start = r.position();
    let mut check = r.clone();
    let mut seen: [&str; PROCEDURES_PER_HELLO_MAX] = [""; PROCEDURES_PER_HELLO_MAX];
    for i in 0..name_count as usize {
        let name = read_name(&mut check)?;
        if seen[..i].contains(&name) {
            return Err(DecodeError::Inconsistent {
                what: "Hello",
                detail: "a procedure name asked for twice",
            });
        }
        seen[i] = name;
    }
    let names = r.take(check.position() - start)?;
    Ok(Hello {
        layout,
        in_flight_max,
        names,
        name_count,
    })
}

fn read_name<'a>(r: &mut Reader<'a>) -> Result<&'a str, DecodeError> {
    let len = r.u8()? as usize;
    check_len("procedure name", len, PROCEDURE_NAME_BYTES_MAX)?;
    let bytes = r.take(len)?;
    if len == 0 || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(DecodeError::Inconsistent {
            what: "procedure name",
            detail: "empty or not printable ASCII",
        });
    }
    std::str::from_utf8(bytes).map_err(|_| DecodeError::Inconsistent {
        what: "procedure name",
        detail: "not UTF-8",
    })
}

fn read_welcome<'a>(r: &mut Reader<'a>) -> Result<Welcome<'a>, DecodeError> {
    let node_id = r.u16()?;
    let limits = AppLimits {
        in_flight_max: r.u32()?,
        value_bytes_max: r.u32()?,
        args_bytes_max: r.u32()?,
        result_bytes_max: r.u32()?,
    };
    check_in_flight("Welcome in_flight_max", limits.in_flight_max)?;
    check_len(
        "Welcome value_bytes_max",
        limits.value_bytes_max as usize,
        VALUE_BYTES_MAX,
    )?;
    if limits.value_bytes_max == 0 {
        return Err(DecodeError::Inconsistent {
            what: "Welcome",
            detail: "a value limit of zero bytes",
        });
    }
    check_len(
        "Welcome args_bytes_max",
        limits.args_bytes_max as usize,
        ARGS_BYTES_MAX,
    )?;
    check_len(
        "Welcome result_bytes_max",
        limits.result_bytes_max as usize,
        RESULT_BYTES_MAX,
    )?;
    let id_count = r.u16()?;
    check_len(
        "Welcome procedure ids",
        id_count as usize,
        PROCEDURES_PER_HELLO_MAX,
    )?;
    let ids = r.take(4 * id_count as usize)?;
    Ok(Welcome {
        node_id,
        limits,
        ids,
        id_count,
    })
}

//! Reassembly of fragmented messages (the receive half of the batcher's
//! fragmentation, [`super::batch`]). Sessions deliver each peer's packets
//! exactly once and in order, so a fragmented body's pieces arrive as
//! consecutive messages from one sender: one buffer per peer suffices,
//! bounded by [`MESSAGE_BYTES_MAX`]. Whole messages pass through without a
//! copy.

use splitkv_layout::wire::{MsgHeader, MsgKind, NodeId, MESSAGE_BYTES_MAX};

/// Why a fragmented message was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FragmentError {
    /// The pieces add up to more than [`MESSAGE_BYTES_MAX`].
    #[error("reassembled message from node {src} exceeds {MESSAGE_BYTES_MAX} B")]
    TooLarge {
        /// Sender.
        src: NodeId,
    },
    /// A piece of another kind than the first arrived mid-message.
    #[error("fragment of another kind mid-message from node {src}")]
    KindChanged {
        /// Sender.
        src: NodeId,
    },
    /// No such sender.
    #[error("no node {src}")]
    BadSource {
        /// Sender.
        src: NodeId,
    },
}

/// Reassembly counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FragmentStats {
    /// Messages reassembled from fragments.
    pub reassembled: u64,
    /// Fragmented messages discarded ([`FragmentError`]).
    pub discarded: u64,
}

#[derive(Debug, Default)]
struct Partial {
    /// Kind of the message being reassembled (`None`: none in progress).
    kind: Option<MsgKind>,
    /// The sender incarnation the pieces came from.
    incarnation: u32,
    buf: Vec<u8>,
    /// The last call returned `buf`; clear it before the next piece.
    done: bool,
    /// After an error: skip pieces until the end of that message.
    discarding: bool,
}

/// Per-sender reassembly buffers of one node (loopback included).
#[derive(Debug)]
pub struct Reassembly {
    peers: Vec<Partial>,
    stats: FragmentStats,
}

impl Reassembly {
    /// Buffers for senders `0..nodes` (allocated at the first fragment of
    /// each sender, then reused).
    pub fn new(nodes: usize) -> Reassembly {
        Reassembly {
            peers: (0..nodes).map(|_| Partial::default()).collect(),
            stats: FragmentStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> FragmentStats {
        self.stats
    }

    /// Takes one message `(h, raw)` from `src` (incarnation `incarnation`)
    /// and returns a complete body to dispatch: `raw` itself for a whole
    /// message (zero copy), the reassembled buffer for a last fragment, or
    /// `Ok(None)` while pieces are pending. A new incarnation of `src`
    /// discards what its previous one left unfinished.
    ///
    /// # Errors
    /// [`FragmentError`]: the message in progress is discarded (counted),
    /// including its pieces still to come.
    pub fn on_message<'a>(
        &'a mut self,
        src: NodeId,
        incarnation: u32,
        h: &MsgHeader,
        raw: &'a [u8],
    ) -> Result<Option<(MsgKind, &'a [u8])>, FragmentError> {
        let Some(p) = self.peers.get_mut(src as usize) else {
            return Err(FragmentError::BadSource { src });
        };
        if p.done || p.incarnation != incarnation {
            p.buf.clear();
            p.kind = None;
            p.done = false;
            p.discarding &= p.incarnation == incarnation;
            p.incarnation = incarnation;
        }
        if p.discarding {
            p.discarding = h.frag_more();
            return Ok(None);
        }
        let Some(kind) = p.kind else {
            if !h.frag_more() {
                return Ok(Some((h.kind, raw)));
            }
            if p.buf.capacity() == 0 {
                p.buf.reserve_exact(MESSAGE_BYTES_MAX);
            }
            p.kind = Some(h.kind);
            p.buf.extend_from_slice(raw);
            return Ok(None);
        };
        let err = if kind != h.kind {
            Some(FragmentError::KindChanged { src })
        } else if p.buf.len() + raw.len() > MESSAGE_BYTES_MAX {
            Some(FragmentError::TooLarge { src })
        } else {
            None
        };
        if let Some(e) = err {
            p.buf.clear();
            p.kind = None;
            p.discarding = h.frag_more();
            self.stats.discarded += 1;
            return Err(e);
        }
        p.buf.extend_from_slice(raw);
        if h.frag_more() {
            return Ok(None);
        }
        p.done = true;
        self.stats.reassembled += 1;
        Ok(Some((kind, &p.buf)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::wire::MSG_FLAG_FRAG_MORE;

    fn piece(kind: MsgKind, more: bool, len: usize) -> MsgHeader {
        MsgHeader {
            flags: if more { MSG_FLAG_FRAG_MORE } else { 0 },
            ..MsgHeader::whole(kind, len as u32)
        }
    }

    #[test]
    fn whole_messages_pass_through_and_pieces_join() {
        let mut r = Reassembly::new(2);
        let whole = [1u8, 2, 3];
        let got = r.on_message(1, 1, &piece(MsgKind::Log, false, 3), &whole);
        assert_eq!(
            got.unwrap().unwrap().1.as_ptr(),
            whole.as_ptr(),
            "zero copy"
        );
        assert_eq!(
            r.on_message(1, 1, &piece(MsgKind::Log, true, 2), &[4, 5]),
            Ok(None)
        );
        let got = r.on_message(1, 1, &piece(MsgKind::Log, false, 1), &[6]);
        assert_eq!(got, Ok(Some((MsgKind::Log, &[4u8, 5, 6][..]))));
        assert_eq!(r.stats().reassembled, 1);
    }

    #[test]
    fn the_size_bound_discards_the_whole_message() {
        let mut r = Reassembly::new(2);
        let chunk = vec![0u8; MESSAGE_BYTES_MAX / 2];
        let h = piece(MsgKind::Commit, true, chunk.len());
        assert_eq!(r.on_message(0, 1, &h, &chunk), Ok(None));
        assert_eq!(
            r.on_message(0, 1, &h, &chunk),
            Ok(None),
            "exactly at the bound"
        );
        assert_eq!(
            r.on_message(0, 1, &h, &[0]),
            Err(FragmentError::TooLarge { src: 0 })
        );
        // Its last piece is skipped; the next message is whole again.
        assert_eq!(
            r.on_message(0, 1, &piece(MsgKind::Commit, false, 1), &[9]),
            Ok(None)
        );
        let got = r.on_message(0, 1, &piece(MsgKind::LogAck, false, 1), &[7]);
        assert_eq!(got, Ok(Some((MsgKind::LogAck, &[7u8][..]))));
        assert_eq!(r.stats().discarded, 1);
    }

    #[test]
    fn a_kind_change_or_a_new_incarnation_drops_the_partial() {
        let mut r = Reassembly::new(2);
        r.on_message(1, 1, &piece(MsgKind::Log, true, 1), &[1])
            .unwrap();
        assert_eq!(
            r.on_message(1, 1, &piece(MsgKind::Commit, false, 1), &[2]),
            Err(FragmentError::KindChanged { src: 1 })
        );
        r.on_message(1, 1, &piece(MsgKind::Log, true, 1), &[1])
            .unwrap();
        let got = r.on_message(1, 2, &piece(MsgKind::Log, false, 1), &[3]);
        assert_eq!(
            got,
            Ok(Some((MsgKind::Log, &[3u8][..]))),
            "fresh after a restart"
        );
        assert!(r
            .on_message(5, 1, &piece(MsgKind::Log, false, 0), &[])
            .is_err());
    }
}

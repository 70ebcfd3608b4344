//! The application API (L5 §3: applications talk to the node through
//! shared-memory rings): submit a shipped-procedure request, poll outcomes.

use splitkv_layout::host_nic::{HostToNic, NicToHost, TxOutcome, TxRequest, ARGS_BYTES_MAX};
use splitkv_layout::ring::{RingConsumer, RingError, RingProducer};
use splitkv_layout::DecodeError;

/// Why a submission or poll failed. A failed submission changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Arguments over [`ARGS_BYTES_MAX`].
    #[error("procedure arguments of {len} B exceed the maximum {max} B")]
    ArgsTooLarge {
        /// Bytes given.
        len: usize,
        /// Limit.
        max: usize,
    },
    /// The request ring is full: poll outcomes and try again.
    #[error("request ring full")]
    Busy,
    /// An outcome entry did not decode.
    #[error("bad outcome entry: {0}")]
    BadOutcome(#[from] DecodeError),
    /// A ring failed.
    #[error("ring: {0}")]
    Ring(RingError),
}

/// One application's connection to its node.
#[derive(Debug)]
pub struct Client {
    requests: RingProducer,
    outcomes: RingConsumer,
    enc: Vec<u8>,
    dec: Vec<u8>,
}

impl Client {
    /// A client over a request ring (to the NIC runtime) and an outcome ring (from it).
    pub fn new(requests: RingProducer, outcomes: RingConsumer) -> Client {
        Client {
            requests,
            outcomes,
            enc: Vec::with_capacity(2048),
            dec: Vec::with_capacity(2048),
        }
    }

    /// Submits `procedure(args)` tagged with `req_id` (echoed in its outcome).
    pub fn submit(&mut self, req_id: u64, procedure: u32, args: &[u8]) -> Result<(), ClientError> {
        if args.len() > ARGS_BYTES_MAX {
            return Err(ClientError::ArgsTooLarge {
                len: args.len(),
                max: ARGS_BYTES_MAX,
            });
        }
        self.enc.clear();
        HostToNic::TxRequest(TxRequest {
            req_id,
            procedure,
            args,
        })
        .encode(&mut self.enc);
        match self.requests.try_push(&self.enc) {
            Ok(_) => Ok(()),
            Err(RingError::Full) => Err(ClientError::Busy),
            Err(e) => Err(ClientError::Ring(e)),
        }
    }

    /// Pushes `bytes` as one raw request-ring entry, bypassing encoding. For
    /// testing how the node treats malformed entries; applications use
    /// [`Client::submit`].
    pub fn submit_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        match self.requests.try_push(bytes) {
            Ok(_) => Ok(()),
            Err(RingError::Full) => Err(ClientError::Busy),
            Err(e) => Err(ClientError::Ring(e)),
        }
    }

    /// Calls `f` for each available outcome (at most `max`); returns how many.
    pub fn poll(
        &mut self,
        max: usize,
        mut f: impl FnMut(&TxOutcome<'_>),
    ) -> Result<usize, ClientError> {
        let mut n = 0;
        while n < max {
            match self.outcomes.try_pop(&mut self.dec) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(ClientError::Ring(e)),
            }
            match NicToHost::decode(&self.dec)? {
                NicToHost::TxOutcome(o) => f(&o),
            }
            n += 1;
        }
        Ok(n)
    }
}

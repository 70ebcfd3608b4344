//! A node's application connection (`splitkv_client::Connection`, L5 §III)
//! as a load generator's port: each drawn call is one request entry on the
//! request ring, each outcome entry one outcome, with the load generator's
//! own request ids. A workload's procedure ids (what its generator draws)
//! are mapped to the ids the node resolved from their names at connect; the
//! built-in `Txn`'s id sends the call as a `Txn` request.

use splitkv_client::{Connection, ConnectionError};
use splitkv_layout::app::{Outcome, Request, Txn};
use splitkv_layout::host_nic::TxStatus;
use splitkv_workloads::loadgen::TxPort;
use splitkv_workloads::TXN_PROCEDURE_ID;

/// Why the connection cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The rings failed (corrupt indices, an entry too large).
    #[error("connection: {0}")]
    Connection(#[from] ConnectionError),
    /// The node closed its end.
    #[error("the node closed the connection")]
    Closed,
    /// A drawn procedure id the workload does not name.
    #[error("procedure id {0} is not one of the workload's")]
    UnknownProcedure(u32),
    /// A request that does not encode (arguments or `Txn` over a limit).
    #[error("request {req_id} does not encode: {detail}")]
    Encode {
        /// The request.
        req_id: u64,
        /// Why.
        detail: String,
    },
    /// An outcome that does not decode, or a status a procedure cannot have.
    #[error("bad outcome from the node: {0}")]
    BadOutcome(String),
}

/// The port (module docs).
pub struct AppPort {
    conn: Connection,
    /// Node procedure id of each workload procedure id.
    ids: Vec<u32>,
    enc: Vec<u8>,
    dec: Vec<u8>,
    /// Polls that found nothing since the socket was last checked.
    empty_polls: u32,
}

/// Empty polls between two checks that the node still holds its end (a
/// system call, kept off the busy path).
const EMPTY_POLLS_PER_CLOSE_CHECK: u32 = 4096;

impl AppPort {
    /// A port over `conn`, workload procedure `i` being node procedure `ids[i]`.
    pub fn new(conn: Connection, ids: Vec<u32>) -> AppPort {
        AppPort {
            conn,
            ids,
            enc: Vec::new(),
            dec: Vec::new(),
            empty_polls: 0,
        }
    }
}

impl TxPort for AppPort {
    type Error = PortError;

    fn submit(&mut self, req_id: u64, procedure: u32, args: &[u8]) -> Result<bool, PortError> {
        let encode_error = |detail: String| PortError::Encode { req_id, detail };
        let request = if procedure == TXN_PROCEDURE_ID {
            let txn = Txn::decode(args).map_err(|e| encode_error(e.to_string()))?;
            Request::Txn { req_id, txn }
        } else {
            let procedure = *self
                .ids
                .get(procedure as usize)
                .ok_or(PortError::UnknownProcedure(procedure))?;
            Request::Call {
                req_id,
                procedure,
                args,
            }
        };
        self.enc.clear();
        request
            .encode(&mut self.enc)
            .map_err(|e| encode_error(e.to_string()))?;
        Ok(self.conn.try_send(&self.enc)?)
    }

    fn poll(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(u64, TxStatus, &[u8]),
    ) -> Result<usize, PortError> {
        let mut n = 0;
        while n < max && self.conn.try_recv(&mut self.dec)? {
            let o = Outcome::decode(&self.dec).map_err(|e| PortError::BadOutcome(e.to_string()))?;
            let status = o.status.to_tx_status().ok_or_else(|| {
                PortError::BadOutcome(format!("status {:?} for request {}", o.status, o.req_id))
            })?;
            each(o.req_id, status, o.body);
            n += 1;
        }
        if n > 0 {
            self.empty_polls = 0;
            return Ok(n);
        }
        self.empty_polls += 1;
        if self.empty_polls >= EMPTY_POLLS_PER_CLOSE_CHECK {
            self.empty_polls = 0;
            if self.conn.peer_closed() {
                return Err(PortError::Closed);
            }
        }
        Ok(0)
    }
}

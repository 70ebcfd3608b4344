//! The client side of Elle's read-write register workload (Kingsbury &
//! Alvaro, VLDB'20 §4): its generator ([`RegisterGenerator`], unique `u64`
//! values over a small fixed set of keys) and the completion of a committed
//! transaction's reads from its result ([`complete`]). The shipped procedure
//! is the node side (`splitkv_bench::register::RegisterTxn`).
//!
//! A register is stored as its value, 8 bytes little-endian; the empty value
//! is the initial state every key is loaded with (no write yet), which a read
//! returns as `null`.

use crate::history_gen::{MicroOpSource, TxShape, WorkloadConfigError, MIXED_OPS_MAX};
use crate::list_append::codec::{self, ResultError, MICRO_OPS_PER_TX_MAX};
use crate::list_append::generator::ELEMENT_COUNTER_BITS;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_check::history::{MicroOp, ReadValue};
use splitkv_layout::host_nic::RESULT_BYTES_MAX;

/// Name of the register procedure (what an application resolves at connect).
pub const REGISTER_PROCEDURE: &str = "register";

/// Table id of the registers.
pub const REGISTER_TABLE: u32 = 21;

/// Bytes of a stored register: the `value_bytes_max` every node of a register
/// cluster is configured with.
pub const REGISTER_VALUE_BYTES: usize = 8;

/// Encoded bytes of one read in a result: a presence tag, then the value.
pub const REGISTER_READ_RESULT_BYTES: usize = 1 + REGISTER_VALUE_BYTES;

const _: () = assert!(MICRO_OPS_PER_TX_MAX * REGISTER_READ_RESULT_BYTES <= RESULT_BYTES_MAX);

/// The micro-ops of a committed register transaction as it completed.
///
/// # Errors
/// [`ResultError`] if `result` does not hold exactly one value per read.
pub fn complete(invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
    codec::complete_reads(invoked, result, |r, i| match r.u8(i)? {
        0 => Ok(None),
        1 => Ok(Some(ReadValue::Register(r.u64(i)?))),
        tag => Err(ResultError::BadTag { op: i, tag }),
    })
}

/// Shape of a register run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegisterConfig {
    /// Keys `0..keys`, each loaded in the initial (empty) state.
    pub keys: u64,
    /// What the transactions look like.
    pub shape: TxShape,
}

impl RegisterConfig {
    /// A configuration over `keys` keys.
    ///
    /// # Errors
    /// [`WorkloadConfigError::TooFewKeys`] if `keys` is below what one
    /// transaction of `shape` needs ([`TxShape::keys_min`]).
    pub fn new(keys: u64, shape: TxShape) -> Result<RegisterConfig, WorkloadConfigError> {
        shape.check(keys)?;
        Ok(RegisterConfig { keys, shape })
    }
}

/// One client's generator of register transactions (values `client << 40 | n`).
#[derive(Debug, Clone)]
pub struct RegisterGenerator {
    cfg: RegisterConfig,
    client: u64,
    rng: Xoshiro256PlusPlus,
    counter: u64,
}

impl RegisterGenerator {
    /// Client `client`'s generator, seeded with `seed`.
    pub fn new(cfg: RegisterConfig, client: u64, seed: u64) -> RegisterGenerator {
        RegisterGenerator {
            cfg,
            client,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (client + 1).wrapping_mul(0xD1B5_4A32_D192_ED03),
            ),
            counter: 0,
        }
    }

    fn write(&mut self, key: u64) -> MicroOp {
        self.counter += 1;
        MicroOp::Write {
            key,
            value: (self.client + 1) << ELEMENT_COUNTER_BITS | self.counter,
        }
    }

    /// Draws the next transaction's micro-ops (reads carry no value yet).
    pub fn draw(&mut self) -> Vec<MicroOp> {
        let keys = self.cfg.keys;
        match self.cfg.shape {
            TxShape::Mixed => {
                let n = self.rng.gen_range(1..=MIXED_OPS_MAX);
                (0..n)
                    .map(|_| {
                        let key = self.rng.gen_range(0..keys);
                        if self.rng.gen_bool(0.5) {
                            MicroOp::Read { key, value: None }
                        } else {
                            self.write(key)
                        }
                    })
                    .collect()
            }
            TxShape::WriteSkew => {
                let a = self.rng.gen_range(0..keys);
                let b = (a + self.rng.gen_range(1..keys)) % keys;
                let w = if self.rng.gen_bool(0.5) { a } else { b };
                let write = self.write(w);
                vec![
                    MicroOp::Read {
                        key: a,
                        value: None,
                    },
                    MicroOp::Read {
                        key: b,
                        value: None,
                    },
                    write,
                ]
            }
            TxShape::GetsPuts { gets, puts } => {
                let keys = distinct_keys(&mut self.rng, keys, gets as usize + puts as usize);
                let (read, written) = keys.split_at(gets as usize);
                let mut ops: Vec<MicroOp> = read
                    .iter()
                    .map(|&key| MicroOp::Read { key, value: None })
                    .collect();
                ops.extend(written.iter().map(|&key| self.write(key)));
                ops
            }
        }
    }
}

/// `n` distinct keys drawn uniformly from `0..keys` (`n <= keys`, at most
/// [`MICRO_OPS_PER_TX_MAX`]), in drawing order.
pub fn distinct_keys(rng: &mut impl Rng, keys: u64, n: usize) -> Vec<u64> {
    debug_assert!(n as u64 <= keys && n <= MICRO_OPS_PER_TX_MAX);
    let mut drawn = Vec::with_capacity(n);
    while drawn.len() < n {
        let key = rng.gen_range(0..keys);
        if !drawn.contains(&key) {
            drawn.push(key);
        }
    }
    drawn
}

impl MicroOpSource for RegisterGenerator {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        let ops = self.draw();
        codec::encode(&ops, args);
        Some(ops)
    }

    fn complete(&self, invoked: &[MicroOp], result: &[u8]) -> Result<Vec<MicroOp>, ResultError> {
        complete(invoked, result)
    }
}

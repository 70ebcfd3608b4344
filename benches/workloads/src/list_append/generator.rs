//! The list-append transaction generator (Elle's `append` generator, Kingsbury
//! & Alvaro, VLDB'20 §5): seeded, over a small window of active keys so many
//! transactions in flight contend, with unique elements and keys retired after
//! a bounded number of appends.
//!
//! Several clients (one generator each, on different nodes) share the keys
//! without talking to each other: window slot `i` holds key
//! `generation * active_keys + i`, and each client moves slot `i` to its next
//! generation after it has drawn its share of the slot's appends
//! (`LIST_ELEMENTS_MAX / clients`; appends of transactions that failed are
//! given back while the key is active), so no key ever receives more than
//! [`LIST_ELEMENTS_MAX`] appends whatever the clients' relative speeds. The key
//! space is bounded ([`ListAppendConfig::keys_total`]) so the cluster can load
//! every key's empty list before the run; a generator that has used it up
//! draws nothing more.

use super::LIST_ELEMENTS_MAX;
use crate::history_gen::{MicroOpSource, TxShape, WorkloadConfigError, MIXED_OPS_MAX};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_check::history::MicroOp;

/// Bits of an element below the client id (the client's counter).
pub const ELEMENT_COUNTER_BITS: u32 = 40;

/// Shape of a list-append run shared by all its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ListAppendConfig {
    /// Keys in the active window (the contention knob: fewer is hotter).
    pub active_keys: u64,
    /// Clients drawing from the same keys.
    pub clients: u64,
    /// Generations each window slot may go through: the key space is
    /// `active_keys * generations_max` keys.
    pub generations_max: u64,
    /// What the transactions look like.
    pub shape: TxShape,
}

impl ListAppendConfig {
    /// A configuration whose key space is large enough for `clients` clients
    /// drawing `budget_per_client` transactions each, even if every append of
    /// one client fell on one window slot.
    ///
    /// # Errors
    /// [`WorkloadConfigError`] if `active_keys` is below what one transaction
    /// of `shape` needs ([`TxShape::keys_min`]) or there are more clients
    /// than [`LIST_ELEMENTS_MAX`] (each needs a share of every key's appends).
    pub fn new(
        active_keys: u64,
        clients: u64,
        budget_per_client: u64,
        shape: TxShape,
    ) -> Result<ListAppendConfig, WorkloadConfigError> {
        shape.check(active_keys)?;
        if clients == 0 || clients > LIST_ELEMENTS_MAX as u64 {
            return Err(WorkloadConfigError::Clients {
                clients,
                max: LIST_ELEMENTS_MAX as u64,
            });
        }
        let share = LIST_ELEMENTS_MAX as u64 / clients;
        // Elle's shapes keep the bound they were sized with (the mix's most
        // micro-ops per transaction), so that their runs stay as they were.
        let appends_per_tx = match shape {
            TxShape::GetsPuts { puts, .. } => puts as u64,
            TxShape::Mixed | TxShape::WriteSkew => MIXED_OPS_MAX as u64,
        };
        let appends_max = budget_per_client * appends_per_tx;
        Ok(ListAppendConfig {
            active_keys,
            clients,
            generations_max: appends_max.div_ceil(share) + 1,
            shape,
        })
    }

    /// Appends one client may draw on one key before retiring it.
    pub fn appends_per_key_per_client(&self) -> usize {
        LIST_ELEMENTS_MAX / self.clients as usize
    }

    /// Keys a run may touch: ids `0..keys_total()`, each loaded as the empty list.
    pub fn keys_total(&self) -> u64 {
        self.active_keys * self.generations_max
    }
}

/// One client's generator of list-append transactions.
#[derive(Debug, Clone)]
pub struct ListAppendGenerator {
    cfg: ListAppendConfig,
    client: u64,
    rng: Xoshiro256PlusPlus,
    counter: u64,
    generation: Vec<u64>,
    appends: Vec<usize>,
}

impl ListAppendGenerator {
    /// Client `client`'s generator (elements `client << 40 | n`), seeded with `seed`.
    pub fn new(cfg: ListAppendConfig, client: u64, seed: u64) -> ListAppendGenerator {
        ListAppendGenerator {
            cfg,
            client,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (client + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            counter: 0,
            generation: vec![0; cfg.active_keys as usize],
            appends: vec![0; cfg.active_keys as usize],
        }
    }

    fn key(&self, slot: usize) -> u64 {
        self.generation[slot] * self.cfg.active_keys + slot as u64
    }

    fn read(&mut self, slot: usize) -> MicroOp {
        MicroOp::Read {
            key: self.key(slot),
            value: None,
        }
    }

    /// An append to the key of `slot`, retiring the key first if this client
    /// used up its share of it; `None` when the slot is out of generations.
    fn append(&mut self, slot: usize) -> Option<MicroOp> {
        if self.appends[slot] == self.cfg.appends_per_key_per_client() {
            if self.generation[slot] + 1 >= self.cfg.generations_max {
                return None;
            }
            self.generation[slot] += 1;
            self.appends[slot] = 0;
        }
        self.appends[slot] += 1;
        self.counter += 1;
        Some(MicroOp::Append {
            key: self.key(slot),
            element: (self.client + 1) << ELEMENT_COUNTER_BITS | self.counter,
        })
    }

    /// Draws the next transaction's micro-ops (reads carry no value yet), or
    /// `None` once the key space is used up.
    pub fn draw(&mut self) -> Option<Vec<MicroOp>> {
        let slots = self.cfg.active_keys as usize;
        match self.cfg.shape {
            TxShape::Mixed => {
                let n = self.rng.gen_range(1..=MIXED_OPS_MAX);
                let mut ops = Vec::with_capacity(n);
                for _ in 0..n {
                    let slot = self.rng.gen_range(0..slots);
                    if self.rng.gen_bool(0.5) {
                        ops.push(self.read(slot));
                    } else {
                        ops.push(self.append(slot)?);
                    }
                }
                Some(ops)
            }
            TxShape::WriteSkew => {
                let a = self.rng.gen_range(0..slots);
                let b = (a + self.rng.gen_range(1..slots)) % slots;
                let (ra, rb) = (self.read(a), self.read(b));
                let w = if self.rng.gen_bool(0.5) { a } else { b };
                let append = self.append(w)?;
                Some(vec![ra, rb, append])
            }
            TxShape::GetsPuts { gets, puts } => {
                let n = gets as usize + puts as usize;
                let slots = crate::register::distinct_keys(&mut self.rng, slots as u64, n);
                let (read, appended) = slots.split_at(gets as usize);
                let mut ops: Vec<MicroOp> = read.iter().map(|&s| self.read(s as usize)).collect();
                for &slot in appended {
                    ops.push(self.append(slot as usize)?);
                }
                Some(ops)
            }
        }
    }
}

impl MicroOpSource for ListAppendGenerator {
    fn next_tx(&mut self, args: &mut Vec<u8>) -> Option<Vec<MicroOp>> {
        let ops = self.draw()?;
        super::codec::encode(&ops, args);
        Some(ops)
    }

    fn complete(
        &self,
        invoked: &[MicroOp],
        result: &[u8],
    ) -> Result<Vec<MicroOp>, super::codec::ResultError> {
        super::complete(invoked, result)
    }

    /// A failed transaction's appends never become visible: they no longer
    /// count against their key's share while the key is still active.
    fn failed(&mut self, invoked: &[MicroOp]) {
        for op in invoked {
            if let MicroOp::Append { key, .. } = *op {
                let slot = (key % self.cfg.active_keys) as usize;
                if self.key(slot) == key {
                    self.appends[slot] -= 1;
                }
            }
        }
    }
}

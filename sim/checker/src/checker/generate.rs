//! Valid histories for testing the checker: a serial in-memory execution of
//! random list-append or register transactions, given timestamps consistent
//! with that serial order, some outcomes made `fail` (not applied) or `info`
//! (applied or not), and each process's last `info` possibly left without a
//! completion. Every history it makes is strictly serializable, so the
//! checker must call it valid; tests corrupt them to see it does not.
//!
//! Timestamps: transaction `i` takes effect at a commit point `c_i`, strictly
//! increasing in `i`, with `invoke_i <= c_i <= complete_i`. If T_i completed
//! before T_j was invoked then `c_i <= complete_i < invoke_j <= c_j`, so
//! `i < j`: the serial order agrees with real time.

use super::Model;
use crate::history::{History, MicroOp, Op, OpType, ReadValue};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::HashMap;

/// Parameters of a generated history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Transactions.
    pub txns: usize,
    /// Client processes (each runs one transaction at a time).
    pub processes: u64,
    /// Keys in use at once; a key is retired after `writes_per_key_max`
    /// writes and replaced by a fresh one (as Elle's generator does).
    pub keys_active: u64,
    /// Writes (appends) to one key before it is retired.
    pub writes_per_key_max: usize,
    /// Micro-ops per transaction, from 1 up to this.
    pub ops_per_txn_max: usize,
    /// [`Model::ListAppend`] or [`Model::Register`] ([`Model::Infer`] means
    /// list-append).
    pub model: Model,
    /// Out of 1000 transactions, how many fail (not applied, `fail`).
    pub fail_per_mille: u32,
    /// Out of 1000 transactions, how many end `info` (half applied, half not).
    pub info_per_mille: u32,
    /// Most nanoseconds between an invoke and its commit point, and between
    /// the commit point and the completion: wider means more concurrency.
    pub spread_ns: u64,
    /// Every transaction invoked after the previous one completed.
    pub serial_times: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 1,
            txns: 1_000,
            processes: 16,
            keys_active: 256,
            writes_per_key_max: 32,
            ops_per_txn_max: 4,
            model: Model::ListAppend,
            fail_per_mille: 20,
            info_per_mille: 20,
            spread_ns: 2_000,
            serial_times: false,
        }
    }
}

/// The in-memory database of the serial execution.
struct Db {
    lists: HashMap<u64, Vec<u64>>,
    registers: HashMap<u64, u64>,
    writes: HashMap<u64, usize>,
    keys: Vec<u64>,
    next_key: u64,
    next_value: u64,
}

impl Db {
    /// A random active key, retiring it once it has had its writes.
    fn key(&mut self, rng: &mut Xoshiro256PlusPlus, cfg: &GenConfig) -> u64 {
        let i = rng.gen_range(0..self.keys.len());
        let k = self.keys[i];
        if self.writes.get(&k).copied().unwrap_or(0) >= cfg.writes_per_key_max {
            self.keys[i] = self.next_key;
            self.next_key += 1;
            return self.keys[i];
        }
        k
    }

    /// Random micro-ops for one transaction (reads unfilled).
    fn plan(&mut self, rng: &mut Xoshiro256PlusPlus, cfg: &GenConfig) -> Vec<MicroOp> {
        let n = rng.gen_range(1..=cfg.ops_per_txn_max.max(1));
        (0..n)
            .map(|_| {
                let key = self.key(rng, cfg);
                if rng.gen_bool(0.5) {
                    return MicroOp::Read { key, value: None };
                }
                *self.writes.entry(key).or_insert(0) += 1;
                self.next_value += 1;
                match cfg.model {
                    Model::Register => MicroOp::Write {
                        key,
                        value: self.next_value,
                    },
                    _ => MicroOp::Append {
                        key,
                        element: self.next_value,
                    },
                }
            })
            .collect()
    }

    /// Runs a planned transaction: fails it, ends it `info` (applied or not),
    /// or commits it; returns the completion's type and micro-ops.
    fn run(
        &mut self,
        rng: &mut Xoshiro256PlusPlus,
        cfg: &GenConfig,
        plan: &[MicroOp],
    ) -> (OpType, Vec<MicroOp>) {
        let roll = rng.gen_range(0..1000u32);
        if roll < cfg.fail_per_mille {
            (OpType::Fail, plan.to_vec())
        } else if roll < cfg.fail_per_mille + cfg.info_per_mille {
            if rng.gen_bool(0.5) {
                self.apply(plan);
            }
            (OpType::Info, plan.to_vec())
        } else {
            (OpType::Ok, self.apply(plan))
        }
    }

    /// Applies `ops` serially, filling in what the reads return.
    fn apply(&mut self, ops: &[MicroOp]) -> Vec<MicroOp> {
        ops.iter()
            .map(|m| match *m {
                MicroOp::Append { key, element } => {
                    self.lists.entry(key).or_default().push(element);
                    m.clone()
                }
                MicroOp::Write { key, value } => {
                    self.registers.insert(key, value);
                    m.clone()
                }
                MicroOp::Read { key, .. } => {
                    let value = if let Some(l) = self.lists.get(&key) {
                        Some(ReadValue::List(l.clone()))
                    } else {
                        self.registers.get(&key).map(|&v| ReadValue::Register(v))
                    };
                    MicroOp::Read { key, value }
                }
            })
            .collect()
    }
}

/// Commit points and invoke/completion times (see the module docs).
struct Timeline {
    commit: u64,
    spread: u64,
    serial: bool,
}

impl Timeline {
    /// The next transaction's (invoke, completion) times, for a process free
    /// since `free_at`.
    fn next(&mut self, rng: &mut Xoshiro256PlusPlus, free_at: u64) -> (u64, u64) {
        self.commit += 1 + rng.gen_range(0..self.spread / 4 + 1);
        let early = if self.serial {
            0
        } else {
            rng.gen_range(0..self.spread)
        };
        let invoke = self.commit.saturating_sub(early).max(free_at + 1);
        self.commit = self.commit.max(invoke);
        if self.serial {
            let done = self.commit;
            self.commit += 1; // the next invoke comes strictly after this completion
            return (invoke, done);
        }
        (invoke, self.commit + rng.gen_range(0..self.spread))
    }
}

/// A strictly serializable history made by a serial execution (see the
/// module docs).
pub fn serial_history(cfg: &GenConfig) -> History {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed);
    let mut db = Db {
        lists: HashMap::new(),
        registers: HashMap::new(),
        writes: HashMap::new(),
        keys: (0..cfg.keys_active.max(1)).collect(),
        next_key: cfg.keys_active.max(1),
        next_value: 0,
    };
    let processes = cfg.processes.max(1);
    let mut free_at = vec![0u64; processes as usize];
    let mut last_info: Vec<Option<usize>> = vec![None; processes as usize];
    let mut ops: Vec<Op> = Vec::with_capacity(2 * cfg.txns);
    let mut clock = Timeline {
        commit: 0,
        spread: cfg.spread_ns.max(1),
        serial: cfg.serial_times,
    };
    for _ in 0..cfg.txns {
        let p = rng.gen_range(0..processes);
        let (invoke, complete) = clock.next(&mut rng, free_at[p as usize]);
        let plan = db.plan(&mut rng, cfg);
        let (kind, value) = db.run(&mut rng, cfg, &plan);
        free_at[p as usize] = complete;
        last_info[p as usize] = (kind == OpType::Info).then_some(ops.len() + 1);
        let op = |kind, value, time_ns| Op {
            index: 0,
            process: p,
            kind,
            value,
            time_ns,
            error: None,
        };
        ops.push(op(OpType::Invoke, plan, invoke));
        ops.push(op(kind, value, complete));
    }
    // Some processes' last `info` never completes at all.
    let mut drop: Vec<usize> = last_info
        .into_iter()
        .flatten()
        .filter(|_| rng.gen_bool(0.5))
        .collect();
    drop.sort_unstable();
    for i in drop.into_iter().rev() {
        ops.remove(i);
    }
    History::merge([ops])
}

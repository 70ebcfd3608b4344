//! The Smallbank client's transaction source: draws the mix of
//! [`super::MIX`] with FaSST's fixed amounts, 90% of transactions over the hot
//! set, and keeps the client's view of what its committed transactions did
//! (money created, Balance's totals) for the check and the report.

use super::txn::{MoneyBook, SmallbankTxnClient};
use super::{aux_of, delta_of, Args, Smallbank, TxType, HOT_TX_PCT, MIX};
use crate::api::TxApi;
use crate::tx::{AttemptOutcome, TxCall, TxGenerator};
use crate::Nanos;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use splitkv_layout::host_nic::TxStatus;

/// One client's Smallbank generator (seeded; `splitkv_bench`'s `Workload::generator` builds one per client).
#[derive(Debug)]
pub struct SmallbankGenerator {
    workload: Smallbank,
    rng: Xoshiro256PlusPlus,
    /// Money created, unknown (the transactions of unknown outcome would
    /// create it if they committed: sum of the negative deltas, sum of the
    /// positive ones) and outstanding (what the drawn transactions without a
    /// last outcome yet could create: at [`TxGenerator::finish`] it joins the
    /// unknown range, since a crashed coordinator's client never learns their
    /// outcomes), and Balance's reads.
    money: MoneyBook,
    /// With [`TxApi::Txn`]: the client running each transaction as a read
    /// `Txn` and a write `Txn` ([`super::txn`]).
    txn: Option<SmallbankTxnClient>,
}

/// The least and most money (cents) one transaction of type `t` can create.
fn money_bounds(t: Option<TxType>) -> (i64, i64) {
    match t {
        Some(TxType::WriteCheck) => (
            -(super::WRITE_CHECK_CENTS + super::WRITE_CHECK_OVERDRAFT_FEE),
            0,
        ),
        Some(t @ (TxType::DepositChecking | TxType::TransactSaving)) => (0, t.amount_cents()),
        _ => (0, 0),
    }
}

impl SmallbankGenerator {
    /// The generator of client `client`, seeded from `seed` (each client a
    /// distinct stream).
    pub fn new(workload: Smallbank, client: u16, seed: u64) -> SmallbankGenerator {
        SmallbankGenerator {
            workload,
            rng: Xoshiro256PlusPlus::seed_from_u64(
                seed ^ (client as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ),
            money: MoneyBook::default(),
            txn: (workload.api == TxApi::Txn).then(|| {
                let mut c = SmallbankTxnClient::new();
                if !workload.txn_version_compares {
                    c.without_version_compares();
                }
                c
            }),
        }
    }

    /// The `Txn` client's state ([`TxApi::Txn`] only).
    pub fn txn_client(&self) -> Option<&SmallbankTxnClient> {
        self.txn.as_ref()
    }

    /// Money (cents) created by this client's committed transactions, summed
    /// from their results.
    pub fn money_created(&self) -> i64 {
        self.money.created
    }

    /// The range (cents, lowest and highest) of money this client's
    /// transactions of unknown outcome ([`TxStatus::Unknown`]) created: each
    /// may have committed or not, so the database's total may be off
    /// [`money_created`](Self::money_created) by any amount in it.
    pub fn money_unknown(&self) -> (i64, i64) {
        self.money.unknown
    }

    /// Committed Balance transactions and the sum of the totals (cents) they
    /// returned.
    pub fn balance_reads(&self) -> (u64, i64) {
        (self.money.balance_reads, self.money.balance_total_sum)
    }

    fn account(&mut self, hot: bool) -> u64 {
        let n = if hot {
            self.workload.hot_accounts
        } else {
            self.workload.accounts
        };
        self.rng.gen_range(0..n)
    }

    /// Draws the next transaction's type and arguments.
    pub fn draw(&mut self) -> (TxType, Args) {
        let mut p = self.rng.gen_range(0..100u32);
        let t = MIX
            .iter()
            .find(|(_, pct)| {
                if p < *pct {
                    true
                } else {
                    p -= pct;
                    false
                }
            })
            .expect("mix sums to 100")
            .0;
        let hot = self.rng.gen_range(0..100) < HOT_TX_PCT;
        let a = self.account(hot);
        let mut b = self.account(hot);
        while b == a {
            b = self.account(hot);
        }
        (
            t,
            Args {
                a,
                b,
                amount: t.amount_cents(),
            },
        )
    }
}

impl TxGenerator for SmallbankGenerator {
    fn next(&mut self, call: &mut TxCall) {
        if let Some(mut txn) = self.txn.take() {
            txn.next(call, || self.draw());
            self.txn = Some(txn);
            return;
        }
        let (t, args) = self.draw();
        let (lo, hi) = money_bounds(Some(t));
        self.money.outstanding.0 += lo;
        self.money.outstanding.1 += hi;
        call.procedure = t as u32;
        args.encode(&mut call.args);
    }

    fn on_outcome(&mut self, o: &AttemptOutcome<'_>) {
        if let Some(txn) = self.txn.as_mut() {
            txn.on_outcome(o, &mut self.money);
            return;
        }
        let m = &mut self.money;
        if o.last {
            let (lo, hi) = money_bounds(TxType::from_id(o.call.procedure));
            m.outstanding.0 -= lo;
            m.outstanding.1 -= hi;
        }
        if o.status.is_indeterminate() {
            // Its result is the one it has if it committed; without one
            // (ended before its procedure returned), any its type allows.
            let (lo, hi) = match delta_of(o.result) {
                Some(d) => (d.min(0), d.max(0)),
                None => money_bounds(TxType::from_id(o.call.procedure)),
            };
            m.unknown.0 += lo;
            m.unknown.1 += hi;
            return;
        }
        if o.status != TxStatus::Committed {
            return;
        }
        m.created += delta_of(o.result).unwrap_or(0);
        if o.call.procedure == TxType::Balance as u32 {
            m.balance_reads += 1;
            m.balance_total_sum += aux_of(o.result).unwrap_or(0);
        }
    }

    fn on_iteration(&mut self, now: Nanos) {
        if let Some(txn) = self.txn.as_mut() {
            txn.on_iteration(now);
        }
    }

    fn set_window(&mut self, from_ns: Nanos, until_ns: Nanos) {
        if let Some(txn) = self.txn.as_mut() {
            txn.set_window(from_ns, until_ns);
        }
    }

    fn finish(&mut self, _now: Nanos) {
        if let Some(txn) = self.txn.as_mut() {
            txn.finish(&mut self.money);
        }
        let (lo, hi) = std::mem::take(&mut self.money.outstanding);
        self.money.unknown.0 += lo;
        self.money.unknown.1 += hi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_outcomes_widen_the_money_range_and_are_not_counted_created() {
        let w = Smallbank::new(100, None).unwrap();
        let mut g = SmallbankGenerator::new(w, 0, 1);
        let feed = |g: &mut SmallbankGenerator, status, delta: i64| {
            let (call, result) = (TxCall::default(), delta.to_le_bytes());
            g.on_outcome(&AttemptOutcome {
                call: &call,
                status,
                result: &result,
                invoked_ns: 0,
                completed_ns: 1,
                attempt: 1,
                last: true,
                seq: 0,
            });
        };
        feed(&mut g, TxStatus::Committed, 5);
        feed(&mut g, TxStatus::Unknown, 7);
        feed(&mut g, TxStatus::Unknown, -3);
        feed(&mut g, TxStatus::LockConflict, 100);
        assert_eq!(g.money_created(), 5);
        assert_eq!(g.money_unknown(), (-3, 7));
    }

    #[test]
    fn generator_draws_the_mix_hot_set_and_fixed_amounts() {
        let w = Smallbank::new(10_000, None).unwrap();
        let mut g = SmallbankGenerator::new(w, 0, 1);
        let mut counts = [0u32; 6];
        let mut hot = 0;
        for _ in 0..20_000 {
            let (t, x) = g.draw();
            counts[t as usize] += 1;
            assert_ne!(x.a, x.b);
            assert_eq!(x.amount, t.amount_cents());
            hot += (x.a < 400) as u32;
        }
        for (i, (_, pct)) in MIX.iter().enumerate() {
            let share = counts[i] as f64 / 200.0;
            assert!((share - *pct as f64).abs() < 1.5, "{i}: {share}");
        }
        let hot_share = hot as f64 / 200.0;
        assert!((hot_share - 90.4).abs() < 1.5, "{hot_share}");
    }

    #[test]
    fn one_seed_one_sequence_and_clients_differ() {
        let w = Smallbank::new(1_000, None).unwrap();
        let draw = |client, seed| {
            let mut g = SmallbankGenerator::new(w, client, seed);
            let mut c = TxCall::default();
            (0..100)
                .map(|_| {
                    c.args.clear();
                    g.next(&mut c);
                    c.clone()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(0, 7), draw(0, 7));
        assert_ne!(draw(0, 7), draw(1, 7));
        assert_ne!(draw(0, 7), draw(0, 8));
    }
}

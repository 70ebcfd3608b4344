//! Smallbank (as used by FaSST and DrTM): two tables, SAVINGS and CHECKING, one
//! row per account, 8-byte keys and 8-byte balances (i64, cents). Six
//! transactions, all run as shipped procedures on the coordinator's NIC runtime
//! (Xenic §4.2.2).
//!
//! | transaction | mix % | reads | writes | money created |
//! |---|---|---|---|---|
//! | Amalgamate(a, b) | 15 | — | sav[a], chk[a], chk[b] | 0 |
//! | Balance(a) | 15 | sav[a], chk[a] | — | 0 |
//! | DepositChecking(a, v) | 15 | — | chk[a] | +v |
//! | SendPayment(a, b, v) | 25 | — | chk[a], chk[b] | 0 (aborts if chk[a] < v) |
//! | TransactSaving(a, v) | 15 | — | sav[a] | +v (aborts if the result < 0) |
//! | WriteCheck(a, v) | 15 | sav[a] | chk[a] | −v, or −(v+1) if overdrawn |
//!
//! Every committed transaction returns the money it created (an i64) as the first
//! 8 bytes of its result, so the run's own record of committed transactions
//! predicts the total balance (the "money" check).

use rand::Rng;
use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// Table id of SAVINGS.
pub const SAVINGS: u32 = 0;
/// Table id of CHECKING.
pub const CHECKING: u32 = 1;
/// Initial balance of every savings and checking row (cents).
pub const INITIAL_BALANCE: i64 = 10_000;
/// Encoded size of a transaction's arguments: account a, account b, amount.
pub const ARGS_BYTES: usize = 24;
/// Share of transactions that draw from the hot set (%).
pub const HOT_TX_PCT: u32 = 90;
/// Size of the hot set as a share of all accounts (%).
pub const HOT_ACCOUNTS_PCT: u64 = 4;

/// The six Smallbank transactions, in registration (procedure id) order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum TxType {
    /// Moves all of a's money into b's checking.
    Amalgamate = 0,
    /// Reads a's total balance.
    Balance = 1,
    /// Adds to a's checking.
    DepositChecking = 2,
    /// Moves money from a's checking to b's.
    SendPayment = 3,
    /// Adds to a's savings.
    TransactSaving = 4,
    /// Writes a check against a's checking.
    WriteCheck = 5,
}

/// Every transaction type with its share of the mix (%).
pub const MIX: [(TxType, u32); 6] = [
    (TxType::Amalgamate, 15),
    (TxType::Balance, 15),
    (TxType::DepositChecking, 15),
    (TxType::SendPayment, 25),
    (TxType::TransactSaving, 15),
    (TxType::WriteCheck, 15),
];

impl TxType {
    /// The type with procedure id `id`.
    pub fn from_id(id: u32) -> Option<TxType> {
        MIX.iter().map(|m| m.0).find(|t| *t as u32 == id)
    }

    /// Display name.
    pub fn name(self) -> &'static str {
        match self {
            TxType::Amalgamate => "Amalgamate",
            TxType::Balance => "Balance",
            TxType::DepositChecking => "DepositChecking",
            TxType::SendPayment => "SendPayment",
            TxType::TransactSaving => "TransactSaving",
            TxType::WriteCheck => "WriteCheck",
        }
    }
}

/// Decoded arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    /// First account.
    pub a: u64,
    /// Second account (unused by one-account transactions).
    pub b: u64,
    /// Amount in cents.
    pub amount: i64,
}

impl Args {
    /// Encodes into `out` (cleared first): a, b, amount as little-endian 8-byte words.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.a.to_le_bytes());
        out.extend_from_slice(&self.b.to_le_bytes());
        out.extend_from_slice(&self.amount.to_le_bytes());
    }

    /// Decodes exactly [`ARGS_BYTES`] bytes.
    pub fn decode(bytes: &[u8]) -> Result<Args, ProcError> {
        if bytes.len() != ARGS_BYTES {
            return Err(ProcError::BadArgs("smallbank arguments are 24 bytes"));
        }
        let w = |i: usize| {
            u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("length checked"))
        };
        Ok(Args {
            a: w(0),
            b: w(1),
            amount: w(2) as i64,
        })
    }
}

fn sav(a: u64) -> Key {
    Key::new(SAVINGS, a)
}
fn chk(a: u64) -> Key {
    Key::new(CHECKING, a)
}

/// Reads a balance; a missing row aborts (every account is loaded, so this
/// would show a lost write, and the money check would then fail too).
fn bal(reads: &ReadView, k: &Key) -> Result<i64, UserAbort> {
    let v = reads.get(k).ok_or(UserAbort)?;
    Ok(i64::from_le_bytes(v.try_into().map_err(|_| UserAbort)?))
}

fn put(writes: &mut WriteSet, k: Key, v: i64) {
    writes.put(k, &v.to_le_bytes());
}

fn result(out: &mut Vec<u8>, delta: i64, aux: i64) {
    out.extend_from_slice(&delta.to_le_bytes());
    out.extend_from_slice(&aux.to_le_bytes());
}

/// The money a committed transaction created, read from its result.
pub fn delta_of(result: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(result.get(..8)?.try_into().ok()?))
}

struct Smallbank(TxType);

impl Procedure for Smallbank {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let x = Args::decode(args)?;
        let two = matches!(self.0, TxType::Amalgamate | TxType::SendPayment);
        if two && x.a == x.b {
            return Err(ProcError::BadArgs(
                "two-account transaction with one account",
            ));
        }
        match self.0 {
            TxType::Amalgamate => {
                plan.write(sav(x.a));
                plan.write(chk(x.a));
                plan.write(chk(x.b));
            }
            TxType::Balance => {
                plan.read(sav(x.a));
                plan.read(chk(x.a));
            }
            TxType::DepositChecking => plan.write(chk(x.a)),
            TxType::SendPayment => {
                plan.write(chk(x.a));
                plan.write(chk(x.b));
            }
            TxType::TransactSaving => plan.write(sav(x.a)),
            TxType::WriteCheck => {
                plan.read(sav(x.a));
                plan.write(chk(x.a));
            }
        }
        Ok(())
    }

    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        w: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let x = Args::decode(args).map_err(|_| UserAbort)?;
        match self.0 {
            TxType::Amalgamate => {
                let total = bal(r, &sav(x.a))? + bal(r, &chk(x.a))?;
                let b = bal(r, &chk(x.b))?;
                put(w, sav(x.a), 0);
                put(w, chk(x.a), 0);
                put(w, chk(x.b), b + total);
                result(out, 0, total);
            }
            TxType::Balance => {
                let total = bal(r, &sav(x.a))? + bal(r, &chk(x.a))?;
                result(out, 0, total);
            }
            TxType::DepositChecking => {
                if x.amount < 0 {
                    return Err(UserAbort);
                }
                put(w, chk(x.a), bal(r, &chk(x.a))? + x.amount);
                result(out, x.amount, 0);
            }
            TxType::SendPayment => {
                let a = bal(r, &chk(x.a))?;
                if a < x.amount {
                    return Err(UserAbort);
                }
                let b = bal(r, &chk(x.b))?;
                put(w, chk(x.a), a - x.amount);
                put(w, chk(x.b), b + x.amount);
                result(out, 0, 0);
            }
            TxType::TransactSaving => {
                let s = bal(r, &sav(x.a))? + x.amount;
                if s < 0 {
                    return Err(UserAbort);
                }
                put(w, sav(x.a), s);
                result(out, x.amount, 0);
            }
            TxType::WriteCheck => {
                let c = bal(r, &chk(x.a))?;
                let total = bal(r, &sav(x.a))? + c;
                let debit = if total < x.amount {
                    x.amount + 1
                } else {
                    x.amount
                };
                put(w, chk(x.a), c - debit);
                result(out, -debit, 0);
            }
        }
        Ok(())
    }
}

/// Registers the six procedures; ids equal `TxType as u32`.
pub fn register(reg: &mut ProcedureRegistry) {
    for (t, _) in MIX {
        let id = reg.register(Arc::new(Smallbank(t)));
        assert_eq!(id, t as u32, "register Smallbank into an empty registry");
    }
}

/// Draws transactions: the mix above; 90% of transactions draw their accounts
/// from the hot set, the rest from all accounts; two-account transactions draw
/// distinct accounts; amounts 1..=100 cents.
#[derive(Debug, Clone)]
pub struct Generator {
    accounts: u64,
    hot: u64,
}

impl Generator {
    /// A generator over `accounts` accounts with `hot` of them in the hot set
    /// (`None`: 4% of all accounts, at least 2).
    ///
    /// # Panics
    /// If fewer than 2 accounts (two-account transactions need two).
    pub fn new(accounts: u64, hot: Option<u64>) -> Generator {
        assert!(accounts >= 2, "smallbank needs at least 2 accounts");
        let hot = hot
            .unwrap_or(accounts * HOT_ACCOUNTS_PCT / 100)
            .clamp(2, accounts);
        Generator { accounts, hot }
    }

    /// Size of the hot set.
    pub fn hot_accounts(&self) -> u64 {
        self.hot
    }

    fn account(&self, rng: &mut impl Rng, hot: bool) -> u64 {
        rng.gen_range(0..if hot { self.hot } else { self.accounts })
    }

    /// Draws the next transaction: its type and encoded arguments in `args`.
    pub fn next(&self, rng: &mut impl Rng, args: &mut Vec<u8>) -> TxType {
        let mut p = rng.gen_range(0..100u32);
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
        let hot = rng.gen_range(0..100) < HOT_TX_PCT;
        let a = self.account(rng, hot);
        let mut b = self.account(rng, hot);
        while b == a {
            b = self.account(rng, hot);
        }
        let amount = rng.gen_range(1..=100);
        Args { a, b, amount }.encode(args);
        t
    }
}

/// The rows of one account, for loading.
pub fn account_keys(a: u64) -> [Key; 2] {
    [sav(a), chk(a)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use splitkv_layout::ObjectMeta;

    #[test]
    fn mix_sums_to_100_and_ids_round_trip() {
        assert_eq!(MIX.iter().map(|m| m.1).sum::<u32>(), 100);
        for (t, _) in MIX {
            assert_eq!(TxType::from_id(t as u32), Some(t));
        }
        assert_eq!(TxType::from_id(6), None);
    }

    #[test]
    fn generator_draws_the_mix_and_hot_set() {
        let g = Generator::new(10_000, None);
        assert_eq!(g.hot_accounts(), 400);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let mut args = Vec::new();
        let mut counts = [0u32; 6];
        let mut hot = 0;
        for _ in 0..20_000 {
            let t = g.next(&mut rng, &mut args);
            counts[t as usize] += 1;
            let x = Args::decode(&args).unwrap();
            assert_ne!(x.a, x.b);
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
    fn procedures_conserve_money_as_declared() {
        let mut reg = ProcedureRegistry::new();
        register(&mut reg);
        let mut reads = ReadView::default();
        for a in 0..2 {
            for k in account_keys(a) {
                reads.insert(k, ObjectMeta(1), &50i64.to_le_bytes(), true);
            }
        }
        for (t, _) in MIX {
            let mut args = Vec::new();
            Args {
                a: 0,
                b: 1,
                amount: 70,
            }
            .encode(&mut args);
            let (mut w, mut out, mut plan) = (WriteSet::default(), Vec::new(), TxPlan::default());
            let p = reg.get(t as u32).unwrap();
            p.plan(&args, &mut plan).unwrap();
            let res = p.execute(&args, &reads, &mut w, &mut out);
            if t == TxType::SendPayment {
                assert_eq!(res, Err(UserAbort), "50 < 70: insufficient funds");
                continue;
            }
            res.unwrap();
            let before: i64 = 200;
            let mut after = before;
            for (k, v) in w.iter() {
                assert!(plan.writes.contains(k));
                after += i64::from_le_bytes(v.try_into().unwrap()) - 50;
            }
            assert_eq!(after - before, delta_of(&out).unwrap(), "{t:?}");
        }
        assert!(reg
            .get(0)
            .unwrap()
            .plan(&[0u8; 3], &mut TxPlan::default())
            .is_err());
    }
}

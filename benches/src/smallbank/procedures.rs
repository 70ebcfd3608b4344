//! The six Smallbank procedures, run on the coordinator's NIC runtime
//! (Xenic §4.2.2). Each committed one returns 16 bytes: the money it created
//! (i64 cents), then an auxiliary figure (Balance's and Amalgamate's total).

use super::{Args, TxType, CHECKING, MIX, SAVINGS, WRITE_CHECK_OVERDRAFT_FEE};
use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

pub(crate) fn sav(a: u64) -> Key {
    Key::new(SAVINGS, a)
}
pub(crate) fn chk(a: u64) -> Key {
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

struct SmallbankProc(TxType);

impl Procedure for SmallbankProc {
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
        let e = decide(self.0, &x, |k| bal(r, k))?;
        for (k, v) in e.writes() {
            put(w, *k, *v);
        }
        result(out, e.delta, e.aux);
        Ok(())
    }
}

/// Most rows a Smallbank transaction reads or writes (Amalgamate's three).
pub const ROWS_PER_TX_MAX: usize = 3;

/// What a Smallbank transaction does given the balances it read: the new
/// balances it writes, the money it creates (cents) and its auxiliary figure
/// (Balance's and Amalgamate's total). One definition for the shipped
/// procedures and for the client that runs Smallbank through the one-shot
/// `Txn` ([`super::txn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effect {
    writes: [(Key, i64); ROWS_PER_TX_MAX],
    writes_len: usize,
    /// Money created (cents).
    pub delta: i64,
    /// Balance's or Amalgamate's total (cents), else 0.
    pub aux: i64,
}

impl Effect {
    fn new(delta: i64, aux: i64) -> Effect {
        Effect {
            writes: [(Key::default(), 0); ROWS_PER_TX_MAX],
            writes_len: 0,
            delta,
            aux,
        }
    }

    fn put(mut self, k: Key, v: i64) -> Effect {
        self.writes[self.writes_len] = (k, v);
        self.writes_len += 1;
        self
    }

    /// The rows written and their new balances, in order.
    pub fn writes(&self) -> &[(Key, i64)] {
        &self.writes[..self.writes_len]
    }
}

/// The rows transaction `t` over `x` reads (its read set and the rows it
/// reads before writing), in a fixed order: at most [`ROWS_PER_TX_MAX`].
pub fn rows_read(t: TxType, x: &Args) -> ([Key; ROWS_PER_TX_MAX], usize) {
    let k = Key::default();
    match t {
        TxType::Amalgamate => ([sav(x.a), chk(x.a), chk(x.b)], 3),
        TxType::Balance | TxType::WriteCheck => ([sav(x.a), chk(x.a), k], 2),
        TxType::DepositChecking => ([chk(x.a), k, k], 1),
        TxType::SendPayment => ([chk(x.a), chk(x.b), k], 2),
        TxType::TransactSaving => ([sav(x.a), k, k], 1),
    }
}

/// Smallbank's semantics (FaSST/DrTM): what `t` over `x` does on the
/// balances `bal` returns for the rows of [`rows_read`].
///
/// # Errors
/// [`UserAbort`] where the transaction aborts itself (SendPayment's
/// insufficient funds, a negative deposit or saving) or `bal` fails (a
/// missing row).
pub fn decide(
    t: TxType,
    x: &Args,
    bal: impl Fn(&Key) -> Result<i64, UserAbort>,
) -> Result<Effect, UserAbort> {
    Ok(match t {
        TxType::Amalgamate => {
            let total = bal(&sav(x.a))? + bal(&chk(x.a))?;
            let b = bal(&chk(x.b))?;
            Effect::new(0, total)
                .put(sav(x.a), 0)
                .put(chk(x.a), 0)
                .put(chk(x.b), b + total)
        }
        TxType::Balance => Effect::new(0, bal(&sav(x.a))? + bal(&chk(x.a))?),
        TxType::DepositChecking => {
            if x.amount < 0 {
                return Err(UserAbort);
            }
            Effect::new(x.amount, 0).put(chk(x.a), bal(&chk(x.a))? + x.amount)
        }
        TxType::SendPayment => {
            let a = bal(&chk(x.a))?;
            if a < x.amount {
                return Err(UserAbort);
            }
            let b = bal(&chk(x.b))?;
            Effect::new(0, 0)
                .put(chk(x.a), a - x.amount)
                .put(chk(x.b), b + x.amount)
        }
        TxType::TransactSaving => {
            let s = bal(&sav(x.a))? + x.amount;
            if s < 0 {
                return Err(UserAbort);
            }
            Effect::new(x.amount, 0).put(sav(x.a), s)
        }
        TxType::WriteCheck => {
            let c = bal(&chk(x.a))?;
            let total = bal(&sav(x.a))? + c;
            let debit = if total < x.amount {
                x.amount + WRITE_CHECK_OVERDRAFT_FEE
            } else {
                x.amount
            };
            Effect::new(-debit, 0).put(chk(x.a), c - debit)
        }
    })
}

/// Registers the six procedures; ids equal `TxType as u32`.
pub fn register(reg: &mut ProcedureRegistry) {
    for (t, _) in MIX {
        let id = reg.register(Arc::new(SmallbankProc(t)));
        assert_eq!(id, t as u32, "register Smallbank into an empty registry");
    }
}

/// Balance's (or Amalgamate's) total, read from its result.
pub fn aux_of(result: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(result.get(8..16)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::super::account_keys;
    use super::*;
    use splitkv_layout::ObjectMeta;

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

//! Smallbank's semantics as a function of the balances read ([`decide`]):
//! one definition for the shipped procedures (`splitkv_bench::smallbank::procedures`,
//! on the coordinator's NIC runtime, Xenic §4.2.2) and for the client that
//! runs Smallbank through the one-shot `Txn` ([`super::txn`]); and the
//! reading of a committed procedure's 16-byte result (the money it created,
//! then Balance's and Amalgamate's total).

use super::{Args, TxType, CHECKING, SAVINGS, WRITE_CHECK_OVERDRAFT_FEE};
use splitkv_layout::Key;

/// The transaction aborts itself (SendPayment's insufficient funds, a
/// negative deposit or saving, or a missing row): the procedure reports it
/// as the NIC runtime's user abort (`splitkv_nic::Declined`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the transaction aborted itself")]
pub struct Declined;

/// The SAVINGS row of account `a`.
pub fn sav(a: u64) -> Key {
    Key::new(SAVINGS, a)
}
/// The CHECKING row of account `a`.
pub fn chk(a: u64) -> Key {
    Key::new(CHECKING, a)
}

/// The money a committed transaction created, read from its result.
pub fn delta_of(result: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(result.get(..8)?.try_into().ok()?))
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
/// [`Declined`] where the transaction aborts itself (SendPayment's
/// insufficient funds, a negative deposit or saving) or `bal` fails (a
/// missing row).
pub fn decide(
    t: TxType,
    x: &Args,
    bal: impl Fn(&Key) -> Result<i64, Declined>,
) -> Result<Effect, Declined> {
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
                return Err(Declined);
            }
            Effect::new(x.amount, 0).put(chk(x.a), bal(&chk(x.a))? + x.amount)
        }
        TxType::SendPayment => {
            let a = bal(&chk(x.a))?;
            if a < x.amount {
                return Err(Declined);
            }
            let b = bal(&chk(x.b))?;
            Effect::new(0, 0)
                .put(chk(x.a), a - x.amount)
                .put(chk(x.b), b + x.amount)
        }
        TxType::TransactSaving => {
            let s = bal(&sav(x.a))? + x.amount;
            if s < 0 {
                return Err(Declined);
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

/// Balance's (or Amalgamate's) total, read from its result.
pub fn aux_of(result: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(result.get(8..16)?.try_into().ok()?))
}

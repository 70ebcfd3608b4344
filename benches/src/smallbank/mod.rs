//! Smallbank as FaSST (OSDI'16) and DrTM use it: two tables, SAVINGS and
//! CHECKING, one row per account, 8-byte keys and 8-byte balances (i64, integer
//! cents). Six transactions with fixed amounts, all run as shipped procedures
//! on the coordinator's NIC runtime (Xenic §4.2.2):
//!
//! | transaction | mix % | reads | writes | amount | money created |
//! |---|---|---|---|---|---|
//! | Amalgamate(a, b) | 15 | — | `sav[a]`, `chk[a]`, `chk[b]` | — | 0 |
//! | Balance(a) | 15 | `sav[a]`, `chk[a]` | — | — | 0 (returns the total) |
//! | DepositChecking(a) | 15 | — | `chk[a]` | 1.30 | +1.30 |
//! | SendPayment(a, b) | 25 | — | `chk[a]`, `chk[b]` | 5.00 | 0 (user abort if `chk[a]` < 5.00) |
//! | TransactSaving(a) | 15 | — | `sav[a]` | 20.20 | +20.20 |
//! | WriteCheck(a) | 15 | `sav[a]` | `chk[a]` | 5.00 | −5.00, or −6.00 if sav+chk < 5.00 |
//!
//! 90% of transactions draw their accounts from a hot set of 4% of the
//! accounts. Every committed transaction returns the money it created as the
//! first 8 bytes of its result, so the clients' sum over committed results
//! predicts the total balance the money check reads from the database
//! ([`check`]); Balance returns the total it read (kept by the generator,
//! [`generator::SmallbankGenerator::balance_reads`]).
//!
//! With [`TxApi::Txn`] ([`Smallbank::with_api`]) no procedure is
//! registered: each transaction is a read `Txn` then a write `Txn` comparing
//! the versions read, retried on a failed compare ([`txn`]).
//!
//! Modules: [`procedures`] (the six procedures), [`txn`] (the same through
//! the one-shot `Txn`), [`generator`] (the client's
//! transaction source), [`check`] (the money check). The replica check is
//! workload-independent ([`crate::replicas`]).

//!
//! The client side (configuration, codec, generator, `Txn` client) is
//! `splitkv_workloads::smallbank`, re-exported here.

pub mod check;
pub mod procedures;

pub use check::{check_money, check_money_range, check_money_totals, MoneyReport};
pub use procedures::{aux_of, delta_of, register};
pub use splitkv_workloads::smallbank::{
    account_keys, generator, txn, Args, Smallbank, SmallbankGenerator, TxType, ARGS_BYTES,
    CHECKING, DEPOSIT_CHECKING_CENTS, HOT_ACCOUNTS_PCT, HOT_TX_PCT, INITIAL_BALANCE, MIX, SAVINGS,
    SEND_PAYMENT_CENTS, TRANSACT_SAVING_CENTS, WRITE_CHECK_CENTS, WRITE_CHECK_OVERDRAFT_FEE,
};

use crate::api::TxApi;
use crate::workload::{CheckError, Db, RowIter, Workload};
use splitkv_nic::ProcedureRegistry;

impl Workload for Smallbank {
    type Generator = SmallbankGenerator;
    type Report = MoneyReport;

    fn name(&self) -> &'static str {
        "smallbank"
    }

    /// The six procedures (with the `Txn` api none: every registry has the
    /// built-in `Txn`).
    fn register(&self, reg: &mut ProcedureRegistry) {
        if self.api != TxApi::Txn {
            register(reg);
        }
    }

    fn rows(&self) -> u64 {
        2 * self.accounts
    }

    fn value_bytes_max(&self) -> usize {
        8
    }

    fn initial_rows(&self) -> RowIter<'_> {
        let value = INITIAL_BALANCE.to_le_bytes();
        Box::new((0..self.accounts).flat_map(move |a| account_keys(a).map(|k| (k, value.to_vec()))))
    }

    fn generator(&self, client: u16, seed: u64) -> SmallbankGenerator {
        SmallbankGenerator::new(*self, client, seed)
    }

    fn check(&self, db: &Db<'_>, gens: &[&SmallbankGenerator]) -> Result<MoneyReport, CheckError> {
        check_money(self, db, gens)
    }
}

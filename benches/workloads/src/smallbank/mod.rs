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
//! predicts the total balance the money check reads from the database; Balance returns the total it read (kept by the generator,
//! [`generator::SmallbankGenerator::balance_reads`]).
//!
//! With [`TxApi::Txn`] ([`Smallbank::with_api`]) no procedure is
//! registered: each transaction is a read `Txn` then a write `Txn` comparing
//! the versions read, retried on a failed compare ([`txn`]).
//!
//! This crate holds the client side: the configuration ([`Smallbank`]), the
//! arguments' codec ([`Args`]), the semantics both the procedures and the
//! `Txn` client share ([`effect`]), the `Txn` client ([`txn`]) and the
//! generator ([`generator`]). The procedures, the money check and the
//! replica check are the node side (`splitkv_bench::smallbank`).

pub mod effect;
pub mod generator;
pub mod txn;

pub use effect::{aux_of, delta_of};
pub use generator::SmallbankGenerator;

use crate::api::{ApiError, TxApi};
use crate::BadArgs;
use splitkv_layout::Key;

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
/// DepositChecking's amount (cents): 1.30, as in FaSST/DrTM.
pub const DEPOSIT_CHECKING_CENTS: i64 = 130;
/// TransactSaving's amount (cents): 20.20.
pub const TRANSACT_SAVING_CENTS: i64 = 2_020;
/// SendPayment's amount (cents): 5.00.
pub const SEND_PAYMENT_CENTS: i64 = 500;
/// WriteCheck's amount (cents): 5.00.
pub const WRITE_CHECK_CENTS: i64 = 500;
/// What WriteCheck adds to the debit when the account's total is below the
/// amount (cents): 1.00, Smallbank's overdraft penalty of one unit.
pub const WRITE_CHECK_OVERDRAFT_FEE: i64 = 100;

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

    /// The fixed amount (cents) the generator passes, 0 for the transactions
    /// without one.
    pub fn amount_cents(self) -> i64 {
        match self {
            TxType::Amalgamate | TxType::Balance => 0,
            TxType::DepositChecking => DEPOSIT_CHECKING_CENTS,
            TxType::SendPayment => SEND_PAYMENT_CENTS,
            TxType::TransactSaving => TRANSACT_SAVING_CENTS,
            TxType::WriteCheck => WRITE_CHECK_CENTS,
        }
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
    ///
    /// # Errors
    /// [`BadArgs`] for any other length.
    pub fn decode(bytes: &[u8]) -> Result<Args, BadArgs> {
        if bytes.len() != ARGS_BYTES {
            return Err(BadArgs("smallbank arguments are 24 bytes"));
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

/// The rows of one account, for loading.
pub fn account_keys(a: u64) -> [Key; 2] {
    [effect::sav(a), effect::chk(a)]
}

/// The Smallbank workload over `accounts` accounts (every one loaded with
/// [`INITIAL_BALANCE`] in both tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Smallbank {
    /// Accounts in the cluster (≥ 2).
    pub accounts: u64,
    /// Size of the hot set (≥ 2, ≤ `accounts`).
    pub hot_accounts: u64,
    /// How the transactions reach the store ([`Smallbank::with_api`]).
    pub api: TxApi,
    /// Whether write `Txn`s compare the versions read (always, but for the
    /// mutation of [`Smallbank::without_version_compares`]).
    pub(crate) txn_version_compares: bool,
}

impl Smallbank {
    /// Smallbank over `accounts` accounts with `hot` of them in the hot set
    /// (`None`: [`HOT_ACCOUNTS_PCT`]% of all accounts); the hot set is clamped
    /// to `2..=accounts`.
    ///
    /// # Errors
    /// [`BadArgs`] with fewer than 2 accounts (two-account
    /// transactions need two).
    pub fn new(accounts: u64, hot: Option<u64>) -> Result<Smallbank, BadArgs> {
        if accounts < 2 {
            return Err(BadArgs("smallbank needs at least 2 accounts"));
        }
        let hot_accounts = hot
            .unwrap_or(accounts * HOT_ACCOUNTS_PCT / 100)
            .clamp(2, accounts);
        Ok(Smallbank {
            accounts,
            hot_accounts,
            api: TxApi::Shipped,
            txn_version_compares: true,
        })
    }

    /// A mutation for tests: with [`TxApi::Txn`], write `Txn`s without their
    /// version compares, so a write between a transaction's read and its
    /// write is lost and the money check must fail under contention.
    #[doc(hidden)]
    pub fn without_version_compares(mut self) -> Smallbank {
        self.txn_version_compares = false;
        self
    }

    /// The same workload with its transactions reaching the store through
    /// `api` (module docs).
    ///
    /// # Errors
    /// [`ApiError::InteractiveNotBuilt`].
    pub fn with_api(mut self, api: TxApi) -> Result<Smallbank, ApiError> {
        self.api = api.check_built()?;
        Ok(self)
    }

    /// The total of every balance after loading (cents).
    pub fn initial_total(&self) -> i64 {
        2 * INITIAL_BALANCE * self.accounts as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_sums_to_100_and_ids_round_trip() {
        assert_eq!(MIX.iter().map(|m| m.1).sum::<u32>(), 100);
        for (t, _) in MIX {
            assert_eq!(TxType::from_id(t as u32), Some(t));
        }
        assert_eq!(TxType::from_id(6), None);
    }

    #[test]
    fn fixed_amounts_are_fasst_s() {
        let cents: Vec<i64> = MIX.iter().map(|(t, _)| t.amount_cents()).collect();
        assert_eq!(cents, [0, 0, 130, 500, 2_020, 500]);
        assert!(Smallbank::new(1, None).is_err());
        let w = Smallbank::new(10_000, None).unwrap();
        assert_eq!(w.hot_accounts, 400);
        assert_eq!(Smallbank::new(10, Some(50)).unwrap().hot_accounts, 10);
    }
}

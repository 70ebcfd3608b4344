//! Smallbank's money check: the sum of every balance, read from the database at
//! each row's primary, equals the initial total plus the money the committed
//! transactions created, as their results told the clients. A lost or
//! duplicated write of any money-moving transaction changes the sum; a
//! transaction that committed but whose result the client counted wrongly does
//! too.

use super::generator::SmallbankGenerator;
use super::{account_keys, Smallbank};
use crate::workload::CheckError;
use crate::workload::Db;

/// What the money check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoneyReport {
    /// Initial total (cents).
    pub initial: i64,
    /// Money created by committed transactions (cents).
    pub created: i64,
    /// The range (cents, low and high) that transactions whose outcome no
    /// client learned could have added (`(0, 0)` in a run without them).
    pub unknown: (i64, i64),
    /// Final total read from the database (within `initial + created +
    /// unknown` when the check passed; equal to `initial + created` when
    /// `unknown` is `(0, 0)`).
    pub total: i64,
    /// Committed Balance transactions over all clients.
    pub balance_reads: u64,
    /// Mean total they returned (cents; 0 with none).
    pub balance_mean: i64,
}

/// Checks the money of `w` in `db` against the generators' committed results.
///
/// # Errors
/// [`CheckError::MissingRow`] if a row is absent at its primary (or not 8
/// bytes); [`CheckError::Money`] if the sum differs.
pub fn check_money(
    w: &Smallbank,
    db: &Db<'_>,
    gens: &[&SmallbankGenerator],
) -> Result<MoneyReport, CheckError> {
    let created: i64 = gens.iter().map(|g| g.money_created()).sum();
    let (reads, sum) = gens.iter().fold((0u64, 0i64), |(n, s), g| {
        let (gn, gs) = g.balance_reads();
        (n + gn, s + gs)
    });
    let unknown = gens.iter().fold((0, 0), |(l, h), g| {
        let (gl, gh) = g.money_unknown();
        (l + gl, h + gh)
    });
    check_money_range(w, db, created, unknown, reads, sum)
}

/// The money rule itself, over what the clients reported: `created` cents
/// created by committed transactions, and `reads` committed Balance
/// transactions whose totals sum to `sum` cents. Shared by the in-process
/// check ([`check_money`]) and the check across node processes.
///
/// # Errors
/// As [`check_money`].
pub fn check_money_totals(
    w: &Smallbank,
    db: &Db<'_>,
    created: i64,
    reads: u64,
    sum: i64,
) -> Result<MoneyReport, CheckError> {
    check_money_range(w, db, created, (0, 0), reads, sum)
}

/// [`check_money_totals`] when transactions of unknown outcome may have
/// created between `unknown.0` and `unknown.1` cents more (each committed
/// or not): the total must lie in `initial + created + unknown.0 ..=
/// initial + created + unknown.1`.
///
/// # Errors
/// As [`check_money`]; `expected` is then the nearer end of the range.
pub fn check_money_range(
    w: &Smallbank,
    db: &Db<'_>,
    created: i64,
    unknown: (i64, i64),
    reads: u64,
    sum: i64,
) -> Result<MoneyReport, CheckError> {
    let initial = w.initial_total();
    let mut total = 0i64;
    let mut buf = Vec::new();
    for a in 0..w.accounts {
        for k in account_keys(a) {
            if db.get(&k, &mut buf).is_none() || buf.len() != 8 {
                return Err(CheckError::MissingRow(k));
            }
            total += i64::from_le_bytes(buf[..8].try_into().expect("8 bytes"));
        }
    }
    let (low, high) = (initial + created + unknown.0, initial + created + unknown.1);
    if !(low..=high).contains(&total) {
        return Err(CheckError::Money {
            actual: total,
            initial,
            created,
            expected: total.clamp(low, high),
        });
    }
    Ok(MoneyReport {
        initial,
        created,
        unknown,
        total,
        balance_reads: reads,
        balance_mean: if reads == 0 { 0 } else { sum / reads as i64 },
    })
}

use super::*;
use crate::smallbank::effect::{chk, sav};

/// Feeds `status` and `result` as the last outcome of draw `seq`.
fn feed(
    c: &mut SmallbankTxnClient,
    money: &mut MoneyBook,
    seq: u64,
    status: TxStatus,
    result: &[u8],
) {
    let call = TxCall::default();
    c.on_outcome(
        &AttemptOutcome {
            call: &call,
            status,
            result,
            invoked_ns: 0,
            completed_ns: 10,
            attempt: 1,
            last: true,
            seq,
        },
        money,
    );
}

/// A committed result of `branch` whose gets read `rows` at
/// `(version, balance)`.
fn result(branch: Branch, rows: &[(u64, i64)]) -> Vec<u8> {
    let values: Vec<[u8; 8]> = rows.iter().map(|r| r.1.to_le_bytes()).collect();
    let gets: Vec<GetResult<'_>> = rows
        .iter()
        .zip(&values)
        .map(|(r, v)| GetResult::Found {
            version: r.0,
            value: v,
        })
        .collect();
    let mut out = Vec::new();
    TxnResult::encode(branch, &gets, &mut out).unwrap();
    out
}

fn deposit(a: u64) -> (TxType, Args) {
    let amount = TxType::DepositChecking.amount_cents();
    (
        TxType::DepositChecking,
        Args {
            a,
            b: a + 1,
            amount,
        },
    )
}

#[test]
fn a_deposit_reads_writes_with_a_version_compare_and_retries_a_failed_one() {
    let (mut c, mut money) = (SmallbankTxnClient::new(), MoneyBook::default());
    let mut call = TxCall::default();
    c.next(&mut call, || deposit(3));
    assert_eq!(call.procedure, TXN_PROCEDURE_ID);
    let read = Txn::decode(&call.args).unwrap();
    assert_eq!(read.compare_count(), 0);
    assert_eq!(
        read.ops(Branch::Success).collect::<Vec<_>>(),
        [Op::Get(chk(3))]
    );

    feed(
        &mut c,
        &mut money,
        0,
        TxStatus::Committed,
        &result(Branch::Success, &[(4, 1_000)]),
    );
    c.next(&mut call, || panic!("the write is queued first"));
    let write = Txn::decode(&call.args).unwrap();
    let cmp: Vec<_> = write.compares().collect();
    assert_eq!(cmp.len(), 1);
    assert_eq!(
        cmp[0].condition,
        Condition::Version {
            op: CmpOp::Equal,
            operand: 4
        }
    );
    let put = 1_130i64.to_le_bytes();
    assert_eq!(
        write.ops(Branch::Success).collect::<Vec<_>>(),
        [Op::Put {
            key: chk(3),
            value: &put
        }]
    );
    assert_eq!(money.outstanding, (0, 130));

    // The compare failed: the failure branch read version 5, balance 2000.
    feed(
        &mut c,
        &mut money,
        1,
        TxStatus::Committed,
        &result(Branch::Failure, &[(5, 2_000)]),
    );
    assert_eq!(c.figures().compare_retries, 1);
    c.next(&mut call, || panic!("the retry is queued first"));
    let retry = Txn::decode(&call.args).unwrap();
    assert!(matches!(
        retry.compares().next().unwrap().condition,
        Condition::Version { operand: 5, .. }
    ));
    feed(
        &mut c,
        &mut money,
        2,
        TxStatus::Committed,
        &result(Branch::Success, &[]),
    );
    assert_eq!(money.created, 130);
    assert_eq!(money.outstanding, (0, 0));
    let f = c.figures();
    assert_eq!((f.started, f.committed), (1, 1));
    assert_eq!(f.committed_by_type[TxType::DepositChecking as usize], 1);
}

#[test]
fn insufficient_funds_abort_after_the_read_and_a_balance_commits_there() {
    let (mut c, mut money) = (SmallbankTxnClient::new(), MoneyBook::default());
    let mut call = TxCall::default();
    let pay = Args {
        a: 1,
        b: 2,
        amount: 500,
    };
    c.next(&mut call, || (TxType::SendPayment, pay));
    feed(
        &mut c,
        &mut money,
        0,
        TxStatus::Committed,
        &result(Branch::Success, &[(1, 100), (1, 0)]),
    );
    assert_eq!(c.figures().user_aborted, 1);
    let bal = Args {
        a: 1,
        b: 2,
        amount: 0,
    };
    c.next(&mut call, || (TxType::Balance, bal));
    let keys: Vec<_> = Txn::decode(&call.args)
        .unwrap()
        .ops(Branch::Success)
        .collect();
    assert_eq!(keys, [Op::Get(sav(1)), Op::Get(chk(1))]);
    feed(
        &mut c,
        &mut money,
        1,
        TxStatus::Committed,
        &result(Branch::Success, &[(1, 70), (1, 30)]),
    );
    assert_eq!((money.balance_reads, money.balance_total_sum), (1, 100));
    assert_eq!(c.figures().committed, 1);
    assert_eq!(money.created, 0);
}

#[test]
fn an_unknown_write_widens_the_money_range_and_an_undrawn_write_is_dropped() {
    let (mut c, mut money) = (SmallbankTxnClient::new(), MoneyBook::default());
    let mut call = TxCall::default();
    c.next(&mut call, || deposit(0));
    c.next(&mut call, || deposit(5));
    feed(
        &mut c,
        &mut money,
        0,
        TxStatus::Committed,
        &result(Branch::Success, &[(1, 0)]),
    );
    c.next(&mut call, || panic!("queued"));
    feed(&mut c, &mut money, 2, TxStatus::Unknown, &[]);
    assert_eq!(money.unknown, (0, 130));
    assert_eq!(c.figures().unknown, 1);
    // The second's write is queued but never drawn: it did not commit.
    feed(
        &mut c,
        &mut money,
        1,
        TxStatus::Committed,
        &result(Branch::Success, &[(1, 0)]),
    );
    assert_eq!(money.outstanding, (0, 130));
    c.finish(&mut money);
    assert_eq!(money.outstanding, (0, 0));
    assert_eq!(money.created, 0);
}

#[test]
fn the_mutation_writes_without_compares() {
    let (mut c, mut money) = (SmallbankTxnClient::new(), MoneyBook::default());
    c.without_version_compares();
    let mut call = TxCall::default();
    c.next(&mut call, || deposit(0));
    feed(
        &mut c,
        &mut money,
        0,
        TxStatus::Committed,
        &result(Branch::Success, &[(1, 0)]),
    );
    c.next(&mut call, || panic!("queued"));
    assert_eq!(Txn::decode(&call.args).unwrap().compare_count(), 0);
}

#[test]
fn a_transaction_gives_up_after_the_most_compare_failed_retries() {
    let (mut c, mut money) = (SmallbankTxnClient::new(), MoneyBook::default());
    let mut call = TxCall::default();
    c.next(&mut call, || deposit(0));
    let read = result(Branch::Success, &[(1, 0)]);
    feed(&mut c, &mut money, 0, TxStatus::Committed, &read);
    for seq in 1..=u64::from(COMPARE_RETRIES_MAX) + 1 {
        c.next(&mut call, || panic!("the retry is queued"));
        let stale = result(Branch::Failure, &[(seq + 1, 0)]);
        feed(&mut c, &mut money, seq, TxStatus::Committed, &stale);
    }
    let f = c.figures();
    assert_eq!(f.gave_up, 1, "{f:?}");
    assert_eq!(f.compare_retries, u64::from(COMPARE_RETRIES_MAX) + 1);
    assert_eq!(money.outstanding, (0, 0), "nothing left in flight");
    assert_eq!(money.created, 0);
    c.next(&mut call, || deposit(1));
    assert_eq!(
        c.figures().started,
        2,
        "a new transaction, no retry left queued"
    );
}

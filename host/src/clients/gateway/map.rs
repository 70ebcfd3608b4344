//! The gateway's two translations, as plain functions: an application
//! [`Request`] into the procedure call the NIC runtime runs
//! ([`to_nic`]), and the NIC runtime's [`TxStatus`] and result back into the
//! application's [`Status`] and body ([`to_app`]).
//!
//! | request | NIC call | committed result → outcome |
//! |---|---|---|
//! | `Call { procedure, args }` | `procedure(args)` | the procedure's result |
//! | `Txn` | [`TXN_PROCEDURE_ID`] with the Txn's bytes | the [`TxnResult`] as it is (its branch tells a failed compare) |
//! | `Get(k)` | GetOne ([`GET_ONE_PROCEDURE_ID`]) with `k`'s bytes | found: a [`GetValue`]; absent: [`Status::KeyNotFound`] |
//! | `Put(k, v)` | WriteOne ([`WRITE_ONE_PROCEDURE_ID`]) with a Txn: success `[put k v]` | empty |
//! | `Insert(k, v)` | WriteOne with a Txn: compare `k` absent, success `[put k v]` | success branch: empty; failure: [`AbortReason::CompareFailed`] |
//! | `Delete(k)` | WriteOne with a Txn: compare `k` present, success `[delete k]` | success branch: empty; failure: [`Status::KeyNotFound`] |
//!
//! `Get`, `Put`, `Insert` and `Delete` are Dandelion §3's `GetOne`,
//! `PutOne`, `InsertOne` and `DeleteOne`: one request to the key's primary, which reads the key (a
//! locked key: [`AbortReason::LockConflict`], retryable) or coordinates the
//! one-key write itself (`splitkv_nic::protocol::single_key`). Both answer
//! with the built-in Txn's result shape, so the outcomes map alike. A
//! delete commits the key's tombstone (`splitkv_nic::procedure::txn`): the
//! key then reads as not found, and an insert over it succeeds.
//!
//! A status the NIC runtime reports other than committed maps through
//! `Status::from(TxStatus)` (one to one), its body being the NIC's reason
//! text when it is valid UTF-8 of at most [`OUTCOME_REASON_BYTES_MAX`]
//! bytes, else a fixed text.

use splitkv_layout::app::txn::{Compare, Condition, Op, Txn};
use splitkv_layout::app::{
    AbortReason, Branch, GetResult, GetValue, Request, Status, TxnResult, OUTCOME_REASON_BYTES_MAX,
};
use splitkv_layout::host_nic::TxStatus;
use splitkv_layout::KEY_BYTES;
use splitkv_nic::procedure::txn::TXN_PROCEDURE_ID;
use splitkv_nic::protocol::single_key::{GET_ONE_PROCEDURE_ID, WRITE_ONE_PROCEDURE_ID};

/// What kind of request a NIC call answers: decides how its outcome maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A single-key get.
    Get,
    /// A single-key put.
    Put,
    /// A single-key insert.
    Insert,
    /// A single-key delete.
    Delete,
    /// A one-shot transaction.
    Txn,
    /// A registered procedure.
    Call,
}

/// Writes the NIC call for `req` into `args` (cleared first); returns the
/// procedure id and the request's kind. A `Call`'s and a `Txn`'s arguments
/// are copied as they are.
///
/// # Errors
/// [`Status::TooLarge`] if a single-key call's one-key transaction does not
/// encode (it cannot: the request decoded within the same bounds).
pub fn to_nic(req: &Request<'_>, args: &mut Vec<u8>) -> Result<(u32, Kind), Status> {
    args.clear();
    let one_key = |compares: &[Compare<'_>], op: Op<'_>, args: &mut Vec<u8>| {
        Txn::encode(compares, &[op], &[], args).map_err(|_| Status::TooLarge)
    };
    Ok(match *req {
        Request::Call {
            procedure, args: a, ..
        } => {
            args.extend_from_slice(a);
            (procedure, Kind::Call)
        }
        Request::Txn { txn, .. } => {
            args.extend_from_slice(txn.as_bytes());
            (TXN_PROCEDURE_ID, Kind::Txn)
        }
        Request::Get { key, .. } => {
            args.resize(KEY_BYTES, 0);
            key.encode(args);
            (GET_ONE_PROCEDURE_ID, Kind::Get)
        }
        Request::Put { key, value, .. } => {
            one_key(&[], Op::Put { key, value }, args)?;
            (WRITE_ONE_PROCEDURE_ID, Kind::Put)
        }
        Request::Insert { key, value, .. } => {
            let absent = Compare {
                key,
                condition: Condition::Absent,
            };
            one_key(&[absent], Op::Put { key, value }, args)?;
            (WRITE_ONE_PROCEDURE_ID, Kind::Insert)
        }
        Request::Delete { key, .. } => {
            let present = Compare {
                key,
                condition: Condition::Present,
            };
            one_key(&[present], Op::Delete(key), args)?;
            (WRITE_ONE_PROCEDURE_ID, Kind::Delete)
        }
    })
}

/// Reason text of a committed Txn whose result does not decode (the NIC
/// runtime's built-in never writes one; kept as a handled case).
const UNREADABLE_RESULT: &str = "the node could not read the transaction's result";

/// Writes the body of the outcome of a `kind` call that ended with
/// `status` and `result` into `body` (cleared first); returns the
/// application's status (module docs).
pub fn to_app(kind: Kind, status: TxStatus, result: &[u8], body: &mut Vec<u8>) -> Status {
    body.clear();
    if status != TxStatus::Committed {
        reason(body, result, "");
        return Status::from(status);
    }
    match kind {
        Kind::Txn | Kind::Call => {
            body.extend_from_slice(result);
            return Status::Committed;
        }
        Kind::Put => return Status::Committed,
        Kind::Get | Kind::Insert | Kind::Delete => {}
    }
    let Ok(r) = TxnResult::decode(result) else {
        body.extend_from_slice(UNREADABLE_RESULT.as_bytes());
        return Status::OutcomeUnknown;
    };
    match (kind, r.branch()) {
        (Kind::Get, _) => match r.gets().next() {
            Some(GetResult::Found { version, value }) => {
                if (GetValue { version, value }).encode(body).is_err() {
                    body.extend_from_slice(UNREADABLE_RESULT.as_bytes());
                    return Status::OutcomeUnknown;
                }
                Status::Committed
            }
            _ => {
                body.extend_from_slice(b"key not found");
                Status::KeyNotFound
            }
        },
        (Kind::Insert, Branch::Failure) => {
            body.extend_from_slice(b"key exists");
            Status::Aborted(AbortReason::CompareFailed)
        }
        (Kind::Delete, Branch::Failure) => {
            body.extend_from_slice(b"key not found");
            Status::KeyNotFound
        }
        _ => Status::Committed,
    }
}

/// `result` as a reason text if it is one (UTF-8, at most
/// [`OUTCOME_REASON_BYTES_MAX`] bytes), else `fallback`.
fn reason(body: &mut Vec<u8>, result: &[u8], fallback: &str) {
    let text = match std::str::from_utf8(result) {
        Ok(t) if t.len() <= OUTCOME_REASON_BYTES_MAX => t,
        _ => fallback,
    };
    body.extend_from_slice(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use splitkv_layout::Key;

    const K: Key = Key::new(3, 7);

    fn result(branch: Branch, gets: &[GetResult<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        TxnResult::encode(branch, gets, &mut out).unwrap();
        out
    }

    #[test]
    fn single_key_calls_become_one_key_transactions() {
        let mut args = Vec::new();
        let insert = Request::Insert {
            req_id: 1,
            key: K,
            value: b"v",
        };
        assert_eq!(
            to_nic(&insert, &mut args),
            Ok((WRITE_ONE_PROCEDURE_ID, Kind::Insert))
        );
        let txn = Txn::decode(&args).unwrap();
        let c: Vec<_> = txn.compares().collect();
        assert_eq!(
            c,
            vec![Compare {
                key: K,
                condition: Condition::Absent
            }]
        );
        assert_eq!(txn.op_count(Branch::Success), 1);
        assert_eq!(txn.op_count(Branch::Failure), 0);
        let delete = Request::Delete { req_id: 4, key: K };
        assert_eq!(
            to_nic(&delete, &mut args),
            Ok((WRITE_ONE_PROCEDURE_ID, Kind::Delete)),
            "a DeleteOne"
        );
        let txn = Txn::decode(&args).unwrap();
        let c: Vec<_> = txn.compares().collect();
        let present = Compare {
            key: K,
            condition: Condition::Present,
        };
        assert_eq!(c, vec![present]);
        let ops: Vec<_> = txn.ops(Branch::Success).collect();
        assert_eq!(ops, vec![Op::Delete(K)]);
        assert_eq!(txn.op_count(Branch::Failure), 0);
        let get = Request::Get { req_id: 3, key: K };
        assert_eq!(
            to_nic(&get, &mut args),
            Ok((GET_ONE_PROCEDURE_ID, Kind::Get))
        );
        assert_eq!(Key::decode(&args), Some(K), "a GetOne carries its key");
        let call = Request::Call {
            req_id: 2,
            procedure: 5,
            args: b"abc",
        };
        assert_eq!(to_nic(&call, &mut args), Ok((5, Kind::Call)));
        assert_eq!(args, b"abc");
    }

    #[test]
    fn outcomes_map_by_kind_and_branch() {
        let mut body = Vec::new();
        let found = result(
            Branch::Success,
            &[GetResult::Found {
                version: 4,
                value: b"x",
            }],
        );
        assert_eq!(
            to_app(Kind::Get, TxStatus::Committed, &found, &mut body),
            Status::Committed
        );
        assert_eq!(
            GetValue::decode(&body).unwrap(),
            GetValue {
                version: 4,
                value: b"x"
            }
        );
        let absent = result(Branch::Success, &[GetResult::NotFound]);
        assert_eq!(
            to_app(Kind::Get, TxStatus::Committed, &absent, &mut body),
            Status::KeyNotFound
        );
        let failed = result(Branch::Failure, &[]);
        assert_eq!(
            to_app(Kind::Insert, TxStatus::Committed, &failed, &mut body),
            Status::Aborted(AbortReason::CompareFailed)
        );
        assert_eq!(
            to_app(Kind::Delete, TxStatus::Committed, &failed, &mut body),
            Status::KeyNotFound
        );
        assert_eq!(
            to_app(Kind::Txn, TxStatus::Committed, &failed, &mut body),
            Status::Committed
        );
        assert_eq!(
            body, failed,
            "a Txn's result passes through with its branch"
        );
        assert_eq!(
            to_app(Kind::Put, TxStatus::LockConflict, b"busy", &mut body),
            Status::Aborted(AbortReason::LockConflict)
        );
        assert_eq!(body, b"busy");
        assert_eq!(
            to_app(Kind::Call, TxStatus::Rejected, &[0xff; 3], &mut body),
            Status::Rejected
        );
        assert!(body.is_empty(), "a reason that is not UTF-8 is dropped");
        assert_eq!(
            to_app(Kind::Insert, TxStatus::Committed, b"\x07", &mut body),
            Status::OutcomeUnknown
        );
    }
}

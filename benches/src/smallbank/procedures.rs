//! The six Smallbank procedures, run on the coordinator's NIC runtime
//! (Xenic §4.2.2). Each committed one returns 16 bytes: the money it created
//! (i64 cents), then an auxiliary figure (Balance's and Amalgamate's total).

//!
//! Their semantics are [`splitkv_workloads::smallbank::effect::decide`], shared
//! with the client that runs Smallbank through the one-shot `Txn`.

pub use splitkv_workloads::smallbank::effect::{
    aux_of, chk, decide, delta_of, rows_read, sav, Declined, Effect, ROWS_PER_TX_MAX,
};

use super::{Args, TxType, MIX};
use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// Reads a balance; a missing row aborts (every account is loaded, so this
/// would show a lost write, and the money check would then fail too).
fn bal(reads: &ReadView, k: &Key) -> Result<i64, Declined> {
    let v = reads.get(k).ok_or(Declined)?;
    Ok(i64::from_le_bytes(v.try_into().map_err(|_| Declined)?))
}

fn put(writes: &mut WriteSet, k: Key, v: i64) {
    writes.put(k, &v.to_le_bytes());
}

fn result(out: &mut Vec<u8>, delta: i64, aux: i64) {
    out.extend_from_slice(&delta.to_le_bytes());
    out.extend_from_slice(&aux.to_le_bytes());
}

struct SmallbankProc(TxType);

impl Procedure for SmallbankProc {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        let x = Args::decode(args).map_err(|e| ProcError::BadArgs(e.0))?;
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
        let e = decide(self.0, &x, |k| bal(r, k)).map_err(|Declined| UserAbort)?;
        for (k, v) in e.writes() {
            put(w, *k, *v);
        }
        result(out, e.delta, e.aux);
        Ok(())
    }
}

/// Registers the six procedures; ids equal `TxType as u32`.
pub fn register(reg: &mut ProcedureRegistry) {
    for (t, _) in MIX {
        let id = reg.register(Arc::new(SmallbankProc(t)));
        assert_eq!(id, t as u32, "register Smallbank into an empty registry");
    }
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

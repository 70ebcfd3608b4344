//! Procedures shared by the embedding-API tests.
#![allow(dead_code)]

use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// Table of the counters `Incr` and `Get` use.
pub const COUNTERS: u32 = 1;

/// Procedure ids in the registry [`registry`] builds.
pub const NOOP: u32 = 0;
/// `incr(id)`: adds 1 to the u64 counter at `(COUNTERS, id)` (absent: 0) and
/// returns the new value.
pub const INCR: u32 = 1;
/// `get(id)`: returns the value at `(COUNTERS, id)` (empty when absent).
pub const GET: u32 = 2;
/// `boom()`: panics with [`BOOM_MESSAGE`].
pub const BOOM: u32 = 3;

/// What `boom` panics with.
pub const BOOM_MESSAGE: &str = "boom: a deliberately panicking procedure";

fn id(args: &[u8]) -> Result<u64, ProcError> {
    let b = args
        .get(..8)
        .ok_or(ProcError::BadArgs("needs an 8-byte id"))?;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The key of counter `id`.
pub fn counter(id: u64) -> Key {
    Key::new(COUNTERS, id)
}

struct Noop;
impl Procedure for Noop {
    fn name(&self) -> &'static str {
        "noop"
    }
    fn plan(&self, _: &[u8], _: &mut TxPlan) -> Result<(), ProcError> {
        Ok(())
    }
    fn execute(
        &self,
        _: &[u8],
        _: &ReadView,
        _: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        Ok(())
    }
}

struct Incr;
impl Procedure for Incr {
    fn name(&self) -> &'static str {
        "incr"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(counter(id(args)?));
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        w: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let k = counter(u64::from_le_bytes(args[..8].try_into().expect("planned")));
        let old = r
            .get(&k)
            .and_then(|v| v.try_into().ok())
            .map(u64::from_le_bytes)
            .unwrap_or(0);
        let new = (old + 1).to_le_bytes();
        w.put(k, &new);
        out.extend_from_slice(&new);
        Ok(())
    }
}

struct Get;
impl Procedure for Get {
    fn name(&self) -> &'static str {
        "get"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.read(counter(id(args)?));
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        _: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let k = counter(u64::from_le_bytes(args[..8].try_into().expect("planned")));
        out.extend_from_slice(r.get(&k).unwrap_or(&[]));
        Ok(())
    }
}

struct Boom;
impl Procedure for Boom {
    fn name(&self) -> &'static str {
        "boom"
    }
    fn plan(&self, _: &[u8], _: &mut TxPlan) -> Result<(), ProcError> {
        Ok(())
    }
    fn execute(
        &self,
        _: &[u8],
        _: &ReadView,
        _: &mut WriteSet,
        _: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        panic!("{BOOM_MESSAGE}");
    }
}

/// noop, incr, get, boom (ids [`NOOP`], [`INCR`], [`GET`], [`BOOM`]).
pub fn registry() -> ProcedureRegistry {
    let mut r = ProcedureRegistry::new();
    assert_eq!(r.register(Arc::new(Noop)), NOOP);
    assert_eq!(r.register(Arc::new(Incr)), INCR);
    assert_eq!(r.register(Arc::new(Get)), GET);
    assert_eq!(r.register(Arc::new(Boom)), BOOM);
    r
}

/// The little-endian u64 in an outcome's result.
pub fn as_u64(result: &[u8]) -> u64 {
    u64::from_le_bytes(result.try_into().expect("8-byte result"))
}

// A minimal splitkv application: register a procedure, start a 3-node cluster,
// load a row, run transactions from two threads, read the result, shut down.
use splitkv_host::{ClientError, Cluster};
use splitkv_layout::Key;
use splitkv_nic::{ProcError, Procedure, ProcedureRegistry, ReadView, TxPlan, UserAbort, WriteSet};
use std::sync::Arc;

/// `incr(id)`: adds 1 to the u64 counter at key (0, id) and returns the new value.
struct Incr;
fn counter(args: &[u8]) -> Option<Key> {
    Some(Key::new(0, u64::from_le_bytes(args.try_into().ok()?)))
}
impl Procedure for Incr {
    fn name(&self) -> &'static str {
        "incr"
    }
    fn plan(&self, args: &[u8], plan: &mut TxPlan) -> Result<(), ProcError> {
        plan.write(counter(args).ok_or(ProcError::BadArgs("incr takes an 8-byte id"))?);
        Ok(())
    }
    fn execute(
        &self,
        args: &[u8],
        r: &ReadView,
        w: &mut WriteSet,
        out: &mut Vec<u8>,
    ) -> Result<(), UserAbort> {
        let key = counter(args).ok_or(UserAbort)?;
        let n = r
            .get(&key)
            .and_then(|v| v.try_into().ok())
            .map_or(0, u64::from_le_bytes)
            + 1;
        w.put(key, &n.to_le_bytes());
        out.extend_from_slice(&n.to_le_bytes());
        Ok(())
    }
}

/// Runs the example; returns the counter's final value (200).
pub fn run() -> Result<u64, Box<dyn std::error::Error>> {
    let mut procedures = ProcedureRegistry::new();
    let incr = procedures.register(Arc::new(Incr));
    let mut cluster = Cluster::builder()
        .nodes(3)
        .replication(3)
        .procedures(procedures)
        .build()?;
    cluster.load([(Key::new(0, 7), 0u64.to_le_bytes())], |_| {})?;
    let (mut a, mut b) = (cluster.client(0)?, cluster.client(1)?); // one client per thread
    let work = |client: &mut splitkv_host::Client| -> Result<(), ClientError> {
        for _ in 0..100 {
            while !client.call(incr, &7u64.to_le_bytes())?.is_committed() {} // retry conflicts
        }
        Ok(())
    };
    std::thread::scope(|s| {
        let t = s.spawn(|| work(&mut a));
        work(&mut b).and(t.join().expect("worker thread"))
    })?;
    let stopped = cluster.shutdown()?; // every table readable now
    let mut value = Vec::new();
    stopped
        .get(&Key::new(0, 7), &mut value)
        .ok_or("counter missing")?;
    let counter = u64::from_le_bytes(value.as_slice().try_into()?);
    println!(
        "counter = {counter}; {} commits",
        stopped.stats().committed()
    );
    Ok(counter)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    run().map(|_| ())
}

//! Dnl-RO (Dandelion §4.2.3; `tla/DnlRO.tla`): a transaction that writes
//! nothing runs Dnl-RO under every row of the skeleton
//! ([`super::skeleton`]). It reads lock-free (at the primaries, or a local
//! replica where the coordinator has one, Dandelion §4.3; TLA `Read`,
//! `ReadLocal`), then validates every read at its primary — unlocked,
//! version unchanged (`ValidateReads`) — and commits: no Locking,
//! Replication or Unlocking, so it never takes a lock. The skeleton's
//! functions give this path for any [`Shape`] with no write
//! ([`Shape::is_read_only`]); [`steps`] lists it.
//!
//! Driven by the coordinator's Dnl path (`coordinator/dnl.rs`) under every
//! row; it never sends a Lock. A lone read's validation may later be
//! skipped when its primary answered it unlocked (GetOne); until then every
//! read is validated.

use super::skeleton::{Row, Shape, Step};

/// The steps a read-only transaction of `shape` runs under `row`, in order,
/// ending with [`Step::Done`]: `[Exec, Validate, Done]` for any read, or
/// `[Exec, Done]` for a transaction that reads nothing. `None` if `shape`
/// writes (it runs the row's own steps).
pub fn steps(row: &Row, shape: Shape) -> Option<Vec<Step>> {
    if !shape.is_read_only() {
        return None;
    }
    let mut path = vec![Step::Exec];
    let mut step = Step::Exec;
    while step != Step::Done {
        step = row.next_step(step, shape);
        path.push(step);
    }
    Some(path)
}
